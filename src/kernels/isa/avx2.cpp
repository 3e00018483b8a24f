// Kernels for AVX2 + FMA + F16C (x86-64-v3: Intel since Haswell, AMD since Zen), on 8 lanes. Compiled with
// -march=x86-64-v3; used only on a CPU that has it (dispatch.cpp). Nothing here may be emitted as a weak symbol
// (see isa.h).
#include <immintrin.h>

#include <cstdint>
#include <type_traits>  // quantizers.inc

#include "isa.h"
#include "plainllama/io/dtype.h"

namespace plainllama::isa {
namespace {

#include "elementwise.inc"
#include "prefetch.inc"
#include "quant_dot.inc"
#include "quantizers.inc"

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

// Decode: each panel streamed once, every line prefetched 4 KiB ahead (prefetch_ahead).
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
                prefetch_ahead(w);
                prefetch_ahead(w + 2);
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
                prefetch_ahead(P + k * kNR);
                if constexpr (sizeof(T) == 4) prefetch_ahead(P + k * kNR + 16);
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

// Four independent accumulators, so the adds' latency does not limit the loads; with plain loads or with one of the
// prefetches.
float sum_stream(const float* p, int64_t n, ReadWay way) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 32) {
        if (way == ReadWay::prefetch_lines) {
            prefetch_ahead(p + i);
            prefetch_ahead(p + i + 16);
        } else if (way == ReadWay::prefetch_pages) {
            prefetch_page_start(p + i, kPageAhead, 128);
        }
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

// Twelve independent chains: more than the FMA units' latency times their count, so the units never wait.
float fma_burst(int64_t reps, double* ops) {
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    __m256 a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(1.0f + float(i));
    for (int64_t r = 0; r < reps; ++r)
        for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
    for (int i = 1; i < 12; ++i) a[0] = _mm256_add_ps(a[0], a[i]);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a[0]), _mm256_extractf128_ps(a[0], 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    *ops = double(reps) * 12 * 8 * 2;
    return _mm_cvtss_f32(h);
}

// ---- quantized weights, decode, on the tiles of 16 interleaved rows (quant.h), as avx512.cpp's kernels on half
// a tile at a time: each 64-byte chunk holds 4 weights of each of 16 rows, its first 32 bytes rows 0 .. 7 and its
// last 32 rows 8 .. 15. Each row's integer sums in its own lane, then quant_dot.inc's float steps for the 8 rows in
// their lanes, in its order: the same bits as quant_dot.inc's kernels.

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

// Sums of u8 x s8 in groups of 4 into s32 (vpmaddubsw, then pairs of int16 by vpmaddwd): exact while no pair of
// products passes 32767, which the callers' value ranges ensure.
inline __m256i dot4(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
inline __m256i bytes4(const int8_t* p) {  // 4 bytes in every 32-bit lane
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
// As avx512.cpp's: each load of a tile comes with a prefetch of the same place `ahead` bytes on
// (load_line_ahead), and the header (the first `bytes`) of the tile `ahead` bytes on is prefetched whole (an even q6_k
// tile's d[16], at its end, with the odd tile after it: the line holding that tile's start).
__attribute__((always_inline)) inline __m256i load_ahead(const uint8_t* p, size_t ahead) {
    return load_line_ahead<__m256i>(p, ahead);
}
inline __m256 load_half8(const uint8_t* p) {  // 8 fp16 as f32
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i load_u8x8(const uint8_t* p) {  // 8 bytes as u32 lanes
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// q8_0 tiles hold q + 128: q recovered (^ 0x80), then |x| . (q with x's sign) (vpsignb), which cannot saturate
// (2 x 127 x 127) and is exact for q >= -127, every q a quantizer writes (llama.cpp's AVX2 kernel does the same).
__attribute__((always_inline)) inline void matvec_q8_0_x16_one(float* out, const uint8_t* W, int64_t K,
                                                               const BlockQ8x32* x, int64_t g0, int64_t g1) {
    const int64_t nb = K / 32;
    for (int64_t g = g0; g < g1; ++g) {
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* T = W + size_t(g * nb + b) * kQ8x16Tile;
            constexpr size_t ahead = 8 * kQ8x16Tile;
            prefetch(T, ahead, 32);
            __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int c = 0; c < 8; ++c) {
                const __m256i xs = bytes4(x[b].qs + 4 * c), ax = _mm256_abs_epi8(xs);
                for (int h = 0; h < 2; ++h) {
                    const __m256i q =
                        _mm256_xor_si256(load_ahead(T + q8_qs_line(c) + 32 * h, ahead), _mm256_set1_epi8(char(0x80)));
                    isum[h] = dot4(isum[h], ax, _mm256_sign_epi8(q, xs));
                }
            }
            for (int h = 0; h < 2; ++h) {
                const __m256 d = _mm256_mul_ps(load_half8(T + 16 * h), _mm256_set1_ps(x[b].d));
                acc[h] = _mm256_add_ps(acc[h], _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[h])));
            }
        }
        _mm256_storeu_ps(out + 16 * g, acc[0]);
        _mm256_storeu_ps(out + 16 * g + 8, acc[1]);
    }
}

// q4_k, M tokens at once (token m: x + m ldx blocks, out + m ldo), each half tile's values unpacked once for all of
// them; for each token the same integer sums and float steps as for it alone. A sub-block's vpmaddubsw pairs
// (2 x 15 x 127 at most) add up in int16 over its 8 chunks without saturating (30480), and vpmaddwd by the row's
// scale in both halves of its lane gives sc (q . x) in int32; the mins likewise, two sub-blocks per vpmaddwd
// (m_j and m_j+1 against the sums of x over each, at most 4064).
template <int M>
__attribute__((always_inline)) inline void matvec_q4_k_x16_body(float* out, int64_t ldo, const uint8_t* W, int64_t K,
                                                                const BlockQ8x256* x, int64_t ldx, int64_t g0,
                                                                int64_t g1) {
    const int64_t nb = K / 256;
    const __m256i nib = _mm256_set1_epi8(0x0F);
    auto pairs = [](__m256i lo, __m256i hi) { return _mm256_or_si256(lo, _mm256_slli_epi32(hi, 16)); };
    for (int64_t g = g0; g < g1; ++g)
        for (int h = 0; h < 2; ++h) {  // rows 8h .. 8h + 7
            __m256 acc[M];
            for (int m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t* T = W + size_t(g * nb + b) * kQ4x16Tile;
                constexpr size_t ahead = 4 * kQ4x16Tile;
                prefetch(T, ahead, q4_qs_line(0));  // the header
                __m256i isum[M], imin[M];
                for (int m = 0; m < M; ++m) isum[m] = imin[m] = _mm256_setzero_si256();
                for (int gr = 0; gr < 4; ++gr) {
                    __m256i lo[M], hi[M];  // int16 pairs
                    for (int m = 0; m < M; ++m) lo[m] = hi[m] = _mm256_setzero_si256();
                    for (int c = 0; c < 8; ++c) {
                        const __m256i v = load_ahead(T + q4_qs_line(8 * gr + c) + 32 * h, ahead);
                        const __m256i vl = _mm256_and_si256(v, nib),
                                      vh = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
                        for (int m = 0; m < M; ++m) {
                            const int8_t* xq = x[m * ldx + b].qs + 64 * gr + 4 * c;
                            lo[m] = _mm256_add_epi16(lo[m], _mm256_maddubs_epi16(vl, bytes4(xq)));
                            hi[m] = _mm256_add_epi16(hi[m], _mm256_maddubs_epi16(vh, bytes4(xq + 32)));
                        }
                    }
                    const __m256i sc_lo = load_u8x8(T + q4_scales(2 * gr) + 8 * h),
                                  sc_hi = load_u8x8(T + q4_scales(2 * gr + 1) + 8 * h);
                    const __m256i s_lo = pairs(sc_lo, sc_lo), s_hi = pairs(sc_hi, sc_hi);
                    for (int m = 0; m < M; ++m)
                        isum[m] = _mm256_add_epi32(
                            isum[m], _mm256_add_epi32(_mm256_madd_epi16(lo[m], s_lo), _mm256_madd_epi16(hi[m], s_hi)));
                }
                for (int j = 0; j < 8; j += 2) {
                    const __m256i mn = pairs(load_u8x8(T + q4_mins(j) + 8 * h), load_u8x8(T + q4_mins(j + 1) + 8 * h));
                    for (int m = 0; m < M; ++m) {
                        const __m256i s = _mm256_set1_epi32(sums32_pair(x[m * ldx + b], j));
                        imin[m] = _mm256_add_epi32(imin[m], _mm256_madd_epi16(mn, s));
                    }
                }
                const __m256 d = load_half8(T + 16 * h), dmin = load_half8(T + kQ4Dmin + 16 * h);
                for (int m = 0; m < M; ++m) {
                    const __m256 t = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[m])),
                                                   _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(imin[m])));
                    acc[m] = _mm256_add_ps(acc[m], _mm256_mul_ps(_mm256_set1_ps(x[m * ldx + b].d), t));
                }
            }
            for (int m = 0; m < M; ++m) _mm256_storeu_ps(out + m * ldo + 16 * g + 8 * h, acc[m]);
        }
}

