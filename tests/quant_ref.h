// Test helpers shared by the quantized-block tests: GGUF's blocks decoded from their definitions (ggml-common.h),
// independently of the library, and random rows.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "plainllama/kernels/quant.h"
#include "test_util.h"

namespace plainllama::quant_ref {

using test::decode_f16;

inline double f16_at(const uint8_t* p) { return decode_f16(uint16_t(p[0] | p[1] << 8)); }

// GGUF's blocks read from their definitions (ggml-common.h), independently of the library: y [K] in double.
inline std::vector<double> gguf_decode(QuantType t, const uint8_t* x, int64_t K) {
    std::vector<double> y;
    if (t == QuantType::q8_0) {
        for (int64_t b = 0; b < K / 32; ++b, x += 34)
            for (int i = 0; i < 32; ++i) y.push_back(f16_at(x) * double(int8_t(x[2 + i])));
    } else if (t == QuantType::q4_k) {  // d, dmin, scales[12], qs[128]
        for (int64_t b = 0; b < K / 256; ++b, x += 144) {
            const uint8_t* s = x + 4;
            for (int j = 0; j < 8; ++j) {  // sub-block j: 32 weights
                const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
                const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
                for (int i = 0; i < 32; ++i) {
                    const uint8_t byte = x[16 + 32 * (j / 2) + i];  // 64 weights per 32 bytes: low, then high
                    const int q = j % 2 ? byte >> 4 : byte & 15;
                    y.push_back(f16_at(x) * sc * q - f16_at(x + 2) * m);
                }
            }
        }
    } else if (t == QuantType::q4_0 || t == QuantType::q5_0) {  // d, (q5_0: qh[4]), qs[16]
        const bool q5 = t == QuantType::q5_0;
        for (int64_t b = 0; b < K / 32; ++b, x += q5 ? 22 : 18) {
            const uint8_t* qs = x + (q5 ? 6 : 2);
            for (int i = 0; i < 32; ++i) {  // weight i < 16 in the low nibble of qs[i], 16 + i in the high one
                const int low = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
                const int high = q5 ? (x[2 + i / 8] >> (i % 8)) & 1 : 0;  // bit i of the little-endian qh
                y.push_back(f16_at(x) * double(low + 16 * high - (q5 ? 16 : 8)));
            }
        }
    } else if (t == QuantType::q5_k) {  // d, dmin, scales[12], qh[32], qs[128]
        for (int64_t b = 0; b < K / 256; ++b, x += 176) {
            const uint8_t* s = x + 4;
            for (int j = 0; j < 8; ++j) {
                const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
                const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
                for (int i = 0; i < 32; ++i) {
                    const uint8_t byte = x[48 + 32 * (j / 2) + i];
                    const int q = (j % 2 ? byte >> 4 : byte & 15) | ((x[16 + i] >> j) & 1) << 4;  // bit j of qh[i]
                    y.push_back(f16_at(x) * sc * q - f16_at(x + 2) * m);
                }
            }
        }
    } else {  // q6_k: ql[128], qh[64], scales[16], d
        for (int64_t b = 0; b < K / 256; ++b, x += 210) {
            const double d = f16_at(x + 208);
            for (int i = 0; i < 256; ++i) {
                const int h = i / 128, l = i % 32, quarter = i % 128 / 32;
                const uint8_t ql = x[64 * h + l + (quarter % 2) * 32], qh = x[128 + 32 * h + l];
                const int q = ((quarter < 2 ? ql & 15 : ql >> 4) | ((qh >> (2 * quarter)) & 3) << 4) - 32;
                y.push_back(d * double(int8_t(x[192 + i / 16])) * q);
            }
        }
    }
    return y;
}

inline std::vector<float> random_row(int64_t K, std::mt19937& rng, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> x(static_cast<size_t>(K));
    for (float& v : x) v = d(rng);
    return x;
}

inline constexpr QuantType kQuantTypes[] = {QuantType::q8_0, QuantType::q4_k, QuantType::q6_k,
                                            QuantType::q4_0, QuantType::q5_0, QuantType::q5_k};

}  // namespace plainllama::quant_ref
