// The server's engine without HTTP: jobs on slots decoded in batched steps give exactly the text a job alone
// gets; stop strings, limits, prompt-cache reuse and cancellation.
#include "plainllama/serve/engine.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "test_util.h"

namespace plainllama {
namespace {

using test::model_dir;

struct EngineFixture {
    Model model{model_dir("stories260K")};
    std::unique_ptr<Tokenizer> tok = load_tokenizer(model_dir("stories260K"));
};

std::shared_ptr<Job> job(const Tokenizer& tok, const std::string& prompt, int64_t max_tokens,
                         std::vector<std::string> stop = {}) {
    JobParams p;
    p.prompt = tok.encode(prompt, true);
    p.max_tokens = max_tokens;
    p.sampling.temp = 0;
    p.stop = std::move(stop);
    return std::make_shared<Job>(std::move(p));
}

JobOutput wait_end(Job& j) {
    for (;;) {
        JobOutput o = j.wait_end(10.0);
        if (o.finish != Finish::none) return o;
    }
}

EngineParams params(int slots) {
    EngineParams p;
    p.slots = slots;
    p.n_ctx = 256;
    p.queue = 16;
    return p;
}

TEST(Engine, ConcurrentJobsGetTheirTextAlone) {
    EngineFixture f;
    const std::vector<std::string> prompts = {"Once upon a time", "The dog", "Lily and Ben", "One day, Tom",
                                              "The sun was", "A little bird", "Mom said", "The big tree"};
    std::vector<std::string> alone;
    {
        Engine e(f.model, *f.tok, {f.tok->eos_id()}, params(1));
        for (const std::string& p : prompts) {
            auto j = job(*f.tok, p, 40);
            ASSERT_TRUE(e.submit(j));
            const JobOutput o = wait_end(*j);
            ASSERT_NE(o.finish, Finish::error) << o.error;
            alone.push_back(o.text);
        }
    }
    // 8 jobs at once on 4 slots: four wait in the queue, every step decodes up to four
    Engine e(f.model, *f.tok, {f.tok->eos_id()}, params(4));
    std::vector<std::shared_ptr<Job>> jobs;
    for (const std::string& p : prompts) {
        jobs.push_back(job(*f.tok, p, 40));
        ASSERT_TRUE(e.submit(jobs.back()));
    }
    std::vector<int> slots_used(4, 0);
    for (size_t i = 0; i < jobs.size(); ++i) {
        const JobOutput o = wait_end(*jobs[i]);
        EXPECT_EQ(o.text, alone[i]) << prompts[i];
        ASSERT_GE(o.slot, 0);
        ++slots_used[size_t(o.slot)];
    }
    for (int n : slots_used) EXPECT_GT(n, 0);  // all four slots ran
    EXPECT_EQ(e.busy(), 0);
}

TEST(Engine, StopStringsLimitsAndCacheReuse) {
    EngineFixture f;
    Engine e(f.model, *f.tok, {f.tok->eos_id()}, params(2));
    auto full = job(*f.tok, "Once upon a time", 30);
    ASSERT_TRUE(e.submit(full));
    const JobOutput a = wait_end(*full);
    EXPECT_EQ(a.finish, Finish::length);
    EXPECT_EQ(a.completion_tokens, 30);
    EXPECT_EQ(a.prompt_tokens, int64_t(f.tok->encode("Once upon a time", true).size()));
    ASSERT_GT(a.text.size(), 20u);

    // a stop string from the middle of that text: the reply ends before it
    const std::string stop = a.text.substr(a.text.size() / 2, 4);
    auto cut = job(*f.tok, "Once upon a time", 30, {"never there", stop});
    ASSERT_TRUE(e.submit(cut));
    const JobOutput b = wait_end(*cut);
    EXPECT_EQ(b.finish, Finish::stop);
    EXPECT_EQ(b.text, a.text.substr(0, a.text.find(stop)));
    // the same prompt again went to the slot that holds it: all but its last token came from the cache
    EXPECT_EQ(b.cached_tokens, b.prompt_tokens - 1);
    EXPECT_EQ(b.slot, a.slot);
}

// Holds the engine's thread after its turns (EngineParams::after_turn) until opened: a job that has started stays
// running, whatever the machine's speed. held(n) waits until the engine has finished n turns and is held there.
class Gate {
public:
    // The hook for EngineParams::after_turn (the gate must outlive the engine's thread: see Opener).
    std::function<void()> hook() {
        return [this] {
            std::unique_lock<std::mutex> lock(m_);
            ++turns_;
            cv_.notify_all();
            cv_.wait(lock, [&] { return open_; });
        };
    }
    void held(int n) {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return turns_ >= n; });
    }
    void open() {
        std::lock_guard<std::mutex> lock(m_);
        open_ = true;
        cv_.notify_all();
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    int turns_ = 0;
    bool open_ = false;
};
// Opens a gate when it goes out of scope (declared after the engine: before the engine joins its thread, also when
// an assertion returns early).
struct Opener {
    Gate& gate;
    ~Opener() { gate.open(); }
};

// A job held after its first turn: running, not finished.
void expect_running(Job& j) {
    std::lock_guard<std::mutex> lock(j.mutex);
    EXPECT_EQ(j.out.finish, Finish::none) << "the job ended before the engine was held: " << j.out.error;
    EXPECT_GE(j.out.slot, 0);
}

TEST(Engine, CancelledJobEndsAndFreesItsSlot) {
    EngineFixture f;
    Gate gate;
    EngineParams p = params(1);
    p.after_turn = gate.hook();
    Engine e(f.model, *f.tok, {f.tok->eos_id()}, p);
    Opener opener{gate};
    auto long_job = job(*f.tok, "Once upon a time", -1);  // until the context is full
    ASSERT_TRUE(e.submit(long_job));
    gate.held(1);  // its first turn: admitted, the prompt evaluated (the first token), one batched step (the second)
    expect_running(*long_job);
    EXPECT_EQ(e.busy(), 1);
    long_job->cancel = true;
    gate.open();
    const JobOutput o = wait_end(*long_job);
    EXPECT_EQ(o.finish, Finish::cancelled);
    EXPECT_EQ(o.completion_tokens, 2);  // the cancel came before its third token
    auto next = job(*f.tok, "The dog", 8);
    ASSERT_TRUE(e.submit(next));
    EXPECT_EQ(wait_end(*next).finish, Finish::length);
}

TEST(Engine, FullQueueAndClosedEngineRefuse) {
    EngineFixture f;
    Gate gate;
    EngineParams p = params(1);
    p.queue = 1;
    p.after_turn = gate.hook();
    Engine e(f.model, *f.tok, {f.tok->eos_id()}, p);
    Opener opener{gate};
    auto a = job(*f.tok, "Once upon a time", -1), b = job(*f.tok, "The dog", 4), c = job(*f.tok, "The cat", 4);
    ASSERT_TRUE(e.submit(a));
    gate.held(1);  // a runs: the queue is empty again
    expect_running(*a);
    EXPECT_TRUE(e.submit(b));
    EXPECT_FALSE(e.submit(c));  // the queue holds one (and no slot is free)
    a->cancel = true;
    gate.open();
    EXPECT_EQ(wait_end(*a).finish, Finish::cancelled);
    EXPECT_EQ(wait_end(*b).finish, Finish::length);
    e.close();
    EXPECT_FALSE(e.submit(c));

    // --queue 0: no waiting, but a free slot takes a job
    Gate gate0;
    p.queue = 0;
    p.after_turn = gate0.hook();
    Engine e0(f.model, *f.tok, {f.tok->eos_id()}, p);
    Opener opener0{gate0};
    auto d = job(*f.tok, "The dog", -1), g = job(*f.tok, "The cat", 4);
    ASSERT_TRUE(e0.submit(d));
    gate0.held(1);
    expect_running(*d);
    EXPECT_FALSE(e0.submit(g));
    d->cancel = true;
    gate0.open();
    EXPECT_EQ(wait_end(*d).finish, Finish::cancelled);
    while (e0.busy() > 0) std::this_thread::yield();
    EXPECT_TRUE(e0.submit(g));
    EXPECT_EQ(wait_end(*g).finish, Finish::length);
}

TEST(Engine, AbortEndsRunningAndQueuedJobs) {
    EngineFixture f;
    Gate gate;
    EngineParams p = params(1);
    p.after_turn = gate.hook();
    Engine e(f.model, *f.tok, {f.tok->eos_id()}, p);
    Opener opener{gate};
    auto running = job(*f.tok, "Once upon a time", -1), queued = job(*f.tok, "The dog", 8);
    ASSERT_TRUE(e.submit(running));
    gate.held(1);
    expect_running(*running);
    ASSERT_TRUE(e.submit(queued));
    e.abort_all("the server is shutting down");
    gate.open();
    for (auto* j : {running.get(), queued.get()}) {
        const JobOutput o = wait_end(*j);
        EXPECT_EQ(o.finish, Finish::cancelled);
        EXPECT_EQ(o.error, "the server is shutting down");
        EXPECT_EQ(o.completion_tokens, j == running.get() ? 2 : 0);  // the running one was held after its first turn
    }
    EXPECT_FALSE(e.submit(job(*f.tok, "The cat", 4)));
}

TEST(Engine, StreamedPiecesAddUpToTheText) {
    EngineFixture f;
    Engine e(f.model, *f.tok, {f.tok->eos_id()}, params(1));
    auto j = job(*f.tok, "Once upon a time", 40);
    ASSERT_TRUE(e.submit(j));
    std::string streamed;
    for (;;) {
        const JobOutput o = j->wait(streamed.size(), 10.0);
        streamed += o.text;  // the bytes from streamed.size() on
        if (o.finish != Finish::none) break;
    }
    EXPECT_EQ(streamed, wait_end(*j).text);
    EXPECT_GT(streamed.size(), 40u);
}

}  // namespace
}  // namespace plainllama