void matvec_q4_k_x16_v(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                       int64_t g0, int64_t g1) {
    token_groups<4>(
        n, [&]<int M>(int m0) __attribute__((always_inline)) {
            matvec_q4_k_x16_body<M>(out + m0 * ldo, ldo, W, K, x + m0 * ldx, ldx, g0, g1);
        });
}

// q6_k tiles, as avx512.cpp's kernel: per half of 128 weights and chunk c, the four quarters' 6-bit values (0 .. 63:
// vpmaddubsw never saturates, 2 x 63 x 127) summed against x per sub-block, then per sub-block
// (sum - 32 sum(x)) times its scale. M tokens at once (M <= 2: each holds 4 sub-block sums, the chunks c < 4 and
// c >= 4 in turn), 8 rows at a time, both 8-row halves of a tile before the next tile (so that the tiles are read once
// from memory, in order, one stream per tile with its lines in read order: quant.h), rather than each half over the
// whole row group (the second from L2); the integer sums are exact in any order, so the same bits as each token
// alone.
template <int M>
__attribute__((always_inline)) inline void matvec_q6_k_x16_body(float* out, int64_t ldo, const uint8_t* W, int64_t K,
                                                                const BlockQ8x256* x, int64_t ldx, int64_t g0,
                                                                int64_t g1) {
    const int64_t nb = K / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    for (int64_t g = g0; g < g1; ++g) {
        __m256 acc[2][M];  // rows 8 r8 .. 8 r8 + 7
        for (int m = 0; m < M; ++m) acc[0][m] = acc[1][m] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t i = g * nb + b;  // the tile's index
            const uint8_t *T = W + size_t(i) * kQ6x16Tile, *body = T + q6_body(i);
            constexpr size_t ahead = 2 * kQ6x16Tile;
            prefetch(T, ahead, q6_body(1) + q6_ql_line(0));  // an odd tile's d[16] and scales
            for (int r8 = 0; r8 < 2; ++r8) {
                __m256i isum[M];
                for (int m = 0; m < M; ++m) isum[m] = _mm256_setzero_si256();
                for (int h = 0; h < 2; ++h)
                    for (int half = 0; half < 2; ++half) {
                        __m256i s[M][4];  // token m, sub-block 8h + 2k + half
                        for (int m = 0; m < M; ++m)
                            for (int k = 0; k < 4; ++k) s[m][k] = _mm256_setzero_si256();
                        for (int c = 4 * half; c < 4 * half + 4; ++c) {
                            const __m256i A = load_ahead(body + q6_ql_line(16 * h + c) + 32 * r8, ahead);
                            const __m256i B = load_ahead(body + q6_ql_line(16 * h + 8 + c) + 32 * r8, ahead);
                            const __m256i H = load_ahead(body + q6_qh_line(8 * h + c) + 32 * r8, ahead);
                            const __m256i q[4] = {_mm256_or_si256(_mm256_and_si256(A, low4),
                                                                  _mm256_and_si256(_mm256_slli_epi16(H, 4), bits45)),
                                                  _mm256_or_si256(_mm256_and_si256(B, low4),
                                                                  _mm256_and_si256(_mm256_slli_epi16(H, 2), bits45)),
                                                  _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), low4),
                                                                  _mm256_and_si256(H, bits45)),
                                                  _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), low4),
                                                                  _mm256_and_si256(_mm256_srli_epi16(H, 2), bits45))};
                            for (int k = 0; k < 4; ++k)
                                for (int m = 0; m < M; ++m)
                                    s[m][k] = dot4(s[m][k], q[k], bytes4(x[m * ldx + b].qs + 128 * h + 32 * k + 4 * c));
                        }
                        for (int k = 0; k < 4; ++k) {
                            const int j = 8 * h + 2 * k + half;
                            const __m256i sc = _mm256_cvtepi8_epi32(
                                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(body + q6_scales(j) + 8 * r8)));
                            for (int m = 0; m < M; ++m) {
                                const __m256i centred =
                                    _mm256_sub_epi32(s[m][k], _mm256_set1_epi32(32 * x[m * ldx + b].bsums[j]));
                                isum[m] = _mm256_add_epi32(isum[m], _mm256_mullo_epi32(centred, sc));
                            }
                        }
                    }
                const __m256 dw = load_half8(T + q6_d(i) + 16 * r8);
                for (int m = 0; m < M; ++m) {
                    const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(x[m * ldx + b].d));
                    acc[r8][m] = _mm256_add_ps(acc[r8][m], _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[m])));
                }
            }
        }
        for (int r8 = 0; r8 < 2; ++r8)
            for (int m = 0; m < M; ++m) _mm256_storeu_ps(out + m * ldo + 16 * g + 8 * r8, acc[r8][m]);
    }
}

