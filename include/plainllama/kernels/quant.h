// Quantized weight formats, bit-compatible with GGUF's blocks (so that a GGUF file's tensors could be used as they
// are), and the 8-bit activation blocks the integer dot products take.
//
//   q8_0  32 weights:  d (fp16), qs[32] (int8)                                   x = d * q                34 bytes
//   q4_0  32 weights:  d (fp16), qs[16] (4-bit, two per byte)                    x = d (q - 8)            18 bytes
//   q5_0  32 weights:  d (fp16), qh[4] (the 5th bits), qs[16] (low 4 bits)       x = d (q - 16)           22 bytes
//   q4_k  256 weights: d, dmin (fp16), scales[12] (8 x 6-bit scale and min),
//                      qs[128] (4-bit, two per byte)                              x = d sc_j q - dmin m_j  144 bytes
//   q5_k  256 weights: d, dmin (fp16), scales[12] (as q4_k), qh[32] (the 5th bits), qs[128] (low 4 bits)
//                                                                                 x = d sc_j q - dmin m_j  176 bytes
//   q6_k  256 weights: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d (fp16)
//                                                                                 x = d sc_j (q - 32)      210 bytes
// q4_0 and q5_0: weight l < 16 in the low nibble of qs[l], weight 16 + l in the high one; q5_0's 5th bit of weight l
// is bit l of qh (a little-endian u32). q4_k and q5_k sub-block j (32 weights) has a 6-bit scale sc_j and min m_j:
// j < 4 in the low 6 bits of scales[j] and scales[j + 4]; j >= 4 in the low (scale) and high (min) nibbles of
// scales[j + 4] with their top 2 bits in the top bits of scales[j - 4] and scales[j]. Their 4-bit values: in each
// group n of 64 weights, weight l < 32 in the low nibble of qs[32 n + l], weight 32 + l in the high one; q5_k's 5th
// bits of those two in bits 2n and 2n + 1 of qh[l]. q6_k sub-block j has 16 weights and scale scales[j]; in each half
// of 128 weights, weight l of the four quarters (l, 32 + l, 64 + l, 96 + l) takes its low 4 bits from the low nibble
// of ql[l], ql[32 + l], and the high nibbles of ql[l], ql[32 + l], and its high 2 bits from bits 0-1, 2-3, 4-5, 6-7 of
// qh[l].
//
// A matrix [N, K] is N rows of K / block blocks each, row after row (a row of K weights is row_bytes(K) bytes).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace plainllama {

enum class QuantType { none, q8_0, q4_k, q6_k, q4_0, q5_0, q5_k };
// Every block format, in the order above.
constexpr QuantType kBlockFormats[] = {QuantType::q8_0, QuantType::q4_k, QuantType::q6_k,
                                       QuantType::q4_0, QuantType::q5_0, QuantType::q5_k};

const char* quant_name(QuantType t);                        // "none", "q8_0", "q4_k", "q6_k", "q4_0", "q5_0", "q5_k"
bool parse_quant_type(const std::string& s, QuantType* t);  // the names above
int64_t quant_block(QuantType t);                           // weights per block: 32 or 256
size_t quant_block_bytes(QuantType t);                      // 34, 144, 210, 18, 22, 176
// Whether the format's blocks hold 256 weights (the activations then come as BlockQ8x256, else BlockQ8x32).
inline bool quant_k_block(QuantType t) { return t == QuantType::q4_k || t == QuantType::q5_k || t == QuantType::q6_k; }
size_t quant_row_bytes(QuantType t, int64_t K);  // K a multiple of quant_block(t)

// A block's fp16 scale: its byte offset in the block (GGUF layout) and its name in the format (d, dmin). An Inf or
// NaN there makes every weight of the block non-finite; --check-tensors reads these. A new format lists its own.
struct QuantScale {
    size_t offset;
    const char* name;
};
struct QuantScales {
    QuantScale at[2];
    int n = 0;
    const QuantScale* begin() const { return at; }
    const QuantScale* end() const { return at + n; }
};
// q8_0, q4_0, q5_0: d at 0; q4_k, q5_k: d at 0, dmin at 2; q6_k: d at 208
QuantScales quant_scales(QuantType t);

// x [K] (K a multiple of the block) quantized into row_bytes(t, K) bytes with llama.cpp's reference quantizers'
// algorithms, without an importance matrix (q4_k's and q5_k's candidate errors computed from their sums, so their
// choices can differ where two candidates nearly tie): q8_0 d = max|x| / 127, q = round(x / d); q4_0 (q5_0) d = the
// x of largest magnitude / -8 (-16), q = x / d + 8.5 (16.5) truncated, at most 15 (31); q4_k and q5_k the scale and
// min of each 32 weights fitted by a weighted least-squares search (weights sqrt(mean x^2) + |x|), then both quantized
// to 6 bits; q6_k the scale of each 16 weights searched to minimise the x^2-weighted error, then quantized to 8 bits.
void quantize_row(QuantType t, const float* x, void* dst, int64_t K);
// y [K] = the values a quantized row stands for (exact in f32 arithmetic: d * sc is rounded once).
void dequantize_row(QuantType t, const void* src, float* y, int64_t K);

