// Kernels for quantized weights on AVX-512 F, BW, CD, DQ, VL (x86-64-v4): decode's kernels on the tiles of 16
// interleaved rows of the k formats (q4_k, q5_k, q6_k; the 32-weight formats' and the quantizers are in
// avx512_quant.cpp), which read the weights as the CPU family's policy says (policy.h). Compiled with -march=x86-64-v4;
// avx512.cpp's tables point at the entry points at the end (avx512_quant.h), used only on a CPU that has it
// (dispatch.cpp). Nothing here may be emitted as a weak symbol (see isa.h).
//
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

#include "prefetch.inc"
#include "quant_dot.inc"

// Decode on the tiles of 16 interleaved rows (quant.h): each row's integer sums in its own lane, then quant_dot.inc's
// float steps for the 16 rows in their lanes, in its order: the same bits as quant_dot.inc's kernels.

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

#include "avx512_tiles.inc"

// Word i of the rows' mins of two sub-blocks widened to int16 ([16 rows of j][16 rows of j + 1]) for word i of the
// pairs (m_j, m_j+1) of each row, by vpermw.
alignas(64) constexpr uint16_t kMinPairWords[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                    8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
// The 16 rows' mins of sub-blocks j and j + 1 of q4_k (q5_k) tile T as int16 pairs (m_j, m_j+1), a pair per row's lane:
// with kPermute one 32-byte load widened and paired by vpermw (pair_words: kMinPairWords), else two 16-byte loads
// interleaved bytewise, then widened.
template <bool kPermute>
__attribute__((always_inline)) inline __m512i q4_k_min_pairs(const uint8_t* T, int j, __m512i pair_words) {
    if constexpr (kPermute) {
        const __m256i mins = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(T + q4_mins(j)));
        return _mm512_permutexvar_epi16(pair_words, _mm512_cvtepu8_epi16(mins));
    } else {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(T + q4_mins(j)));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(T + q4_mins(j + 1)));
        return _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(a, c), _mm_unpacklo_epi8(a, c)));
    }
}
// acc += each lane's int16 pair of u times x's sums of sub-blocks j and j + 1 (xb.sums32[j], [j + 1]): Dot4::fw with
// the pair as its memory operand (kOperand), else vpmaddwd by the pair broadcast and an add.
template <class Dot4, bool kOperand>
__attribute__((always_inline)) inline __m512i dot2_x(__m512i acc, __m512i u, const BlockQ8x256& xb, int j) {
    if constexpr (kOperand)
        return Dot4::fw(acc, u, xb.sums32 + j);
    else
        return _mm512_add_epi32(acc, _mm512_madd_epi16(u, _mm512_set1_epi32(sums32_pair(xb, j))));
}
// q4_k (kQ5 false) and q5_k tiles. M tokens at once (token m: x + m ldx blocks, out + m ldo): each tile's values
// unpacked once for all of them, and for each token the same integer sums and float steps as for it alone (so the
// same bits). Without VNNI (Dot4::kPairs16), a sub-block's vpmaddubsw pairs (2 x 15 x 127 at most) add up in int16
// over its 8 chunks without saturating (30480), q5_k's (2 x 31 x 127) over 4 chunks (31496), and vpmaddwd by the
// row's scale in both halves of its lane gives sc (q . x) in int32. One token's sums of a sub-block in
// Policy::kQ4_KChains (kQ5_KChains) chains with VNNI (chunk c into chain c mod n), added at the end. q5_k's 5th bits
// of qs line k are bits 2 (k % 4) and 2 (k % 4) + 1 of each byte of the qh line before it, loaded with qs line
// 4 (k / 4) and shifted down 2 bits for each line after (bits of the byte above reach only bits 6-7), tested into a
// mask that adds 16 to the byte's value.
//
// Each tile is read header first (d and dmin, line 0; the mins' sums, lines 3-4), then its body with the scales
// (lines 1-2), so that its lines come in nearly ascending order, not its first lines after its last. (AVX2's kernel,
// which prefetches each header some tiles on, keeps its order: there it read slower.)
template <class Dot4, bool kQ5, int M, class Policy>
__attribute__((always_inline)) inline void matvec_q4_k_x16_body(float* out, int64_t ldo, const uint8_t* W, int64_t K,
                                                                const BlockQ8x256* x, int64_t ldx, int64_t g0,
                                                                int64_t g1) {
    const int64_t nb = K / 256;
    constexpr size_t kTile = kQ5 ? kQ5Kx16Tile : kQ4x16Tile;
    constexpr ReadAhead kRead = kQ5 ? Policy::kQ5_K : Policy::kQ4_K;
    constexpr int kChains = M == 1 && !Dot4::kPairs16 ? (kQ5 ? Policy::kQ5_KChains : Policy::kQ4_KChains) : 1;
    static_assert(kChains == 1 || !Dot4::kPairs16, "int16 pair sums are not added as int32 chains");
    constexpr bool kOperand = kXOperand<Dot4, Policy, M>;   // x's chunks and sums as the memory operand
    constexpr bool kHighInPlace = !kQ5 && !Dot4::kPairs16;  // see below
    constexpr int kSpan = kQ5 && Dot4::kPairs16 ? 4 : 8;    // chunks summed before the scales (int16: see above)
    const __m512i nib = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
    const __m512i bit0 = _mm512_set1_epi8(1), bit1 = _mm512_set1_epi8(2);
    const __m512i pair_words = _mm512_load_si512(kMinPairWords);
    for (int64_t g = g0; g < g1; ++g) {
        __m512 acc[M];
        for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* T = W + size_t(g * nb + b) * kTile;
            prefetch_tile<kRead>(T, kTile, q4_qs_line(0));  // the header
            // the header first, then the body with the scales (above)
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(T)));
            const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(T + kQ4Dmin)));
            __m512i isum[M], imin[M];
            for (int m = 0; m < M; ++m) isum[m] = imin[m] = _mm512_setzero_si512();
            for (int j = 0; j < 8; j += 2) {  // sub-blocks j and j + 1: the rows' mins as int16 pairs
                const __m512i mn = q4_k_min_pairs<kOperand>(T, j, pair_words);
                for (int m = 0; m < M; ++m) imin[m] = dot2_x<Dot4, kOperand>(imin[m], mn, x[m * ldx + b], j);
            }
            for (int gr = 0; gr < 4; ++gr) {
                const auto scales = [&](int j) __attribute__((always_inline)) {  // sub-block j's, as int32 lanes
                    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(T + q4_scales(j))));
                };
                const __m512i sc_lo = scales(2 * gr), sc_hi = scales(2 * gr + 1);
                __m512i h = _mm512_setzero_si512();  // q5_k: the qh line of qs lines 8 gr + 4 (c / 4) ..
                for (int c0 = 0; c0 < 8; c0 += kSpan) {
                    __m512i lo[M][kChains], hi[M][kChains];
                    for (int m = 0; m < M; ++m)
                        for (int i = 0; i < kChains; ++i) lo[m][i] = hi[m][i] = _mm512_setzero_si512();
                    for (int c = c0; c < c0 + kSpan; ++c) {
                        const __m512i v =
                            load_tile_line<kRead>(T + (kQ5 ? q5k_qs_line(8 * gr + c) : q4_qs_line(8 * gr + c)));
                        // with VNNI q4_k's high nibbles stay in place (16 h: vpdpbusd has no int16 stage to saturate),
                        // their sums shifted back once per sub-block and token below, not once per load (port 0, as
                        // vpdpbusd)
                        __m512i vl = _mm512_and_si512(v, nib);
                        __m512i vh =
                            kHighInPlace ? _mm512_andnot_si512(nib, v) : _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
                        if constexpr (kQ5) {
                            // the 5th bits of the low and high nibbles in bits 0 and 1 of each byte (q5k_tile_qh_bit)
                            h = c % 4 == 0 ? load_tile_line<kRead>(T + q5k_qh_line(2 * gr + c / 4))
                                           : _mm512_srli_epi16(h, 2);
                            vl = _mm512_mask_add_epi8(vl, _mm512_test_epi8_mask(h, bit0), vl, bit4);
                            vh = _mm512_mask_add_epi8(vh, _mm512_test_epi8_mask(h, bit1), vh, bit4);
                        }
                        for (int m = 0; m < M; ++m) {
                            const int8_t* xq = x[m * ldx + b].qs;  // sub-blocks 2 gr (xl) and 2 gr + 1 (xh)
                            const int8_t *xl = xq + 64 * gr + 4 * c, *xh = xq + 64 * gr + 32 + 4 * c;
                            __m512i &l = lo[m][c % kChains], &h = hi[m][c % kChains];
                            if constexpr (Dot4::kPairs16) {
                                l = _mm512_add_epi16(l, _mm512_maddubs_epi16(vl, splat4(xl)));
                                h = _mm512_add_epi16(h, _mm512_maddubs_epi16(vh, splat4(xh)));
                            } else {
                                l = dot4_x<Dot4, kOperand>(l, vl, xl);
                                h = dot4_x<Dot4, kOperand>(h, vh, xh);
                            }
                        }
                    }
                    for (int m = 0; m < M; ++m)
                        for (int i = 1; i < kChains; ++i) {
                            lo[m][0] = _mm512_add_epi32(lo[m][0], lo[m][i]);
                            hi[m][0] = _mm512_add_epi32(hi[m][0], hi[m][i]);
                        }
                    if constexpr (kHighInPlace)
                        for (int m = 0; m < M; ++m)
                            hi[m][0] = _mm512_srai_epi32(hi[m][0], 4);  // exact: 16 x an integer
                    if constexpr (Dot4::kPairs16) {
                        const __m512i s_lo = _mm512_or_si512(sc_lo, _mm512_slli_epi32(sc_lo, 16));
                        const __m512i s_hi = _mm512_or_si512(sc_hi, _mm512_slli_epi32(sc_hi, 16));
                        for (int m = 0; m < M; ++m)
                            isum[m] = _mm512_add_epi32(isum[m], _mm512_add_epi32(_mm512_madd_epi16(lo[m][0], s_lo),
                                                                                 _mm512_madd_epi16(hi[m][0], s_hi)));
                    } else {
                        for (int m = 0; m < M; ++m)
                            isum[m] = _mm512_add_epi32(isum[m], _mm512_add_epi32(_mm512_mullo_epi32(lo[m][0], sc_lo),
                                                                                 _mm512_mullo_epi32(hi[m][0], sc_hi)));
                    }
                }
            }
            for (int m = 0; m < M; ++m) {
                const __m512 t = _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[m])),
                                               _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(imin[m])));
                acc[m] = _mm512_add_ps(acc[m], _mm512_mul_ps(_mm512_set1_ps(x[m * ldx + b].d), t));
            }
        }
        for (int m = 0; m < M; ++m) _mm512_storeu_ps(out + m * ldo + 16 * g, acc[m]);
    }
}

