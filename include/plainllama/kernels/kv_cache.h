// The KV cache's storage: its types, its layout (keys in panels, values in rows) and how a position is stored.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "plainllama/kernels/kernels.h"

namespace plainllama {

// The KV cache's storage type (llama.cpp's -ctk/-ctv): f32; f16 (round to nearest even); q8_0, each row of a head's
// key or value in blocks of 32 dimensions with an fp16 scale, as llama.cpp's (the same values: d = max|x| / 127,
// q = round(x / d)); bf16 (round to nearest even; attention then multiplies in BF16 where the CPU can:
// attention_bf16_products). Keys and values of one position are rounded once, when stored, so decoding and a batched
// prompt read the same values.
enum class CacheType { f32, f16, q8_0, bf16 };
const char* cache_type_name(CacheType t);  // "f32", "f16", "q8_0", "bf16"
bool parse_cache_type(const std::string& s, CacheType* t);
// Bytes of one position's key (or value) in one KV head: head_dim x 4, x 2 (f16, bf16), or head_dim / 32 blocks of 34.
size_t kv_row_bytes(CacheType t, int64_t head_dim);
// Empty when the type can hold rows of head_dim, else why not (q8_0: head_dim must be a multiple of 32).
std::string cache_type_unsupported(CacheType t, int64_t head_dim);

// One sequence's cache of one layer:
//   k: each KV head's keys as panels of kPanel positions (see PackedMatrix in kernels.h), positions as rows, so that
//      Q K^T reads them as a weight matrix, a panel at a time: panel p of head g at
//      k + (g * key_cache_positions(ctx) / kPanel + p) * kPanel * kv_row_bytes. Inside a panel:
//        f32, f16, bf16  [head_dim][kPanel]: key j's dimension i at [i][j % kPanel]
//        q8_0      per block b of 32 dimensions, 1088 bytes: d[kPanel] (fp16, key j's scale at [j % kPanel]), then
//                  q[32][kPanel] (int8): key j's dimension 32 b + i at [i][j % kPanel]
//   v: [n_kv_heads, ctx] rows of kv_row_bytes: f32, f16 or bf16 [head_dim], q8_0 llama.cpp's blocks (d, q[32]) in a
//      row.
// Slots past the positions in use may hold anything: kernels read whole panels, but those lanes never reach a result.
struct KvView {
    CacheType type = CacheType::f32;
    void* k = nullptr;
    void* v = nullptr;
    int64_t n_kv_heads = 0, head_dim = 0, ctx = 0;
};
int64_t key_cache_positions(int64_t ctx);  // ctx rounded up to a whole panel
size_t key_cache_bytes(CacheType t, int64_t n_kv_heads, int64_t head_dim, int64_t ctx);
size_t value_cache_bytes(CacheType t, int64_t n_kv_heads, int64_t head_dim, int64_t ctx);
constexpr int64_t kKvQ8Block = 32;  // dimensions per q8_0 block
constexpr size_t kKvQ8PanelBlock =
    2 * kPanel + kKvQ8Block * kPanel;  // a key panel's q8_0 block: d[kPanel], q[32][kPanel]
inline size_t kv_panel_bytes(const KvView& c) { return size_t(kPanel) * kv_row_bytes(c.type, c.head_dim); }
// The panel holding key j of KV head g, and the row of value j of head g.
inline uint8_t* kv_key_panel(const KvView& c, int64_t g, int64_t j) {
    return static_cast<uint8_t*>(c.k) +
           size_t(g * key_cache_positions(c.ctx) / kPanel + j / kPanel) * kv_panel_bytes(c);
}
inline uint8_t* kv_value_row(const KvView& c, int64_t g, int64_t j) {
    return static_cast<uint8_t*>(c.v) + size_t(g * c.ctx + j) * kv_row_bytes(c.type, c.head_dim);
}
// Position j of every KV head: k, v [n_kv_heads, head_dim], rounded to the cache's type.
void store_kv(const KvView& c, int64_t j, const float* k, const float* v);
// What the cache holds at position j of KV head g, as f32 [head_dim] (tests).
void load_key(const KvView& c, int64_t g, int64_t j, float* k);
void load_value(const KvView& c, int64_t g, int64_t j, float* v);

}  // namespace plainllama
