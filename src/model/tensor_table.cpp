// The tensor table (weights.h): every tensor of a LLaMA checkpoint, its HF and llama.cpp names, the shape the config
// implies and the field it binds to.
#include "plainllama/model/weights.h"

namespace plainllama {

namespace {

// A dimension of the config.
enum class Dim { none, hidden, q, kv, ffn, vocab };

int64_t size_of(Dim d, const LlamaConfig& c) {
    switch (d) {
        case Dim::none:
            return 1;
        case Dim::hidden:
            return c.hidden_size;
        case Dim::q:
            return c.num_attention_heads * c.head_dim;
        case Dim::kv:
            return c.num_key_value_heads * c.head_dim;
        case Dim::ffn:
            return c.intermediate_size;
        case Dim::vocab:
            return c.vocab_size;
    }
    return 0;
}

// A tensor: its name (after "model.layers.<i>." for a layer's), shape [rows, cols] ([cols] when rows is none),
// whether matmul reads it, and its field.
struct Entry {
    const char* name;
    const char* gguf;  // llama.cpp's name (after "blk.<i>." for a layer's)
    Dim rows, cols;
    bool matrix;
    Weight LayerWeights::*layer_field;
    Weight ModelWeights::*model_field;
};

const Entry kLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight", Dim::none, Dim::hidden, false, &LayerWeights::input_layernorm,
     nullptr},
    {"self_attn.q_proj.weight", "attn_q.weight", Dim::q, Dim::hidden, true, &LayerWeights::q_proj, nullptr},
    {"self_attn.k_proj.weight", "attn_k.weight", Dim::kv, Dim::hidden, true, &LayerWeights::k_proj, nullptr},
    {"self_attn.v_proj.weight", "attn_v.weight", Dim::kv, Dim::hidden, true, &LayerWeights::v_proj, nullptr},
    {"self_attn.o_proj.weight", "attn_output.weight", Dim::hidden, Dim::q, true, &LayerWeights::o_proj, nullptr},
    {"post_attention_layernorm.weight", "ffn_norm.weight", Dim::none, Dim::hidden, false,
     &LayerWeights::post_attention_layernorm, nullptr},
    {"mlp.gate_proj.weight", "ffn_gate.weight", Dim::ffn, Dim::hidden, true, &LayerWeights::gate_proj, nullptr},
    {"mlp.up_proj.weight", "ffn_up.weight", Dim::ffn, Dim::hidden, true, &LayerWeights::up_proj, nullptr},
    {"mlp.down_proj.weight", "ffn_down.weight", Dim::hidden, Dim::ffn, true, &LayerWeights::down_proj, nullptr},
};
// embed_tokens is gathered row by row, not multiplied; a tied lm_head packs its tensor (see Model).
const Entry kEmbed = {"model.embed_tokens.weight", "token_embd.weight", Dim::vocab, Dim::hidden, false, nullptr,
                      &ModelWeights::embed_tokens};
const Entry kNorm = {"model.norm.weight", "output_norm.weight", Dim::none, Dim::hidden, false, nullptr,
                     &ModelWeights::norm};
const Entry kLmHead = {"lm_head.weight", "output.weight",       Dim::vocab, Dim::hidden, true,
                       nullptr,          &ModelWeights::lm_head};

TensorSpec spec(const Entry& e, const LlamaConfig& c, int64_t layer) {
    TensorSpec s;
    s.name = layer < 0 ? e.name : "model.layers." + std::to_string(layer) + "." + e.name;
    s.gguf_name = layer < 0 ? e.gguf : "blk." + std::to_string(layer) + "." + e.gguf;
    if (e.rows != Dim::none) s.shape.push_back(size_of(e.rows, c));
    s.shape.push_back(size_of(e.cols, c));
    s.layer = layer;
    s.matrix = e.matrix;
    s.layer_field = e.layer_field;
    s.model_field = e.model_field;
    return s;
}

}  // namespace

std::vector<TensorSpec> llama_tensor_table(const LlamaConfig& c) {
    std::vector<TensorSpec> t;
    t.push_back(spec(kEmbed, c, -1));
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
        for (const Entry& e : kLayer) t.push_back(spec(e, c, i));
    t.push_back(spec(kNorm, c, -1));
    if (!c.tie_word_embeddings) t.push_back(spec(kLmHead, c, -1));
    return t;
}

Weight& weight_of(ModelWeights& m, const TensorSpec& s) {
    return s.layer >= 0 ? m.layers.at(size_t(s.layer)).*s.layer_field : m.*s.model_field;
}
const Weight& weight_of(const ModelWeights& m, const TensorSpec& s) {
    return s.layer >= 0 ? m.layers.at(size_t(s.layer)).*s.layer_field : m.*s.model_field;
}

}  // namespace plainllama
