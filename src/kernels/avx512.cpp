// Kernels for AVX-512 F, BW, CD, DQ, VL (x86-64-v4), on 16 lanes, and the vdpbf16ps tiles of AVX512_BF16 (their
// own function target). Compiled with -march=x86-64-v4; used only on a CPU that has it (dispatch.cpp). Nothing here
// may be emitted as a weak symbol (see isa.h).
// GCC 12 flags the intrinsics' own _mm512_undefined_* temporaries (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "isa.h"
#include "plainllama/io/dtype.h"

namespace plainllama::isa {
namespace {

#include "elementwise.inc"
#include "quant.inc"
#include "quantize.inc"

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
        // Masked loads cost half the speed on Zen 4: only for a partial block of a row-major B.
        for (int64_t k = 0; k < kc; ++k) fma_k(load16(Wp + k * ldw, c.m0), load16(Wp + k * ldw + 16, c.m1), k);
    }
    c.store(out, ldo);
}

// See DotTile in isa.h: vdpbf16ps multiplies BF16 pairs exactly and accumulates in f32, twice the FMA rate.
template <int MR>
PL_TARGET_BF16 void micro_tile_dot(float* out, int64_t ldo, const uint32_t* x, int64_t ldx, const uint32_t* Wp,
                                   int64_t pc, int64_t nr, bool accumulate) {
    OutTile<MR> c(out, ldo, nr, accumulate);
    for (int64_t p = 0; p < pc; ++p) {
        const __m512bh w0 = (__m512bh)_mm512_loadu_si512(Wp + p * kNR);
        const __m512bh w1 = (__m512bh)_mm512_loadu_si512(Wp + p * kNR + 16);
        for (int i = 0; i < MR; ++i) {
            const __m512bh xb = (__m512bh)_mm512_set1_epi32(int(x[i * ldx + p]));
            c.acc0[i] = _mm512_dpbf16_ps(c.acc0[i], xb, w0);
            c.acc1[i] = _mm512_dpbf16_ps(c.acc1[i], xb, w1);
        }
    }
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

template <class T>
void matvec(float* out, const float* x, const T* W, int64_t N, int64_t K, int64_t p0, int64_t p1) {
    const int64_t Ks = stored_k(Pairs<T>::value, K);
    for (int64_t p = p0; p < p1; ++p) {
        const T* P = W + p * kNR * Ks;
        const int64_t nr = N - p * kNR < kNR ? N - p * kNR : kNR;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;
        if constexpr (Pairs<T>::value) {
            const uint32_t* w = reinterpret_cast<const uint32_t*>(P);
            int64_t k = 0;
            for (; k + 2 <= K; k += 2, w += kNR) {
                const __m512i v0 = _mm512_loadu_si512(w), v1 = _mm512_loadu_si512(w + 16);
                const __m512 xe = _mm512_set1_ps(x[k]), xo = _mm512_set1_ps(x[k + 1]);
                a0 = _mm512_fmadd_ps(xe, bf16_even(v0), a0);
                a1 = _mm512_fmadd_ps(xe, bf16_even(v1), a1);
                a0 = _mm512_fmadd_ps(xo, bf16_odd(v0), a0);
                a1 = _mm512_fmadd_ps(xo, bf16_odd(v1), a1);
            }
            if (k < K) {
                const __m512 xe = _mm512_set1_ps(x[k]);
                a0 = _mm512_fmadd_ps(xe, bf16_even(_mm512_loadu_si512(w)), a0);
                a1 = _mm512_fmadd_ps(xe, bf16_even(_mm512_loadu_si512(w + 16)), a1);
            }
        } else {
            for (int64_t k = 0; k < K; ++k) {
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

// ---- quantized weights, decode: 16 rows at a time, one row per lane of the float steps. Each row's integer sums
// of a block are vectors of partial sums (u8 x s8 pairs summed into s16 by vpmaddubsw, never saturating here: at
// most 2 x 63 x 127; then times the sub-block scales into s32 by vpmaddwd), reduced 16 rows at once into one vector
// whose lane i is row i's exact block sum; then quant.inc's float steps for the 16 rows in their lanes, in its
// order: the same bits as quant.inc's kernels, which take the rows left over.

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Lane i = the sum of v[i]'s 16 lanes (v is overwritten).
inline __m512i reduce16(__m512i* v) {
    for (int i = 0; i < 8; ++i)  // 128-bit lane q of v[i]: row 2i's and row 2i+1's partial sums interleaved
        v[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; ++i)  // 128-bit lane q of v[i]: rows 4i .. 4i+3, partial
        v[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_epi64(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 2; ++i)  // [rows 8i .. 8i+3 (two halves summed), rows 8i+4 .. 8i+7] twice over
        v[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(v[2 * i], v[2 * i + 1], 0x88),
                                _mm512_shuffle_i32x4(v[2 * i], v[2 * i + 1], 0xDD));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(v[0], v[1], 0x88), _mm512_shuffle_i32x4(v[0], v[1], 0xDD));
}

// Prefetch a row's bytes kAhead on, n of them (16 rows are 16 streams: more than the hardware prefetcher follows).
constexpr int64_t kAhead = 1024;
inline void prefetch_ahead(const uint8_t* p, int64_t n) {
    for (int64_t o = 0; o < n; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + kAhead + o), _MM_HINT_T0);
}

// The 32-bit words at p + i * stride for the 16 rows i.
inline __m512i gather_rows(const uint8_t* p, int64_t stride) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(int(stride)));
    return _mm512_i32gather_epi32(idx, p, 1);
}
inline __m512 low_halves(__m512i words) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words)); }
inline __m512 high_halves(__m512i words) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(words, 16))); }

