// Kernels for quantized weights on AVX-512 F, BW, CD, DQ, VL (x86-64-v4): the quantizers and the reference dot
// products (quantizers.inc, quant_dot.inc) compiled for it, and decode's kernels on the tiles of 16 interleaved rows,
// which read the weights as the CPU family's policy says (policy.h). Compiled with -march=x86-64-v4; avx512.cpp's
// tables point at the entry points at the end (avx512_quant.h), used only on a CPU that has it (dispatch.cpp).
// Nothing here may be emitted as a weak symbol (see isa.h).
//
// GCC 12 flags the intrinsics' own _mm512_undefined_* temporaries (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "avx512_quant.h"

#include <immintrin.h>

#include <cstdint>
#include <type_traits>  // quantizers.inc

#include "isa.h"
#include "policy.h"

namespace plainllama::isa {
namespace {

#include "prefetch.inc"
#include "quant_dot.inc"
#include "quantizers.inc"

// Decode on the tiles of 16 interleaved rows (quant.h): each row's integer sums in its own lane, then quant_dot.inc's
// float steps for the 16 rows in their lanes, in its order: the same bits as quant_dot.inc's kernels, which also take
// matrices whose rows do not come in groups of 16 (not tiled).

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

// Decode reads a tile as more streams than the hardware prefetcher follows well (its header, then its values), so in
// the default policy (policy.h) each 64-byte load of a tile comes with a prefetch of the same place some tiles on,
// and the header of the tile that far on is prefetched whole (q6_k's: kQ6Header; an even tile's d[16], its last half
// line, is on the first line the odd tile after it prefetches, as prefetch takes whole lines from the one holding its
// start).

// Tile T's prefetches before its loads, as ReadAhead R says: the header (the first header_bytes) of the tile
// R.l1_ahead on, and the first line of the page R.page_start_ahead on when this tile of tile_bytes enters it.
template <ReadAhead R>
__attribute__((always_inline)) inline void prefetch_tile(const uint8_t* T, size_t tile_bytes, size_t header_bytes) {
    if constexpr (R.l1_ahead) prefetch(T, R.l1_ahead, header_bytes);
    if constexpr (R.page_start_ahead) prefetch_page_start(T, R.page_start_ahead, tile_bytes);
}

// A 64-byte load of a tile's line with R's line prefetches (load_line_ahead), or alone.
template <ReadAhead R>
__attribute__((always_inline)) inline __m512i load_tile_line(const uint8_t* p) {
    if constexpr (R.l1_ahead)
        return load_line_ahead<__m512i, R.l2>(p, R.l1_ahead);
    else
        return _mm512_loadu_si512(p);
}

// The several-token kernels' groups (token_groups, quant_dot.inc) under the policy in use (with_policy):
// f.template operator()<M, Policy>(m0).
template <int kMax, class F>
__attribute__((always_inline)) inline void policy_token_groups(int n, const F& f) {
    with_policy([&]<class Policy>() __attribute__((always_inline)) {
        token_groups<kMax>(
            n, [&]<int M>(int m0) __attribute__((always_inline)) { f.template operator()<M, Policy>(m0); });
    });
}

// q4_k, 16 interleaved rows per tile (quant.h): each 64-byte load holds 4 weights of each of the 16 rows, so the
// products of a sub-block accumulate per row in the lanes (u8 x s8 in groups of 4 into s32: Dot4), then times the
// rows' scales; no reduction across lanes. Dot4 is vpdpbusd with VNNI, vpmaddubsw + vpmaddwd without.
struct Dot4Plain {
    static constexpr bool kPairs16 = true;  // see matvec_q4_k_x16_body
    __attribute__((always_inline)) static __m512i f(__m512i acc, __m512i u, __m512i s) {
        return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
    }
};
// The 4 bytes at p in every lane (a chunk of x: 4 activations, one per u8 x s8 group).
__attribute__((always_inline)) inline __m512i splat4(const int8_t* p) {
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
// vpdpbusd written as an instruction rather than the intrinsic, so that it inlines into kernels compiled for plain
// x86-64-v4 (only the avx512_bf16 table, on CPUs with AVX512_VNNI, points at the kernels that use it).
struct Dot4Vnni {
    static constexpr bool kPairs16 = false;
    __attribute__((always_inline)) static __m512i f(__m512i acc, __m512i u, __m512i s) {
        asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
        return acc;
    }
    // f with s = the 4 bytes at x4 in every lane, as the instruction's broadcast memory operand ({1to16}): one
    // operation where a broadcast and f take two
    __attribute__((always_inline)) static __m512i fx(__m512i acc, __m512i u, const int8_t* x4) {
        asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*reinterpret_cast<const int32_t*>(x4)));
        return acc;
    }
    // acc += each lane's two int16 of u times the two at x2 (vpdpwssd, x2 broadcast as fx's): vpmaddwd and the add
    // in one operation
    __attribute__((always_inline)) static __m512i fw(__m512i acc, __m512i u, const int16_t* x2) {
        asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*reinterpret_cast<const int32_t*>(x2)));
        return acc;
    }
};

