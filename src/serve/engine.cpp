#include "plainllama/serve/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "plainllama/sys/clock.h"
#include "plainllama/sys/error.h"

namespace plainllama {

const char* finish_name(Finish f) {
    switch (f) {
        case Finish::stop:
            return "stop";
        case Finish::length:
            return "length";
        case Finish::cancelled:
            return "cancelled";
        case Finish::error:
            return "error";
        case Finish::none:
            break;
    }
    return "none";
}

JobOutput Job::wait(size_t have, double timeout_s, size_t have_logprobs) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait_for(lock, std::chrono::duration<double>(timeout_s),
                     [&] { return out.text.size() > have || out.finish != Finish::none; });
    std::string all = std::move(out.text);
    std::vector<TokenLogprob> lps = std::move(out.logprobs);
    JobOutput copy = out;  // all but the text and the logprobs
    out.text = std::move(all);
    out.logprobs = std::move(lps);
    copy.text.assign(out.text, std::min(have, out.text.size()));
    copy.logprobs.assign(out.logprobs.begin() + ptrdiff_t(std::min(have_logprobs, out.logprobs.size())),
                         out.logprobs.end());
    return copy;
}

JobOutput Job::wait_end(double timeout_s) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return out.finish != Finish::none; });
    return out;
}

struct Engine::Slot {
    int seq = 0;
    std::shared_ptr<Job> job;  // null: free
    // the running job's prompt + sampled tokens (kept after it ends): the cache holds the first n_past(seq)
    std::vector<int32_t> tokens;
    int64_t prompt_done = 0;  // prompt tokens in the cache
    bool generating = false;  // `tokens.back()` was sampled and waits for the next step
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<StreamDecoder> decoder;
    std::unique_ptr<GrammarConstraint> grammar;  // the job's, when it has one
    std::vector<float> logits;                   // [vocab_size] scratch: the logits after bias and penalties
    std::vector<int32_t> counts;                 // [vocab_size] times each token was generated (penalties)
    TokenMask mask;                              // scratch: the grammar's mask without the banned tokens
    std::vector<TokenLogprob> logprobs;          // this job's, not yet given to it
    std::string text;                            // decoded so far
    size_t shown = 0;                            // bytes of `text` given to the job
    int64_t generated = 0;
    double t_queued = 0, t_start = 0, t_generate = 0;
};

Engine::Engine(const Model& model, const Tokenizer& tok, std::vector<int32_t> stop_ids, const EngineParams& p)
    : model_(model),
      tok_(tok),
      stop_ids_(std::move(stop_ids)),
      params_(p),
      trie_(std::make_shared<const TokenTrie>(tok, int32_t(model.config().vocab_size))),
      // exact: BF16 prefill keeps f32 activations, so a reply does not depend on how its tokens were batched
      ctx_(model, ContextParams{p.n_ctx, std::max<int64_t>(p.prefill_chunk, p.slots), true, p.slots, p.cache_type}) {
    for (int i = 0; i < p.slots; ++i) {
        slots_.push_back(std::make_unique<Slot>());
        slots_.back()->seq = i;
    }
    thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

bool Engine::submit(const std::shared_ptr<Job>& job) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        const int free_slots = int(slots_.size()) - running_;  // each takes a queued job at the engine's next turn
        if (closed_ || int(queue_.size()) >= params_.queue + std::max(0, free_slots)) return false;
        job->out.queued_s = now_seconds();  // the time it was queued, until it starts
        queue_.push_back(job);
    }
    wake_.notify_all();
    return true;
}

void Engine::abort_all(const std::string& why) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        closed_ = true;
        abort_why_ = why;
    }
    wake_.notify_all();
}

void Engine::close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
}

int Engine::busy() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return int(queue_.size()) + running_;
}

EngineStats Engine::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    EngineStats s = stats_;
    s.slots = int(slots_.size());
    s.busy = running_;
    s.queued = int(queue_.size());
    s.kv_total = int64_t(slots_.size()) * ctx_.n_ctx();
    return s;
}

