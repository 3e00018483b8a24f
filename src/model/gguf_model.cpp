#include "plainllama/model/gguf_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

constexpr GgufWeightType kWeightTypes[] = {
    {kGgmlF32, DType::F32, QuantType::none},   {kGgmlF16, DType::F16, QuantType::none},
    {kGgmlBF16, DType::BF16, QuantType::none}, {kGgmlQ8_0, DType::U8, QuantType::q8_0},
    {kGgmlQ4_K, DType::U8, QuantType::q4_k},   {kGgmlQ6_K, DType::U8, QuantType::q6_k},
};

// llama.cpp's llama_ftype names (general.file_type), by value.
const char* const kFileTypes[] = {"F32",    "F16",    "Q4_0",  "Q4_1",    nullptr,  nullptr,  nullptr,    "Q8_0",
                                  "Q5_0",   "Q5_1",   "Q2_K",  "Q3_K_S",  "Q3_K_M", "Q3_K_L", "Q4_K_S",   "Q4_K_M",
                                  "Q5_K_S", "Q5_K_M", "Q6_K",  "IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS",   "IQ3_XXS",
                                  "IQ1_S",  "IQ4_NL", "IQ3_S", "IQ3_M",   "IQ2_S",  "IQ2_M",  "IQ4_XS",   "IQ1_M",
                                  "BF16",   nullptr,  nullptr, nullptr,   "TQ1_0",  "TQ2_0",  "MXFP4_MOE"};
constexpr int64_t kGuessed = 1024;  // llama.cpp's LLAMA_FTYPE_GUESSED flag

constexpr int64_t kGgufMaxDim = int64_t(1) << 20;
constexpr int64_t kGgufMaxVocab = int64_t(1) << 24;
constexpr int64_t kGgufMaxLayers = 4096;
constexpr int64_t kGgufMaxPositions = int64_t(1) << 24;

// A token id key of the vocabulary (tokenizer.ggml.*_token_id), -1 when absent.
int64_t token_id(const GgufFile& m, const std::string& key, int64_t vocab) {
    return m.integer(key, 0, vocab - 1, false, -1);
}

}  // namespace

const GgufWeightType* gguf_weight_type(uint32_t ggml) {
    for (const GgufWeightType& t : kWeightTypes)
        if (t.ggml == ggml) return &t;
    return nullptr;
}

std::string gguf_supported_types() {
    std::string s;
    for (const GgufWeightType& t : kWeightTypes) s += (s.empty() ? "" : ", ") + std::string(ggml_type(t.ggml)->name);
    return s;
}

uint32_t ggml_type_of(QuantType q) {
    for (const GgufWeightType& t : kWeightTypes)
        if (t.quant == q && q != QuantType::none) return t.ggml;
    PL_CHECK(false);
}

std::string gguf_file_type_name(int64_t file_type) {
    const int64_t t = file_type & ~kGuessed;
    if (t >= 0 && t < int64_t(std::size(kFileTypes)) && kFileTypes[t]) return kFileTypes[t];
    return "type " + std::to_string(file_type);
}

bool scheme_of_file_type(int64_t file_type, QuantScheme* scheme) {
    switch (file_type & ~kGuessed) {
        case 0:
        case 1:
        case 32:
            *scheme = QuantScheme::none;
            return true;
        case 7:
            *scheme = QuantScheme::q8_0;
            return true;
        case 15:
            *scheme = QuantScheme::q4_k_m;
            return true;
        case 18:
            *scheme = QuantScheme::q6_k;
            return true;
        default:
            return false;
    }
}

int64_t file_type_of(QuantScheme scheme, DType t) {
    switch (scheme) {
        case QuantScheme::none:
            return t == DType::F32 ? 0 : t == DType::BF16 ? 32 : 1;
        case QuantScheme::q8_0:
            return 7;
        case QuantScheme::q6_k:
            return 18;
        case QuantScheme::q4_k_m:
            return 15;
    }
    return 0;
}

LlamaConfig gguf_config(const GgufModel& g) {
    const GgufFile& m = g.meta();
    const std::string& src = m.source();
    const std::string arch = m.string("general.architecture");
    if (arch != "llama")
        throw Error(src + ": 'general.architecture' is \"" + printable(arch) + "\"; only \"llama\" is supported");
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
            if (!(std::isfinite(x) && x > 0))
                throw Error(where + ": factor " + std::to_string(i) + " is " + std::to_string(x) +
                            " (expected a positive number)");
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
    if (m.find("general.file_type")) c.torch_dtype = gguf_file_type_name(m.integer("general.file_type", 0, 1 << 20));
    return c;
}

ModelFiles open_gguf_model(const std::filesystem::path& file, bool read_data) {
    (void)read_data;  // nothing is copied: the views point into the mapping (a float tensor at an odd offset aside)
    auto g = std::make_shared<GgufModel>(file);
    ModelFiles f;
    f.config = gguf_config(*g);
    const LlamaConfig& c = f.config;
    const std::string src = g->meta().source();
    std::map<std::string, TensorView> tensors;
    std::map<std::string, std::string> meta;
    std::set<std::string> used = {"rope_freqs.weight"};
    for (const TensorSpec& s : llama_tensor_table(c)) {
        const GgufTensor* t = g->tensor(s.gguf_name);
        std::vector<int64_t> want(s.shape.rbegin(), s.shape.rend());  // GGUF's order: the row length first
        if (!t) throw Error(src + ": tensor '" + s.gguf_name + "' is missing (expected " + shape_str(want) + ")");
        const std::string where = t->file + ": tensor '" + s.gguf_name + "'";
        const GgufWeightType* wt = gguf_weight_type(t->type->id);
        if (!wt)
            throw Error(where + " is " + t->type->name +
                        ", which is not supported (supported: " + gguf_supported_types() + ")");
        if (t->ne != want)
            throw Error(where + " has shape " + t->shape_str() + "; the llama.* metadata implies " + shape_str(want));
        TensorView v;
        v.name = t->name;
        v.file = t->file;
        v.dtype = wt->dtype;
        v.data = t->data;
        v.nbytes = t->nbytes;
        v.shape = s.shape;
        if (wt->quant != QuantType::none) {  // as a saved quantized folder stores blocks: U8 [rows, row bytes]
            v.shape = {t->rows(), int64_t(quant_row_bytes(wt->quant, t->ne[0]))};
            meta[kQuantKey + s.name] = quant_name(wt->quant);
        }
        tensors.emplace(s.name, std::move(v));
        used.insert(s.gguf_name);
    }
    for (const GgufTensor* t : g->tensors())
        if (!used.count(t->name))
            throw Error(t->file + ": unexpected tensor '" + printable(t->name) + "' (not part of a LLaMA model)");
    f.checkpoint = std::make_unique<Checkpoint>(g, std::move(tensors), std::move(meta));
    f.weights = bind_weights(*f.checkpoint, c, src);
    for (LayerWeights& l : f.weights.layers) {
        l.q_proj.rope_heads = c.num_attention_heads;
        l.k_proj.rope_heads = c.num_key_value_heads;
    }
    return f;
}

}  // namespace plainllama
