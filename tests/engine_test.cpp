// The server's engine without HTTP: jobs on slots decoded in batched steps give exactly the text a job alone
// gets; stop strings, limits, prompt-cache reuse and cancellation.
#include "plainllama/serve/engine.h"

#include <gtest/gtest.h>

#include <memory>
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

TEST(Engine, CancelledJobEndsAndFreesItsSlot) {
    EngineFixture f;
    Engine e(f.model, *f.tok, {f.tok->eos_id()}, params(1));
    auto long_job = job(*f.tok, "Once upon a time", -1);  // until the context is full
    ASSERT_TRUE(e.submit(long_job));
    long_job->wait(0, 10.0);  // the first text
    long_job->cancel = true;
    EXPECT_EQ(wait_end(*long_job).finish, Finish::cancelled);
    auto next = job(*f.tok, "The dog", 8);
    ASSERT_TRUE(e.submit(next));
    EXPECT_EQ(wait_end(*next).finish, Finish::length);
}

TEST(Engine, FullQueueAndClosedEngineRefuse) {
    EngineFixture f;
    EngineParams p = params(1);
    p.queue = 1;
    Engine e(f.model, *f.tok, {f.tok->eos_id()}, p);
    auto a = job(*f.tok, "Once upon a time", -1), b = job(*f.tok, "The dog", 4), c = job(*f.tok, "The cat", 4);
    ASSERT_TRUE(e.submit(a));
    a->wait(0, 10.0);  // a runs: the queue is empty again
    EXPECT_TRUE(e.submit(b));
    EXPECT_FALSE(e.submit(c));  // the queue holds one (and no slot is free)
    a->cancel = true;
    EXPECT_EQ(wait_end(*b).finish, Finish::length);
    e.close();
    EXPECT_FALSE(e.submit(c));

    // --queue 0: no waiting, but a free slot takes a job
    p.queue = 0;
    Engine e0(f.model, *f.tok, {f.tok->eos_id()}, p);
    auto d = job(*f.tok, "The dog", -1), g = job(*f.tok, "The cat", 4);
    ASSERT_TRUE(e0.submit(d));
    d->wait(0, 10.0);
    EXPECT_FALSE(e0.submit(g));
    d->cancel = true;
    EXPECT_EQ(wait_end(*d).finish, Finish::cancelled);
    while (e0.busy() > 0) std::this_thread::yield();
    EXPECT_TRUE(e0.submit(g));
    EXPECT_EQ(wait_end(*g).finish, Finish::length);
}

TEST(Engine, AbortEndsRunningAndQueuedJobs) {
    EngineFixture f;
    Engine e(f.model, *f.tok, {f.tok->eos_id()}, params(1));
    auto running = job(*f.tok, "Once upon a time", -1), queued = job(*f.tok, "The dog", 8);
    ASSERT_TRUE(e.submit(running));
    running->wait(0, 10.0);
    ASSERT_TRUE(e.submit(queued));
    e.abort_all("the server is shutting down");
    for (auto* j : {running.get(), queued.get()}) {
        const JobOutput o = wait_end(*j);
        EXPECT_EQ(o.finish, Finish::cancelled);
        EXPECT_EQ(o.error, "the server is shutting down");
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
