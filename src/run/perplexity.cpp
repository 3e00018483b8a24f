#include "plainllama/run/perplexity.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "plainllama/sys/error.h"

namespace plainllama {

double token_nll(const float* logits, int64_t n_vocab, int32_t target) {
    float mx = logits[0];
    for (int64_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
    double sum = 0;
    for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - double(mx));
    return double(mx) + std::log(sum) - double(logits[target]);
}

namespace {

// Running sums of NLL and NLL^2, turned into llama.cpp's figures.
struct NllSums {
    double nll = 0, nll2 = 0;
    int64_t count = 0;
    void add(double x) {
        nll += x;
        nll2 += x * x;
        ++count;
    }
    void finish(PerplexityResult* r) const {
        const double mean = nll / double(count);
        double var = nll2 / double(count) - mean * mean;
        r->mean_nll = mean;
        r->ppl = std::exp(mean);
        r->ppl_stderr = count > 1 && var > 0 ? std::sqrt(var / double(count - 1)) * r->ppl : 0.0;
        r->n_scored = count;
    }
};

}  // namespace

// KL(p || q) for logits a (p) and b (q) [n], in double, and whether their argmaxes agree.
void kl_divergence(const float* a, const float* b, int64_t n, double* kld, bool* same_top) {
    const float ma = *std::max_element(a, a + n), mb = *std::max_element(b, b + n);
    double sa = 0, sb = 0;
    for (int64_t i = 0; i < n; ++i) {
        sa += std::exp(double(a[i]) - double(ma));
        sb += std::exp(double(b[i]) - double(mb));
    }
    const double la = double(ma) + std::log(sa), lb = double(mb) + std::log(sb);  // log-sum-exps
    double k = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double lpa = double(a[i]) - la, lpb = double(b[i]) - lb;
        k += std::exp(lpa) * (lpa - lpb);
    }
    *kld = std::max(k, 0.0);
    *same_top = std::max_element(a, a + n) - a == std::max_element(b, b + n) - b;
}

PerplexityResult perplexity_chunks(const std::vector<Context*>& ctxs, const std::vector<int32_t>& tokens, int64_t n_ctx,
                                   int32_t bos, int64_t max_chunks, const PerplexityProgress& progress,
                                   const Context::Abort& abort, const std::vector<Context*>& reference) {
    PL_CHECK(!ctxs.empty());
    PL_CHECK(reference.empty() || reference.size() == ctxs.size());
    for (const Context* c : ctxs)
        if (n_ctx < 4 || n_ctx > c->n_ctx())
            throw UsageError("--ctx " + std::to_string(n_ctx) + " must be in [4, " + std::to_string(c->n_ctx()) + "]");
    if (int64_t(tokens.size()) < 2 * n_ctx)
        throw Error("the text has " + std::to_string(tokens.size()) + " tokens; perplexity with --ctx " +
                    std::to_string(n_ctx) + " needs at least " + std::to_string(2 * n_ctx) + " (two chunks)");
    int64_t n_chunks = int64_t(tokens.size()) / n_ctx;
    if (max_chunks > 0) n_chunks = std::min(n_chunks, max_chunks);
    const int64_t V = ctxs[0]->model().config().vocab_size, first = n_ctx / 2, P = int64_t(ctxs.size());
    PerplexityResult r;
    NllSums total;
    std::vector<std::vector<double>> nll(static_cast<size_t>(P));  // per context: NLL of its chunk's scored tokens
    std::vector<char> done(static_cast<size_t>(P));                // per context: its chunk was evaluated
    // Against the reference, per context: its NLL, the KL divergence and the top-token agreement of each scored token.
    std::vector<std::vector<double>> ref_nll(static_cast<size_t>(P)), kld(static_cast<size_t>(P));
    std::vector<std::vector<char>> same(static_cast<size_t>(P));
    NllSums ref_total;
    double kld_sum = 0, kld_sum2 = 0;
    int64_t same_count = 0;
    for (int64_t c0 = 0; c0 < n_chunks; c0 += P) {
        const int64_t batch = std::min(P, n_chunks - c0);
        std::exception_ptr error;
        std::fill(done.begin(), done.end(), 0);
        // One chunk per context, each on its own thread (the kernels inside run on that thread).
#pragma omp parallel for num_threads(int(batch)) schedule(static, 1) if (batch > 1)
        for (int64_t i = 0; i < batch; ++i) {
            try {
                std::vector<int32_t> chunk(tokens.begin() + (c0 + i) * n_ctx, tokens.begin() + (c0 + i + 1) * n_ctx);
                if (bos >= 0) chunk[0] = bos;
                Context& ctx = *ctxs[size_t(i)];
                ctx.reset();
                const float* logits = ctx.eval(chunk, /*all_logits=*/true, abort);
                if (!logits) continue;  // aborted
                nll[size_t(i)].clear();
                for (int64_t j = first; j < n_ctx - 1; ++j)
                    nll[size_t(i)].push_back(token_nll(logits + j * V, V, chunk[size_t(j + 1)]));
                if (!reference.empty()) {
                    Context& ref = *reference[size_t(i)];
                    ref.reset();
                    const float* ref_logits = ref.eval(chunk, /*all_logits=*/true, abort);
                    if (!ref_logits) continue;
                    ref_nll[size_t(i)].clear();
                    kld[size_t(i)].clear();
                    same[size_t(i)].clear();
                    for (int64_t j = first; j < n_ctx - 1; ++j) {
                        double k;
                        bool s;
                        kl_divergence(ref_logits + j * V, logits + j * V, V, &k, &s);
                        ref_nll[size_t(i)].push_back(token_nll(ref_logits + j * V, V, chunk[size_t(j + 1)]));
                        kld[size_t(i)].push_back(k);
                        same[size_t(i)].push_back(s);
                    }
                }
                done[size_t(i)] = 1;
            } catch (...) {
#pragma omp critical
                error = std::current_exception();
            }
        }
        if (error) std::rethrow_exception(error);
        for (int64_t i = 0; i < batch; ++i) {  // in chunk order, as if one after another
            if (!done[size_t(i)]) {            // the abort stopped it
                r.interrupted = true;
                return r;
            }
            NllSums part;
            for (double x : nll[size_t(i)]) {
                part.add(x);
                total.add(x);
            }
            r.window_ppl.push_back(std::exp(part.nll / double(part.count)));
            r.running_ppl.push_back(std::exp(total.nll / double(total.count)));
            r.n_windows = c0 + i + 1;
            total.finish(&r);
            if (!reference.empty()) {
                for (double x : ref_nll[size_t(i)]) ref_total.add(x);
                for (double k : kld[size_t(i)]) {
                    kld_sum += k;
                    kld_sum2 += k * k;
                }
                for (char s : same[size_t(i)]) same_count += s;
                const double n = double(ref_total.count);
                r.ref_ppl = std::exp(ref_total.nll / n);
                r.mean_kld = kld_sum / n;
                r.kld_stderr = n > 1 ? std::sqrt(std::max(0.0, kld_sum2 / n - r.mean_kld * r.mean_kld) / (n - 1)) : 0;
                r.same_top = double(same_count) / n;
            }
            if (progress) progress(c0 + i + 1, n_chunks, r);
        }
    }
    return r;
}

