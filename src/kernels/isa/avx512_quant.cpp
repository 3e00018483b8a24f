// Kernels for quantized weights on AVX-512 F, BW, CD, DQ, VL (x86-64-v4): the quantizers and the reference dot
// products (quantizers.inc, quant_dot.inc) compiled for it, and decode's kernels on the tiles of 16 interleaved rows
// of the formats with blocks of 32 weights (q8_0, q4_0, q5_0; the k formats' are in avx512_quant_k.cpp), which read
// the weights as the CPU family's policy says (policy.h). Compiled with -march=x86-64-v4; avx512.cpp's tables point at
// the entry points at the end (avx512_quant.h), used only on a CPU that has it (dispatch.cpp). Nothing here may be
// emitted as a weak symbol (see isa.h).
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

#include "avx512_tiles.inc"

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

// q4_0 (kQ5 false) and q5_0 tiles: per line c, 4 bytes of each row whose low nibbles are weights 4c .. 4c+3 and high
// nibbles 16 + 4c .., summed against x's chunks c and 4 + c as u8 (0 .. 15, or 0 .. 31 with q5_0's 5th bit joined
// in: Dot4 never saturates, 2 x 31 x 127), the two halves as two chains, less 8 (16) sum(x) once per tile. q5_0's
// 5th bits come as one line per tile, a word per row laid out (q5_0_tile_bits) so that for line c a shift by 4 - c
// and one by c put them in bit 4 of each byte. M tokens at once, each tile unpacked once for all of them; for each
// token the same steps as for it alone. Without VNNI, vpmaddubsw + vpmaddwd (Dot4Plain).
template <bool kQ5>
struct Q4_0Tiles {
    static constexpr size_t kTile = kQ5 ? kQ50x16Tile : kQ40x16Tile;
    static constexpr int kOffset = kQ5 ? 16 : 8;
    static size_t body(int64_t i) { return kQ5 ? q50_body(i) : q40_body(i); }
    static size_t d(int64_t i) { return kQ5 ? q50_d(i) : q40_d(i); }
    static constexpr size_t qs_line(int c) { return kQ5 ? q50_qs_line(c) : q40_qs_line(c); }
};
template <class Dot4, bool kQ5, int M, class Policy>
__attribute__((always_inline)) inline void matvec_q4_0_x16_body(float* out, int64_t ldo, const uint8_t* W, int64_t K,
                                                                const BlockQ8x32* x, int64_t ldx, int64_t g0,
                                                                int64_t g1) {
    using F = Q4_0Tiles<kQ5>;
    const int64_t nb = K / 32;
    constexpr ReadAhead kRead = kQ5 ? Policy::kQ5_0 : Policy::kQ4_0;
    static_assert(kRead.l1_ahead % (2 * F::kTile) == 0, "read ahead by an even number of tiles (see below)");
    constexpr bool kOperand = kXOperand<Dot4, Policy, M>;
    constexpr bool kHighInPlace = !kQ5 && !Dot4::kPairs16;  // vpdpbusd has no int16 stage to saturate
    const __m512i nib = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
    for (int64_t g = g0; g < g1; ++g) {
        __m512 acc[M];
        for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t i = g * nb + b;  // the tile's index
            const uint8_t *T = W + size_t(i) * F::kTile, *body = T + F::body(i);
            // the line of d[16] of the tile l1_ahead on (an even number of tiles: it holds no body line of either
            // tile of its pair), and the page starts
            if constexpr (kRead.l1_ahead) prefetch(T + F::d(i), kRead.l1_ahead, 32);
            if constexpr (kRead.page_start_ahead) prefetch_page_start(T, kRead.page_start_ahead, F::kTile);
            __m512i lo[M], hi[M];
            for (int m = 0; m < M; ++m) lo[m] = hi[m] = _mm512_setzero_si512();
            __m512i H = _mm512_setzero_si512();
            if constexpr (kQ5) H = load_tile_line<kRead>(body + kQ50Qh);
#pragma GCC unroll 4
            for (int c = 0; c < 4; ++c) {
                const __m512i v = load_tile_line<kRead>(body + F::qs_line(c));
                __m512i vl, vh;
                if constexpr (kQ5) {  // (nibble & 0x0F) | the 5th bit in bit 4: vpternlogd 0xEC, (a & c) | b
                    const __m512i hl = _mm512_and_si512(_mm512_slli_epi16(H, 4 - c), bit4);
                    const __m512i hh = _mm512_and_si512(_mm512_srli_epi16(H, c), bit4);
                    vl = _mm512_ternarylogic_epi32(v, hl, nib, 0xEC);
                    vh = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), hh, nib, 0xEC);
                } else {  // with VNNI the high nibbles stay in place (16 q), their sums shifted back once per tile
                    vl = _mm512_and_si512(v, nib);
                    vh = kHighInPlace ? _mm512_andnot_si512(nib, v) : _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
                }
                for (int m = 0; m < M; ++m) {
                    const int8_t* xq = x[m * ldx + b].qs;
                    lo[m] = dot4_x<Dot4, kOperand>(lo[m], vl, xq + 4 * c);
                    hi[m] = dot4_x<Dot4, kOperand>(hi[m], vh, xq + 16 + 4 * c);
                }
            }
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(T + F::d(i))));
            for (int m = 0; m < M; ++m) {
                const BlockQ8x32& xb = x[m * ldx + b];
                const __m512i h = kHighInPlace ? _mm512_srai_epi32(hi[m], 4) : hi[m];  // exact: 16 times an integer
                const __m512i sum =
                    _mm512_sub_epi32(_mm512_add_epi32(lo[m], h), _mm512_set1_epi32(F::kOffset * xb.sum));
                const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(xb.d));
                acc[m] = _mm512_add_ps(acc[m], _mm512_mul_ps(d, _mm512_cvtepi32_ps(sum)));
            }
        }
        for (int m = 0; m < M; ++m) _mm512_storeu_ps(out + m * ldo + 16 * g, acc[m]);
    }
}