// q8_0 (quants in [-127, 127], as the format's quantizer writes them): w . x as |x| . (w with x's sign).
void matvec_q8_0_v(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t r0, int64_t r1) {
    const int64_t nb = K / 32, row = nb * 34;
    const __m512i ones = _mm512_set1_epi16(1);
    int64_t r = r0;
    for (; r + 16 <= r1; r += 16) {
        const uint8_t* w = W + r * row;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b, w += 34) {
            const __m512i xv = _mm512_broadcast_i64x4(load32(x[b].qs));
            const __mmask64 neg = _mm512_movepi8_mask(xv);
            const __m512i ax = _mm512_abs_epi8(xv);
            __m512i v[16];
            if (b % 2 == 0)
                for (int i = 0; i < 16; ++i) prefetch_ahead(w + i * row, 68);
            for (int i = 0; i < 8; ++i) {  // rows i and i + 8
                const __m512i q = join(load32(w + i * row + 2), load32(w + (i + 8) * row + 2));
                const __m512i sq = _mm512_mask_sub_epi8(q, neg, _mm512_setzero_si512(), q);
                const __m512i d = _mm512_madd_epi16(_mm512_maddubs_epi16(ax, sq), ones);
                v[i] = _mm512_maskz_mov_epi32(0x00FF, d);
                v[i + 8] = _mm512_maskz_mov_epi32(0xFF00, d);
            }
            const __m512i isum = reduce16(v);
            const __m512 d = _mm512_mul_ps(low_halves(gather_rows(w, row)), _mm512_set1_ps(x[b].d));
            acc = _mm512_add_ps(acc, _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum)));
        }
        _mm512_storeu_ps(out + r, acc);
    }
    matvec_q8_0(out, W, K, x, r, r1);
}

// q4_k sub-blocks' 6-bit scales (low 8 bytes) and mins (high 8 bytes) from the 12 packed bytes at s (quant.h; 4
// more bytes are read, which the block always has after them), as dwords: s0-3, s4-7, s8-11 -> sc0-3, sc4-7, m0-3,
// m4-7.
inline __m128i q4k_scales_mins(const uint8_t* s) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i lo6 = _mm_and_si128(a, _mm_set1_epi8(0x3F));  // sc0-3 | m0-3
    const __m128i b = _mm_shuffle_epi32(a, 0xAA);                // s8-11 in every dword
    const __m128i low4 = _mm_and_si128(_mm_srlv_epi32(b, _mm_setr_epi32(0, 4, 0, 0)), _mm_set1_epi8(0x0F));
    const __m128i top2 = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(a, 6), _mm_set1_epi8(0x03)), 4);
    return _mm_unpacklo_epi32(lo6, _mm_or_si128(low4, top2));  // [sc0-3, sc4-7, m0-3, m4-7]
}

