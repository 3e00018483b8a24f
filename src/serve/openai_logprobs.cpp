// Log-probabilities in the OpenAI API's two shapes: chat's content list and the legacy completions' parallel lists.
#include <string>

#include "plainllama/serve/openai.h"

namespace plainllama {

using nlohmann::json;

namespace {

// The bytes a token adds to the text; a token without any (control, special) shows its vocabulary entry.
std::string token_text(const Tokenizer& tok, int32_t id) {
    std::string b = tok.token_bytes(id);
    return b.empty() ? tok.piece(id) : b;
}

json byte_list(const std::string& s) {
    json a = json::array();
    for (unsigned char c : s) a.push_back(int(c));
    return a;
}

json chat_entry(const Tokenizer& tok, int32_t id, double logprob) {
    const std::string b = tok.token_bytes(id);
    return {{"token", token_text(tok, id)}, {"logprob", logprob}, {"bytes", byte_list(b)}};
}

}  // namespace

json chat_logprobs_json(const std::vector<TokenLogprob>& lps, const Tokenizer& tok) {
    json content = json::array();
    for (const TokenLogprob& t : lps) {
        json e = chat_entry(tok, t.id, t.logprob);
        json top = json::array();
        for (const auto& [id, lp] : t.top) top.push_back(chat_entry(tok, id, lp));
        e["top_logprobs"] = std::move(top);
        content.push_back(std::move(e));
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
}

json legacy_logprobs_json(const std::vector<int32_t>* prompt, const std::vector<TokenLogprob>& prompt_lps,
                          const std::vector<TokenLogprob>& lps, const Tokenizer& tok, size_t offset) {
    json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
    auto add = [&](int32_t id, const TokenLogprob* t) {
        tokens.push_back(token_text(tok, id));
        offsets.push_back(offset);
        offset += tok.token_bytes(id).size();
        if (!t) {
            values.push_back(nullptr);
            tops.push_back(nullptr);
            return;
        }
        values.push_back(t->logprob);
        json top = json::object();
        for (const auto& [tid, lp] : t->top) top[token_text(tok, tid)] = lp;
        tops.push_back(std::move(top));
    };
    if (prompt && !prompt->empty()) {
        add(prompt->front(), nullptr);  // nothing before it to predict it
        for (size_t i = 1; i < prompt->size(); ++i)
            add((*prompt)[i], i - 1 < prompt_lps.size() ? &prompt_lps[i - 1] : nullptr);
    }
    for (const TokenLogprob& t : lps) add(t.id, &t);
    return {{"tokens", std::move(tokens)},
            {"token_logprobs", std::move(values)},
            {"top_logprobs", std::move(tops)},
            {"text_offset", std::move(offsets)}};
}

}  // namespace plainllama
