// Storage types of weights and their scalar conversions to and from float.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace plainllama {

// U8: raw bytes, only as the blocks of a quantized matrix (quant.h; the format named in the file's __metadata__).
enum class DType { F32, F16, BF16, U8 };

inline size_t dtype_size(DType t) { return t == DType::F32 ? 4 : t == DType::U8 ? 1 : 2; }
const char* dtype_name(DType t);
// "F32" / "F16" / "BF16" / "U8" (safetensors spelling); false for anything else.
bool parse_dtype(const std::string& s, DType* out);

inline float bf16_to_f32(uint16_t h) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}

// IEEE half precision, exact (handles subnormals, Inf and NaN).
inline float f16_to_f32(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (mant == 0) {
            u = sign;
        } else {  // subnormal: normalise
            int e = -1;
            do {
                mant <<= 1;
                ++e;
            } while (!(mant & 0x400u));
            u = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | mant << 13;
    } else {
        u = sign | (exp + 127 - 15) << 23 | mant << 13;
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Round to nearest even.
uint16_t f32_to_f16(float f);

}  // namespace plainllama