void matvec_q4_k_v(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1) {
    const int64_t nb = K / 256, row = nb * 144;
    const __m512i nib = _mm512_set1_epi8(0x0F);
    // s16 lanes 0-15 take the scale of sub-block a, 16-31 of b: (a, b) = (0, 2), (1, 3), (4, 6), (5, 7).
    auto pick = [](int a, int b) {
        return join(_mm256_set1_epi16(int16_t(a)), _mm256_set1_epi16(int16_t(b)));
    };
    const __m512i sel[4] = {pick(0, 2), pick(1, 3), pick(4, 6), pick(5, 7)};
    int64_t r = r0;
    for (; r + 16 <= r1; r += 16) {
        const uint8_t* w = W + r * row;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b, w += 144) {
            const int8_t* xq = x[b].qs;
            // x in the nibbles' order: [p][lo/hi]: weights 128p + (0..31, 64..95) and 128p + (32..63, 96..127)
            const __m512i xs[4] = {join(load32(xq), load32(xq + 64)), join(load32(xq + 32), load32(xq + 96)),
                                   join(load32(xq + 128), load32(xq + 192)), join(load32(xq + 160), load32(xq + 224))};
            const __m128i bs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].bsums));  // s16 x 8: 0..7
            const __m128i bs_hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].bsums + 8));
            const __m128i pairs = _mm_packs_epi32(_mm_madd_epi16(bs, _mm_set1_epi16(1)),
                                                  _mm_madd_epi16(bs_hi, _mm_set1_epi16(1)));  // s16 x 8: sub-blocks
            __m512i v[16], m[16];
            for (int i = 0; i < 16; ++i) {
                const uint8_t* wi = w + i * row;
                prefetch_ahead(wi, 144);
                const __m128i sm = q4k_scales_mins(wi + 4);
                const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm));  // s16: scales 0..7, mins 0..7
                m[i] = _mm512_zextsi128_si512(_mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), pairs));
                __m512i sum = _mm512_setzero_si512();
                for (int p = 0; p < 2; ++p) {
                    const __m512i q = _mm512_loadu_si512(wi + 16 + 64 * p);
                    const __m512i lo = _mm512_and_si512(q, nib), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), nib);
                    sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(lo, xs[2 * p]),
                                                                  _mm512_permutexvar_epi16(sel[2 * p], sc16)));
                    sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(hi, xs[2 * p + 1]),
                                                                  _mm512_permutexvar_epi16(sel[2 * p + 1], sc16)));
                }
                v[i] = sum;
            }
            const __m512i isum = reduce16(v), imin = reduce16(m);
            const __m512i dd = gather_rows(w, row);  // d | dmin << 16
            const __m512 t = _mm512_sub_ps(_mm512_mul_ps(low_halves(dd), _mm512_cvtepi32_ps(isum)),
                                           _mm512_mul_ps(high_halves(dd), _mm512_cvtepi32_ps(imin)));
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(x[b].d), t));
        }
        _mm512_storeu_ps(out + r, acc);
    }
    matvec_q4_k(out, W, K, x, r, r1);
}

// q4_k, 16 interleaved rows per tile (quant.h): each 64-byte load holds 4 weights of each of the 16 rows, so the
// products of a sub-block accumulate per row in the lanes (u8 x s8 in groups of 4 into s32: Dot4), then times the
// rows' scales; no reduction across lanes. Dot4 is vpdpbusd with VNNI, vpmaddubsw + vpmaddwd without.
struct Dot4Plain {
    __attribute__((always_inline)) static __m512i f(__m512i acc, __m512i u, __m512i s) {
        return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
    }
};
// vpdpbusd written as an instruction rather than the intrinsic, so that it inlines into kernels compiled for plain
// x86-64-v4 (only the avx512_bf16 table, on CPUs with AVX512_VNNI, points at the kernels that use it).
struct Dot4Vnni {
    __attribute__((always_inline)) static __m512i f(__m512i acc, __m512i u, __m512i s) {
        asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
        return acc;
    }
};