PerplexityResult perplexity_chunks(Context& ctx, const std::vector<int32_t>& tokens, int64_t n_ctx, int32_t bos,
                                   int64_t max_chunks, const PerplexityProgress& progress,
                                   const Context::Abort& abort) {
    return perplexity_chunks(std::vector<Context*>{&ctx}, tokens, n_ctx, bos, max_chunks, progress, abort);
}

PerplexityResult perplexity_stride(Context& ctx, const std::vector<int32_t>& tokens, int64_t n_ctx, int64_t stride,
                                   const PerplexityProgress& progress, const Context::Abort& abort,
                                   int64_t max_windows) {
    if (n_ctx < 2 || n_ctx > ctx.n_ctx())
        throw UsageError("--ctx " + std::to_string(n_ctx) + " must be in [2, " + std::to_string(ctx.n_ctx()) + "]");
    if (stride < 1 || stride > n_ctx)
        throw UsageError("--stride " + std::to_string(stride) + " must be in [1, --ctx = " + std::to_string(n_ctx) +
                         "]");
    const int64_t n = int64_t(tokens.size()), V = ctx.model().config().vocab_size;
    if (n < 2) throw Error("the text has " + std::to_string(n) + " tokens; perplexity needs at least 2");
    int64_t total_windows = n <= n_ctx ? 1 : (n - n_ctx + stride - 1) / stride + 1;
    if (max_windows > 0) total_windows = std::min(total_windows, max_windows);
    PerplexityResult r;
    NllSums total;
    int64_t prev_end = 1;  // tokens before this index are scored (token 0 has no context)
    for (int64_t begin = 0, w = 0;; begin += stride, ++w) {
        const int64_t end = std::min(begin + n_ctx, n);
        ctx.reset();
        const float* logits = ctx.eval(tokens.data() + begin, end - begin, /*all_logits=*/true, abort);
        if (!logits) {
            r.interrupted = true;
            return r;
        }
        NllSums part;
        for (int64_t t = std::max(prev_end, begin + 1); t < end; ++t) {  // target t predicted at t-1
            const double nll = token_nll(logits + (t - 1 - begin) * V, V, tokens[size_t(t)]);
            part.add(nll);
            total.add(nll);
        }
        prev_end = end;
        if (part.count > 0) r.window_ppl.push_back(std::exp(part.nll / double(part.count)));
        r.running_ppl.push_back(std::exp(total.nll / double(total.count)));
        r.n_windows = w + 1;
        total.finish(&r);
        if (progress) progress(w + 1, total_windows, r);
        if (end == n || w + 1 == total_windows) break;
    }
    return r;
}

}  // namespace plainllama
