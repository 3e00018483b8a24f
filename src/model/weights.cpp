#include "plainllama/model/weights.h"

#include <set>

#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

// A dimension of the config.
enum class Dim { none, hidden, q, kv, ffn, vocab };

int64_t size_of(Dim d, const LlamaConfig& c) {
    switch (d) {
        case Dim::none: return 1;
        case Dim::hidden: return c.hidden_size;
        case Dim::q: return c.num_attention_heads * c.head_dim;
        case Dim::kv: return c.num_key_value_heads * c.head_dim;
        case Dim::ffn: return c.intermediate_size;
        case Dim::vocab: return c.vocab_size;
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
const Entry kLmHead = {"lm_head.weight", "output.weight", Dim::vocab, Dim::hidden, true, nullptr, &ModelWeights::lm_head};

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

namespace {

bool ignorable(const std::string& name, const LlamaConfig& c) {
    // Buffers some exporters save, and a redundant lm_head when embeddings are tied.
    const std::string inv = "rotary_emb.inv_freq";
    return (name.size() >= inv.size() && name.compare(name.size() - inv.size(), inv.size(), inv) == 0) ||
           (c.tie_word_embeddings && name == "lm_head.weight");
}

}  // namespace

ModelWeights bind_weights(const Checkpoint& ckpt, const LlamaConfig& c, const std::string& source) {
    std::set<std::string> used;
    const auto& meta = ckpt.metadata();
    auto get = [&](const std::string& name, const std::vector<int64_t>& shape, bool matrix) {
        const TensorView* t = ckpt.find(name);
        if (!t) throw Error(source + ": tensor '" + name + "' is missing (expected shape " + shape_str(shape) + ")");
        Weight w;
        w.data = t->data;
        w.dtype = t->dtype;
        w.rows = shape.size() == 2 ? shape[0] : 1;
        w.cols = shape.back();
        std::vector<int64_t> want = shape;
        if (auto q = meta.find(kQuantKey + name); q != meta.end()) {
            const std::string where = t->file + ": tensor '" + printable(t->name) + "'";
            if (!parse_quant_type(q->second, &w.quant) || w.quant == QuantType::none)
                throw Error(where + ": __metadata__ format '" + printable(q->second) + "' (expected q8_0, q4_k or q6_k)");
            if (!matrix && name != kEmbed.name)
                throw Error(where + ": only the matrices and the embedding can be stored quantized");
            if (w.cols % quant_block(w.quant) != 0)
                throw Error(where + ": " + std::to_string(w.cols) + " columns are not a multiple of " +
                            q->second + "'s block of " + std::to_string(quant_block(w.quant)));
            if (t->dtype != DType::U8) throw Error(where + ": stored as " + q->second + " must be U8, not " + dtype_name(t->dtype));
            want = {w.rows, int64_t(quant_row_bytes(w.quant, w.cols))};
        } else if (t->dtype == DType::U8) {
            throw Error(t->file + ": tensor '" + printable(t->name) +
                        "' is U8 but __metadata__ names no format for it (" + kQuantKey + name + ")");
        }
        if (t->shape != want)
            throw Error(t->file + ": tensor '" + printable(t->name) + "' has wrong shape; expected " + shape_str(want) +
                        ", got " + t->shape_str());
        used.insert(name);
        return w;
    };
    ModelWeights m;
    m.layers.resize(size_t(c.num_hidden_layers));
    for (const TensorSpec& s : llama_tensor_table(c)) weight_of(m, s) = get(s.name, s.shape, s.matrix);
    if (c.tie_word_embeddings) {
        m.lm_head = m.embed_tokens;
        if (meta.count(kQuantKey + "lm_head.weight"))  // quantized apart from the embedding it is tied to
            m.lm_head = get("lm_head.weight", {c.vocab_size, c.hidden_size}, true);
    }
    for (const auto& [name, t] : ckpt.tensors())
        if (!used.count(name) && !ignorable(name, c))
            throw Error(t.file + ": unexpected tensor '" + printable(name) +
                        "' (not part of a LLaMA model with this config)");
    return m;
}

}  // namespace plainllama