// q8_0 tiles hold q + 128 (u8): with VNNI, vpdpbusd's sum of (q + 128) x less 128 sum(x); without, q recovered
// (^ 0x80) and |x| . (q with x's sign) by vpmaddubsw, which cannot saturate then (2 x 127 x 127).
template <bool kVnni>
__attribute__((always_inline)) inline void matvec_q8_0_x16_body(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t g0, int64_t g1) {
    const int64_t nb = K / 32;
    for (int64_t g = g0; g < g1; ++g) {
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* T = W + size_t(g * nb + b) * kQ8x16Tile;
            _mm_prefetch(reinterpret_cast<const char*>(T + 8 * kQ8x16Tile), _MM_HINT_T0);
            __m512i isum = _mm512_setzero_si512();
            for (int c = 0; c < 8; ++c) {
                const __m512i v = _mm512_loadu_si512(T + 32 + 64 * c);
                int32_t xc;
                __builtin_memcpy(&xc, x[b].qs + 4 * c, 4);
                const __m512i xs = _mm512_set1_epi32(xc);
                if constexpr (kVnni) {
                    isum = Dot4Vnni::f(isum, v, xs);
                } else {
                    const __m512i q = _mm512_xor_si512(v, _mm512_set1_epi8(char(0x80)));
                    const __m512i sq = _mm512_mask_sub_epi8(q, _mm512_movepi8_mask(xs), _mm512_setzero_si512(), q);
                    isum = Dot4Plain::f(isum, _mm512_abs_epi8(xs), sq);
                }
            }
            if constexpr (kVnni) isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(128 * x[b].sum));
            const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(T))),
                                           _mm512_set1_ps(x[b].d));
            acc = _mm512_add_ps(acc, _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum)));
        }
        _mm512_storeu_ps(out + 16 * g, acc);
    }
}

void matvec_q8_0_x16_v(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t g0, int64_t g1) {
    matvec_q8_0_x16_body<false>(out, W, K, x, g0, g1);
}
void matvec_q8_0_x16_vnni(float* out, const uint8_t* W, int64_t K,
                                                                const BlockQ8x32* x, int64_t g0, int64_t g1) {
    matvec_q8_0_x16_body<true>(out, W, K, x, g0, g1);
}

template <class Dot4>
__attribute__((always_inline)) inline void matvec_q4_k_x16_body(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t g0,
                                 int64_t g1) {
    const int64_t nb = K / 256;
    const __m512i nib = _mm512_set1_epi8(0x0F);
    for (int64_t g = g0; g < g1; ++g) {
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* T = W + size_t(g * nb + b) * kQ4x16Tile;
            _mm_prefetch(reinterpret_cast<const char*>(T + 4 * kQ4x16Tile), _MM_HINT_T0);
            const int8_t* xq = x[b].qs;
            __m512i isum = _mm512_setzero_si512(), imin = _mm512_setzero_si512();
            for (int gr = 0; gr < 4; ++gr) {
                __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
                for (int c = 0; c < 8; ++c) {
                    const __m512i v = _mm512_loadu_si512(T + 320 + 64 * (8 * gr + c));
                    int32_t xl, xh;
                    __builtin_memcpy(&xl, xq + 64 * gr + 4 * c, 4);
                    __builtin_memcpy(&xh, xq + 64 * gr + 32 + 4 * c, 4);
                    lo = Dot4::f(lo, _mm512_and_si512(v, nib), _mm512_set1_epi32(xl));
                    hi = Dot4::f(hi, _mm512_and_si512(_mm512_srli_epi16(v, 4), nib), _mm512_set1_epi32(xh));
                }
                const __m512i sc_lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(T + 64 + 32 * gr)));
                const __m512i sc_hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(T + 80 + 32 * gr)));
                isum = _mm512_add_epi32(isum, _mm512_add_epi32(_mm512_mullo_epi32(lo, sc_lo), _mm512_mullo_epi32(hi, sc_hi)));
            }
            for (int j = 0; j < 8; ++j) {
                const __m512i m = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(T + 192 + 16 * j)));
                imin = _mm512_add_epi32(imin, _mm512_mullo_epi32(m, _mm512_set1_epi32(x[b].bsums[2 * j] + x[b].bsums[2 * j + 1])));
            }
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(T)));
            const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(T + 32)));
            const __m512 t = _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(isum)),
                                           _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(imin)));
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(x[b].d), t));
        }
        _mm512_storeu_ps(out + 16 * g, acc);
    }
}

void matvec_q4_k_x16_v(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t g0, int64_t g1) {
    matvec_q4_k_x16_body<Dot4Plain>(out, W, K, x, g0, g1);
}
void matvec_q4_k_x16_vnni(float* out, const uint8_t* W, int64_t K,
                                                                const BlockQ8x256* x, int64_t g0, int64_t g1) {
    matvec_q4_k_x16_body<Dot4Vnni>(out, W, K, x, g0, g1);
}

