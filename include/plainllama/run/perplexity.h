// Perplexity of a token sequence, by llama.cpp's chunked method or a sliding window (HF's guide).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "plainllama/model/model.h"

namespace plainllama {

struct PerplexityResult {
    double ppl = 0;         // exp(mean NLL)
    double ppl_stderr = 0;  // stderr of the NLL mean x ppl (llama.cpp's uncertainty)
    double mean_nll = 0;
    int64_t n_scored = 0;             // tokens whose NLL was counted
    int64_t n_windows = 0;            // chunks or windows evaluated
    std::vector<double> running_ppl;  // after each chunk/window: exp(mean NLL so far)
    std::vector<double> window_ppl;   // each chunk/window on its own
    bool interrupted = false;         // the abort stopped it before the last chunk/window
    // Against a reference model (perplexity_chunks with `reference`), over the scored tokens:
    double ref_ppl = 0;     // the reference's perplexity
    double mean_kld = 0;    // mean KL divergence KL(reference || this) of the next-token distributions
    double kld_stderr = 0;  // its standard error
    double same_top = 0;    // fraction of tokens whose most likely next token is the reference's
};

// Called after each chunk/window (1-based index, of total).
using PerplexityProgress = std::function<void(int64_t index, int64_t total, const PerplexityResult& so_far)>;
// Each function also takes a Context::Abort (called between layers, from every evaluating thread): true stops
// within a chunk/window (or at the start of the next); the result then covers the chunks/windows finished before
// it (n_windows may be 0).

// -log p(target | logits) computed directly as max + log(sum(exp(l - max))) - l[target], in double.
double token_nll(const float* logits, int64_t n_vocab, int32_t target);

// llama.cpp's method. `tokens` is the whole text (with BOS first when the tokenizer adds one); chunks of n_ctx tokens
// (at most max_chunks when > 0), each chunk's first token replaced by `bos` (unless -1), evaluated as one batch; the
// NLL of tokens n_ctx/2+1 .. n_ctx-1 of each chunk is scored. Needs at least 2 * n_ctx tokens.
PerplexityResult perplexity_chunks(Context& ctx, const std::vector<int32_t>& tokens, int64_t n_ctx, int32_t bos,
                                   int64_t max_chunks, const PerplexityProgress& progress = nullptr,
                                   const Context::Abort& abort = {});
// The same, with several contexts of one model: consecutive chunks run at once, one per context on its own
// thread (no synchronisation inside a chunk), and are accumulated in order, so the figures are the same. With
// `reference` (as many contexts, of another model with the same vocabulary: the unquantized one), each chunk runs
// on it too and the ref_ppl, mean_kld and same_top figures are filled (llama.cpp's --kl-divergence).
PerplexityResult perplexity_chunks(const std::vector<Context*>& ctxs, const std::vector<int32_t>& tokens, int64_t n_ctx,
                                   int32_t bos, int64_t max_chunks, const PerplexityProgress& progress = nullptr,
                                   const Context::Abort& abort = {}, const std::vector<Context*>& reference = {});

// Sliding window: windows of n_ctx tokens starting every `stride` tokens; each token after the first is
// scored exactly once, in the first window that contains it with the most left context the stride allows. At most
// max_windows windows when > 0.
PerplexityResult perplexity_stride(Context& ctx, const std::vector<int32_t>& tokens, int64_t n_ctx, int64_t stride,
                                   const PerplexityProgress& progress = nullptr, const Context::Abort& abort = {},
                                   int64_t max_windows = -1);

}  // namespace plainllama
