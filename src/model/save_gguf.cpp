#include "plainllama/model/save_gguf.h"

#include <cmath>
#include <vector>

#include "plainllama/io/gguf_writer.h"
#include "plainllama/model/gguf_model.h"
#include "plainllama/sys/error.h"

namespace plainllama {

namespace fs = std::filesystem;

namespace {

uint32_t ggml_float_type(DType t) {
    switch (t) {
        case DType::F32:
            return kGgmlF32;
        case DType::F16:
            return kGgmlF16;
        case DType::BF16:
            return kGgmlBF16;
        case DType::U8:
            break;
    }
    PL_CHECK(false);
}

// The frequency factors llama.cpp's converter writes for Llama 3.1's rope_scaling (rope_freqs.weight).
std::vector<float> llama3_factors(const LlamaConfig& c) {
    const RopeScaling& s = c.rope_scaling;
    const double old_ctx = double(s.original_max_position_embeddings);
    const double low_wavelen = old_ctx / s.low_freq_factor, high_wavelen = old_ctx / s.high_freq_factor;
    std::vector<float> f;
    for (int64_t i = 0; i < c.head_dim / 2; ++i) {
        const double freq = 1.0 / std::pow(c.rope_theta, double(2 * i) / double(c.head_dim));
        const double wavelen = 2.0 * M_PI / freq;
        if (wavelen < high_wavelen) {
            f.push_back(1.0f);
        } else if (wavelen > low_wavelen) {
            f.push_back(float(s.factor));
        } else {
            const double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
            f.push_back(float(1.0 / ((1.0 - smooth) / s.factor + smooth)));
        }
    }
    return f;
}

void add_vocab(GgufWriter& w, GgufVocab v, const LlamaConfig& c) {
    const bool spm = v.model == "llama";
    if (int64_t(v.tokens.size()) > c.vocab_size)
        throw Error("the tokenizer has " + std::to_string(v.tokens.size()) + " tokens but the model's vocabulary " +
                    std::to_string(c.vocab_size));
    // An embedding padded past the tokenizer: named, unused tokens (as llama.cpp's converter pads).
    for (int64_t i = 0; int64_t(v.tokens.size()) < c.vocab_size; ++i) {
        v.tokens.push_back("[PAD" + std::to_string(i) + "]");
        v.types.push_back(kTokUnused);
        if (spm) v.scores.push_back(-1000.0f);
    }
    w.add_string("tokenizer.ggml.model", v.model);
    w.add_string("tokenizer.ggml.pre", v.pre);
    w.add_strings("tokenizer.ggml.tokens", v.tokens);
    if (spm) w.add_f32s("tokenizer.ggml.scores", v.scores);
    w.add_i32s("tokenizer.ggml.token_type", v.types);
    if (!spm) w.add_strings("tokenizer.ggml.merges", v.merges);
    if (v.bos >= 0) w.add_u32("tokenizer.ggml.bos_token_id", uint32_t(v.bos));
    if (v.eos >= 0) w.add_u32("tokenizer.ggml.eos_token_id", uint32_t(v.eos));
    if (v.unk >= 0) w.add_u32("tokenizer.ggml.unknown_token_id", uint32_t(v.unk));
    w.add_bool("tokenizer.ggml.add_bos_token", v.add_bos);
    w.add_bool("tokenizer.ggml.add_eos_token", false);
    if (spm) w.add_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
    if (!v.chat_template.empty()) w.add_string("tokenizer.chat_template", v.chat_template);
}

}  // namespace

void save_gguf(const Model& model, const GgufVocab& vocab, const std::string& name, const fs::path& out) {
    const LlamaConfig& c = model.config();
    const ModelWeights& mw = model.weights();
    std::error_code ec;
    if (const GgufModel* g = model.checkpoint().gguf())
        for (const auto& part : g->parts())
            if (fs::equivalent(out, part->source(), ec)) throw Error(out.string() + ": is the model's own file");

    GgufWriter w;
    DType float_type = DType::F32;  // the matrices' type, for general.file_type when they are not quantized
    bool quantized = false;
    for (const TensorSpec& s : llama_tensor_table(c))
        if (s.matrix) {
            const Weight& x = weight_of(mw, s);
            float_type = x.dtype == DType::U8 ? float_type : x.dtype;
            quantized = quantized || x.packed.quant != QuantType::none;
        }
    w.add_string("general.architecture", "llama");
    w.add_string("general.name", name);
    int64_t file_type = file_type_of(quantized ? model.quant() : QuantScheme::none, float_type);
    if (const GgufModel* g = model.checkpoint().gguf(); quantized && model.quant() == QuantScheme::none && g)
        file_type = g->meta().integer("general.file_type", 0, 1 << 20, false, file_type);  // a mix not ours: as read
    w.add_u32("general.file_type", uint32_t(file_type));
    if (quantized) w.add_u32("general.quantization_version", 2);
    w.add_u32("llama.context_length", uint32_t(c.max_position_embeddings));
    w.add_u32("llama.embedding_length", uint32_t(c.hidden_size));
    w.add_u32("llama.block_count", uint32_t(c.num_hidden_layers));
    w.add_u32("llama.feed_forward_length", uint32_t(c.intermediate_size));
    w.add_u32("llama.attention.head_count", uint32_t(c.num_attention_heads));
    w.add_u32("llama.attention.head_count_kv", uint32_t(c.num_key_value_heads));
    if (c.head_dim * c.num_attention_heads != c.hidden_size) {
        w.add_u32("llama.attention.key_length", uint32_t(c.head_dim));
        w.add_u32("llama.attention.value_length", uint32_t(c.head_dim));
    }
    w.add_f32("llama.attention.layer_norm_rms_epsilon", float(c.rms_norm_eps));
    w.add_u32("llama.rope.dimension_count", uint32_t(c.head_dim));
    w.add_f32("llama.rope.freq_base", float(c.rope_theta));
    if (c.rope_scaling.rope_type == RopeType::linear) {
        w.add_string("llama.rope.scaling.type", "linear");
        w.add_f32("llama.rope.scaling.factor", float(c.rope_scaling.factor));
    }
    w.add_u32("llama.vocab_size", uint32_t(c.vocab_size));
    add_vocab(w, vocab, c);

    // A matrix's rows in GGUF's order: GGUF row g is HF row r (for attn_q / attn_k of `heads` heads, hf_rope_row),
    // taken from the model's memory (quantized blocks, in HF's order) or from its file (a GGUF's attn_q / attn_k rows
    // are in GGUF's order there already).
    auto write_rows = [](const Weight& x, const TensorView& src, int64_t heads, const GgufWriter::Sink& sink) {
        const int64_t head_dim = heads ? x.rows / heads : 1;
        const QuantType q = x.packed.quant;
        const size_t row = q != QuantType::none ? quant_row_bytes(q, x.cols) : src.nbytes / size_t(x.rows);
        std::vector<uint8_t> buf(row);
        for (int64_t g = 0; g < x.rows; ++g) {
            const int64_t r = heads ? hf_rope_row(g, head_dim) : g;
            if (q != QuantType::none && tiled(q, x.rows)) {
                const int64_t nb = x.cols / quant_block(q);
                deinterleave(q, buf.data(),
                             static_cast<const uint8_t*>(x.packed.data) + size_t(r / 16 * nb) * tile_bytes(q), r % 16,
                             0, nb, r / 16 * nb);
                sink(buf.data(), row);
            } else if (q != QuantType::none) {
                sink(static_cast<const uint8_t*>(x.packed.data) + size_t(r) * row, row);
            } else {
                const int64_t at = x.rope_heads ? gguf_rope_row(r, head_dim) : r;
                sink(static_cast<const uint8_t*>(src.data) + size_t(at) * row, row);
            }
        }
    };
    for (const TensorSpec& s : llama_tensor_table(c)) {
        const Weight& x = weight_of(mw, s);
        const TensorView& src = *model.checkpoint().find(s.name);
        const std::vector<int64_t> ne(s.shape.rbegin(), s.shape.rend());
        if (s.matrix) {
            const int64_t heads = s.layer_field == &LayerWeights::q_proj   ? c.num_attention_heads
                                  : s.layer_field == &LayerWeights::k_proj ? c.num_key_value_heads
                                                                           : 0;
            const uint32_t type =
                x.packed.quant != QuantType::none ? ggml_type_of(x.packed.quant) : ggml_float_type(x.dtype);
            w.add_tensor(s.gguf_name, ne, type, [&x, &src, heads, write_rows](const GgufWriter::Sink& sink) {
                write_rows(x, src, heads, sink);
            });
        } else if (s.shape.size() == 1) {  // the norms, as F32
            w.add_tensor(s.gguf_name, ne, kGgmlF32, [&src, &x](const GgufWriter::Sink& sink) {
                std::vector<float> f(size_t(x.cols));
                convert_to_f32(f.data(), src.data, src.dtype, x.cols);
                sink(f.data(), f.size() * 4);
            });
        } else if (x.quant != QuantType::none) {  // the embedding's rows of blocks (as stored, or quantized at load)
            const size_t n = size_t(x.rows) * quant_row_bytes(x.quant, x.cols);
            w.add_tensor(s.gguf_name, ne, ggml_type_of(x.quant),
                         [&x, n](const GgufWriter::Sink& sink) { sink(x.data, n); });
        } else {  // the embedding as stored
            w.add_tensor(s.gguf_name, ne, ggml_float_type(x.dtype),
                         [&src](const GgufWriter::Sink& sink) { sink(src.data, src.nbytes); });
        }
    }
    // A tied model's output projection is the embedding's tensor (no output.weight, as llama.cpp writes it), but in a
    // folder saved before the embedding was quantized with it: quantized apart, as output.weight (llama.cpp reads it
    // as untied).
    const Weight& head = mw.lm_head;
    if (c.tie_word_embeddings && head.packed.quant != QuantType::none && head.data != mw.embed_tokens.data) {
        const TensorView& src = *model.checkpoint().find("lm_head.weight");
        w.add_tensor("output.weight", {c.hidden_size, c.vocab_size}, ggml_type_of(head.packed.quant),
                     [&head, &src, write_rows](const GgufWriter::Sink& sink) { write_rows(head, src, 0, sink); });
    }
    std::vector<float> factors(c.rope_scaling.freq_factors.begin(), c.rope_scaling.freq_factors.end());
    if (factors.empty() && c.rope_scaling.rope_type == RopeType::llama3) factors = llama3_factors(c);
    if (!factors.empty())
        w.add_tensor("rope_freqs.weight", {int64_t(factors.size())}, kGgmlF32,
                     [factors](const GgufWriter::Sink& sink) { sink(factors.data(), factors.size() * 4); });
    w.write(out);
}

}  // namespace plainllama