template <class Dot4, bool kQ5>
void matvec_q4_k_x16_v(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                       int64_t g0, int64_t g1) {
    policy_token_groups<4>(
        n, [&]<int M, class Policy>(int m0) __attribute__((always_inline)) {
            matvec_q4_k_x16_body<Dot4, kQ5, M, Policy>(out + m0 * ldo, ldo, W, K, x + m0 * ldx, ldx, g0, g1);
        });
}

// The four quarters' 6-bit values (0 .. 63) of chunk c of half h of a q6_k tile's body: ql chunks c and 8 + c, qh
// chunk c, each load with R's prefetches (load_tile_line).
template <ReadAhead R>
__attribute__((always_inline)) inline void q6_k_chunk(const uint8_t* body, int h, int c, __m512i q[4]) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
    const __m512i A = load_tile_line<R>(body + q6_ql_line(16 * h + c));
    const __m512i B = load_tile_line<R>(body + q6_ql_line(16 * h + 8 + c));
    const __m512i H = load_tile_line<R>(body + q6_qh_line(8 * h + c));
    // (lo & 0x0F) | hi, hi the high 2 bits already in bits 4-5: one vpternlogd (0xEC: (a & c) | b)
    auto join = [&](__m512i lo, __m512i hi) { return _mm512_ternarylogic_epi32(lo, hi, low4, 0xEC); };
    q[0] = join(A, _mm512_and_si512(_mm512_slli_epi16(H, 4), bits45));
    q[1] = join(B, _mm512_and_si512(_mm512_slli_epi16(H, 2), bits45));
    q[2] = join(_mm512_srli_epi16(A, 4), _mm512_and_si512(H, bits45));
    q[3] = join(_mm512_srli_epi16(B, 4), _mm512_and_si512(_mm512_srli_epi16(H, 2), bits45));
}

