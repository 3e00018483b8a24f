// Kernels for AVX-512 F, BW, CD, DQ, VL (x86-64-v4), on 16 lanes: the float kernels, the vdpbf16ps tiles of
// AVX512_BF16 (their own function target) and the two AVX-512 tables, which point at avx512_quant.cpp's kernels for
// quantized weights too. Compiled with -march=x86-64-v4; used only on a CPU that has it (dispatch.cpp). Nothing here
// may be emitted as a weak symbol (see isa.h).
// GCC 12 flags the intrinsics' own _mm512_undefined_* temporaries (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "avx512_quant.h"
#include "isa.h"
#include "policy.h"

namespace plainllama::isa {
namespace {

#include "elementwise.inc"
#include "prefetch.inc"

#define PL_TARGET_BF16 __attribute__((target("avx512bf16")))

inline __mmask16 tail_mask(int64_t n) { return __mmask16((1u << n) - 1u); }  // n <= 16
inline __mmask16 mask_of(int64_t n) { return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : tail_mask(n); }

// 16 lanes of any storage type as f32; `m` masks a tail.
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const F16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512 load16(const BF16* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(const F16* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
inline __m512 load16(const BF16* p, __mmask16 m) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// A BF16 pair word (k even in the low half, k+1 in the high half) as two f32 vectors.
inline __m512 bf16_even(__m512i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); }
inline __m512 bf16_odd(__m512i v) {
    return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))));
}

// An MR x kNR tile of out in registers, columns masked to nr; starts from out when accumulating.
template <int MR>
struct OutTile {
    __m512 acc0[MR], acc1[MR];
    __mmask16 m0, m1;
    OutTile(const float* out, int64_t ldo, int64_t nr, bool accumulate) : m0(mask_of(nr)), m1(mask_of(nr - 16)) {
        for (int i = 0; i < MR; ++i) {
            acc0[i] = accumulate ? _mm512_maskz_loadu_ps(m0, out + i * ldo) : _mm512_setzero_ps();
            acc1[i] = accumulate ? _mm512_maskz_loadu_ps(m1, out + i * ldo + 16) : _mm512_setzero_ps();
        }
    }
    void store(float* out, int64_t ldo) const {
        for (int i = 0; i < MR; ++i) {
            _mm512_mask_storeu_ps(out + i * ldo, m0, acc0[i]);
            _mm512_mask_storeu_ps(out + i * ldo + 16, m1, acc1[i]);
        }
    }
};

// See MicroTile in isa.h. E: float, F16, or BF16 pairs (W[k, j] at Wp[k / 2 * 2 kNR + 2 j + k % 2]).
template <int MR, class E>
void micro_tile(float* out, int64_t ldo, const float* x, int64_t ldx, const E* Wp, int64_t ldw, int64_t kc, int64_t nr,
                bool accumulate) {
    constexpr bool f32 = sizeof(E) == 4;
    OutTile<MR> c(out, ldo, nr, accumulate);
    auto fma_k = [&](__m512 w0, __m512 w1, int64_t k) {  // acc += x[:, k] * W[k, :]
        for (int i = 0; i < MR; ++i) {
            const __m512 xb = _mm512_set1_ps(x[i * ldx + k]);
            c.acc0[i] = _mm512_fmadd_ps(xb, w0, c.acc0[i]);
            c.acc1[i] = _mm512_fmadd_ps(xb, w1, c.acc1[i]);
        }
    };
    if constexpr (Pairs<E>::value) {
        const uint32_t* w = reinterpret_cast<const uint32_t*>(Wp);
        int64_t k = 0;
        for (; k + 2 <= kc; k += 2, w += kNR) {
            const __m512i v0 = _mm512_loadu_si512(w), v1 = _mm512_loadu_si512(w + 16);
            fma_k(bf16_even(v0), bf16_even(v1), k);
            fma_k(bf16_odd(v0), bf16_odd(v1), k + 1);
        }
        if (k < kc) fma_k(bf16_even(_mm512_loadu_si512(w)), bf16_even(_mm512_loadu_si512(w + 16)), k);
    } else if (!f32 || nr == kNR || ldw == kNR) {  // a full block, a panel or a widened block
        for (int64_t k = 0; k < kc; ++k) fma_k(load16(Wp + k * ldw), load16(Wp + k * ldw + 16), k);
    } else if constexpr (f32) {
        // Masked loads are slow on some cores (Zen 4): only for a partial block of a row-major B.
        for (int64_t k = 0; k < kc; ++k) fma_k(load16(Wp + k * ldw, c.m0), load16(Wp + k * ldw + 16, c.m1), k);
    }
    c.store(out, ldo);
}