// In memory (not in files), a quantized matrix whose rows come in whole groups of 16 (tiled(t, N)) has each group's
// blocks interleaved, so that decode computes 16 rows in the lanes of one vector, each row's sums in its own lane:
// tile (g, b) = block b of rows 16g .. 16g+15, at (g * blocks per row + b) * tile_bytes(t). In a tile, 4 bytes of
// each of the 16 rows follow one another ([chunk][row][4]: one 64-byte vector per chunk):
//   q8_0 (544 bytes)   d[16] (fp16); qs[8][16][4]: q + 128 (u8) of weights 4c .. 4c+3
//   q4_k (2368 bytes)  d[16], dmin[16] (fp16); sc[8][16], m[8][16] (the 6-bit scales and mins, a byte each,
//                      [sub-block][row]); qs[4][8][16][4]: row r's qs[32 gr + 4 c ..] for 64-weight group gr
//   q6_k (3360 bytes)  the body: sc[16][16] ([sub-block][row]); then per half h and chunk c < 8, the three 64-byte
//                      lines decode reads together, one after another (q6_ql_line, q6_qh_line): row r's
//                      ql[64 h + 4 c ..], ql[64 h + 32 + 4 c ..] and qh[32 h + 4 c ..]; and d[16] (fp16), before
//                      the body in the odd tiles (g * blocks per row + b odd), after it in the even ones (q6_body,
//                      q6_d). 3360 bytes are 52.5 cache lines: so in a matrix that begins on a line (PackedWeights),
//                      each 64-byte load of a body is one line, not the halves of two
//   q4_0 (288 bytes)   the body qs[4][16][4]: row r's qs[4 c ..] in line c; and d[16], before the body in odd tiles,
//                      after it in even ones (q40_body, q40_d: as q6_k's, so that every body line is a cache line)
//   q5_0 (352 bytes)   the body: the 5th bits (one line, q50_qh: a 4-byte word per row, below), then qs[4][16][4] as
//                      q4_0's; d[16] at alternating ends (q50_body, q50_d)
//   q5_k (2880 bytes)  q4_k's header (d, dmin, sc, m); then for j = 0 .. 7 the 5th bits of qs lines 4 j .. 4 j + 3
//                      (qh line j: a 4-byte word per row, below) and those four qs lines (k = 8 gr + c: row r's
//                      qs[4 k ..]), in the order decode reads them (q5k_qs_line, q5k_qh_line)
constexpr size_t kQ8x16Tile = 32 + 512, kQ4x16Tile = 64 + 256 + 2048, kQ6x16Tile = 32 + 256 + 2048 + 1024;
constexpr size_t kQ40x16Tile = 256 + 32, kQ50x16Tile = 64 + 256 + 32, kQ5Kx16Tile = 64 + 256 + 2048 + 512;
// Where a q8_0 tile holds its qs line c (0 .. 7: the rows' q + 128 of weights 4c .. 4c+3), after d[16].
constexpr size_t q8_qs_line(int c) { return 32 + 64 * c; }
static_assert(q8_qs_line(8) == kQ8x16Tile, "d[16], then the 8 lines of qs");
// Where a q4_k tile holds its parts: d[16] at 0 and dmin[16] at kQ4Dmin (line 0); the 16 rows' scales of sub-block j
// at q4_scales(j) and their mins at q4_mins(j) (lines 1-2, 3-4); then qs line k (0 .. 31, k = 8 gr + c: the rows'
// qs[4 k ..]) at q4_qs_line(k). The header is everything before q4_qs_line(0).
constexpr size_t kQ4Dmin = 32;
constexpr size_t q4_scales(int j) { return 64 + 16 * j; }
constexpr size_t q4_mins(int j) { return q4_scales(8) + 16 * j; }
constexpr size_t q4_qs_line(int k) { return q4_mins(8) + 64 * k; }
static_assert(kQ4Dmin + 32 == q4_scales(0) && q4_scales(0) == 64 && q4_mins(0) == 192 && q4_qs_line(0) == 320 &&
                  q4_qs_line(32) == kQ4x16Tile && kQ4x16Tile % 64 == 0,
              "a 5-line header (d and dmin, scales, mins), then 32 lines of qs: from a line, every tile's lines are "
              "cache lines");
