#include "plainllama/io/gguf_config.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

constexpr int64_t kGgufMaxDim = int64_t(1) << 20;  // as config.json's limits
constexpr int64_t kGgufMaxVocab = int64_t(1) << 24;
constexpr int64_t kGgufMaxLayers = 4096;
constexpr int64_t kGgufMaxPositions = int64_t(1) << 24;

// A token id key of the vocabulary (tokenizer.ggml.*_token_id), -1 when absent.
int64_t token_id(const GgufFile& m, const std::string& key, int64_t vocab) {
    return m.integer(key, 0, vocab - 1, false, -1);
}

}  // namespace

LlamaConfig gguf_config(const GgufModel& g) {
    const GgufFile& m = g.meta();
    const std::string& src = m.source();
    const std::string arch = m.string("general.architecture");
    if (arch != "llama")
        throw Error(src + ": 'general.architecture' is \"" + printable(arch) + "\"; only \"llama\" is supported");
    if (m.integer("llama.expert_count", 0, 1 << 20, false, 0) > 0)
        throw Error(src + ": 'llama.expert_count' is " + std::to_string(m.integer("llama.expert_count", 0, 1 << 20)) +
                    ": mixture-of-experts models (Mixtral) are not supported");
    LlamaConfig c;
    c.hidden_size = m.integer("llama.embedding_length", 1, kGgufMaxDim);
    c.intermediate_size = m.integer("llama.feed_forward_length", 1, kGgufMaxDim);
    c.num_hidden_layers = m.integer("llama.block_count", 1, kGgufMaxLayers);
    c.num_attention_heads = m.integer("llama.attention.head_count", 1, kGgufMaxDim);
    c.num_key_value_heads = m.integer("llama.attention.head_count_kv", 1, kGgufMaxDim, false, c.num_attention_heads);
    c.max_position_embeddings = m.integer("llama.context_length", 1, kGgufMaxPositions);
    if (m.find("llama.attention.key_length")) {
        c.head_dim = m.integer("llama.attention.key_length", 2, kGgufMaxDim);
        if (m.integer("llama.attention.value_length", 1, kGgufMaxDim, false, c.head_dim) != c.head_dim)
            throw Error(src + ": 'llama.attention.value_length' differs from 'llama.attention.key_length' (" +
                        std::to_string(c.head_dim) + "); not supported");
    } else {
        if (c.hidden_size % c.num_attention_heads != 0)
            throw Error(src + ": 'llama.attention.head_count' (" + std::to_string(c.num_attention_heads) +
                        ") must divide 'llama.embedding_length' (" + std::to_string(c.hidden_size) + ")");
        c.head_dim = c.hidden_size / c.num_attention_heads;
    }
    if (c.head_dim % 2 != 0)
        throw Error(src + ": the head size " + std::to_string(c.head_dim) + " must be even for RoPE");
    if (c.num_attention_heads % c.num_key_value_heads != 0)
        throw Error(src + ": 'llama.attention.head_count_kv' (" + std::to_string(c.num_key_value_heads) +
                    ") must divide 'llama.attention.head_count' (" + std::to_string(c.num_attention_heads) + ")");
    if (c.num_attention_heads * c.head_dim > kGgufMaxDim)
        throw Error(src + ": 'llama.attention.head_count' times the head size is too large");
    const int64_t rope_dims = m.integer("llama.rope.dimension_count", 1, kGgufMaxDim, false, c.head_dim);
    if (rope_dims != c.head_dim)
        throw Error(src + ": 'llama.rope.dimension_count' is " + std::to_string(rope_dims) + " but the heads have " +
                    std::to_string(c.head_dim) + " dimensions (partial RoPE is not supported)");
    // The eps as the file stores it (an f32), widened exactly: the same float the kernels then use.
    c.rms_norm_eps = m.number("llama.attention.layer_norm_rms_epsilon");
    if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1))
        throw Error(src + ": 'llama.attention.layer_norm_rms_epsilon' must be in (0, 1), found " +
                    m.find("llama.attention.layer_norm_rms_epsilon")->brief());
    c.rope_theta = m.number("llama.rope.freq_base", false, 10000.0);
    if (!(c.rope_theta >= 1))
        throw Error(src + ": 'llama.rope.freq_base' must be at least 1, found " +
                    m.find("llama.rope.freq_base")->brief());
    const std::string scaling = m.string("llama.rope.scaling.type", false, "none");
    double factor = 1.0;
    if (scaling == "linear") {
        factor = m.number("llama.rope.scaling.factor");
        if (!(factor >= 1))
            throw Error(src + ": 'llama.rope.scaling.factor' must be at least 1, found " +
                        m.find("llama.rope.scaling.factor")->brief());
    } else if (scaling != "none") {
        throw Error(src + ": 'llama.rope.scaling.type' is \"" + printable(scaling) + "\"; supported: none, linear");
    } else if (m.find("llama.rope.scale_linear")) {  // the older key
        factor = m.number("llama.rope.scale_linear");
        if (!(factor >= 1))
            throw Error(src + ": 'llama.rope.scale_linear' must be at least 1, found " +
                        m.find("llama.rope.scale_linear")->brief());
    }
    if (factor != 1.0) {
        c.rope_scaling.rope_type = RopeType::linear;
        c.rope_scaling.factor = factor;
    }
    if (const GgufTensor* f = g.tensor("rope_freqs.weight")) {  // Llama 3.1's frequency factors, [head_dim / 2] F32
        const std::string where = f->file + ": tensor 'rope_freqs.weight'";
        if (f->type->id != kGgmlF32 || f->ne != std::vector<int64_t>{c.head_dim / 2})
            throw Error(where + " must be F32 [" + std::to_string(c.head_dim / 2) + "], found " + f->type->name + " " +
                        f->shape_str());
        for (int64_t i = 0; i < c.head_dim / 2; ++i) {
            float x;
            std::memcpy(&x, f->data + 4 * i, 4);
            if (!(std::isfinite(x) && x >= 1))  // (as a scaling factor: frequencies only slow down)
                throw Error(where + ": factor " + std::to_string(i) + " is " + std::to_string(x) +
                            " (expected a number of at least 1)");
            c.rope_scaling.freq_factors.push_back(x);
        }
    }

    // The vocabulary: llama.vocab_size, else the tokenizer's tokens, else the embedding's rows.
    const GgufTensor* embd = g.tensor("token_embd.weight");
    if (m.find("llama.vocab_size"))
        c.vocab_size = m.integer("llama.vocab_size", 1, kGgufMaxVocab);
    else if (const GgufValue* t = m.find("tokenizer.ggml.tokens"); t && t->is_array())
        c.vocab_size = int64_t(t->count);
    else if (embd && embd->ne.size() == 2)
        c.vocab_size = embd->ne[1];
    if (c.vocab_size < 1 || c.vocab_size > kGgufMaxVocab)
        throw Error(src + ": no vocabulary size ('llama.vocab_size', 'tokenizer.ggml.tokens' or token_embd.weight)");
    c.tie_word_embeddings = !g.tensor("output.weight");
    c.bos_token_id = token_id(m, "tokenizer.ggml.bos_token_id", c.vocab_size);
    c.eos_token_id.clear();
    for (const char* key :
         {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
        if (const int64_t id = token_id(m, key, c.vocab_size);
            id >= 0 && std::find(c.eos_token_id.begin(), c.eos_token_id.end(), id) == c.eos_token_id.end())
            c.eos_token_id.push_back(id);
    // llama.cpp's end-of-generation tokens besides EOS: the control tokens that end a turn or a text.
    if (const GgufValue* t = m.find("tokenizer.ggml.tokens"); t && t->is_array() && t->elem == GgufType::string) {
        const GgufValue* types = m.find("tokenizer.ggml.token_type");
        for (uint64_t i = 0; i < t->count && int64_t(i) < c.vocab_size; ++i) {
            const std::string_view text = t->strings[i];
            if (text != "<|eot_id|>" && text != "<|eom_id|>" && text != "<|end_of_text|>" && text != "<|im_end|>" &&
                text != "<|end|>" && text != "<end_of_turn>")
                continue;
            const bool control =
                types && types->is_array() && types->is_integer() && types->count == t->count && types->integer(i) == 3;
            if (control && std::find(c.eos_token_id.begin(), c.eos_token_id.end(), int64_t(i)) == c.eos_token_id.end())
                c.eos_token_id.push_back(int64_t(i));
        }
    }
    return c;
}

}  // namespace plainllama