// One step of the DotTiles: c += each row's pair p of x (broadcast) times the pair words w0 (columns 0-15) and w1
// (16-31).
template <int MR>
PL_TARGET_BF16 __attribute__((always_inline)) inline void dot_pair(OutTile<MR>& c, const uint32_t* x, int64_t ldx,
                                                                   int64_t p, __m512i w0, __m512i w1) {
    for (int i = 0; i < MR; ++i) {
        const __m512bh xb = (__m512bh)_mm512_set1_epi32(int(x[i * ldx + p]));
        c.acc0[i] = _mm512_dpbf16_ps(c.acc0[i], xb, (__m512bh)w0);
        c.acc1[i] = _mm512_dpbf16_ps(c.acc1[i], xb, (__m512bh)w1);
    }
}

// See DotTile in isa.h: vdpbf16ps multiplies BF16 pairs exactly and accumulates in f32, twice the FMA rate.
template <int MR>
PL_TARGET_BF16 void micro_tile_dot(float* out, int64_t ldo, const uint32_t* x, int64_t ldx, const uint32_t* Wp,
                                   int64_t pc, int64_t nr, bool accumulate) {
    OutTile<MR> c(out, ldo, nr, accumulate);
    for (int64_t p = 0; p < pc; ++p)
        dot_pair(c, x, ldx, p, _mm512_loadu_si512(Wp + p * kNR), _mm512_loadu_si512(Wp + p * kNR + 16));
    c.store(out, ldo);
}

// x [K] rounded to nearest-even BF16 (vcvtne2ps2bf16: denormals read as zero), as pairs; an odd K pads a 0.
PL_TARGET_BF16 void round_bf16_pairs(uint32_t* dst_words, const float* x, int64_t K) {
    uint16_t* dst = reinterpret_cast<uint16_t*>(dst_words);
    int64_t k = 0;
    for (; k + 32 <= K; k += 32)
        _mm512_storeu_si512(dst + k, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + k + 16), _mm512_loadu_ps(x + k)));
    for (; k < K; k += 16) {
        const __mmask16 m = mask_of(K - k);
        _mm256_mask_storeu_epi16(dst + k, m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + k)));
    }
    if (K % 2) dst[K] = 0;
}

