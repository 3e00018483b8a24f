#include "plainllama/model/quant_scheme.h"

#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

constexpr QuantScheme kSchemes[] = {QuantScheme::none,   QuantScheme::q8_0,   QuantScheme::q6_k,
                                    QuantScheme::q4_k_m, QuantScheme::q5_k_m, QuantScheme::q4_0};

// The format if K fits its block, else llama.cpp's fallback (llama-quant.cpp's tensor_type_fallback): q4_k -> q5_0,
// q5_k -> q5_0 (llama.cpp's q5_1, which plainllama does not have), q6_k -> q8_0; a 32-weight format that does not fit
// either -> the matrix's float type (llama.cpp: F16).
QuantType fitting(QuantType t, int64_t K) {
    if (t == QuantType::none || K % quant_block(t) == 0) return t;
    if (quant_k_block(t)) t = t == QuantType::q6_k ? QuantType::q8_0 : QuantType::q5_0;
    return K % quant_block(t) == 0 ? t : QuantType::none;
}

// llama.cpp's choice of layers for more bits in its _M schemes.
bool more_bits(int64_t layer, int64_t n_layers) {
    return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

QuantType base(QuantScheme s) {
    switch (s) {
        case QuantScheme::none:
            return QuantType::none;
        case QuantScheme::q8_0:
            return QuantType::q8_0;
        case QuantScheme::q6_k:
            return QuantType::q6_k;
        case QuantScheme::q4_k_m:
            return QuantType::q4_k;
        case QuantScheme::q5_k_m:
            return QuantType::q5_k;
        case QuantScheme::q4_0:
            return QuantType::q4_0;
    }
    return QuantType::none;
}

// The output projection (llama.cpp's output branch): q8_0 under q8_0, else q6_k, q8_0 where the rows do not fit 256
// (llama.cpp takes q8_0 there directly).
QuantType output_type(QuantScheme scheme, int64_t K) {
    if (scheme == QuantScheme::none) return QuantType::none;
    if (scheme == QuantScheme::q8_0 || K % 256 != 0) return fitting(QuantType::q8_0, K);
    return QuantType::q6_k;
}

}  // namespace

const char* scheme_name(QuantScheme s) {
    switch (s) {
        case QuantScheme::none:
            return "none";
        case QuantScheme::q8_0:
            return "q8_0";
        case QuantScheme::q6_k:
            return "q6_k";
        case QuantScheme::q4_k_m:
            return "q4_k_m";
        case QuantScheme::q5_k_m:
            return "q5_k_m";
        case QuantScheme::q4_0:
            return "q4_0";
    }
    return "?";
}

std::string scheme_names() {
    std::string s;
    for (QuantScheme q : kSchemes) s += std::string(s.empty() ? "" : ", ") + scheme_name(q);
    return s;
}

QuantScheme parse_scheme(const std::string& name, const std::string& what) {
    for (QuantScheme s : kSchemes)
        if (name == scheme_name(s)) return s;
    throw UsageError(what + " " + name + ": expected one of " + scheme_names());
}

QuantType quant_for(QuantScheme scheme, const TensorSpec& s, const LlamaConfig& c) {
    const int64_t K = s.shape.back();
    if (s.model_field == &ModelWeights::lm_head) return output_type(scheme, K);
    QuantType t = base(scheme);
    if (scheme == QuantScheme::q4_k_m || scheme == QuantScheme::q5_k_m) {
        const bool v_or_down = s.layer_field == &LayerWeights::v_proj || s.layer_field == &LayerWeights::down_proj;
        if (v_or_down && more_bits(s.layer, c.num_hidden_layers)) t = QuantType::q6_k;
    }
    return fitting(t, K);
}

QuantType quant_for_tied_lm_head(QuantScheme scheme, const LlamaConfig& c) {
    return output_type(scheme, c.hidden_size);
}

QuantType quant_for_embedding(QuantScheme scheme, const LlamaConfig& c) {
    if (c.tie_word_embeddings) return quant_for_tied_lm_head(scheme, c);
    return fitting(base(scheme), c.hidden_size);
}

}  // namespace plainllama
