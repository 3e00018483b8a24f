// The server's engine: N slots over one model, each with its own KV cache (a sequence of one multi-sequence
// Context), a bounded queue of waiting jobs, and one thread that runs them all. Each turn of that thread evaluates
// at most one prompt chunk of a newly admitted job, then one batched step: one token of every slot that is
// generating, in one forward pass (each weight read once for all of them). A slot keeps the tokens of its last job
// in its cache; a new job goes to the free slot whose cache shares the longest prefix with its prompt, and only the
// rest is evaluated.
//
// Knows nothing of HTTP: a Job is tokens in, text out, shared between the thread that submitted it and the engine.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "plainllama/model/model.h"
#include "plainllama/run/grammar.h"
#include "plainllama/run/grammar_constraint.h"
#include "plainllama/run/sampler.h"
#include "plainllama/tokenizer/tokenizer.h"

namespace plainllama {

struct JobParams {
    std::vector<int32_t> prompt;  // rendered, BOS included; 1 .. n_ctx - 1 tokens
    int64_t max_tokens = -1;      // -1: until a stop or a full context; 0: the prompt is evaluated, no token
    SamplerParams sampling;
    std::vector<std::string> stop;           // strings that end the text (not included in it)
    std::shared_ptr<const Grammar> grammar;  // null: free text; else the reply is a sentence of it (ends with it)
    // OpenAI's penalties on the logits of the tokens generated so far: l -= count * frequency + (count > 0) * presence
    float frequency_penalty = 0, presence_penalty = 0;
    std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logits; -100 bans the token
    int top_logprobs = -1;         // -1: no log-probabilities; 0..20: each token's, and this many most likely
    bool prompt_logprobs = false;  // also the prompt's tokens' (the whole prompt is evaluated again)
};

// A token's log-probability and the most likely tokens at its position (most likely first).
struct TokenLogprob {
    int32_t id = -1;
    double logprob = 0;
    std::vector<std::pair<int32_t, double>> top;
};

enum class Finish { none, stop, length, cancelled, error };
const char* finish_name(Finish f);  // "stop", "length", "cancelled", "error"

// What a job has produced so far; read under Job::mutex.
struct JobOutput {
    std::string text;              // the reply so far: safe to show (a possible start of a stop string held back)
    Finish finish = Finish::none;  // set once, when the job is over
    std::string error;             // Finish::error: why
    int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
    double queued_s = 0, prompt_s = 0, generate_s = 0;  // waiting for a slot, evaluating the prompt, generating
    int slot = -1;
    // with JobParams::top_logprobs >= 0: one per generated token (the stop token excluded), and with
    // prompt_logprobs one per prompt token after the first
    std::vector<TokenLogprob> logprobs, prompt_logprobs;
};

struct Job {
    explicit Job(JobParams p) : params(std::move(p)) {}
    const JobParams params;
    std::atomic<bool> cancel{false};  // set by the submitter (its client went away): the engine ends the job
    std::mutex mutex;
    std::condition_variable changed;  // notified on new text and at the end
    JobOutput out;

    // Waits until the text is longer than `have` bytes or the job is over, at most `timeout_s`; a copy of the
    // output whose `text` holds the bytes from `have` on and `logprobs` the entries from `have_logprobs` on (a
    // stream copies each byte once); prompt_logprobs are copied whole.
    JobOutput wait(size_t have, double timeout_s, size_t have_logprobs = 0);
    // Waits until the job is over, at most `timeout_s`; a copy of the whole output.
    JobOutput wait_end(double timeout_s);
};

struct EngineParams {
    int slots = 1;
    int64_t n_ctx = 0;                                   // per slot (ContextParams::n_ctx)
    int queue = 64;                                      // jobs waiting for a slot at most
    int64_t prefill_chunk = 512;                         // most prompt tokens evaluated in one turn
    std::optional<CacheType> cache_type = std::nullopt;  // the KV cache's (ContextParams::cache_type)
    // Test hook (null in the server): called on the engine's thread after each turn (admission, a prompt chunk, a
    // batched step). While it blocks, every running job stays running: tests hold jobs open with it, not by timing.
    std::function<void()> after_turn;
};

// What the engine holds now (GET /metrics, GET /ready).
struct EngineStats {
    int slots = 0;                   // in all
    int busy = 0;                    // holding a job: evaluating its prompt or generating
    int queued = 0;                  // jobs waiting for a slot
    int64_t kv_used = 0;             // KV cache positions filled, over every slot (a free slot keeps its last job's)
    int64_t kv_total = 0;            // slots * n_ctx
    int64_t decode_tokens = 0;       // tokens sampled in batched steps since the start
    double decode_seconds = 0;       // time spent in batched steps since the start
    double decode_tokens_per_s = 0;  // over the last second or so of batched steps (the last value while idle)
};

class Engine {
   public:
    // stop_ids: tokens that end a reply (EOS, end of turn). The model and tokenizer outlive the engine.
    Engine(const Model& model, const Tokenizer& tok, std::vector<int32_t> stop_ids, const EngineParams& p);
    ~Engine();  // ends every job (Finish::cancelled) and joins the thread

    // Queues a job; false when `queue` jobs already wait for a slot besides those a free slot is about to take, or
    // when the engine is closed (the job is untouched).
    bool submit(const std::shared_ptr<Job>& job);
    // Ends every queued and running job with Finish::cancelled and the error text `why`, and refuses new ones.
    void abort_all(const std::string& why);
    // Refuses new jobs; those queued or running go on.
    void close();
    // Jobs queued or running.
    int busy() const;
    EngineStats stats() const;

    int64_t n_ctx() const { return ctx_.n_ctx(); }
    const TokenTrie& vocab() const { return *trie_; }
    int slots() const { return int(slots_.size()); }

   private:
    struct Slot;
    void run();
    void admit();
    void prefill(Slot& s);
    void step();
    // Takes the sampled token `id` into the slot's job: text, stops, limits. False when the job is over.
    bool accept(Slot& s, int32_t id);
    // Samples the slot's next token from its logits [vocab_size]: bias, penalties, grammar, log-probabilities.
    int32_t sample(Slot& s, const float* logits);
    void finish(Slot& s, Finish f, const std::string& error = {});
    // Counts a batched step of `tokens` rows that took `seconds`.
    void decoded(int64_t tokens, double seconds);

    const Model& model_;
    const Tokenizer& tok_;
    const std::vector<int32_t> stop_ids_;
    const EngineParams params_;
    std::shared_ptr<const TokenTrie> trie_;  // the vocabulary for grammar masks, shared by every slot's constraint
    Context ctx_;
    std::vector<std::unique_ptr<Slot>> slots_;

    mutable std::mutex mutex_;   // queue_, closed_, stopping_, stats_
    EngineStats stats_;          // kv_used and the decode figures; the rest is read at stats()
    int64_t window_tokens_ = 0;  // batched steps since decode_tokens_per_s was last set
    double window_s_ = 0;
    std::condition_variable wake_;
    std::deque<std::shared_ptr<Job>> queue_;
    int running_ = 0;
    bool closed_ = false, stopping_ = false;
    std::string abort_why_;
    std::thread thread_;
};

}  // namespace plainllama
