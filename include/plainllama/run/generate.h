// The generation loop shared by `generate` and `chat`: evaluate new tokens, sample, stream text.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "plainllama/model/model.h"
#include "plainllama/run/grammar_constraint.h"
#include "plainllama/run/sampler.h"
#include "plainllama/tokenizer/tokenizer.h"

namespace plainllama {

struct GenerateStats {
    int64_t n_prompt = 0;     // tokens evaluated before the first sample
    int64_t n_generated = 0;  // tokens sampled
    double prompt_seconds = 0, generate_seconds = 0;
    bool stopped_eos = false, stopped_ctx = false, interrupted = false;
    bool stopped_grammar = false;  // the grammar was complete and nothing could follow
};

// Called with each sampled token and the text it completes (may be empty); return false to stop.
using OnToken = std::function<bool(int32_t id, const std::string& text)>;

// `tokens` is the whole sequence; the context already holds its first ctx.n_past() tokens, the rest are
// evaluated as one batch, then up to n_predict tokens (-1: until the context is full) are sampled and
// appended to `tokens`. Stops at any id in `stop_ids`, at a full context, or when *stop becomes true (also
// during the prompt, between layers: n_prompt then counts the tokens the cache took). A stop id is appended but
// not streamed. With a grammar, each token is sampled from those it allows (a stop id only where it is complete), and
// generation stops once it is complete and nothing may follow; Error when it allows no token.
GenerateStats generate(Context& ctx, Sampler& sampler, StreamDecoder& decoder, std::vector<int32_t>& tokens,
                       int64_t n_predict, const std::vector<int32_t>& stop_ids, const OnToken& on_token,
                       const std::atomic<bool>* stop = nullptr, GrammarConstraint* grammar = nullptr);

// EOS ids of a model, each once: config.json's eos_token_id list, generation_config.json's (see
// load_generation_eos), and the tokenizer's EOS.
std::vector<int32_t> eos_ids(const LlamaConfig& c, const Tokenizer& tok,
                             const std::vector<int64_t>& generation_eos = {});

}  // namespace plainllama