// Whether a kernel for groups of M tokens takes x's chunks as the broadcast memory operand (Dot4Vnni::fx, fw) rather
// than broadcast into a register first: with VNNI, for groups as large as Policy::kXOperandTokens (policy.h).
template <class Dot4, class Policy, int M>
constexpr bool kXOperand = !Dot4::kPairs16 && Policy::kXOperandTokens > 0 && M >= Policy::kXOperandTokens;
// acc = Dot4::f(acc, u, the chunk of x at x4 in every lane), the chunk as the memory operand with kOperand.
template <class Dot4, bool kOperand>
__attribute__((always_inline)) inline __m512i dot4_x(__m512i acc, __m512i u, const int8_t* x4) {
    if constexpr (kOperand)
        return Dot4::fx(acc, u, x4);
    else
        return Dot4::f(acc, u, splat4(x4));
}

// q8_0 tiles hold q + 128 (u8): with VNNI, vpdpbusd's sum of (q + 128) x less 128 sum(x); without, q recovered
// (^ 0x80) and |x| . (q with x's sign) by vpmaddubsw, which cannot saturate then (2 x 127 x 127), exact for
// q >= -127, every q a quantizer writes (llama.cpp's kernels do the same). M tokens at once (token m: x + m ldx
// blocks, out + m ldo), each tile loaded once for all of them; for each token the same steps as for it alone. One
// token's sums in Policy::kQ8_0Chains chains (chunk c into chain c mod n): integers, so the same sums.
template <bool kVnni, int M, class Policy>
__attribute__((always_inline)) inline void matvec_q8_0_x16_body(float* out, int64_t ldo, const uint8_t* W, int64_t K,
                                                                const BlockQ8x32* x, int64_t ldx, int64_t g0,
                                                                int64_t g1) {
    const int64_t nb = K / 32;
    constexpr ReadAhead kRead = Policy::kQ8_0;
    constexpr int kChains = M == 1 && kVnni ? Policy::kQ8_0Chains : 1;
    for (int64_t g = g0; g < g1; ++g) {
        __m512 acc[M];
        for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* T = W + size_t(g * nb + b) * kQ8x16Tile;
            prefetch_tile<kRead>(T, kQ8x16Tile, q8_qs_line(0));  // the header: d[16]
            __m512i isum[M][kChains];
            for (int m = 0; m < M; ++m)
                for (int i = 0; i < kChains; ++i) isum[m][i] = _mm512_setzero_si512();
            for (int c = 0; c < 8; ++c) {
                const __m512i v = load_tile_line<kRead>(T + q8_qs_line(c));
                const __m512i q = kVnni ? v : _mm512_xor_si512(v, _mm512_set1_epi8(char(0x80)));
                for (int m = 0; m < M; ++m) {
                    const int8_t* x4 = x[m * ldx + b].qs + 4 * c;
                    __m512i& s = isum[m][c % kChains];
                    if constexpr (kVnni) {
                        s = dot4_x<Dot4Vnni, kXOperand<Dot4Vnni, Policy, M>>(s, q, x4);
                    } else {
                        const __m512i xs = splat4(x4);
                        const __m512i sq = _mm512_mask_sub_epi8(q, _mm512_movepi8_mask(xs), _mm512_setzero_si512(), q);
                        s = Dot4Plain::f(s, _mm512_abs_epi8(xs), sq);
                    }
                }
            }
            for (int m = 0; m < M; ++m)
                for (int i = 1; i < kChains; ++i) isum[m][0] = _mm512_add_epi32(isum[m][0], isum[m][i]);
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(T)));
            for (int m = 0; m < M; ++m) {
                const BlockQ8x32& xb = x[m * ldx + b];
                __m512i sum = isum[m][0];
                if constexpr (kVnni) sum = _mm512_sub_epi32(sum, _mm512_set1_epi32(128 * xb.sum));
                const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(xb.d));
                acc[m] = _mm512_add_ps(acc[m], _mm512_mul_ps(d, _mm512_cvtepi32_ps(sum)));
            }
        }
        for (int m = 0; m < M; ++m) _mm512_storeu_ps(out + m * ldo + 16 * g, acc[m]);
    }
}

