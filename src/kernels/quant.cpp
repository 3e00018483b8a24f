// The quantized formats (quant.h): names and block sizes; quantizing and dequantizing a row with the active
// kernels (quantize.inc, quant.inc).
#include "plainllama/kernels/quant.h"

#include "isa.h"
#include "plainllama/sys/error.h"

namespace plainllama {

const char* quant_name(QuantType t) {
    switch (t) {
        case QuantType::none: return "none";
        case QuantType::q8_0: return "q8_0";
        case QuantType::q4_k: return "q4_k";
        case QuantType::q6_k: return "q6_k";
    }
    return "?";
}

bool parse_quant_type(const std::string& s, QuantType* t) {
    for (QuantType q : {QuantType::none, QuantType::q8_0, QuantType::q4_k, QuantType::q6_k})
        if (s == quant_name(q)) {
            *t = q;
            return true;
        }
    return false;
}

int64_t quant_block(QuantType t) { return t == QuantType::q8_0 ? 32 : t == QuantType::none ? 1 : 256; }

size_t quant_block_bytes(QuantType t) {
    switch (t) {
        case QuantType::none: return 0;
        case QuantType::q8_0: return 34;
        case QuantType::q4_k: return 144;
        case QuantType::q6_k: return 210;
    }
    return 0;
}

size_t quant_row_bytes(QuantType t, int64_t K) { return size_t(K / quant_block(t)) * quant_block_bytes(t); }

void quantize_row(QuantType t, const float* x, void* dst, int64_t K) {
    PL_CHECK(t != QuantType::none && K % quant_block(t) == 0);
    isa::active().quantize_row(t, x, static_cast<uint8_t*>(dst), K);
}

void dequantize_row(QuantType t, const void* src, float* y, int64_t K) {
    PL_CHECK(t != QuantType::none && K % quant_block(t) == 0);
    isa::active().dequantize(t, static_cast<const uint8_t*>(src), y, K);
}

}  // namespace plainllama