// See pairs_bf16_rows in isa.h: two rows' words interleaved by vpermt2w, the bits moved, never converted.
alignas(64) constexpr uint16_t kPairsLow[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
alignas(64) constexpr uint16_t kPairsHigh[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                                 24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
// Rows a and a + ld (kNR BF16 values each; the second 0 with b_zero) as pair words: w0 columns 0-15, w1 16-31.
__attribute__((always_inline)) inline void bf16_row_pairs(const BF16* a, int64_t ld, bool b_zero, __m512i& w0,
                                                          __m512i& w1) {
    const __m512i A = _mm512_loadu_si512(a);
    const __m512i B = b_zero ? _mm512_setzero_si512() : _mm512_loadu_si512(a + ld);
    w0 = _mm512_permutex2var_epi16(A, _mm512_load_si512(kPairsLow), B);
    w1 = _mm512_permutex2var_epi16(A, _mm512_load_si512(kPairsHigh), B);
}
void pairs_bf16_rows(uint32_t* out, const BF16* src, int64_t ld, int64_t rows) {
    for (int64_t r = 0; r < rows; r += 2, out += kNR) {
        __m512i w0, w1;
        bf16_row_pairs(src + r * ld, ld, r + 1 >= rows, w0, w1);
        _mm512_storeu_si512(out, w0);
        _mm512_storeu_si512(out + 16, w1);
    }
}
// See DotRowsTile in isa.h: micro_tile_dot's sums on the pairs bf16_row_pairs makes in registers.
template <int MR>
PL_TARGET_BF16 void micro_tile_dot_rows(float* out, int64_t ldo, const uint32_t* x, int64_t ldx, const BF16* src,
                                        int64_t ld, int64_t pc, int64_t nr, bool accumulate) {
    OutTile<MR> c(out, ldo, nr, accumulate);
    for (int64_t p = 0; p < pc; ++p) {
        __m512i w0, w1;
        bf16_row_pairs(src + 2 * p * ld, ld, false, w0, w1);
        dot_pair(c, x, ldx, p, w0, w1);
    }
    c.store(out, ldo);
}

// Decode: each panel streamed once, read ahead as Policy::kPanels says (policy.h).
template <class Policy, class T>
__attribute__((always_inline)) inline void matvec_body(float* out, const float* x, const T* W, int64_t N, int64_t K,
                                                       int64_t p0, int64_t p1) {
    constexpr ReadAhead kRead = Policy::kPanels;
    const int64_t Ks = stored_k(Pairs<T>::value, K);
    // the prefetches for the lines of the step of `step` bytes at p
    const auto prefetch_step = [](const void* p, size_t step) __attribute__((always_inline)) {
        constexpr ReadAhead kRead = Policy::kPanels;
        if constexpr (kRead.page_start_ahead) prefetch_page_start(p, kRead.page_start_ahead, step);
        if constexpr (kRead.l1_ahead)
            for (size_t o = 0; o < step; o += 64)
                prefetch_line_ahead<kRead.l2>(static_cast<const char*>(p) + o, kRead.l1_ahead);
    };
    for (int64_t p = p0; p < p1; ++p) {
        const T* P = W + p * kNR * Ks;
        const int64_t nr = N - p * kNR < kNR ? N - p * kNR : kNR;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;
        if constexpr (Pairs<T>::value) {
            const uint32_t* w = reinterpret_cast<const uint32_t*>(P);
            int64_t k = 0;
            for (; k + 2 <= K; k += 2, w += kNR) {
                prefetch_step(w, 128);
                const __m512i v0 = _mm512_loadu_si512(w), v1 = _mm512_loadu_si512(w + 16);
                const __m512 xe = _mm512_set1_ps(x[k]), xo = _mm512_set1_ps(x[k + 1]);
                a0 = _mm512_fmadd_ps(xe, bf16_even(v0), a0);
                a1 = _mm512_fmadd_ps(xe, bf16_even(v1), a1);
                a0 = _mm512_fmadd_ps(xo, bf16_odd(v0), a0);
                a1 = _mm512_fmadd_ps(xo, bf16_odd(v1), a1);
            }
            if (k < K) {
                // the page-start prefetch sees every step, so that the next panel's steps follow on from this one
                if constexpr (kRead.page_start_ahead) prefetch_page_start(w, kRead.page_start_ahead, 128);
                const __m512 xe = _mm512_set1_ps(x[k]);
                a0 = _mm512_fmadd_ps(xe, bf16_even(_mm512_loadu_si512(w)), a0);
                a1 = _mm512_fmadd_ps(xe, bf16_even(_mm512_loadu_si512(w + 16)), a1);
            }
        } else {
            for (int64_t k = 0; k < K; ++k) {
                prefetch_step(P + k * kNR, kNR * sizeof(T));
                const __m512 xb = _mm512_set1_ps(x[k]);
                a0 = _mm512_fmadd_ps(xb, load16(P + k * kNR), a0);
                a1 = _mm512_fmadd_ps(xb, load16(P + k * kNR + 16), a1);
            }
        }
        float* o = out + p * kNR;
        _mm512_mask_storeu_ps(o, mask_of(nr), a0);
        if (nr > 16) _mm512_mask_storeu_ps(o + 16, mask_of(nr - 16), a1);
    }
}

template <class T>
void matvec(float* out, const float* x, const T* W, int64_t N, int64_t K, int64_t p0, int64_t p1) {
    with_policy([&]<class Policy>() __attribute__((always_inline)) { matvec_body<Policy>(out, x, W, N, K, p0, p1); });
}

// r[i] = row i of a 16x16 block  ->  r[i] = column i.
inline void transpose16x16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; ++i) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xDD);
        }
    for (int i = 0; i < 8; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    }
}

