// Binding a checkpoint's tensors to the weights (the table itself: tensor_table.cpp).
#include "plainllama/model/weights.h"

#include <set>

#include "plainllama/sys/error.h"

namespace plainllama {

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
    // `blocks`: may be stored quantized (the matrices, and the embedding, gathered a row at a time).
    auto get = [&](const std::string& name, const std::vector<int64_t>& shape, bool blocks) {
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
                throw Error(where + ": __metadata__ format '" + printable(q->second) +
                            "' (expected q8_0, q4_k or q6_k)");
            if (!blocks) throw Error(where + ": only the matrices and the embedding can be stored quantized");
            if (w.cols % quant_block(w.quant) != 0)
                throw Error(where + ": " + std::to_string(w.cols) + " columns are not a multiple of " + q->second +
                            "'s block of " + std::to_string(quant_block(w.quant)));
            if (t->dtype != DType::U8)
                throw Error(where + ": stored as " + q->second + " must be U8, not " + dtype_name(t->dtype));
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
    for (const TensorSpec& s : llama_tensor_table(c))
        weight_of(m, s) = get(s.name, s.shape, s.matrix || s.model_field == &ModelWeights::embed_tokens);
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
