#include "plainllama/model/quant_scheme.h"

#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

// The format if K fits its block, else the next that fits (q4_k, q6_k -> q8_0 -> none).
QuantType fitting(QuantType t, int64_t K) {
    if (t != QuantType::none && K % quant_block(t) != 0) t = QuantType::q8_0;
    if (t == QuantType::q8_0 && K % quant_block(t) != 0) t = QuantType::none;
    return t;
}

// llama.cpp's choice of layers for more bits in its _M schemes.
bool more_bits(int64_t layer, int64_t n_layers) {
    return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

QuantType base(QuantScheme s) {
    switch (s) {
        case QuantScheme::none: return QuantType::none;
        case QuantScheme::q8_0: return QuantType::q8_0;
        case QuantScheme::q6_k: return QuantType::q6_k;
        case QuantScheme::q4_k_m: return QuantType::q4_k;
    }
    return QuantType::none;
}

}  // namespace

const char* scheme_name(QuantScheme s) {
    switch (s) {
        case QuantScheme::none: return "none";
        case QuantScheme::q8_0: return "q8_0";
        case QuantScheme::q6_k: return "q6_k";
        case QuantScheme::q4_k_m: return "q4_k_m";
    }
    return "?";
}

QuantScheme parse_scheme(const std::string& name, const std::string& what) {
    for (QuantScheme s : {QuantScheme::none, QuantScheme::q8_0, QuantScheme::q6_k, QuantScheme::q4_k_m})
        if (name == scheme_name(s)) return s;
    throw UsageError(what + " " + name + ": expected none, q8_0, q6_k or q4_k_m");
}

QuantType quant_for(QuantScheme scheme, const TensorSpec& s, const LlamaConfig& c) {
    QuantType t = base(scheme);
    if (scheme == QuantScheme::q4_k_m) {
        const bool output = s.model_field == &ModelWeights::lm_head;
        const bool v_or_down = s.layer_field == &LayerWeights::v_proj || s.layer_field == &LayerWeights::down_proj;
        if (output || (v_or_down && more_bits(s.layer, c.num_hidden_layers))) t = QuantType::q6_k;
    }
    return fitting(t, s.shape.back());
}

QuantType quant_for_tied_lm_head(QuantScheme scheme, const LlamaConfig& c) {
    return fitting(scheme == QuantScheme::q4_k_m ? QuantType::q6_k : base(scheme), c.hidden_size);
}

}  // namespace plainllama