// 16 elements of 32 or 16 bits as the bits of 16 32-bit lanes, and back: moved, never converted.
inline __m512 load_bits(const uint32_t* p, __mmask16 m) { return _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(m, p)); }
inline __m512 load_bits(const uint16_t* p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)));
}
inline void store_bits(uint32_t* p, __m512 v) { _mm512_storeu_si512(p, _mm512_castps_si512(v)); }
inline void store_bits(uint16_t* p, __m512 v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(_mm512_castps_si512(v)));
}

// 16x16 blocks transposed in registers, a partial last block of k read masked.
template <class E>
void pack_block(E* Wp, const E* W, int64_t K, int64_t n0, int64_t nr, int64_t k0, int64_t kc) {
    for (int64_t j0 = 0; j0 < kNR; j0 += 16) {
        for (int64_t k = 0; k < kc; k += 16) {
            const int64_t m = kc - k < 16 ? kc - k : 16;
            const __mmask16 mask = tail_mask(m);
            __m512 r[16];
            for (int64_t i = 0; i < 16; ++i)
                r[i] = j0 + i < nr ? load_bits(W + (n0 + j0 + i) * K + k0 + k, mask) : _mm512_setzero_ps();
            transpose16x16(r);
            for (int64_t i = 0; i < m; ++i) store_bits(Wp + (k + i) * kNR + j0, r[i]);
        }
    }
}

template <class T>
void widen(float* out, const T* src, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, load16(src + i));
    if (i < n) _mm512_mask_storeu_ps(out + i, tail_mask(n - i), load16(src + i, tail_mask(n - i)));
}

// Four independent accumulators, so the adds' latency does not limit the loads; with plain loads or with one of the
// kernels' prefetches.
float sum_stream(const float* p, int64_t n, ReadWay way) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 64) {
        if (way == ReadWay::prefetch_lines)
            for (int l = 0; l < 4; ++l) prefetch_ahead(p + i + 16 * l);
        else if (way == ReadWay::prefetch_pages)
            prefetch_page_start(p + i, kPageAhead, 256);
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    alignas(64) float lanes[16];  // (GCC 12's _mm512_reduce_add_ps warns of an uninitialised temporary)
    _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    float s = 0.0f;
    for (float v : lanes) s += v;
    return s;
}

// Twelve independent chains: more than the FMA units' latency times their count, so the units never wait.
float fma_burst(int64_t reps, double* ops) {
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    __m512 a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(1.0f + float(i));
    for (int64_t r = 0; r < reps; ++r)
        for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
    for (int i = 1; i < 12; ++i) a[0] = _mm512_add_ps(a[0], a[i]);
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, a[0]);
    float s = 0.0f;
    for (float v : lanes) s += v;
    *ops = double(reps) * 12 * 16 * 2;
    return s;
}

