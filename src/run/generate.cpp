#include "plainllama/run/generate.h"

#include <algorithm>

#include "plainllama/sys/clock.h"
#include "plainllama/sys/error.h"

namespace plainllama {

GenerateStats generate(Context& ctx, Sampler& sampler, StreamDecoder& decoder, std::vector<int32_t>& tokens,
                       int64_t n_predict, const std::vector<int32_t>& stop_ids, const OnToken& on_token,
                       const std::atomic<bool>* stop, GrammarConstraint* grammar) {
    GenerateStats st;
    const int64_t vocab = ctx.model().config().vocab_size;
    if (int64_t(tokens.size()) <= ctx.n_past()) throw Error("generate: no new tokens to evaluate");
    if (int64_t(tokens.size()) > ctx.n_ctx())
        throw Error("the prompt has " + std::to_string(tokens.size()) + " tokens but the context holds " +
                    std::to_string(ctx.n_ctx()) +
                    (ctx.n_ctx() < ctx.model().config().max_position_embeddings
                         ? " (raise -c/--ctx-size or shorten the prompt)"
                         : " (all the model's max_position_embeddings: shorten the prompt)"));
    const Context::Abort abort = [stop] { return stop && stop->load(); };
    double t0 = now_seconds();
    const int64_t past = ctx.n_past();
    const float* logits = ctx.eval(tokens.data() + past, int64_t(tokens.size()) - past, false, abort);
    st.n_prompt = ctx.n_past() - past;  // all of them unless the stop cut the prompt
    st.prompt_seconds = now_seconds() - t0;
    if (!logits) {
        st.interrupted = true;
        return st;  // the rest of the prompt is not in the cache: a later turn evaluates it first
    }
    t0 = now_seconds();
    while (n_predict < 0 || st.n_generated < n_predict) {
        if (abort()) {
            st.interrupted = true;
            break;
        }
        const int32_t id = sampler.sample(logits, int32_t(vocab), tokens, grammar ? &grammar->allowed() : nullptr);
        tokens.push_back(id);
        ++st.n_generated;
        if (std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end()) {
            st.stopped_eos = true;
            break;
        }
        if (grammar) grammar->accept(id);
        if (!on_token(id, decoder.push(id))) break;
        if (grammar && grammar->must_end()) {
            st.stopped_grammar = true;
            break;
        }
        if (n_predict >= 0 && st.n_generated >= n_predict) break;
        if (ctx.n_past() >= ctx.n_ctx()) {
            st.stopped_ctx = true;
            break;
        }
        logits = ctx.eval(&tokens.back(), 1);  // one token is quick: a stop is seen at the top of the loop
    }
    // The last sampled token is not yet in the cache: a later turn evaluates it first.
    st.generate_seconds = now_seconds() - t0;
    return st;
}

std::vector<int32_t> eos_ids(const LlamaConfig& c, const Tokenizer& tok, const std::vector<int64_t>& generation_eos) {
    std::vector<int32_t> ids;
    auto add = [&](int64_t id) {
        if (id >= 0 && std::find(ids.begin(), ids.end(), int32_t(id)) == ids.end()) ids.push_back(int32_t(id));
    };
    for (int64_t id : c.eos_token_id) add(id);
    for (int64_t id : generation_eos) add(id);
    add(tok.eos_id());
    return ids;
}

}  // namespace plainllama
