#include "plainllama/model/gguf_model.h"

#include <algorithm>
#include <set>

#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

constexpr GgufWeightType kWeightTypes[] = {
    {kGgmlF32, DType::F32, QuantType::none},   {kGgmlF16, DType::F16, QuantType::none},
    {kGgmlBF16, DType::BF16, QuantType::none}, {kGgmlQ8_0, DType::U8, QuantType::q8_0},
    {kGgmlQ4_0, DType::U8, QuantType::q4_0},   {kGgmlQ5_0, DType::U8, QuantType::q5_0},
    {kGgmlQ4_K, DType::U8, QuantType::q4_k},   {kGgmlQ5_K, DType::U8, QuantType::q5_k},
    {kGgmlQ6_K, DType::U8, QuantType::q6_k},
};

// llama.cpp's llama_ftype names (general.file_type), by value.
const char* const kFileTypes[] = {"F32",    "F16",    "Q4_0",  "Q4_1",    nullptr,  nullptr,  nullptr,    "Q8_0",
                                  "Q5_0",   "Q5_1",   "Q2_K",  "Q3_K_S",  "Q3_K_M", "Q3_K_L", "Q4_K_S",   "Q4_K_M",
                                  "Q5_K_S", "Q5_K_M", "Q6_K",  "IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS",   "IQ3_XXS",
                                  "IQ1_S",  "IQ4_NL", "IQ3_S", "IQ3_M",   "IQ2_S",  "IQ2_M",  "IQ4_XS",   "IQ1_M",
                                  "BF16",   nullptr,  nullptr, nullptr,   "TQ1_0",  "TQ2_0",  "MXFP4_MOE"};
constexpr int64_t kGuessed = 1024;  // llama.cpp's LLAMA_FTYPE_GUESSED flag

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
        case 2:
            *scheme = QuantScheme::q4_0;
            return true;
        case 15:
            *scheme = QuantScheme::q4_k_m;
            return true;
        case 17:
            *scheme = QuantScheme::q5_k_m;
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
        case QuantScheme::q5_k_m:
            return 17;
        case QuantScheme::q4_0:
            return 2;
    }
    return 0;
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
