// The portable kernels: plain C++ for any x86-64 (compiled like the rest of the project), and the reference the
// tests hold the others to. 16-bit panels are always widened before the GEMM (a software F16 conversion per use
// would cost more than the products).
#include <xmmintrin.h>  // SSE, part of every x86-64: quantizers.inc's clamp

#include <cstdint>
#include <type_traits>  // quantizers.inc

#include "isa.h"
#include "plainllama/io/dtype.h"

namespace plainllama::isa {
namespace {

#include "elementwise.inc"
#include "quant_dot.inc"
#include "quantizers.inc"

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

template <class T>
void matvec(float* out, const float* x, const T* W, int64_t N, int64_t K, int64_t p0, int64_t p1) {
    const int64_t Ks = stored_k(Pairs<T>::value, K);
    for (int64_t p = p0; p < p1; ++p) {
        const T* P = W + p * kNR * Ks;
        const int64_t nr = N - p * kNR < kNR ? N - p * kNR : kNR;
        float acc[kNR] = {};
        for (int64_t k = 0; k < K; ++k) {
            const float xv = x[k];
            for (int64_t j = 0; j < kNR; ++j) acc[j] += xv * to_f32(P[panel_index(Pairs<T>::value, k, j)]);
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
        for (int64_t j = 0; j < kNR; ++j) out[k * kNR + j] = to_f32(P[panel_index(true, k, j)]);
}

float sum_stream(const float* p, int64_t n, ReadWay) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += p[i];
    return s;
}

// Eight independent chains of a multiply, then an add (the compiler may pair them into vector instructions).
float fma_burst(int64_t reps, double* ops) {
    float a[8];
    for (int i = 0; i < 8; ++i) a[i] = 1.0f + float(i);
    for (int64_t r = 0; r < reps; ++r)
        for (int i = 0; i < 8; ++i) a[i] = a[i] * 0.999999f + 1e-7f;
    float s = 0.0f;
    for (float v : a) s += v;
    *ops = double(reps) * 8 * 2;
    return s;
}

constexpr Kernels kTable = {
    .name = "scalar",
    .tile_f32 = PL_TILES(micro_tile),
    .f16_direct_rows = 0,  // 16-bit panels always widened first: converting each value at every use costs more
    .bf16_direct_rows = 0,
    .matvec_f32 = matvec<float>,
    .matvec_f16 = matvec<F16>,
    .matvec_bf16 = matvec<BF16>,
    .pack_block32 = pack_block<uint32_t>,
    .pack_block16 = pack_block<uint16_t>,
    .widen_f16 = widen<F16>,
    .widen_bf16 = widen<BF16>,
    .widen_bf16_pairs = widen_bf16_pairs,
    .sum_squares = sum_squares,
    .scale_mul = scale_mul,
    .softmax = softmax,
    .exp_shifted = exp_shifted,
    .scale_i8_rows = scale_i8_rows,
    .silu_mul = silu_mul,
    .add = add,
    .rope_rotate_half = rope_rotate_half,
    .quantize_row = quantize_row,
    .dequantize = dequantize,
    .quantize_q8x32 = quantize_q8x32,
    .quantize_q8x256 = quantize_q8x256,
    .matvec_q8_0 = matvec_q8_0,
    .matvec_q4_k = matvec_q4_k,
    .matvec_q6_k = matvec_q6_k,
    .matvec_q4_0 = matvec_q4_0,
    .matvec_q5_0 = matvec_q5_0,
    .matvec_q5_k = matvec_q5_k,
    .matvec_q8_0_x16 = matvec_q8_0_x16,
    .matvec_q4_k_x16 = matvec_q4_k_x16,
    .matvec_q6_k_x16 = matvec_q6_k_x16,
    .matvec_q4_0_x16 = matvec_q4_0_x16,
    .matvec_q5_0_x16 = matvec_q5_0_x16,
    .matvec_q5_k_x16 = matvec_q5_k_x16,
    .sum_stream = sum_stream,
    .fma_burst = fma_burst,
};

}  // namespace

const Kernels& scalar_kernels() { return kTable; }

}  // namespace plainllama::isa