namespace {

void end_job(Job& job, Finish f, const std::string& error) {
    {
        std::lock_guard<std::mutex> lock(job.mutex);
        job.out.finish = f;
        job.out.error = error;
    }
    job.changed.notify_all();
}

// log p(id) under the softmax of `logits` [n] over the tokens `mask` allows (all without one), computed as
// token_nll does (the same value, bit for bit, without a mask), and the `top` most likely of those tokens.
TokenLogprob token_logprob(const float* logits, int32_t n, int32_t id, const TokenMask* mask, int top) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; ++i)
        if (!mask || mask->test(i)) mx = std::max(mx, logits[i]);
    double sum = 0;
    for (int32_t i = 0; i < n; ++i)
        if (!mask || mask->test(i)) sum += std::exp(double(logits[i]) - double(mx));
    const double lse = double(mx) + std::log(sum);
    auto logprob = [&](int32_t i) { return -(lse - double(logits[i])); };
    TokenLogprob t;
    t.id = id;
    t.logprob = logprob(id);
    if (top > 0) {
        std::vector<int32_t> ids;
        ids.reserve(size_t(n));
        for (int32_t i = 0; i < n; ++i)
            if (!mask || mask->test(i)) ids.push_back(i);
        const size_t k = std::min(ids.size(), size_t(top));
        std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(k), ids.end(), [&](int32_t a, int32_t b) {
            return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
        });
        for (size_t i = 0; i < k; ++i) t.top.emplace_back(ids[i], logprob(ids[i]));
    }
    return t;
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

}  // namespace

void Engine::run() {
    for (;;) {
        std::string abort_why;
        bool stopping = false;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] {
                const bool free = std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return !s->job; });
                return stopping_ || !abort_why_.empty() || running_ > 0 || (!queue_.empty() && free);
            });
            stopping = stopping_;
            if (stopping_ || !abort_why_.empty()) {
                abort_why = stopping_ ? "the server is shutting down" : abort_why_;
                for (auto& j : queue_) end_job(*j, Finish::cancelled, abort_why);
                queue_.clear();
            }
        }
        if (!abort_why.empty()) {
            for (auto& s : slots_)
                if (s->job) finish(*s, Finish::cancelled, abort_why);
            if (stopping) return;
            std::lock_guard<std::mutex> lock(mutex_);
            abort_why_.clear();
            continue;
        }
        admit();
        for (auto& s : slots_)  // at most one prompt chunk per turn: the others' next token waits one chunk at most
            if (s->job && !s->generating) {
                prefill(*s);
                break;
            }
        step();
        int64_t kv_used = 0;
        for (auto& s : slots_) kv_used += ctx_.n_past(s->seq);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stats_.kv_used = kv_used;
        }
        if (params_.after_turn) params_.after_turn();
    }
}

void Engine::admit() {
    std::vector<std::shared_ptr<Job>> jobs;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        int free = int(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return !s->job; }));
        while (free > 0 && !queue_.empty()) {
            std::shared_ptr<Job> j = std::move(queue_.front());
            queue_.pop_front();
            if (j->cancel.load()) {
                end_job(*j, Finish::cancelled, "");
                continue;
            }
            jobs.push_back(std::move(j));
            --free;
            ++running_;
        }
    }
    const double now = now_seconds();
    for (auto& j : jobs) {
        // the free slot whose cache shares the most with the prompt (cache_prompt)
        Slot* best = nullptr;
        size_t best_n = 0;
        for (auto& s : slots_)
            if (!s->job) {
                const size_t n = std::min(common_prefix(s->tokens, j->params.prompt), size_t(ctx_.n_past(s->seq)));
                if (!best || n > best_n) best = s.get(), best_n = n;
            }
        Slot& s = *best;
        // at least the prompt's last token is evaluated: its logits start the reply
        const size_t keep = j->params.prompt_logprobs ? 0 : std::min(best_n, j->params.prompt.size() - 1);
        ctx_.truncate(int64_t(keep), s.seq);
        s.job = j;
        s.tokens = j->params.prompt;
        s.prompt_done = int64_t(keep);
        s.generating = false;
        s.sampler = std::make_unique<Sampler>(j->params.sampling);
        s.decoder = std::make_unique<StreamDecoder>(tok_);
        s.grammar.reset();
        if (j->params.grammar) s.grammar = std::make_unique<GrammarConstraint>(j->params.grammar, trie_, stop_ids_);
        s.counts.clear();
        s.logprobs.clear();
        s.decoder->push(j->params.prompt.back());  // left context: the reply's first word keeps its space
        s.text.clear();
        s.shown = 0;
        s.generated = 0;
        s.t_start = now;
        {
            std::lock_guard<std::mutex> lock(j->mutex);
            s.t_queued = j->out.queued_s;
            j->out.queued_s = now - s.t_queued;
            j->out.prompt_tokens = int64_t(j->params.prompt.size());
            j->out.cached_tokens = int64_t(keep);
            j->out.slot = s.seq;
        }
    }
}

