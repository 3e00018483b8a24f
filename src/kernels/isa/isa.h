// The per-instruction-set micro-kernels behind kernels.h (private to src/kernels/).
//
// Each ISA file (scalar.cpp, avx2.cpp, avx512.cpp with avx512_quant.cpp) is compiled with its own target flags and
// fills one table of function pointers; dispatch.cpp picks the best table this CPU runs, once, and the code that cuts
// work into tiles, spreads it over threads and dispatches on the weight type (matmul.cpp, pack.cpp, vector.cpp) is
// written once, with no intrinsics, over whatever table is active. The shared .inc files hold code written once and
// compiled into each ISA file (elementwise.inc, prefetch.inc, quant_dot.inc: dot products of quantized blocks,
// quantizers.inc); policy.h the AVX-512 decode kernels' choices per CPU family.
//
// The ISA files define everything in an anonymous namespace (but the table getters below and avx512_quant.cpp's entry
// points, avx512_quant.h: plain functions, defined once) and use nothing from the standard library or our headers that
// could be emitted out of line: a weak (COMDAT) copy of an inline function compiled for AVX-512 could be the one the
// linker keeps for every caller, and crash a CPU without it. py.test_isa_objects checks their symbols.
//
// Layouts (see PackedMatrix in kernels.h): a packed panel holds kNR rows of W k-major, [K][kNR] (F32, F16), or BF16
// pairs [ceil(K/2)][kNR][2]. Every product sums each output as one chain of fused multiply-adds over k in order
// (the scalar table: multiply then add), lanes along the outputs, so a result does not depend on T, the tile or
// the thread that computed it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "plainllama/kernels/kernels.h"
#include "plainllama/kernels/quant.h"

namespace plainllama::isa {

constexpr int64_t kNR = 32;  // panel width (= kPanel)
constexpr int kMRMax = 8;    // register tiles of 1 .. kMRMax token rows

// Typed views of 16-bit storage.
struct F16 {
    uint16_t bits;
};
struct BF16 {
    uint16_t bits;
};
// Pairs<T>::value: a packed panel of T holds pairs (k, k+1) per 32-bit word (BF16, for vdpbf16ps).
template <class T>
struct Pairs {
    static constexpr bool value = false;
};
template <>
struct Pairs<BF16> {
    static constexpr bool value = true;
};

// The packed layout: panels of kNR rows, each [stored_k][kNR] (pairs: [stored_k / 2][kNR][2]).
constexpr int64_t n_panels(int64_t N) { return (N + kNR - 1) / kNR; }
constexpr int64_t stored_k(bool pairs, int64_t K) { return pairs ? (K + 1) / 2 * 2 : K; }  // pairs round K up
// Where W[kNR p + j, k] sits inside panel p: [k][j], or [k/2][j][k%2] for pairs.
constexpr int64_t panel_index(bool pairs, int64_t k, int64_t j) {
    return pairs ? k / 2 * 2 * kNR + j * 2 + k % 2 : k * kNR + j;
}

// out[i, j] (+)= sum_{k < kc} x[i * ldx + k] * W[k, j]   for i < MR, j < nr <= kNR, W[k, j] at Wp[k * ldw + j]:
// f32 with any ldw (a panel, a widened block, a row-major B: a partial row-major block is read masked), or a
// packed 16-bit panel (ldw == kNR; BF16 as pairs) read straight and widened in registers. A panel is read whole
// past nr: each column is its own lane and only the first nr are stored.
template <class E>
using MicroTile = void (*)(float* out, int64_t ldo, const float* x, int64_t ldx, const E* Wp, int64_t ldw, int64_t kc,
                           int64_t nr, bool accumulate);
// The same with vdpbf16ps: x as BF16 pairs [MR][ldx] (k, k+1 in one word), Wp BF16 pairs [pc][kNR].
using DotTile = void (*)(float* out, int64_t ldo, const uint32_t* x, int64_t ldx, const uint32_t* Wp, int64_t pc,
                         int64_t nr, bool accumulate);
// The same with W's pairs taken from BF16 rows as they are read: pair p = rows 2p and 2p + 1 of kNR values at
// src + r * ld (the same words as pairs_bf16_rows makes, so the same bits as it and a DotTile).
using DotRowsTile = void (*)(float* out, int64_t ldo, const uint32_t* x, int64_t ldx, const BF16* src, int64_t ld,
                             int64_t pc, int64_t nr, bool accumulate);
// Decode: out[kNR p .. kNR p + kNR - 1] = W x for panels p0 .. p1-1 of a packed W [N, K].
template <class E>
using Matvec = void (*)(float* out, const float* x, const E* W, int64_t N, int64_t K, int64_t p0, int64_t p1);

struct Kernels {
    const char* name = {};
    bool has_tuning = {};  // its decode kernels follow tuning()

