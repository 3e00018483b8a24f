// Kernels for AVX2 + FMA + F16C (x86-64-v3: Intel since Haswell, AMD since Zen), on 8 lanes. Compiled with
// -march=x86-64-v3; used only on a CPU that has it (dispatch.cpp). Nothing here may be emitted as a weak symbol
// (see isa.h).
#include <immintrin.h>

#include <cstdint>

#include "isa.h"
#include "plainllama/io/dtype.h"

namespace plainllama::isa {
namespace {

#include "elementwise.inc"
#include "quant.inc"
#include "quantize.inc"

// 8 lanes of any storage type as f32.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const F16* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load8(const BF16* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline float load1(F16 v) { return _cvtsh_ss(v.bits); }
inline float load1(BF16 v) {
    const uint32_t u = uint32_t(v.bits) << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}
// Lanes i < n set (all for n >= 8, none for n <= 0), for maskload / maskstore.
inline __m256i lane_mask(int64_t n) {
    const int c = n < 0 ? 0 : n > 8 ? 8 : int(n);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// A BF16 pair word (k even in the low half, k+1 in the high half) as two f32 vectors.
inline __m256 bf16_even(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }
inline __m256 bf16_odd(__m256i v) {
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
}

// See MicroTile in isa.h. 16 registers: up to 6 rows x 16 columns (12 accumulators) at a time. E: float or F16.
template <int MR, class E>
void micro_tile(float* out, int64_t ldo, const float* x, int64_t ldx, const E* Wp, int64_t ldw, int64_t kc, int64_t nr,
                bool accumulate) {
    if constexpr (MR > 6) {
        micro_tile<4, E>(out, ldo, x, ldx, Wp, ldw, kc, nr, accumulate);
        micro_tile<MR - 4, E>(out + 4 * ldo, ldo, x + 4 * ldx, ldx, Wp, ldw, kc, nr, accumulate);
    } else {
        constexpr bool f32 = sizeof(E) == 4;
        for (int64_t h = 0; h < nr; h += 16) {
            // maskload / maskstore only for a partial block: they are slow on some cores.
            const bool full = nr - h >= 16;
            const __m256i m0 = lane_mask(nr - h), m1 = lane_mask(nr - h - 8);
            __m256 a0[MR], a1[MR];
            for (int i = 0; i < MR; ++i) {
                float* o = out + i * ldo + h;
                a0[i] = !accumulate ? _mm256_setzero_ps() : full ? _mm256_loadu_ps(o) : _mm256_maskload_ps(o, m0);
                a1[i] = !accumulate ? _mm256_setzero_ps()
                        : full      ? _mm256_loadu_ps(o + 8)
                                    : _mm256_maskload_ps(o + 8, m1);
            }
            auto fma_k = [&](__m256 w0, __m256 w1, int64_t k) {
                for (int i = 0; i < MR; ++i) {
                    const __m256 xb = _mm256_broadcast_ss(x + i * ldx + k);
                    a0[i] = _mm256_fmadd_ps(xb, w0, a0[i]);
                    a1[i] = _mm256_fmadd_ps(xb, w1, a1[i]);
                }
            };
            if (!f32 || full || ldw == kNR) {  // a panel is read past nr (its lanes are never stored)
                for (int64_t k = 0; k < kc; ++k) fma_k(load8(Wp + k * ldw + h), load8(Wp + k * ldw + h + 8), k);
            } else if constexpr (f32) {
                for (int64_t k = 0; k < kc; ++k) {
                    const float* w = Wp + k * ldw + h;
                    fma_k(_mm256_maskload_ps(w, m0), _mm256_maskload_ps(w + 8, m1), k);
                }
            }
            for (int i = 0; i < MR; ++i) {
                float* o = out + i * ldo + h;
                if (full) {
                    _mm256_storeu_ps(o, a0[i]);
                    _mm256_storeu_ps(o + 8, a1[i]);
                } else {
                    _mm256_maskstore_ps(o, m0, a0[i]);
                    _mm256_maskstore_ps(o + 8, m1, a1[i]);
                }
            }
        }
    }
}

template <class T>
void matvec(float* out, const float* x, const T* W, int64_t N, int64_t K, int64_t p0, int64_t p1) {
    constexpr bool pairs = Pairs<T>::value;
    const int64_t Ks = stored_k(pairs, K);
    for (int64_t p = p0; p < p1; ++p) {
        const T* P = W + p * kNR * Ks;
        const int64_t nr = N - p * kNR < kNR ? N - p * kNR : kNR;
        __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        if constexpr (pairs) {
            const __m256i* w = reinterpret_cast<const __m256i*>(P);  // per k pair: 32 words = 4 vectors
            int64_t k = 0;
            for (; k + 2 <= K; k += 2, w += 4) {
                const __m256 xe = _mm256_broadcast_ss(x + k), xo = _mm256_broadcast_ss(x + k + 1);
                for (int v = 0; v < 4; ++v) {
                    const __m256i wv = _mm256_loadu_si256(w + v);
                    a[v] = _mm256_fmadd_ps(xo, bf16_odd(wv), _mm256_fmadd_ps(xe, bf16_even(wv), a[v]));
                }
            }
            if (k < K) {
                const __m256 xe = _mm256_broadcast_ss(x + k);
                for (int v = 0; v < 4; ++v) a[v] = _mm256_fmadd_ps(xe, bf16_even(_mm256_loadu_si256(w + v)), a[v]);
            }
        } else {
            for (int64_t k = 0; k < K; ++k) {
                const __m256 xb = _mm256_broadcast_ss(x + k);
                for (int v = 0; v < 4; ++v) a[v] = _mm256_fmadd_ps(xb, load8(P + k * kNR + 8 * v), a[v]);
            }
        }
        for (int v = 0; v < 4; ++v) {
            float* o = out + p * kNR + 8 * v;
            if (nr == kNR)
                _mm256_storeu_ps(o, a[v]);
            else
                _mm256_maskstore_ps(o, lane_mask(nr - 8 * v), a[v]);
        }
    }
}

// 8 elements of 32 or 16 bits as the bits of 8 32-bit lanes, and back.
inline __m256 load_bits(const uint32_t* p) {
    return _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m256 load_bits(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline void store_bits(uint32_t* p, __m256 v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_castps_si256(v));
}
inline void store_bits(uint16_t* p, __m256 v) {
    const __m256i w = _mm256_castps_si256(v);  // lanes < 2^16: unsigned saturation keeps them
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
}
// r[i] = row i of an 8x8 block  ->  r[i] = column i.
inline void transpose8x8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

// 8x8 blocks transposed in registers, then the k left over (kc % 8) one value at a time.
template <class E>
void pack_block(E* Wp, const E* W, int64_t K, int64_t n0, int64_t nr, int64_t k0, int64_t kc) {
    int64_t k8 = 0;
    for (; k8 + 8 <= kc; k8 += 8)
        for (int64_t j0 = 0; j0 < kNR; j0 += 8) {
            __m256 r[8];
            for (int64_t i = 0; i < 8; ++i)
                r[i] = j0 + i < nr ? load_bits(W + (n0 + j0 + i) * K + k0 + k8) : _mm256_setzero_ps();
            transpose8x8(r);
            for (int64_t i = 0; i < 8; ++i) store_bits(Wp + (k8 + i) * kNR + j0, r[i]);
        }
    for (int64_t k = k8; k < kc; ++k)
        for (int64_t j = 0; j < kNR; ++j) Wp[k * kNR + j] = j < nr ? W[(n0 + j) * K + k0 + k] : E(0);
}

template <class T>
void widen(float* out, const T* src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, load8(src + i));
    for (; i < n; ++i) out[i] = load1(src[i]);
}

void widen_bf16_pairs(float* out, const BF16* P, int64_t kc) {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(P);
    for (int64_t k = 0; k < kc; k += 2, w += kNR)
        for (int64_t j = 0; j < kNR; j += 8) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + j));
            _mm256_storeu_ps(out + k * kNR + j, bf16_even(v));
            _mm256_storeu_ps(out + (k + 1) * kNR + j, bf16_odd(v));  // out has room for an odd kc's pad row
        }
}

// Four independent accumulators, so the adds' latency does not limit the loads.
float sum_stream(const float* p, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

constexpr Kernels kTable = {
    .name = "avx2",
    .tile_f32 = PL_TILES(micro_tile, float),
    .tile_f16 = PL_TILES(micro_tile, F16),
    .f16_direct_rows = INT64_MAX,  // F16 panels read directly at any height: faster than widening a block first
    .bf16_direct_rows = 0,         // BF16 pairs are widened first: reading them directly is slower with AVX2
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
    .matvec_q8_0_x16 = matvec_q8_0_x16,
    .matvec_q4_k_x16 = matvec_q4_k_x16,
    .matvec_q6_k_x16 = matvec_q6_k_x16,
    .sum_stream = sum_stream,
};

}  // namespace

const Kernels& avx2_kernels() { return kTable; }

}  // namespace plainllama::isa
