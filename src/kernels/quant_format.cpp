// The quantized formats (quant.h): names, block and row sizes, where a block keeps its scales. Nothing here runs a
// kernel: the loader (and the fuzz targets, which build the loader alone) use it.
#include "plainllama/kernels/quant.h"

namespace plainllama {

const char* quant_name(QuantType t) {
    switch (t) {
        case QuantType::none:
            return "none";
        case QuantType::q8_0:
            return "q8_0";
        case QuantType::q4_k:
            return "q4_k";
        case QuantType::q6_k:
            return "q6_k";
        case QuantType::q4_0:
            return "q4_0";
        case QuantType::q5_0:
            return "q5_0";
        case QuantType::q5_k:
            return "q5_k";
    }
    return "?";
}

bool parse_quant_type(const std::string& s, QuantType* t) {
    if (s == quant_name(QuantType::none)) {
        *t = QuantType::none;
        return true;
    }
    for (QuantType q : kBlockFormats)
        if (s == quant_name(q)) {
            *t = q;
            return true;
        }
    return false;
}

int64_t quant_block(QuantType t) { return t == QuantType::none ? 1 : quant_k_block(t) ? 256 : 32; }

size_t quant_block_bytes(QuantType t) {
    switch (t) {
        case QuantType::none:
            return 0;
        case QuantType::q8_0:
            return 34;
        case QuantType::q4_k:
            return 144;
        case QuantType::q6_k:
            return 210;
        case QuantType::q4_0:
            return 18;
        case QuantType::q5_0:
            return 22;
        case QuantType::q5_k:
            return 176;
    }
    return 0;
}

QuantScales quant_scales(QuantType t) {
    switch (t) {
        case QuantType::none:
            return {};
        case QuantType::q8_0:
        case QuantType::q4_0:
        case QuantType::q5_0:
            return {{{0, "d"}}, 1};
        case QuantType::q4_k:
        case QuantType::q5_k:
            return {{{0, "d"}, {2, "dmin"}}, 2};
        case QuantType::q6_k:
            return {{{208, "d"}}, 1};
    }
    return {};
}

size_t quant_row_bytes(QuantType t, int64_t K) { return size_t(K / quant_block(t)) * quant_block_bytes(t); }

bool tiled(QuantType t, int64_t N) { return t != QuantType::none && N % 16 == 0; }

size_t tile_bytes(QuantType t) {
    switch (t) {
        case QuantType::none:
            return 0;
        case QuantType::q8_0:
            return kQ8x16Tile;
        case QuantType::q4_k:
            return kQ4x16Tile;
        case QuantType::q6_k:
            return kQ6x16Tile;
        case QuantType::q4_0:
            return kQ40x16Tile;
        case QuantType::q5_0:
            return kQ50x16Tile;
        case QuantType::q5_k:
            return kQ5Kx16Tile;
    }
    return 0;
}

size_t quant_matrix_bytes(QuantType t, int64_t N, int64_t K) {
    return tiled(t, N) ? size_t(N / 16) * size_t(K / quant_block(t)) * tile_bytes(t)
                       : size_t(N) * quant_row_bytes(t, K);
}

}  // namespace plainllama