// The bytes of a q6_k tile's header prefetch: an odd tile's d[16] and scales, an even tile's scales (its d[16] is on
// the first line of the odd tile after it).
constexpr size_t kQ6Header = q6_body(1) + q6_ql_line(0);
// The 16 rows' scales of sub-block j of a q6_k tile's body, as int32 lanes.
__attribute__((always_inline)) inline __m512i q6_k_scales(const uint8_t* body, int j) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(body + q6_scales(j))));
}
// The 16 rows' d of q6_k tile i at T, as f32 lanes.
__attribute__((always_inline)) inline __m512 q6_k_d(const uint8_t* T, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(T + q6_d(i))));
}
// A sub-block's sums s (each row's q . x, q the 6-bit values 0 .. 63) as the rows' integer products: (s - 32 sum(x))
// times the rows' scales sc, bsum = sum(x) over the sub-block.
__attribute__((always_inline)) inline __m512i q6_k_scaled(__m512i s, __m512i sc, int bsum) {
    return _mm512_mullo_epi32(_mm512_sub_epi32(s, _mm512_set1_epi32(32 * bsum)), sc);
}

// q6_k tiles: per half of 128 weights and chunk c (weights l = 4c .. 4c+3 of each quarter), the four quarters' 6-bit
// values from ql chunks c and 8 + c and qh chunk c, each summed against x (values 0 .. 63: Dot4 never saturates,
// 2 x 63 x 127), per sub-block (quarter k, l < 16 or not: sub-block 8h + 2k + (c >= 4)); then per sub-block
// (sum - 32 sum(x)) times its scale. The halves are unrolled, so that every load is at a constant offset from the
// body, and the tile's lines are read in the order they are stored (quant.h): one stream per tile.
template <class Dot4, class Policy>
__attribute__((always_inline)) inline void matvec_q6_k_x16_one(float* out, const uint8_t* W, int64_t K,
                                                               const BlockQ8x256* x, int64_t g0, int64_t g1) {
    const int64_t nb = K / 256;
    for (int64_t g = g0; g < g1; ++g) {
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t i = g * nb + b;  // the tile's index
            const uint8_t *T = W + size_t(i) * kQ6x16Tile, *body = T + q6_body(i);
            prefetch_tile<Policy::kQ6_K>(T, kQ6x16Tile, kQ6Header);
            const int8_t* xq = x[b].qs;
            __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {  // unrolled: every load at a constant offset from body
                __m512i s[8];              // sub-block 8h + l
                for (int l = 0; l < 8; ++l) s[l] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int c = 0; c < 8; ++c) {
                    __m512i q[4];
                    q6_k_chunk<Policy::kQ6_K>(body, h, c, q);
                    for (int k = 0; k < 4; ++k)
                        s[2 * k + (c >= 4)] = Dot4::f(s[2 * k + (c >= 4)], q[k], splat4(xq + 128 * h + 32 * k + 4 * c));
                }
                for (int l = 0; l < 8; ++l) {
                    const int j = 8 * h + l;
                    isum = _mm512_add_epi32(isum, q6_k_scaled(s[l], q6_k_scales(body, j), x[b].bsums[j]));
                }
            }
            const __m512 d = _mm512_mul_ps(q6_k_d(T, i), _mm512_set1_ps(x[b].d));
            acc = _mm512_add_ps(acc, _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum)));
        }
        _mm512_storeu_ps(out + 16 * g, acc);
    }
}