// q6_k tiles: per half of 128 weights and chunk c (weights l = 4c .. 4c+3 of each quarter), the four quarters' 6-bit
// values from ql chunks c and 8 + c and qh chunk c, each summed against x (values 0 .. 63: Dot4 never saturates,
// 2 x 63 x 127), per sub-block (quarter k, l < 16 or not: sub-block 8h + 2k + (c >= 4)); then per sub-block
// (sum - 32 sum(x)) times its scale.
template <class Dot4>
__attribute__((always_inline)) inline void matvec_q6_k_x16_body(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t g0,
                                 int64_t g1) {
    const int64_t nb = K / 256;
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
    for (int64_t g = g0; g < g1; ++g) {
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* T = W + size_t(g * nb + b) * kQ6x16Tile;
            _mm_prefetch(reinterpret_cast<const char*>(T + 2 * kQ6x16Tile), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(T + 2 * kQ6x16Tile + 1680), _MM_HINT_T0);
            const int8_t* xq = x[b].qs;
            __m512i isum = _mm512_setzero_si512();
            for (int h = 0; h < 2; ++h) {
                __m512i s[8];  // sub-block 8h + i
                for (int i = 0; i < 8; ++i) s[i] = _mm512_setzero_si512();
                for (int c = 0; c < 8; ++c) {
                    const __m512i A = _mm512_loadu_si512(T + 288 + 64 * (16 * h + c));
                    const __m512i B = _mm512_loadu_si512(T + 288 + 64 * (16 * h + 8 + c));
                    const __m512i H = _mm512_loadu_si512(T + 2336 + 64 * (8 * h + c));
                    const __m512i q[4] = {
                        _mm512_or_si512(_mm512_and_si512(A, low4), _mm512_and_si512(_mm512_slli_epi16(H, 4), bits45)),
                        _mm512_or_si512(_mm512_and_si512(B, low4), _mm512_and_si512(_mm512_slli_epi16(H, 2), bits45)),
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(A, 4), low4), _mm512_and_si512(H, bits45)),
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(B, 4), low4),
                                        _mm512_and_si512(_mm512_srli_epi16(H, 2), bits45))};
                    for (int k = 0; k < 4; ++k) {
                        int32_t xk;
                        __builtin_memcpy(&xk, xq + 128 * h + 32 * k + 4 * c, 4);
                        s[2 * k + (c >= 4)] = Dot4::f(s[2 * k + (c >= 4)], q[k], _mm512_set1_epi32(xk));
                    }
                }
                for (int i = 0; i < 8; ++i) {
                    const int j = 8 * h + i;
                    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(T + 32 + 16 * j)));
                    const __m512i centred = _mm512_sub_epi32(s[i], _mm512_set1_epi32(32 * x[b].bsums[j]));
                    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(centred, sc));
                }
            }
            const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(T))),
                                           _mm512_set1_ps(x[b].d));
            acc = _mm512_add_ps(acc, _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum)));
        }
        _mm512_storeu_ps(out + 16 * g, acc);
    }
}

void matvec_q6_k_x16_v(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t g0, int64_t g1) {
    matvec_q6_k_x16_body<Dot4Plain>(out, W, K, x, g0, g1);
}
void matvec_q6_k_x16_vnni(float* out, const uint8_t* W, int64_t K,
                                                                const BlockQ8x256* x, int64_t g0, int64_t g1) {
    matvec_q6_k_x16_body<Dot4Vnni>(out, W, K, x, g0, g1);
}