void Engine::prefill(Slot& s) {
    if (s.job->cancel.load()) return finish(s, Finish::cancelled);
    const std::vector<int32_t>& P = s.job->params.prompt;
    const int64_t n = std::min<int64_t>(params_.prefill_chunk, int64_t(P.size()) - s.prompt_done);
    try {
        const bool all = s.job->params.prompt_logprobs;
        const int64_t V = model_.config().vocab_size;
        const float* logits = ctx_.eval(P.data() + s.prompt_done, n, all, {}, s.seq);
        if (all) {  // row i predicts prompt token prompt_done + i + 1
            std::vector<TokenLogprob> lps;
            for (int64_t i = 0; i < n && s.prompt_done + i + 1 < int64_t(P.size()); ++i)
                lps.push_back(token_logprob(logits + i * V, V, P[size_t(s.prompt_done + i + 1)], nullptr,
                                            s.job->params.top_logprobs));
            std::lock_guard<std::mutex> lock(s.job->mutex);
            auto& out = s.job->out.prompt_logprobs;
            out.insert(out.end(), lps.begin(), lps.end());
            logits += (n - 1) * V;
        }
        s.prompt_done += n;
        if (s.prompt_done < int64_t(P.size())) return;
        const double now = now_seconds();
        {
            std::lock_guard<std::mutex> lock(s.job->mutex);
            s.job->out.prompt_s = now - s.t_start;
        }
        s.t_generate = now;
        if (s.job->params.max_tokens == 0) return finish(s, Finish::length);  // the prompt only
        accept(s, sample(s, logits));
    } catch (const std::exception& e) {
        finish(s, Finish::error, e.what());
    }
}

void Engine::step() {
    std::vector<SeqToken> batch;
    std::vector<Slot*> rows;
    for (auto& s : slots_)
        if (s->job && s->generating) {
            if (s->job->cancel.load()) {
                finish(*s, Finish::cancelled);
                continue;
            }
            batch.push_back({s->seq, s->tokens.back()});
            rows.push_back(s.get());
        }
    if (batch.empty()) return;
    const int32_t V = int32_t(model_.config().vocab_size);
    const double t0 = now_seconds();
    try {
        const float* logits = ctx_.eval_step(batch);
        for (size_t i = 0; i < rows.size(); ++i) {
            Slot& s = *rows[i];
            try {
                accept(s, sample(s, logits + i * size_t(V)));
            } catch (const std::exception& e) {
                finish(s, Finish::error, e.what());
            }
        }
    } catch (const NonFiniteError& e) {
        // only the sequences whose rows went bad fail; the others did not move on and run again next turn
        for (Slot* s : rows)
            if (std::find(e.seqs.begin(), e.seqs.end(), s->seq) != e.seqs.end() || e.seqs.empty())
                finish(*s, Finish::error, e.what());
    } catch (const std::exception& e) {
        for (Slot* s : rows) finish(*s, Finish::error, e.what());
    }
    decoded(int64_t(rows.size()), now_seconds() - t0);
}

void Engine::decoded(int64_t tokens, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.decode_tokens += tokens;
    stats_.decode_seconds += seconds;
    window_tokens_ += tokens;
    window_s_ += seconds;
    // a figure per second or so of decoding, and one when the last job is over
    if (window_s_ > 0 && (window_s_ >= 1.0 || running_ == 0)) {
        stats_.decode_tokens_per_s = double(window_tokens_) / window_s_;
        window_tokens_ = 0;
        window_s_ = 0;
    }
}

int32_t Engine::sample(Slot& s, const float* logits) {
    const JobParams& p = s.job->params;
    const int32_t V = int32_t(model_.config().vocab_size);
    const TokenMask* mask = s.grammar ? &s.grammar->allowed() : nullptr;
    const bool penalties = p.frequency_penalty != 0 || p.presence_penalty != 0;
    if (!p.logit_bias.empty() || penalties) {
        s.logits.assign(logits, logits + V);
        bool banned = false;
        for (const auto& [id, bias] : p.logit_bias) {
            if (bias <= -100)
                banned = true;
            else
                s.logits[size_t(id)] += bias;
        }
        if (penalties && !s.counts.empty())
            for (int32_t id = 0; id < V; ++id)
                if (const int32_t c = s.counts[size_t(id)])
                    s.logits[size_t(id)] -= float(c) * p.frequency_penalty + p.presence_penalty;
        if (banned) {  // out of the mask (the grammar's, or all tokens)
            if (mask) {
                s.mask = *mask;
            } else {
                s.mask.clear(V);
                for (auto& w : s.mask.bits) w = ~uint64_t(0);
                if (V % 64) s.mask.bits.back() = (uint64_t(1) << (V % 64)) - 1;
            }
            for (const auto& [id, bias] : p.logit_bias)
                if (bias <= -100) s.mask.reset(id);
            if (s.mask.count() == 0)
                throw Error(mask ? "logit_bias bans every token the grammar allows here"
                                 : "logit_bias bans every token");
            mask = &s.mask;
        }
        logits = s.logits.data();
    }
    if (s.grammar) {
        // The tokens left before max_tokens or the context cut the reply: when few, only the tokens after which the
        // text can still be completed in time are allowed, so that the reply ends complete instead of cut.
        int64_t left = ctx_.n_ctx() - ctx_.n_past(s.seq);
        if (p.max_tokens >= 0) left = std::min(left, p.max_tokens - s.generated);
        constexpr int64_t kWindow = 64;
        if (left <= kWindow) {
            if (mask != &s.mask) s.mask = *mask;
            s.grammar->keep_completable(s.mask, size_t(std::max<int64_t>(left, 1)));
            mask = &s.mask;
        }
    }
    const int32_t id = s.sampler->sample(logits, V, s.tokens, mask);
    if (p.top_logprobs >= 0 && std::find(stop_ids_.begin(), stop_ids_.end(), id) == stop_ids_.end())
        s.logprobs.push_back(token_logprob(logits, V, id, mask, p.top_logprobs));
    if (penalties) {
        if (s.counts.empty()) s.counts.assign(size_t(V), 0);
        ++s.counts[size_t(id)];
    }
    return id;
}

