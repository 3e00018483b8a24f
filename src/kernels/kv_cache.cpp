#include "plainllama/kernels/kv_cache.h"

#include <cstring>

#include "plainllama/io/dtype.h"
#include "plainllama/kernels/quant.h"

namespace plainllama {

const char* cache_type_name(CacheType t) {
    switch (t) {
        case CacheType::f32:
            return "f32";
        case CacheType::f16:
            return "f16";
        case CacheType::q8_0:
            return "q8_0";
        case CacheType::bf16:
            return "bf16";
    }
    return "?";
}

bool parse_cache_type(const std::string& s, CacheType* t) {
    for (CacheType c : {CacheType::f32, CacheType::f16, CacheType::q8_0, CacheType::bf16})
        if (s == cache_type_name(c)) {
            *t = c;
            return true;
        }
    return false;
}

size_t kv_row_bytes(CacheType t, int64_t head_dim) {
    switch (t) {
        case CacheType::f32:
            return size_t(head_dim) * 4;
        case CacheType::f16:
        case CacheType::bf16:
            return size_t(head_dim) * 2;
        case CacheType::q8_0:
            return size_t(head_dim / kKvQ8Block) * quant_block_bytes(QuantType::q8_0);
    }
    return 0;
}

std::string cache_type_unsupported(CacheType t, int64_t head_dim) {
    if (t == CacheType::q8_0 && head_dim % kKvQ8Block != 0)
        return "q8_0 stores rows in blocks of 32 and this model's head_dim is " + std::to_string(head_dim);
    return "";
}

int64_t key_cache_positions(int64_t ctx) { return (ctx + kPanel - 1) / kPanel * kPanel; }

size_t key_cache_bytes(CacheType t, int64_t n_kv_heads, int64_t head_dim, int64_t ctx) {
    return size_t(n_kv_heads) * size_t(key_cache_positions(ctx)) * kv_row_bytes(t, head_dim);
}
size_t value_cache_bytes(CacheType t, int64_t n_kv_heads, int64_t head_dim, int64_t ctx) {
    return size_t(n_kv_heads) * size_t(ctx) * kv_row_bytes(t, head_dim);
}

void store_kv(const KvView& c, int64_t j, const float* k, const float* v) {
    const int64_t hd = c.head_dim, lane = j % kPanel;
    for (int64_t g = 0; g < c.n_kv_heads; ++g) {
        const float *kg = k + g * hd, *vg = v + g * hd;
        uint8_t *P = kv_key_panel(c, g, j), *V = kv_value_row(c, g, j);
        switch (c.type) {
            case CacheType::f32: {
                auto* dst = reinterpret_cast<float*>(P);
                for (int64_t i = 0; i < hd; ++i) dst[i * kPanel + lane] = kg[i];
                std::memcpy(V, vg, size_t(hd) * 4);
                break;
            }
            case CacheType::f16:
            case CacheType::bf16: {
                const auto round = c.type == CacheType::f16 ? f32_to_f16 : f32_to_bf16;
                auto* dst = reinterpret_cast<uint16_t*>(P);
                auto* vd = reinterpret_cast<uint16_t*>(V);
                for (int64_t i = 0; i < hd; ++i) {
                    dst[i * kPanel + lane] = round(kg[i]);
                    vd[i] = round(vg[i]);
                }
                break;
            }
            case CacheType::q8_0: {  // the key's row as llama.cpp's blocks, then scattered into the panel's lanes
                uint8_t row[kKvQ8Block + 2];
                for (int64_t b = 0; b < hd / kKvQ8Block; ++b) {
                    quantize_row(QuantType::q8_0, kg + b * kKvQ8Block, row, kKvQ8Block);
                    uint8_t* blk = P + size_t(b) * kKvQ8PanelBlock;
                    std::memcpy(blk + 2 * lane, row, 2);
                    for (int64_t i = 0; i < kKvQ8Block; ++i) blk[2 * kPanel + i * kPanel + lane] = row[2 + i];
                }
                quantize_row(QuantType::q8_0, vg, V, hd);
                break;
            }
        }
    }
}

namespace {
// A stored f16 or bf16 value as f32 (exact).
float widen16(CacheType t, uint16_t h) { return t == CacheType::f16 ? f16_to_f32(h) : bf16_to_f32(h); }
}  // namespace

void load_key(const KvView& c, int64_t g, int64_t j, float* k) {
    const int64_t hd = c.head_dim, lane = j % kPanel;
    const uint8_t* P = kv_key_panel(c, g, j);
    switch (c.type) {
        case CacheType::f32:
            for (int64_t i = 0; i < hd; ++i) k[i] = reinterpret_cast<const float*>(P)[i * kPanel + lane];
            return;
        case CacheType::f16:
        case CacheType::bf16:
            for (int64_t i = 0; i < hd; ++i)
                k[i] = widen16(c.type, reinterpret_cast<const uint16_t*>(P)[i * kPanel + lane]);
            return;
        case CacheType::q8_0:
            for (int64_t b = 0; b < hd / kKvQ8Block; ++b) {
                const uint8_t* blk = P + size_t(b) * kKvQ8PanelBlock;
                uint16_t d;
                std::memcpy(&d, blk + 2 * lane, 2);
                for (int64_t i = 0; i < kKvQ8Block; ++i)
                    k[b * kKvQ8Block + i] = float(int8_t(blk[2 * kPanel + i * kPanel + lane])) * f16_to_f32(d);
            }
            return;
    }
}

void load_value(const KvView& c, int64_t g, int64_t j, float* v) {
    const int64_t hd = c.head_dim;
    const uint8_t* V = kv_value_row(c, g, j);
    switch (c.type) {
        case CacheType::f32:
            std::memcpy(v, V, size_t(hd) * 4);
            return;
        case CacheType::f16:
        case CacheType::bf16:
            for (int64_t i = 0; i < hd; ++i) v[i] = widen16(c.type, reinterpret_cast<const uint16_t*>(V)[i]);
            return;
        case CacheType::q8_0:
            dequantize_row(QuantType::q8_0, V, v, hd);
            return;
    }
}

}  // namespace plainllama
