// Causal grouped-query attention over a KV cache (a kernel: it knows heads, not the model).
#pragma once
#include <cstdint>

#include "plainllama/kernels/kernels.h"

namespace plainllama {

// The key cache holds each KV head's keys as the panels matmul reads (F32, see PackedMatrix in kernels.h), with
// positions as rows: key j of KV head g is column j % kPanel of panel j / kPanel, so S = Q K^T runs on the cache
// as it is (nothing repacked per call) and decoding streams it once.
//   k_cache: [n_kv_heads, key_cache_positions(ctx) / kPanel, head_dim, kPanel]
// Slots past the keys in use may hold anything: kernels read whole panels, but those lanes never reach a result.
int64_t key_cache_positions(int64_t ctx);  // ctx rounded up to a whole panel
inline int64_t key_cache_index(int64_t g, int64_t j, int64_t i, int64_t head_dim, int64_t ctx) {
    return ((g * key_cache_positions(ctx) + j / kPanel * kPanel) * head_dim) + i * kPanel + j % kPanel;
}
// k_cache[g, j, :] = k[:]     k: [head_dim]
void store_key(float* k_cache, const float* k, int64_t g, int64_t j, int64_t head_dim, int64_t ctx);

// Floats of scratch one thread needs for up to T tokens' queries (group = query heads per KV head) against a
// cache of ctx positions.
int64_t attention_scratch_per_thread(int64_t T, int64_t group, int64_t ctx, int64_t head_dim);

// For T new tokens at positions pos0 .. pos0+T-1, whose keys and values are already in the cache:
//   out[t, h, :] = sum_{j <= pos0+t} softmax_j(q[t, h, :] . K[g, j, :] / sqrt(head_dim)) V[g, j, :]
// with g = h / (n_heads / n_kv_heads): consecutive query heads share one KV head.
//   q, out: [T, n_heads, head_dim]     k_cache: key panels (above)     v_cache: [n_kv_heads, ctx, head_dim]
//   scratch: [thread_count(), attention_scratch_per_thread(T, n_heads / n_kv_heads, ctx, head_dim)]
// Per KV head and chunk of 32 tokens, over the group's query heads: S = Q K^T (matmul), softmax over each
// row's own keys, then O = P V as one product over the keys before the chunk (matmul_nn) continued row by row
// over the row's keys inside the chunk (gemv_acc), one fma chain per output. A later token of the chunk gets a
// score in an earlier token's row of S, but it never enters that row's softmax or P V (an Inf or NaN in its K or V
// cannot reach the earlier token), and decode (T == 1) runs the same code, so a token's output does not depend
// on how the tokens were batched, bit for bit.
void attention(float* out, const float* q, const float* k_cache, const float* v_cache, int64_t T, int64_t pos0,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t ctx, float* scratch);

}  // namespace plainllama