bool Engine::accept(Slot& s, int32_t id) {
    const JobParams& p = s.job->params;
    s.tokens.push_back(id);
    s.generating = false;
    if (std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) {
        s.text += s.decoder->flush();  // the end: what the decoder and the stop-string check held back is text
        finish(s, Finish::stop);
        return false;
    }
    ++s.generated;
    s.text += s.decoder->push(id);
    if (s.grammar) s.grammar->accept(id);

    // A stop string ends the text before it; a text end that could begin one is held back until it cannot.
    size_t cut = std::string::npos, hold = 0;
    for (const std::string& stop : p.stop) {
        const size_t at = s.text.find(stop, s.shown);
        if (at != std::string::npos) cut = std::min(cut, at);
        for (size_t k = std::min(stop.size() - 1, s.text.size() - s.shown); k > hold; --k)
            if (s.text.compare(s.text.size() - k, k, stop, 0, k) == 0) {
                hold = k;
                break;
            }
    }
    if (cut != std::string::npos) {
        s.text.resize(cut);
        finish(s, Finish::stop);
        return false;
    }
    if (s.grammar && s.grammar->must_end()) {  // the grammar is complete and nothing may follow
        s.text += s.decoder->flush();
        finish(s, Finish::stop);
        return false;
    }
    // no more tokens allowed, or no position left in the cache for the one just sampled
    if ((p.max_tokens >= 0 && s.generated >= p.max_tokens) || ctx_.n_past(s.seq) >= ctx_.n_ctx()) {
        s.text += s.decoder->flush();
        finish(s, s.grammar && s.grammar->can_end() ? Finish::stop : Finish::length);  // complete: not cut
        return false;
    }
    {
        std::lock_guard<std::mutex> lock(s.job->mutex);
        if (s.text.size() - hold > s.shown) {
            s.job->out.text.append(s.text, s.shown, s.text.size() - hold - s.shown);
            s.shown = s.text.size() - hold;
        }
        s.job->out.completion_tokens = s.generated;
        auto& lps = s.job->out.logprobs;
        lps.insert(lps.end(), s.logprobs.begin(), s.logprobs.end());
        s.logprobs.clear();
    }
    s.job->changed.notify_all();
    s.generating = true;
    return true;
}

void Engine::finish(Slot& s, Finish f, const std::string& error) {
    Job& job = *s.job;
    const double now = now_seconds();
    {
        std::lock_guard<std::mutex> lock(mutex_);  // before the job says it is over: busy() counts it no more then
        --running_;
    }
    {
        std::lock_guard<std::mutex> lock(job.mutex);
        if (f == Finish::stop || f == Finish::length) job.out.text = s.text;  // all of it: nothing is held back now
        job.out.completion_tokens = s.generated;
        job.out.logprobs.insert(job.out.logprobs.end(), s.logprobs.begin(), s.logprobs.end());
        s.logprobs.clear();
        if (s.prompt_done == int64_t(s.job->params.prompt.size()))
            job.out.generate_s = now - s.t_generate;
        else
            job.out.prompt_s = now - s.t_start;
        job.out.finish = f;
        job.out.error = error;
    }
    job.changed.notify_all();
    s.job.reset();
    s.generating = false;
    s.sampler.reset();
    s.decoder.reset();
    s.grammar.reset();
    wake_.notify_all();
}

}  // namespace plainllama