template <bool kVnni>
void matvec_q8_0_x16_v(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                       int64_t g0, int64_t g1) {
    policy_token_groups<4>(
        n, [&]<int M, class Policy>(int m0) __attribute__((always_inline)) {
            matvec_q8_0_x16_body<kVnni, M, Policy>(out + m0 * ldo, ldo, W, K, x + m0 * ldx, ldx, g0, g1);
        });
}

// Word i of the rows' mins of two sub-blocks widened to int16 ([16 rows of j][16 rows of j + 1]) for word i of the
// pairs (m_j, m_j+1) of each row, by vpermw.
alignas(64) constexpr uint16_t kMinPairWords[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                    8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
// The 16 rows' mins of sub-blocks j and j + 1 of q4_k tile T as int16 pairs (m_j, m_j+1), a pair per row's lane: with
// kPermute one 32-byte load widened and paired by vpermw (pair_words: kMinPairWords), else two 16-byte loads
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
// M tokens at once (token m: x + m ldx blocks, out + m ldo): each tile's values unpacked once for all of them, and
// for each token the same integer sums and float steps as for it alone (so the same bits). Without VNNI
// (Dot4::kPairs16), a sub-block's vpmaddubsw pairs (2 x 15 x 127 at most) add up in int16 over its 8 chunks without
// saturating (30480), and vpmaddwd by the row's scale in both halves of its lane gives sc (q . x) in int32. One
// token's sums of a sub-block in Policy::kQ4_KChains chains with VNNI (chunk c into chain c mod n), added at the end.
//
// Each tile is read header first (d and dmin, line 0; the mins' sums, lines 3-4), then its body with the scales
// (lines 1-2), so that its lines come in nearly ascending order, not its first lines after its last. (AVX2's kernel,
// which prefetches each header some tiles on, keeps its order: there it read slower.)
template <class Dot4, int M, class Policy>
__attribute__((always_inline)) inline void matvec_q4_k_x16_body(float* out, int64_t ldo, const uint8_t* W, int64_t K,
                                                                const BlockQ8x256* x, int64_t ldx, int64_t g0,
                                                                int64_t g1) {
    const int64_t nb = K / 256;
    constexpr ReadAhead kRead = Policy::kQ4_K;
    constexpr int kChains = M == 1 && !Dot4::kPairs16 ? Policy::kQ4_KChains : 1;
    static_assert(kChains == 1 || !Dot4::kPairs16, "int16 pair sums are not added as int32 chains");
    constexpr bool kOperand = kXOperand<Dot4, Policy, M>;  // x's chunks and sums as the memory operand
    const __m512i nib = _mm512_set1_epi8(0x0F), pair_words = _mm512_load_si512(kMinPairWords);
    for (int64_t g = g0; g < g1; ++g) {
        __m512 acc[M];
        for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* T = W + size_t(g * nb + b) * kQ4x16Tile;
            prefetch_tile<kRead>(T, kQ4x16Tile, q4_qs_line(0));  // the header
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
                __m512i lo[M][kChains], hi[M][kChains];
                for (int m = 0; m < M; ++m)
                    for (int i = 0; i < kChains; ++i) lo[m][i] = hi[m][i] = _mm512_setzero_si512();
                for (int c = 0; c < 8; ++c) {
                    const __m512i v = load_tile_line<kRead>(T + q4_qs_line(8 * gr + c));
                    // with VNNI the high nibbles stay in place (16 h: vpdpbusd has no int16 stage to saturate),
                    // their sums shifted back once per sub-block and token below, not once per load (port 0, as
                    // vpdpbusd)
                    const __m512i vl = _mm512_and_si512(v, nib);
                    const __m512i vh =
                        Dot4::kPairs16 ? _mm512_and_si512(_mm512_srli_epi16(v, 4), nib) : _mm512_andnot_si512(nib, v);
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
                if constexpr (!Dot4::kPairs16)
                    for (int m = 0; m < M; ++m)
                        hi[m][0] = _mm512_srai_epi32(hi[m][0], 4);               // exact: 16 times an integer
                const auto scales = [&](int j) __attribute__((always_inline)) {  // sub-block j's, as int32 lanes
                    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(T + q4_scales(j))));
                };
                const __m512i sc_lo = scales(2 * gr), sc_hi = scales(2 * gr + 1);
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
            for (int m = 0; m < M; ++m) {
                const __m512 t = _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[m])),
                                               _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(imin[m])));
                acc[m] = _mm512_add_ps(acc[m], _mm512_mul_ps(_mm512_set1_ps(x[m * ldx + b].d), t));
            }
        }
        for (int m = 0; m < M; ++m) _mm512_storeu_ps(out + m * ldo + 16 * g, acc[m]);
    }
}