void matvec_q6_k_v(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1) {
    const int64_t nb = K / 256, row = nb * 210;
    const __m512i nib = _mm512_set1_epi8(0x0F), two = _mm512_set1_epi8(3);
    // s16 lane l of the scale vector for weights 64c .. 64c + 63 (sub-blocks 4c .. 4c + 3): sub-block 4c + l / 8.
    __m512i sel[4];
    for (int c = 0; c < 4; ++c) {
        alignas(64) int16_t idx[32];
        for (int l = 0; l < 32; ++l) idx[l] = int16_t(4 * c + l / 8);
        sel[c] = _mm512_load_si512(idx);
    }
    int64_t r = r0;
    for (; r + 16 <= r1; r += 16) {
        const uint8_t* w = W + r * row;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b, w += 210) {
            const int8_t* xq = x[b].qs;
            const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums));
            __m512i v[16];
            for (int i = 0; i < 16; ++i) {
                const uint8_t* wi = w + i * row;
                prefetch_ahead(wi, 210);
                const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wi + 192)));
                const __m512i sc = _mm512_castsi256_si512(sc16);
                // the values are stored + 32: subtract 32 sum_j sc_j (sum of x's quants in sub-block j)
                __m512i sum = _mm512_zextsi256_si512(_mm256_slli_epi32(_mm256_madd_epi16(sc16, bsums), 5));
                sum = _mm512_sub_epi32(_mm512_setzero_si512(), sum);
                for (int h = 0; h < 2; ++h) {  // 128 weights: ql[64h ..], qh[32h ..]
                    const __m512i ql = _mm512_loadu_si512(wi + 64 * h);
                    const __m256i qh = load32(wi + 128 + 32 * h);
                    const __m512i hb = join(qh, _mm256_srli_epi16(qh, 2));  // bits 0-1: weights 0..31, 2-3: 32..63
                    const __m512i hi_a = _mm512_slli_epi16(_mm512_and_si512(hb, two), 4);
                    const __m512i hi_b = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 4), two), 4);
                    const __m512i qa = _mm512_or_si512(_mm512_and_si512(ql, nib), hi_a);  // weights 0 .. 63
                    const __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), nib), hi_b);
                    const int8_t* xh = xq + 128 * h;
                    sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(qa, _mm512_loadu_si512(xh)),
                                                                  _mm512_permutexvar_epi16(sel[2 * h], sc)));
                    sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(qb, _mm512_loadu_si512(xh + 64)),
                                                                  _mm512_permutexvar_epi16(sel[2 * h + 1], sc)));
                }
                v[i] = sum;
            }
            const __m512i isum = reduce16(v);
            const __m512 d = _mm512_mul_ps(high_halves(gather_rows(w + 206, row)), _mm512_set1_ps(x[b].d));
            acc = _mm512_add_ps(acc, _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum)));
        }
        _mm512_storeu_ps(out + r, acc);
    }
    matvec_q6_k(out, W, K, x, r, r1);
}

#pragma GCC pop_options

// Four independent accumulators, so the adds' latency does not limit the loads.
float sum_stream(const float* p, int64_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 64) {
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

constexpr Kernels kTable = {
    .name = "avx512",
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
    .silu_mul = silu_mul,
    .add = add,
    .rope_rotate_half = rope_rotate_half,
    .quantize_row = quantize_row,
    .dequantize = dequantize,
    .quantize_q8x32 = quantize_q8x32,
    .quantize_q8x256 = quantize_q8x256,
    .matvec_q8_0 = matvec_q8_0_v,
    .matvec_q4_k = matvec_q4_k_v,
    .matvec_q6_k = matvec_q6_k_v,
    .matvec_q8_0_x16 = matvec_q8_0_x16_v,
    .matvec_q4_k_x16 = matvec_q4_k_x16_v,
    .matvec_q6_k_x16 = matvec_q6_k_x16_v,
    .sum_stream = sum_stream,
};

constexpr Kernels with_bf16_dot(Kernels k) {
    k.name = "avx512_bf16";
    const DotTile dot[kMRMax + 1] = PL_TILES(micro_tile_dot);
    for (int i = 0; i <= kMRMax; ++i) k.tile_bf16_dot[i] = dot[i];
    k.round_bf16_pairs = round_bf16_pairs;
    k.matvec_q8_0_x16 = matvec_q8_0_x16_vnni;
    k.matvec_q4_k_x16 = matvec_q4_k_x16_vnni;
    k.matvec_q6_k_x16 = matvec_q6_k_x16_vnni;  // every CPU with AVX512_BF16 has AVX512_VNNI (checked at dispatch)
    return k;
}

// constexpr: a table built at run time would run AVX-512 code at start-up, on any CPU.
constexpr Kernels kTableBf16 = with_bf16_dot(kTable);

}  // namespace

const Kernels& avx512_kernels() { return kTable; }
const Kernels& avx512_bf16_kernels() { return kTableBf16; }

}  // namespace plainllama::isa
