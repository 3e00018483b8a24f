// The server's engine without HTTP: jobs on slots decoded in batched steps give exactly the text a job alone
// gets; stop strings, limits, prompt-cache reuse and cancellation.
#include "plainllama/serve/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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
    const std::vector<std::string> prompts = {"Once upon a time", "The dog",       "Lily and Ben", "One day, Tom",
                                              "The sun was",      "A little bird", "Mom said",     "The big tree"};
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

TEST(Engine, ZeroMaxTokensEvaluatesThePromptOnly) {
    EngineFixture f;
    Engine e(f.model, *f.tok, {f.tok->eos_id()}, params(1));
    auto none = job(*f.tok, "Once upon a time", 0);
    ASSERT_TRUE(e.submit(none));
    const JobOutput a = wait_end(*none);
    EXPECT_EQ(a.finish, Finish::length);
    EXPECT_EQ(a.text, "");
    EXPECT_EQ(a.completion_tokens, 0);
    EXPECT_EQ(a.prompt_tokens, int64_t(f.tok->encode("Once upon a time", true).size()));
    // the prompt is in the slot's cache: the same prompt again evaluates only its last token
    auto again = job(*f.tok, "Once upon a time", 3);
    ASSERT_TRUE(e.submit(again));
    const JobOutput b = wait_end(*again);
    EXPECT_EQ(b.completion_tokens, 3);
    EXPECT_EQ(b.cached_tokens, b.prompt_tokens - 1);
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

// A copy of model folder `from` in `to` whose F32 tensor `name` has `value` at elements [begin, end).
void poison(const test::fs::path& from, const test::fs::path& to, const std::string& name, int64_t begin, int64_t end,
            float value) {
    test::copy_model(from, to);
    std::vector<test::RawTensor> tensors = test::read_safetensors(to / "model.safetensors");
    bool found = false;
    for (test::RawTensor& t : tensors)
        if (t.name == name) {
            for (int64_t i = begin; i < end; ++i) std::memcpy(&t.bytes[size_t(i) * 4], &value, 4);
            found = true;
        }
    ASSERT_TRUE(found) << name;
    test::write_safetensors(to / "model.safetensors", tensors);
}

// The greedy continuation of `prompt` (n tokens), evaluated alone.
std::vector<int32_t> greedy(const Model& m, std::vector<int32_t> prompt, int n) {
    Context ctx(m, ContextParams{256});
    const int64_t V = m.config().vocab_size;
    const size_t n_prompt = prompt.size();
    const float* logits = ctx.eval(prompt);
    for (int i = 0; i < n; ++i) {
        prompt.push_back(int32_t(std::max_element(logits, logits + V) - logits));
        logits = ctx.eval(&prompt.back(), 1);
    }
    return {prompt.begin() + long(n_prompt), prompt.end()};
}

// A NaN weight: the job ends with the error naming where the NaN appeared, and the engine takes the next job.
TEST(Engine, NonFiniteStateFailsTheJobNotTheEngine) {
    test::TempDir tmp;
    poison(model_dir("stories260K"), tmp.path(), "model.layers.1.post_attention_layernorm.weight", 0, 1, NAN);
    const Model model(tmp.path());
    const auto tok = load_tokenizer(tmp.path());
    Engine e(model, *tok, {tok->eos_id()}, params(2));
    for (const char* prompt : {"Once upon a time", "The dog"}) {
        auto j = job(*tok, prompt, 8);
        ASSERT_TRUE(e.submit(j));
        const JobOutput o = wait_end(*j);
        EXPECT_EQ(o.finish, Finish::error);
        EXPECT_TRUE(test::HasSubstr(o.error, "layer 1's MLP activation is not finite")) << o.error;
        EXPECT_EQ(o.completion_tokens, 0);
    }
    EXPECT_EQ(e.busy(), 0);
}

// In a batched step, a row that goes non-finite fails its own job; the others are evaluated again and get the text
// they get alone. The poisoned row: the embedding of a token job A samples after a few steps and job B never sees.
TEST(Engine, NonFiniteRowFailsOnlyItsJob) {
    const test::fs::path src = model_dir("tinystories3M");  // an lm_head of its own: the logits stay finite
    const Model clean(src);
    const auto tok = load_tokenizer(src);
    const std::vector<int32_t> pa = tok->encode("Once upon a time", true), pb = tok->encode("The dog", true);
    const int n = 24;
    const std::vector<int32_t> ga = greedy(clean, pa, n), gb = greedy(clean, pb, n);
    std::vector<int32_t> seen_by_b = pb;
    seen_by_b.insert(seen_by_b.end(), gb.begin(), gb.end());
    auto in = [](const std::vector<int32_t>& v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); };
    int k = 4;  // A's k-th generated token (from 0) is the first in the poisoned row
    while (k < n && (in(seen_by_b, ga[size_t(k)]) || in(pa, ga[size_t(k)]) ||
                     std::find(ga.begin(), ga.begin() + k, ga[size_t(k)]) != ga.begin() + k))
        ++k;
    ASSERT_LT(k, n) << "no token of A's reply that B does not also meet";
    const int32_t x = ga[size_t(k)];
    const int64_t H = clean.config().hidden_size;
    test::TempDir tmp;
    poison(src, tmp.path(), "model.embed_tokens.weight", x * H, (x + 1) * H, NAN);
    const Model model(tmp.path());

    std::string b_alone;
    {
        Engine e(model, *tok, {tok->eos_id()}, params(1));
        auto b = job(*tok, "The dog", n);
        ASSERT_TRUE(e.submit(b));
        const JobOutput o = wait_end(*b);
        ASSERT_EQ(o.finish, Finish::length) << o.error;
        b_alone = o.text;
    }
    Gate gate;
    EngineParams p = params(2);
    p.after_turn = gate.hook();
    Engine e(model, *tok, {tok->eos_id()}, p);
    Opener opener{gate};
    auto a = job(*tok, "Once upon a time", n), b = job(*tok, "The dog", n);
    ASSERT_TRUE(e.submit(a));
    gate.held(1);  // A generates; B comes in at the next turn and is in every batched step after it
    ASSERT_TRUE(e.submit(b));
    gate.open();
    const JobOutput oa = wait_end(*a), ob = wait_end(*b);
    EXPECT_EQ(oa.finish, Finish::error);
    EXPECT_TRUE(test::HasSubstr(oa.error, "is not finite at position " + std::to_string(pa.size() + size_t(k))))
        << oa.error;
    EXPECT_EQ(oa.completion_tokens, k + 1);  // the token was sampled; its evaluation failed
    EXPECT_EQ(ob.finish, Finish::length) << ob.error;
    EXPECT_EQ(ob.text, b_alone);
    // and the engine goes on
    auto c = job(*tok, "The dog", 4);
    ASSERT_TRUE(e.submit(c));
    EXPECT_EQ(wait_end(*c).finish, Finish::length);
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
