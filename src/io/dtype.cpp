#include "plainllama/io/dtype.h"

#include <cmath>

namespace plainllama {

const char* dtype_name(DType t) {
    switch (t) {
        case DType::F32:
            return "F32";
        case DType::F16:
            return "F16";
        case DType::BF16:
            return "BF16";
        case DType::U8:
            return "U8";
    }
    return "?";
}

bool parse_dtype(const std::string& s, DType* out) {
    if (s == "F32")
        *out = DType::F32;
    else if (s == "F16")
        *out = DType::F16;
    else if (s == "BF16")
        *out = DType::BF16;
    else if (s == "U8")
        *out = DType::U8;
    else
        return false;
    return true;
}

uint16_t f32_to_f16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;   // NaN
    if (a >= 0x477ff000u) return sign | 0x7c00u;  // overflow (>= 65520) -> Inf
    if (a < 0x38800000u) {                        // subnormal or zero in f16
        float af;
        std::memcpy(&af, &a, 4);
        // 2^-24 is the f16 subnormal step; nearbyint rounds to nearest even.
        return sign | uint16_t(std::nearbyint(af * 16777216.0f));
    }
    uint32_t mant_round = a + 0xfffu + ((a >> 13) & 1u);  // round to nearest even at bit 13
    return sign | uint16_t((mant_round - (uint32_t(127 - 15) << 23)) >> 13);
}

}  // namespace plainllama
