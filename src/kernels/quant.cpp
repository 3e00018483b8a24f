// The quantized formats (quant.h): interleaving rows into tiles and back; quantizing and dequantizing a row with the
// active kernels (quantizers.inc, quant_dot.inc). Names and sizes: quant_format.cpp.
#include "plainllama/kernels/quant.h"

#include <cstring>

#include "isa/isa.h"
#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

uint32_t load_u32(const uint8_t* p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
void store_u32(uint8_t* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}

// Sub-block j's 6-bit scale and min from the k formats' 12 packed bytes (quant.h), and back (s zeroed first).
void unpack_scale_min(const uint8_t* s, int j, int* sc, int* m) {
    *sc = j < 4 ? s[j] & 63 : (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
    *m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4;
}
void pack_scale_min(uint8_t* s, int j, int sc, int m) {
    if (j < 4) {
        s[j] = uint8_t(sc);
        s[j + 4] = uint8_t(m);
    } else {
        s[j + 4] = uint8_t((sc & 0xF) | (m & 0xF) << 4);
        s[j - 4] = uint8_t(s[j - 4] | (sc >> 4) << 6);
        s[j] = uint8_t(s[j] | (m >> 4) << 6);
    }
}

// Row r's block (GGUF layout) into tile T, tile i of its matrix, or (put false) back out of it (T then only read).
template <bool put>
void move_block(QuantType t, uint8_t* T, int64_t i, int r, uint8_t* blk) {
    auto copy = [](uint8_t* tile, uint8_t* block, size_t n) {
        if constexpr (put)
            std::memcpy(tile, block, n);
        else
            std::memcpy(block, tile, n);
    };
    switch (t) {
        case QuantType::none:
            return;
        case QuantType::q8_0:
            copy(T + 2 * r, blk, 2);
            for (int k = 0; k < 8; ++k)
                for (int b = 0; b < 4; ++b) {
                    uint8_t& q = T[q8_qs_line(k) + 4 * r + b];
                    if constexpr (put)
                        q = uint8_t(blk[2 + 4 * k + b] ^ 0x80);
                    else
                        blk[2 + 4 * k + b] = uint8_t(q ^ 0x80);
                }
            return;
        case QuantType::q4_0:
            copy(T + q40_d(i) + 2 * r, blk, 2);
            for (int c = 0; c < 4; ++c) copy(T + q40_body(i) + q40_qs_line(c) + 4 * r, blk + 2 + 4 * c, 4);
            return;
        case QuantType::q5_0: {
            uint8_t* body = T + q50_body(i);
            copy(T + q50_d(i) + 2 * r, blk, 2);
            if constexpr (put)
                store_u32(body + kQ50Qh + 4 * r, q5_0_tile_bits(load_u32(blk + 2)));
            else
                store_u32(blk + 2, q5_0_gguf_bits(load_u32(body + kQ50Qh + 4 * r)));
            for (int c = 0; c < 4; ++c) copy(body + q50_qs_line(c) + 4 * r, blk + 6 + 4 * c, 4);
            return;
        }
        case QuantType::q6_k: {
            uint8_t* body = T + q6_body(i);
            copy(T + q6_d(i) + 2 * r, blk + 208, 2);
            for (int j = 0; j < 16; ++j) copy(body + q6_scales(j) + r, blk + 192 + j, 1);
            for (int k = 0; k < 32; ++k) copy(body + q6_ql_line(k) + 4 * r, blk + 4 * k, 4);        // ql
            for (int k = 0; k < 16; ++k) copy(body + q6_qh_line(k) + 4 * r, blk + 128 + 4 * k, 4);  // qh
            return;
        }
        case QuantType::q4_k:
        case QuantType::q5_k: {  // d, dmin, the scales and mins a byte each, then qs (and q5_k's qh) lines
            const bool k5 = t == QuantType::q5_k;
            copy(T + 2 * r, blk, 2);
            copy(T + kQ4Dmin + 2 * r, blk + 2, 2);
            uint8_t* s = blk + 4;
            if constexpr (!put) std::memset(s, 0, 12);
            for (int j = 0; j < 8; ++j) {
                int sc, m;
                if constexpr (put) {
                    unpack_scale_min(s, j, &sc, &m);
                    T[q4_scales(j) + r] = uint8_t(sc), T[q4_mins(j) + r] = uint8_t(m);
                } else {
                    pack_scale_min(s, j, T[q4_scales(j) + r], T[q4_mins(j) + r]);
                }
            }
            uint8_t* qs = blk + (k5 ? 48 : 16);
            for (int k = 0; k < 32; ++k) copy(T + (k5 ? q5k_qs_line(k) : q4_qs_line(k)) + 4 * r, qs + 4 * k, 4);
            if (k5) {  // the 5th bits: GGUF's qh[32] as 8 words, the row's word in each of the tile's qh lines
                uint32_t from[8];
                for (int n = 0; n < 8; ++n) from[n] = load_u32(put ? blk + 16 + 4 * n : T + q5k_qh_line(n) + 4 * r);
                for (int n = 0; n < 8; ++n)
                    store_u32(put ? T + q5k_qh_line(n) + 4 * r : blk + 16 + 4 * n,
                              put ? q5k_tile_word(from, n) : q5k_gguf_word(from, n));
            }
            return;
        }
    }
}

}  // namespace

void interleave(QuantType t, uint8_t* tiles, const uint8_t* rows, int64_t nb, int64_t first) {
    const size_t bb = quant_block_bytes(t), row = size_t(nb) * bb;
    uint8_t blk[256];
    for (int64_t b = 0; b < nb; ++b, tiles += tile_bytes(t))
        for (int r = 0; r < 16; ++r) {
            std::memcpy(blk, rows + r * row + size_t(b) * bb, bb);
            move_block<true>(t, tiles, first + b, r, blk);
        }
}

void deinterleave(QuantType t, uint8_t* dst, const uint8_t* tiles, int64_t r, int64_t b0, int64_t n, int64_t first) {
    tiles += size_t(b0) * tile_bytes(t);
    for (int64_t b = b0; b < b0 + n; ++b, tiles += tile_bytes(t), dst += quant_block_bytes(t))
        move_block<false>(t, const_cast<uint8_t*>(tiles), first + b, int(r), dst);
}

void quantize_row(QuantType t, const float* x, void* dst, int64_t K) {
    PL_CHECK(t != QuantType::none && K % quant_block(t) == 0);
    isa::active().quantize_row(t, x, static_cast<uint8_t*>(dst), K);
}

void dequantize_row(QuantType t, const void* src, float* y, int64_t K) {
    PL_CHECK(t != QuantType::none && K % quant_block(t) == 0);
    isa::active().dequantize(t, static_cast<const uint8_t*>(src), y, K);
}

}  // namespace plainllama