template <class Dot4, bool kQ5>
void matvec_q4_0_x16_v(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                       int64_t g0, int64_t g1) {
    policy_token_groups<4>(
        n, [&]<int M, class Policy>(int m0) __attribute__((always_inline)) {
            matvec_q4_0_x16_body<Dot4, kQ5, M, Policy>(out + m0 * ldo, ldo, W, K, x + m0 * ldx, ldx, g0, g1);
        });
}

#pragma GCC pop_options

}  // namespace

// The entry points of avx512_quant.h (the k formats' tile kernels: avx512_quant_k.cpp): the functions above under the
// names the tables use.
namespace avx512 {

void quantize_row(QuantType t, const float* x, uint8_t* y, int64_t K) { isa::quantize_row(t, x, y, K); }
void dequantize(QuantType t, const uint8_t* src, float* y, int64_t n) { isa::dequantize(t, src, y, n); }
void quantize_q8x32(BlockQ8x32* y, const float* x, int64_t K) { isa::quantize_q8x32(y, x, K); }
void quantize_q8x256(BlockQ8x256* y, const float* x, int64_t K) { isa::quantize_q8x256(y, x, K); }
void matvec_q8_0(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t r0, int64_t r1) {
    isa::matvec_q8_0(out, W, K, x, r0, r1);
}
void matvec_q4_0(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t r0, int64_t r1) {
    isa::matvec_q4_0(out, W, K, x, r0, r1);
}
void matvec_q5_0(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t r0, int64_t r1) {
    isa::matvec_q5_0(out, W, K, x, r0, r1);
}
void matvec_q4_k(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1) {
    isa::matvec_q4_k(out, W, K, x, r0, r1);
}
void matvec_q5_k(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1) {
    isa::matvec_q5_k(out, W, K, x, r0, r1);
}
void matvec_q6_k(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1) {
    isa::matvec_q6_k(out, W, K, x, r0, r1);
}
void matvec_q8_0_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1) {
    matvec_q8_0_x16_v<false>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q4_0_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1) {
    matvec_q4_0_x16_v<Dot4Plain, false>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q5_0_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1) {
    matvec_q4_0_x16_v<Dot4Plain, true>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q8_0_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                          int64_t g0, int64_t g1) {
    matvec_q8_0_x16_v<true>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q4_0_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                          int64_t g0, int64_t g1) {
    matvec_q4_0_x16_v<Dot4Vnni, false>(out, ldo, W, K, x, ldx, n, g0, g1);
}
void matvec_q5_0_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                          int64_t g0, int64_t g1) {
    matvec_q4_0_x16_v<Dot4Vnni, true>(out, ldo, W, K, x, ldx, n, g0, g1);
}

}  // namespace avx512
}  // namespace plainllama::isa