// q8_0: the tokens in turn (its accumulators fill the 16 registers already); q6_k: in pairs.
void matvec_q8_0_x16_v(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                       int64_t g0, int64_t g1) {
    for (int m = 0; m < n; ++m) matvec_q8_0_x16_one(out + m * ldo, W, K, x + m * ldx, g0, g1);
}
void matvec_q6_k_x16_v(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                       int64_t g0, int64_t g1) {
    token_groups<2>(
        n, [&]<int M>(int m0) __attribute__((always_inline)) {
            matvec_q6_k_x16_body<M>(out + m0 * ldo, ldo, W, K, x + m0 * ldx, ldx, g0, g1);
        });
}

#pragma GCC pop_options

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
    .matvec_q8_0_x16 = matvec_q8_0_x16_v,
    .matvec_q4_k_x16 = matvec_q4_k_x16_v,
    .matvec_q6_k_x16 = matvec_q6_k_x16_v,
    .matvec_q4_0_x16 = matvec_q4_0_x16,
    .matvec_q5_0_x16 = matvec_q5_0_x16,
    .matvec_q5_k_x16 = matvec_q5_k_x16,
    .sum_stream = sum_stream,
    .fma_burst = fma_burst,
};

}  // namespace

const Kernels& avx2_kernels() { return kTable; }

}  // namespace plainllama::isa
