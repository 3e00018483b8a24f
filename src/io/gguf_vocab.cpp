#include "plainllama/io/gguf_vocab.h"

#include <cmath>

#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

constexpr int64_t kMaxTokens = int64_t(1) << 24;

bool is_llama_bpe(const std::string& pre) { return pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3"; }

}  // namespace

bool has_gguf_vocab(const GgufFile& f) { return f.find("tokenizer.ggml.model") != nullptr; }

GgufVocab read_gguf_vocab(const GgufFile& f) {
    const std::string& src = f.source();
    GgufVocab v;
    v.model = f.string("tokenizer.ggml.model");
    if (v.model != "llama" && v.model != "gpt2")
        throw Error(
            src + ": 'tokenizer.ggml.model' is \"" + printable(v.model) +
            "\"; supported: llama (SentencePiece) and gpt2 (byte-level BPE, with tokenizer.ggml.pre llama-bpe)");
    const bool spm = v.model == "llama";
    v.pre = f.string("tokenizer.ggml.pre", !spm, "default");
    if (spm && v.pre != "default")
        throw Error(src + ": 'tokenizer.ggml.pre' is \"" + printable(v.pre) + "\"; a llama vocabulary takes default");
    if (!spm && !is_llama_bpe(v.pre))
        throw Error(src + ": 'tokenizer.ggml.pre' is \"" + printable(v.pre) +
                    "\"; supported for gpt2: llama-bpe (Llama 3's pre-tokenizer)");
    const GgufValue& tokens = f.array("tokenizer.ggml.tokens", GgufType::string);
    if (tokens.count < 1 || int64_t(tokens.count) > kMaxTokens)
        throw Error(src + ": 'tokenizer.ggml.tokens' holds " + std::to_string(tokens.count) +
                    " tokens (expected 1 to " + std::to_string(kMaxTokens) + ")");
    const size_t n = size_t(tokens.count);
    v.tokens.assign(tokens.strings.begin(), tokens.strings.end());
    v.types.assign(n, kTokNormal);
    if (f.find("tokenizer.ggml.token_type")) {
        const GgufValue& t = f.array("tokenizer.ggml.token_type", GgufType::i64, n);
        for (size_t i = 0; i < n; ++i) {
            const int64_t x = t.integer(i);
            if (x < 0 || x > kTokByte)
                throw Error(src + ": 'tokenizer.ggml.token_type' element " + std::to_string(i) + " is " +
                            std::to_string(x) + " (expected 0 to 6)");
            v.types[i] = x == 0 ? kTokNormal : int32_t(x);
        }
    }
    if (spm) {
        v.scores.assign(n, 0.0f);
        if (f.find("tokenizer.ggml.scores")) {
            const GgufValue& s = f.array("tokenizer.ggml.scores", GgufType::f64, n);
            for (size_t i = 0; i < n; ++i) {
                v.scores[i] = float(s.number(i));
                if (!std::isfinite(v.scores[i]))
                    throw Error(src + ": 'tokenizer.ggml.scores' element " + std::to_string(i) + " is not finite");
            }
        }
    } else {
        const GgufValue& m = f.array("tokenizer.ggml.merges", GgufType::string);
        v.merges.assign(m.strings.begin(), m.strings.end());
    }
    const int64_t hi = int64_t(n) - 1;
    // llama.cpp's defaults when a key is absent: <s> 1, </s> 2, <unk> 0 for a SentencePiece vocabulary.
    v.bos = f.integer("tokenizer.ggml.bos_token_id", 0, hi, false, spm && n > 1 ? 1 : -1);
    v.eos = f.integer("tokenizer.ggml.eos_token_id", 0, hi, false, spm && n > 2 ? 2 : -1);
    v.unk = f.integer("tokenizer.ggml.unknown_token_id", 0, hi, false, spm ? 0 : -1);
    v.eot = f.integer("tokenizer.ggml.eot_token_id", 0, hi, false, -1);
    v.add_bos = f.boolean("tokenizer.ggml.add_bos_token", true);
    v.add_space_prefix = f.boolean("tokenizer.ggml.add_space_prefix", spm);
    v.chat_template = f.string("tokenizer.chat_template", false);
    return v;
}

}  // namespace plainllama