template <class Dot4>
void matvec_q4_k_x16_v(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                       int64_t g0, int64_t g1) {
    policy_token_groups<4>(
        n, [&]<int M, class Policy>(int m0) __attribute__((always_inline)) {
            matvec_q4_k_x16_body<Dot4, M, Policy>(out + m0 * ldo, ldo, W, K, x + m0 * ldx, ldx, g0, g1);
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

void quantize_row(QuantType t, const float* x, uint8_t* y, int64_t K) { isa::quantize_row(t, x, y, K); }
void dequantize(QuantType t, const uint8_t* src, float* y, int64_t n) { isa::dequantize(t, src, y, n); }
void quantize_q8x32(BlockQ8x32* y, const float* x, int64_t K) { isa::quantize_q8x32(y, x, K); }
void quantize_q8x256(BlockQ8x256* y, const float* x, int64_t K) { isa::quantize_q8x256(y, x, K); }
void matvec_q8_0(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t r0, int64_t r1) {
    isa::matvec_q8_0(out, W, K, x, r0, r1);
}
void matvec_q4_k(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1) {
    isa::matvec_q4_k(out, W, K, x, r0, r1);
}
void matvec_q6_k(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1) {
    isa::matvec_q6_k(out, W, K, x, r0, r1);
}
void matvec_q8_0_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1) {
    matvec_q8_0_x16_v<false>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q4_k_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1) {
    matvec_q4_k_x16_v<Dot4Plain>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q6_k_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1) {
    matvec_q6_k_x16_v<Dot4Plain>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q8_0_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                          int64_t g0, int64_t g1) {
    matvec_q8_0_x16_v<true>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q4_k_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx,
                          int n, int64_t g0, int64_t g1) {
    matvec_q4_k_x16_v<Dot4Vnni>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q6_k_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx,
                          int n, int64_t g0, int64_t g1) {
    matvec_q6_k_x16_v<Dot4Vnni>(out, ldo, W, K, x, ldx, n, g0, g1);
}

}  // namespace avx512
}  // namespace plainllama::isa