    MicroTile<float> tile_f32[kMRMax + 1] = {};  // indexed by MR ([0] unused)
    // Prefill tiles of at most f16_direct_rows (bf16_direct_rows) token rows read a 16-bit panel straight with these
    // tiles; taller ones widen each panel block into an f32 buffer first. 0: always widen (no tiles needed).
    MicroTile<F16> tile_f16[kMRMax + 1] = {};
    int64_t f16_direct_rows = {};
    MicroTile<BF16> tile_bf16[kMRMax + 1] = {};
    int64_t bf16_direct_rows = {};
    // BF16 weights, prefill unless exact: x rounded to BF16 pairs and vdpbf16ps; null without AVX512_BF16.
    DotTile tile_bf16_dot[kMRMax + 1] = {};
    void (*round_bf16_pairs)(uint32_t* dst, const float* x, int64_t K) = {};  // [ceil(K/2)] words; odd K pads 0
    // rows rows of kNR BF16 values, row r at src + r * ld, as pairs of consecutive rows: out [ceil(rows/2)][kNR]
    // words, word (p, j) = (row 2p's j, row 2p + 1's j); an odd count pairs its last row with 0 (a DotTile's Wp).
    // Null without AVX512_BF16, as is the tile after it.
    void (*pairs_bf16_rows)(uint32_t* out, const BF16* src, int64_t ld, int64_t rows) = {};
    DotRowsTile tile_bf16_dot_rows[kMRMax + 1] = {};

    Matvec<float> matvec_f32 = {};
    Matvec<F16> matvec_f16 = {};
    Matvec<BF16> matvec_bf16 = {};

    // Rows n0 .. n0+nr-1 (nr <= kNR), columns k0 .. k0+kc-1 of a row-major [*, K] matrix of 32- or 16-bit
    // elements, transposed into Wp [kc][kNR]; rows past nr are zero. Bits are moved, never converted.
    void (*pack_block32)(uint32_t* Wp, const uint32_t* W, int64_t K, int64_t n0, int64_t nr, int64_t k0,
                         int64_t kc) = {};
    void (*pack_block16)(uint16_t* Wp, const uint16_t* W, int64_t K, int64_t n0, int64_t nr, int64_t k0,
                         int64_t kc) = {};

    void (*widen_f16)(float* out, const F16* src, int64_t n) = {};    // out[i] = float(src[i]), exact
    void (*widen_bf16)(float* out, const BF16* src, int64_t n) = {};  // out[i] = float(src[i]), exact
    // A BF16 panel block of kc k (pairs, starting at an even k) as f32 [kc][kNR]; out has room for an even kc.
    // Null when bf16_direct_rows covers every tile.
    void (*widen_bf16_pairs)(float* out, const BF16* P, int64_t kc) = {};