// Several tokens at once (M = 2 .. 4, as q4_k's), the chunks c < 4 and c >= 4 in turn so that each token holds 4
// sub-block sums at a time (M = 4: 16 registers); the integer sums are exact in any order, so the same bits as each
// token alone. One token stays with the kernel above, which reads faster than this body with M = 1.
template <class Dot4, int M, class Policy>
__attribute__((always_inline)) inline void matvec_q6_k_x16_body(float* out, int64_t ldo, const uint8_t* W, int64_t K,
                                                                const BlockQ8x256* x, int64_t ldx, int64_t g0,
                                                                int64_t g1) {
    const int64_t nb = K / 256;
    for (int64_t g = g0; g < g1; ++g) {
        __m512 acc[M];
        for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t i = g * nb + b;  // the tile's index
            const uint8_t *T = W + size_t(i) * kQ6x16Tile, *body = T + q6_body(i);
            prefetch_tile<Policy::kQ6_K>(T, kQ6x16Tile, kQ6Header);
            __m512i isum[M];
            for (int m = 0; m < M; ++m) isum[m] = _mm512_setzero_si512();
            for (int h = 0; h < 2; ++h)
                for (int half = 0; half < 2; ++half) {
                    __m512i s[M][4];  // token m, sub-block 8h + 2k + half
                    for (int m = 0; m < M; ++m)
                        for (int k = 0; k < 4; ++k) s[m][k] = _mm512_setzero_si512();
#pragma GCC unroll 4
                    for (int c = 4 * half; c < 4 * half + 4; ++c) {
                        __m512i q[4];
                        q6_k_chunk<Policy::kQ6_K>(body, h, c, q);
                        for (int m = 0; m < M; ++m)
                            for (int k = 0; k < 4; ++k)
                                s[m][k] = Dot4::f(s[m][k], q[k], splat4(x[m * ldx + b].qs + 128 * h + 32 * k + 4 * c));
                    }
                    for (int k = 0; k < 4; ++k) {
                        const int j = 8 * h + 2 * k + half;
                        const __m512i sc = q6_k_scales(body, j);
                        for (int m = 0; m < M; ++m)
                            isum[m] = _mm512_add_epi32(isum[m], q6_k_scaled(s[m][k], sc, x[m * ldx + b].bsums[j]));
                    }
                }
            const __m512 dw = q6_k_d(T, i);
            for (int m = 0; m < M; ++m) {
                const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(x[m * ldx + b].d));
                acc[m] = _mm512_add_ps(acc[m], _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[m])));
            }
        }
        for (int m = 0; m < M; ++m) _mm512_storeu_ps(out + m * ldo + 16 * g, acc[m]);
    }
}