// Where q6_k tile i (its index in the matrix) holds its body and its d[16].
constexpr size_t q6_body(int64_t i) { return i % 2 ? 32 : 0; }
constexpr size_t q6_d(int64_t i) { return i % 2 ? 0 : kQ6x16Tile - 32; }
// Where a q6_k body holds the 16 rows' scales of sub-block j (int8), its ql line k (0 .. 31: the rows' ql[4 k ..]) and
// its qh line k (0 .. 15: the rows' qh[4 k ..]), so that for half h and chunk c < 8 lines 16 h + c and 16 h + 8 + c of
// ql and line 8 h + c of qh follow one another in the order the kernels read them (one stream per tile, not three).
constexpr size_t q6_scales(int j) { return 16 * j; }
constexpr size_t q6_ql_line(int k) { return 256 + 192 * (8 * (k / 16) + k % 8) + 64 * (k % 16 / 8); }
constexpr size_t q6_qh_line(int k) { return 256 + 192 * k + 128; }
static_assert(q6_scales(16) == q6_ql_line(0) && q6_ql_line(0) == 256 && q6_ql_line(8) == 256 + 64 &&
                  q6_qh_line(0) == 256 + 128 && q6_ql_line(31) + 64 == q6_qh_line(15) &&
                  q6_qh_line(15) + 64 + 32 == kQ6x16Tile,
              "the 48 lines fill the body after its scales, 3 per chunk, and d[16] the rest of the tile");
static_assert(q6_d(0) == q6_body(0) + q6_qh_line(15) + 64 && q6_d(1) + 32 <= q6_body(1) && q6_body(0) % 64 == 0 &&
                  (kQ6x16Tile + q6_body(1)) % 64 == 0 && (2 * kQ6x16Tile) % 64 == 0,
              "body, d, d, body: from a line, every body (even or odd tile) starts on a line, its d[16] beside it");
// Where q4_0 and q5_0 tile i (its index in the matrix) hold their body and d[16]: as q6_k's, so that from a line,
// every body starts on a line (the tiles are 4.5 and 5.5 lines).
constexpr size_t q40_body(int64_t i) { return i % 2 ? 32 : 0; }
constexpr size_t q40_d(int64_t i) { return i % 2 ? 0 : kQ40x16Tile - 32; }
constexpr size_t q50_body(int64_t i) { return i % 2 ? 32 : 0; }
constexpr size_t q50_d(int64_t i) { return i % 2 ? 0 : kQ50x16Tile - 32; }
// A q4_0 body's qs line c (0 .. 3: the rows' qs[4 c ..], weights 4c .. 4c+3 in the low nibbles, 16 + 4c .. in the
// high ones); a q5_0 body's line of 5th bits, then its qs lines.
constexpr size_t q40_qs_line(int c) { return 64 * c; }
constexpr size_t kQ50Qh = 0;
constexpr size_t q50_qs_line(int c) { return 64 + 64 * c; }
static_assert(q40_qs_line(4) + 32 == kQ40x16Tile && q50_qs_line(4) + 32 == kQ50x16Tile && (2 * kQ40x16Tile) % 64 == 0 &&
                  (kQ40x16Tile + q40_body(1)) % 64 == 0 && (2 * kQ50x16Tile) % 64 == 0 &&
                  (kQ50x16Tile + q50_body(1)) % 64 == 0 && q40_d(0) == q40_qs_line(4) && q50_d(0) == q50_qs_line(4),
              "body, d, d, body: from a line, every body (even or odd tile) starts on a line, its d[16] beside it");
// A q5_0 row's 4-byte word of 5th bits in its tile (q5_0_tile_bits): byte i holds in bit c the 5th bit of weight
// 4c + i (its low nibble in qs line c) and in bit 4 + c that of weight 16 + 4c + i (the high nibble), so that for
// line c a shift of each 16-bit half by 4 - c (left) and by c (right) brings them to bit 4 of byte i, the bits of the
// other byte never landing there. GGUF's qh: bit l of a u32 for weight l.
constexpr uint32_t q5_0_tile_bits(uint32_t qh) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
        for (int c = 0; c < 4; ++c)
            v |= (qh >> (4 * c + i) & 1) << (8 * i + c) | (qh >> (16 + 4 * c + i) & 1) << (8 * i + 4 + c);
    return v;
}
constexpr uint32_t q5_0_gguf_bits(uint32_t v) {
    uint32_t qh = 0;
    for (int i = 0; i < 4; ++i)
        for (int c = 0; c < 4; ++c)
            qh |= (v >> (8 * i + c) & 1) << (4 * c + i) | (v >> (8 * i + 4 + c) & 1) << (16 + 4 * c + i);
    return qh;
}
static_assert(q5_0_gguf_bits(q5_0_tile_bits(0x89abcdefu)) == 0x89abcdefu && q5_0_tile_bits(1u << 17) == 1u << 12,
              "a permutation of the 32 bits: weight 17's (high nibble, line 0, byte 1) to bit 4 of byte 1");