    // Element-wise, over one row or one thread's share (the callers split the work over threads).
    double (*sum_squares)(const float* x, int64_t n) = {};                                 // in double
    void (*scale_mul)(float* y, const float* x, float s, const float* w, int64_t n) = {};  // y = x * s * w
    void (*softmax)(float* x, int64_t n, float scale) = {};
    // x = e^(scale x - m), m = max(scale x) into *max; returns the sum of the new x.
    float (*exp_shifted)(float* x, int64_t n, float scale, float* max) = {};
    // out[r][j] = q[r][j] * d[j], r < rows, j < 32 (a q8_0 key panel's block, exactly).
    void (*scale_i8_rows)(float* out, const int8_t* q, const float* d, int64_t rows) = {};
    void (*silu_mul)(float* g, const float* u, int64_t n) = {};
    void (*add)(float* y, const float* x, int64_t n) = {};
    void (*rope_rotate_half)(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) = {};
    // Quantized weights, decode (quant_dot.inc): x [K] to 8-bit blocks, and out[r] = W[r, :] x for rows r0 .. r1-1 of a
    // row-major quantized W [*, K].
    // y = x [K] (K a multiple of t's block) quantized to format t, as quantizers.inc's reference does.
    void (*quantize_row)(QuantType t, const float* x, uint8_t* y, int64_t K) = {};
    // y [n] = the weights of n / block consecutive blocks of format t, exactly (quant.h).
    void (*dequantize)(QuantType t, const uint8_t* src, float* y, int64_t n) = {};
    void (*quantize_q8x32)(BlockQ8x32* y, const float* x, int64_t K) = {};
    void (*quantize_q8x256)(BlockQ8x256* y, const float* x, int64_t K) = {};
    void (*matvec_q8_0)(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t r0, int64_t r1) = {};
    void (*matvec_q4_k)(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1) = {};
    void (*matvec_q6_k)(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1) = {};
    void (*matvec_q4_0)(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t r0, int64_t r1) = {};
    void (*matvec_q5_0)(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t r0, int64_t r1) = {};
    void (*matvec_q5_k)(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1) = {};
    // Tiles of 16 interleaved rows (quant.h): rows 16 g0 .. 16 g1 - 1, for n >= 1 tokens (token m: x + m ldx blocks,
    // out + m ldo), the same bits as each token alone: the AVX-512 ones unpack each tile once for several tokens,
    // faster than the dequantizing GEMM (AVX2: q4_k for 4, q6_k for 2, q8_0 one token after another).
    void (*matvec_q8_0_x16)(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx,
                            int n, int64_t g0, int64_t g1) = {};
    void (*matvec_q4_k_x16)(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx,
                            int n, int64_t g0, int64_t g1) = {};
    void (*matvec_q6_k_x16)(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx,
                            int n, int64_t g0, int64_t g1) = {};
    void (*matvec_q4_0_x16)(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx,
                            int n, int64_t g0, int64_t g1) = {};
    void (*matvec_q5_0_x16)(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx,
                            int n, int64_t g0, int64_t g1) = {};
    void (*matvec_q5_k_x16)(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx,
                            int n, int64_t g0, int64_t g1) = {};

    // sum(p[0 .. n)) with independent accumulators, for the bandwidth test: p 64-byte aligned, n a multiple of 64;
    // with plain loads alone, with the float decode kernels' prefetch of every line (prefetch_ahead), or with a
    // prefetch of each 4 KiB page's first line (prefetch_page_start; the scalar table reads the same way in all three).
    float (*sum_stream)(const float* p, int64_t n, ReadWay way) = {};
    // reps steps of independent fused multiply-add chains held in registers, for the FMA peak test: the sum of the
    // chains, and the floating-point operations done (a multiply-add counts two) into *ops (the scalar table:
    // a multiply, then an add).
    float (*fma_burst)(int64_t reps, double* ops) = {};
};

// A table of register tiles {nullptr, f<1, ...>, ..., f<kMRMax, ...>} from a micro-kernel template f<MR, ...>.
#define PL_TILES(f, ...)                                                                                            \
    {                                                                                                               \
        nullptr, f<1 __VA_OPT__(, ) __VA_ARGS__>, f<2 __VA_OPT__(, ) __VA_ARGS__>, f<3 __VA_OPT__(, ) __VA_ARGS__>, \
            f<4 __VA_OPT__(, ) __VA_ARGS__>, f<5 __VA_OPT__(, ) __VA_ARGS__>, f<6 __VA_OPT__(, ) __VA_ARGS__>,      \
            f<7 __VA_OPT__(, ) __VA_ARGS__>, f<8 __VA_OPT__(, ) __VA_ARGS__>                                        \
    }
static_assert(kMRMax == 8, "PL_TILES lists the tiles 1 .. kMRMax");

// The tables of the ISA files; the AVX ones only for a CPU that runs them (see dispatch.cpp).
const Kernels& scalar_kernels();
const Kernels& avx2_kernels();         // AVX2 + FMA + F16C (x86-64-v3)
const Kernels& avx512_kernels();       // AVX-512 F, BW, CD, DQ, VL (x86-64-v4)
const Kernels& avx512_bf16_kernels();  // the same with AVX512_BF16's vdpbf16ps for BF16 prefill

// A per-thread buffer of at least n floats, 64-byte aligned, kept between calls (for the code around the tables).
float* thread_buffer(size_t n);

// The table in use (chosen at the first call: PLAINLLAMA_KERNELS, else the best this CPU supports).
const Kernels& active();

// The decode kernels' tuning (kernels.h's Tuning): what use_tuning last set, else PLAINLLAMA_TUNING's, else cpuid's
// (AMD family 25: zen4, 26 or later: zen5, else intel), chosen at the first call. The AVX-512 kernels run the policy
// of the tuning (policy.h: with_policy).
Tuning tuning();

}  // namespace plainllama::isa