template <class Dot4>
void matvec_q6_k_x16_v(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                       int64_t g0, int64_t g1) {
    policy_token_groups<4>(
        n, [&]<int M, class Policy>(int m0) __attribute__((always_inline)) {
            if constexpr (M == 1)
                matvec_q6_k_x16_one<Dot4, Policy>(out + m0 * ldo, W, K, x + m0 * ldx, g0, g1);
            else
                matvec_q6_k_x16_body<Dot4, M, Policy>(out + m0 * ldo, ldo, W, K, x + m0 * ldx, ldx, g0, g1);
        });
}

#pragma GCC pop_options

}  // namespace

// The entry points of avx512_quant.h: the functions above under the names the tables use.
namespace avx512 {

void matvec_q4_k_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1) {
    matvec_q4_k_x16_v<Dot4Plain, false>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q5_k_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1) {
    matvec_q4_k_x16_v<Dot4Plain, true>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q6_k_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1) {
    matvec_q6_k_x16_v<Dot4Plain>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q4_k_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx,
                          int n, int64_t g0, int64_t g1) {
    matvec_q4_k_x16_v<Dot4Vnni, false>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q5_k_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx,
                          int n, int64_t g0, int64_t g1) {
    matvec_q4_k_x16_v<Dot4Vnni, true>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q6_k_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx,
                          int n, int64_t g0, int64_t g1) {
    matvec_q6_k_x16_v<Dot4Vnni>(out, ldo, W, K, x, ldx, n, g0, g1);
}

}  // namespace avx512
}  // namespace plainllama::isa