// Where a q5_k tile holds its qs line k (0 .. 31, k = 8 gr + c: the rows' qs[4 k ..]) and its qh line j (0 .. 7: the
// 5th bits of qs lines 4 j .. 4 j + 3), after q4_k's header: each qh line just before the four qs lines it serves, so
// that decode reads the tile in ascending order at an even pace (a qh line every four qs lines).
constexpr size_t q5k_qh_line(int j) { return q4_qs_line(0) + 320 * j; }
constexpr size_t q5k_qs_line(int k) { return q5k_qh_line(k / 4) + 64 * (1 + k % 4); }
static_assert(q5k_qs_line(3) + 64 == q5k_qh_line(1) && q5k_qs_line(31) + 64 == kQ5Kx16Tile && kQ5Kx16Tile % 64 == 0,
              "q4_k's 5-line header, then 8 runs of a qh line and 4 qs lines: every line a cache line");
// A q5_k row's 5th bits in its tile: its word in qh line j holds in bits 2 i and 2 i + 1 of byte b those of byte b of
// qs line k = 4 j + i (its low and high nibble), so that qs line k tests bits q5k_tile_qh_bit(k, 0 or 1) of the word
// it follows. GGUF's qh[32], as 8 little-endian words, holds them in bits 2 gr and 2 gr + 1 of byte b of word c
// (k = 8 gr + c). Word j of the tile from GGUF's words, and word c of GGUF's from the tile's.
constexpr int q5k_tile_qh_bit(int k, int h) { return 2 * (k % 4) + h; }
constexpr uint32_t q5k_tile_word(const uint32_t* gguf, int j) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= (gguf[(4 * j + i) % 8] >> (2 * ((4 * j + i) / 8)) & 0x03030303u) << (2 * i);
    return v;
}
constexpr uint32_t q5k_gguf_word(const uint32_t* tile, int c) {
    uint32_t v = 0;
    for (int gr = 0; gr < 4; ++gr) v |= (tile[(8 * gr + c) / 4] >> (2 * (c % 4)) & 0x03030303u) << (2 * gr);
    return v;
}
constexpr bool q5k_words_round_trip() {
    uint32_t gguf[8] = {}, tile[8] = {};
    for (int n = 0; n < 8; ++n) gguf[n] = 0x9e3779b9u * uint32_t(n + 1);
    for (int n = 0; n < 8; ++n) tile[n] = q5k_tile_word(gguf, n);
    for (int n = 0; n < 8; ++n)
        if (q5k_gguf_word(tile, n) != gguf[n]) return false;
    return (q5k_tile_word(gguf, 2) & 3) == (gguf[0] >> 2 & 3);
}
static_assert(q5k_words_round_trip(), "a permutation of the 256 bits: qs line 8's bits (group 1, chunk 0) in word 2");
bool tiled(QuantType t, int64_t N);  // any format, N a multiple of 16
size_t tile_bytes(QuantType t);      // of a tiled format
// Bytes of a quantized [N, K] matrix in memory (rows of blocks, or tiles).
size_t quant_matrix_bytes(QuantType t, int64_t N, int64_t K);
// 16 rows of nb blocks each (GGUF layout, rows after one another) as nb tiles, tiles first .. first + nb - 1 of their
// matrix (group g's: first = g * nb).
void interleave(QuantType t, uint8_t* tiles, const uint8_t* rows, int64_t nb, int64_t first);
// Blocks b0 .. b0+n-1 of row r (0 .. 15) of a group's tiles (from tile `first` of the matrix) back in GGUF layout.
void deinterleave(QuantType t, uint8_t* dst, const uint8_t* tiles, int64_t r, int64_t b0, int64_t n, int64_t first);

// 8-bit activations for the integer dot products: 32 (for q8_0, q4_0, q5_0 weights) or 256 values (q4_k, q5_k, q6_k)
// with one f32 scale, and their sums: of the 32 (q8_0's, q4_0's and q5_0's offsets), of each 16 (q6_k's offset) and
// of each 32 (the k formats' mins).
struct BlockQ8x32 {
    float d;
    int8_t qs[32];
    int32_t sum;  // of qs (for q8_0's tiles, which hold q + 128, and q4_0's and q5_0's offsets)
};
struct BlockQ8x256 {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
    int16_t sums32[8];  // bsums[2 j] + bsums[2 j + 1] (at most 32 x 127)
};

}  // namespace plainllama
