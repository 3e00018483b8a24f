#include "plainllama/weights.h"

#include <set>

#include "plainllama/error.h"

namespace plainllama {

std::vector<TensorSpec> llama_tensor_table(const LlamaConfig& c) {
    const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                  kv = c.num_key_value_heads * c.head_dim, ffn = c.intermediate_size;
    std::vector<TensorSpec> t;
    t.push_back({"model.embed_tokens.weight", {c.vocab_size, h}});
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        t.push_back({p + "input_layernorm.weight", {h}});
        t.push_back({p + "self_attn.q_proj.weight", {q, h}});
        t.push_back({p + "self_attn.k_proj.weight", {kv, h}});
        t.push_back({p + "self_attn.v_proj.weight", {kv, h}});
        t.push_back({p + "self_attn.o_proj.weight", {h, q}});
        t.push_back({p + "post_attention_layernorm.weight", {h}});
        t.push_back({p + "mlp.gate_proj.weight", {ffn, h}});
        t.push_back({p + "mlp.up_proj.weight", {ffn, h}});
        t.push_back({p + "mlp.down_proj.weight", {h, ffn}});
    }
    t.push_back({"model.norm.weight", {h}});
    if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {c.vocab_size, h}});
    return t;
}

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
    TensorView v;
    v.shape = s;
    return v.shape_str();
}

bool ignorable(const std::string& name, const LlamaConfig& c) {
    // Buffers some exporters save, and a redundant lm_head when embeddings are tied.
    const std::string inv = "rotary_emb.inv_freq";
    return (name.size() >= inv.size() && name.compare(name.size() - inv.size(), inv.size(), inv) == 0) ||
           (c.tie_word_embeddings && name == "lm_head.weight");
}

}  // namespace

ModelWeights bind_weights(const Checkpoint& ckpt, const LlamaConfig& c, const std::string& source) {
    std::set<std::string> used;
    auto get = [&](const std::string& name, const std::vector<int64_t>& shape) {
        const TensorView* t = ckpt.find(name);
        if (!t) throw Error(source + ": tensor '" + name + "' is missing (expected shape " + shape_str(shape) + ")");
        if (t->shape != shape)
            throw Error(t->file + ": tensor '" + name + "' has wrong shape; expected " + shape_str(shape) +
                        ", got " + t->shape_str());
        used.insert(name);
        Weight w;
        w.data = t->data;
        w.dtype = t->dtype;
        w.rows = shape.size() == 2 ? shape[0] : 1;
        w.cols = shape.back();
        return w;
    };
    ModelWeights m;
    size_t i = 0;
    const std::vector<TensorSpec> table = llama_tensor_table(c);
    auto next = [&] {
        const TensorSpec& s = table[i++];
        return get(s.name, s.shape);
    };
    m.embed_tokens = next();
    m.layers.resize(size_t(c.num_hidden_layers));
    for (LayerWeights& l : m.layers) {
        l.input_layernorm = next();
        l.q_proj = next();
        l.k_proj = next();
        l.v_proj = next();
        l.o_proj = next();
        l.post_attention_layernorm = next();
        l.gate_proj = next();
        l.up_proj = next();
        l.down_proj = next();
    }
    m.norm = next();
    m.lm_head = c.tie_word_embeddings ? m.embed_tokens : next();
    PL_CHECK(i == table.size());
    for (const auto& [name, t] : ckpt.tensors())
        if (!used.count(name) && !ignorable(name, c))
            throw Error(t.file + ": unexpected tensor '" + printable(name) +
                        "' (not part of a LLaMA model with this config)");
    return m;
}

}  // namespace plainllama
