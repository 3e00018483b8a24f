// The quantized formats (quant.h): names and block sizes; quantizing and dequantizing a row with the active
// kernels (quantizers.inc, quant_dot.inc).
#include "plainllama/kernels/quant.h"

#include <cstring>

#include "isa/isa.h"
#include "plainllama/sys/error.h"

namespace plainllama {

const char* quant_name(QuantType t) {
    switch (t) {
        case QuantType::none: return "none";
        case QuantType::q8_0: return "q8_0";
        case QuantType::q4_k: return "q4_k";
        case QuantType::q6_k: return "q6_k";
    }
    return "?";
}

bool parse_quant_type(const std::string& s, QuantType* t) {
    for (QuantType q : {QuantType::none, QuantType::q8_0, QuantType::q4_k, QuantType::q6_k})
        if (s == quant_name(q)) {
            *t = q;
            return true;
        }
    return false;
}

int64_t quant_block(QuantType t) { return t == QuantType::q8_0 ? 32 : t == QuantType::none ? 1 : 256; }

size_t quant_block_bytes(QuantType t) {
    switch (t) {
        case QuantType::none: return 0;
        case QuantType::q8_0: return 34;
        case QuantType::q4_k: return 144;
        case QuantType::q6_k: return 210;
    }
    return 0;
}

size_t quant_row_bytes(QuantType t, int64_t K) { return size_t(K / quant_block(t)) * quant_block_bytes(t); }

bool tiled(QuantType t, int64_t N) { return t != QuantType::none && N % 16 == 0; }

size_t tile_bytes(QuantType t) {
    return t == QuantType::q8_0 ? kQ8x16Tile : t == QuantType::q4_k ? kQ4x16Tile : kQ6x16Tile;
}

size_t quant_matrix_bytes(QuantType t, int64_t N, int64_t K) {
    return tiled(t, N) ? size_t(N / 16) * size_t(K / quant_block(t)) * tile_bytes(t) : size_t(N) * quant_row_bytes(t, K);
}

void interleave(QuantType t, uint8_t* tiles, const uint8_t* rows, int64_t nb, int64_t first) {
    const size_t bb = quant_block_bytes(t), row = size_t(nb) * bb;
    for (int64_t b = 0; b < nb; ++b, tiles += tile_bytes(t))
        for (int r = 0; r < 16; ++r) {
            const uint8_t* blk = rows + r * row + size_t(b) * bb;
            if (t == QuantType::q8_0) {
                std::memcpy(tiles + 2 * r, blk, 2);
                for (int k = 0; k < 8; ++k)
                    for (int i = 0; i < 4; ++i) tiles[q8_qs_line(k) + 4 * r + i] = uint8_t(blk[2 + 4 * k + i] ^ 0x80);
                continue;
            }
            if (t == QuantType::q6_k) {
                uint8_t* body = tiles + q6_body(first + b);
                std::memcpy(tiles + q6_d(first + b) + 2 * r, blk + 208, 2);
                for (int j = 0; j < 16; ++j) body[q6_scales(j) + r] = blk[192 + j];
                for (int k = 0; k < 32; ++k) std::memcpy(body + q6_ql_line(k) + 4 * r, blk + 4 * k, 4);        // ql
                for (int k = 0; k < 16; ++k) std::memcpy(body + q6_qh_line(k) + 4 * r, blk + 128 + 4 * k, 4);  // qh
                continue;
            }
            std::memcpy(tiles + 2 * r, blk, 2);
            std::memcpy(tiles + kQ4Dmin + 2 * r, blk + 2, 2);
            const uint8_t* s = blk + 4;
            for (int j = 0; j < 8; ++j) {
                tiles[q4_scales(j) + r] = uint8_t(j < 4 ? s[j] & 63 : (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4);
                tiles[q4_mins(j) + r] = uint8_t(j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4);
            }
            for (int k = 0; k < 32; ++k)  // chunk k = 8 gr + c
                std::memcpy(tiles + q4_qs_line(k) + 4 * r, blk + 16 + 4 * k, 4);
        }
}

void deinterleave(QuantType t, uint8_t* dst, const uint8_t* tiles, int64_t r, int64_t b0, int64_t n, int64_t first) {
    tiles += size_t(b0) * tile_bytes(t);
    for (int64_t b = b0; b < b0 + n; ++b, tiles += tile_bytes(t), dst += quant_block_bytes(t)) {
        if (t == QuantType::q6_k) {
            const uint8_t* body = tiles + q6_body(first + b);
            std::memcpy(dst + 208, tiles + q6_d(first + b) + 2 * r, 2);
            for (int j = 0; j < 16; ++j) dst[192 + j] = body[q6_scales(j) + r];
            for (int k = 0; k < 32; ++k) std::memcpy(dst + 4 * k, body + q6_ql_line(k) + 4 * r, 4);
            for (int k = 0; k < 16; ++k) std::memcpy(dst + 128 + 4 * k, body + q6_qh_line(k) + 4 * r, 4);
            continue;
        }
        std::memcpy(dst, tiles + 2 * r, 2);
        if (t == QuantType::q8_0) {
            for (int k = 0; k < 8; ++k)
                for (int i = 0; i < 4; ++i) dst[2 + 4 * k + i] = uint8_t(tiles[q8_qs_line(k) + 4 * r + i] ^ 0x80);
            continue;
        }
        std::memcpy(dst + 2, tiles + kQ4Dmin + 2 * r, 2);
        uint8_t* s = dst + 4;
        for (int j = 0; j < 8; ++j) {
            const int sc = tiles[q4_scales(j) + r], m = tiles[q4_mins(j) + r];
            if (j < 4) {
                s[j] = uint8_t(sc);
                s[j + 4] = uint8_t(m);
            } else {
                s[j + 4] = uint8_t((sc & 0xF) | (m & 0xF) << 4);
                s[j - 4] = uint8_t(s[j - 4] | (sc >> 4) << 6);
                s[j] = uint8_t(s[j] | (m >> 4) << 6);
            }
        }
        for (int k = 0; k < 32; ++k) std::memcpy(dst + 16 + 4 * k, tiles + q4_qs_line(k) + 4 * r, 4);
    }
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