constexpr Kernels kTable = {
    .name = "avx512",
    .has_tuning = true,
    .tile_f32 = PL_TILES(micro_tile, float),
    // F16 panels read directly in tiles of up to 48 rows (below that, few rows cannot repay widening a block first;
    // above it the widened f32 block is faster); BF16 pairs at any height, so they are never widened.
    .tile_f16 = PL_TILES(micro_tile, F16),
    .f16_direct_rows = 48,
    .tile_bf16 = PL_TILES(micro_tile, BF16),
    .bf16_direct_rows = INT64_MAX,
    .matvec_f32 = matvec<float>,
    .matvec_f16 = matvec<F16>,
    .matvec_bf16 = matvec<BF16>,
    .pack_block32 = pack_block<uint32_t>,
    .pack_block16 = pack_block<uint16_t>,
    .widen_f16 = widen<F16>,
    .widen_bf16 = widen<BF16>,
    .sum_squares = sum_squares,
    .scale_mul = scale_mul,
    .softmax = softmax,
    .exp_shifted = exp_shifted,
    .scale_i8_rows = scale_i8_rows,
    .silu_mul = silu_mul,
    .add = add,
    .rope_rotate_half = rope_rotate_half,
    .quantize_row = avx512::quantize_row,
    .dequantize = avx512::dequantize,
    .quantize_q8x32 = avx512::quantize_q8x32,
    .quantize_q8x256 = avx512::quantize_q8x256,
    .matvec_q8_0 = avx512::matvec_q8_0,
    .matvec_q4_k = avx512::matvec_q4_k,
    .matvec_q6_k = avx512::matvec_q6_k,
    .matvec_q4_0 = avx512::matvec_q4_0,
    .matvec_q5_0 = avx512::matvec_q5_0,
    .matvec_q5_k = avx512::matvec_q5_k,
    .matvec_q8_0_x16 = avx512::matvec_q8_0_x16,
    .matvec_q4_k_x16 = avx512::matvec_q4_k_x16,
    .matvec_q6_k_x16 = avx512::matvec_q6_k_x16,
    .matvec_q4_0_x16 = avx512::matvec_q4_0_x16,
    .matvec_q5_0_x16 = avx512::matvec_q5_0_x16,
    .matvec_q5_k_x16 = avx512::matvec_q5_k_x16,
    .sum_stream = sum_stream,
    .fma_burst = fma_burst,
};

constexpr Kernels with_bf16_dot(Kernels k) {
    k.name = "avx512_bf16";
    const DotTile dot[kMRMax + 1] = PL_TILES(micro_tile_dot);
    for (int i = 0; i <= kMRMax; ++i) k.tile_bf16_dot[i] = dot[i];
    k.round_bf16_pairs = round_bf16_pairs;
    k.pairs_bf16_rows = pairs_bf16_rows;
    const DotRowsTile dot_rows[kMRMax + 1] = PL_TILES(micro_tile_dot_rows);
    for (int i = 0; i <= kMRMax; ++i) k.tile_bf16_dot_rows[i] = dot_rows[i];
    k.matvec_q8_0_x16 = avx512::matvec_q8_0_x16_vnni;
    k.matvec_q4_k_x16 = avx512::matvec_q4_k_x16_vnni;
    k.matvec_q6_k_x16 = avx512::matvec_q6_k_x16_vnni;  // every CPU with AVX512_BF16 has VNNI (checked at dispatch)
    k.matvec_q4_0_x16 = avx512::matvec_q4_0_x16_vnni;
    k.matvec_q5_0_x16 = avx512::matvec_q5_0_x16_vnni;
    k.matvec_q5_k_x16 = avx512::matvec_q5_k_x16_vnni;
    return k;
}

// constexpr: a table built at run time would run AVX-512 code at start-up, on any CPU.
constexpr Kernels kTableBf16 = with_bf16_dot(kTable);

}  // namespace

const Kernels& avx512_kernels() { return kTable; }
const Kernels& avx512_bf16_kernels() { return kTableBf16; }

}  // namespace plainllama::isa
