// The portable kernels: plain C++ for any x86-64 (compiled like the rest of the project), and the reference the
// tests hold the others to. 16-bit panels are always widened before the GEMM (a software F16 conversion per use
// would cost more than the products).
#include <cstdint>

#include "isa.h"
#include "plainllama/io/dtype.h"

namespace plainllama::isa {
namespace {

#include "elementwise.inc"

inline float to_f32(float v) { return v; }
inline float to_f32(F16 v) { return f16_to_f32(v.bits); }
inline float to_f32(BF16 v) { return bf16_to_f32(v.bits); }

template <int MR>
void micro_tile(float* out, int64_t ldo, const float* x, int64_t ldx, const float* Wp, int64_t ldw, int64_t kc,
                int64_t nr, bool accumulate) {
    float acc[MR][kNR];
    for (int i = 0; i < MR; ++i)
        for (int64_t j = 0; j < kNR; ++j) acc[i][j] = accumulate && j < nr ? out[i * ldo + j] : 0.0f;
    for (int64_t k = 0; k < kc; ++k)
        for (int i = 0; i < MR; ++i) {
            const float xv = x[i * ldx + k];
            for (int64_t j = 0; j < nr; ++j) acc[i][j] += xv * Wp[k * ldw + j];
        }
    for (int i = 0; i < MR; ++i)
        for (int64_t j = 0; j < nr; ++j) out[i * ldo + j] = acc[i][j];
}

// W[kNR p + j, k] inside panel p: [k][j], or [k/2][j][k%2] for BF16 pairs.
template <class T>
inline int64_t panel_at(int64_t k, int64_t j) {
    return Pairs<T>::value ? k / 2 * 2 * kNR + j * 2 + k % 2 : k * kNR + j;
}

template <class T>
void matvec(float* out, const float* x, const T* W, int64_t N, int64_t K, int64_t p0, int64_t p1) {
    const int64_t Ks = Pairs<T>::value ? (K + 1) / 2 * 2 : K;
    for (int64_t p = p0; p < p1; ++p) {
        const T* P = W + p * kNR * Ks;
        const int64_t nr = N - p * kNR < kNR ? N - p * kNR : kNR;
        float acc[kNR] = {};
        for (int64_t k = 0; k < K; ++k) {
            const float xv = x[k];
            for (int64_t j = 0; j < kNR; ++j) acc[j] += xv * to_f32(P[panel_at<T>(k, j)]);
        }
        for (int64_t j = 0; j < nr; ++j) out[p * kNR + j] = acc[j];
    }
}

// 16 k at a time: each row's 16 values are one read, the [16][kNR] destination stays in L1.
template <class E>
void pack_block(E* Wp, const E* W, int64_t K, int64_t n0, int64_t nr, int64_t k0, int64_t kc) {
    for (int64_t kb = 0; kb < kc; kb += 16) {
        const int64_t m = kc - kb < 16 ? kc - kb : 16;
        for (int64_t j = 0; j < kNR; ++j)
            for (int64_t k = 0; k < m; ++k) Wp[(kb + k) * kNR + j] = j < nr ? W[(n0 + j) * K + k0 + kb + k] : E(0);
    }
}

template <class T>
void widen(float* out, const T* src, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = to_f32(src[i]);
}

void widen_bf16_pairs(float* out, const BF16* P, int64_t kc) {
    for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = 0; j < kNR; ++j) out[k * kNR + j] = to_f32(P[panel_at<BF16>(k, j)]);
}

float sum_stream(const float* p, int64_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += p[i];
    return s;
}

constexpr Kernels kTable = {
    "scalar",
    {nullptr, micro_tile<1>, micro_tile<2>, micro_tile<3>, micro_tile<4>, micro_tile<5>, micro_tile<6>, micro_tile<7>,
     micro_tile<8>},
    {},
    {},
    0,
    0,
    {},
    nullptr,
    matvec<float>,
    matvec<F16>,
    matvec<BF16>,
    pack_block<uint32_t>,
    pack_block<uint16_t>,
    widen<F16>,
    widen<BF16>,
    widen_bf16_pairs,
    sum_squares,
    scale_mul,
    softmax,
    silu_mul,
    add,
    rope_rotate_half,
    sum_stream,
};

}  // namespace

const Kernels& scalar_kernels() { return kTable; }

}  // namespace plainllama::isa
