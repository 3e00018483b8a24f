// Causal grouped-query attention over a KV cache (a kernel: it knows heads, not the model).
#pragma once
#include <cstdint>

namespace plainllama {

// Floats of scratch one thread needs for up to T tokens' queries (group = query heads per KV head) against a
// cache of ctx positions.
int64_t attention_scratch_per_thread(int64_t T, int64_t group, int64_t ctx, int64_t head_dim);

// For T new tokens at positions pos0 .. pos0+T-1, whose keys and values are already in the cache:
//   out[t, h, :] = sum_{j <= pos0+t} softmax_j(q[t, h, :] . K[g, j, :] / sqrt(head_dim)) V[g, j, :]
// with g = h / (n_heads / n_kv_heads): consecutive query heads share one KV head.
//   q, out: [T, n_heads, head_dim]     k_cache, v_cache: [n_kv_heads, ctx, head_dim]
//   scratch: [omp_get_max_threads(), attention_scratch_per_thread(T, n_heads / n_kv_heads, ctx, head_dim)]
// Per KV head and chunk of 32 tokens, over the group's query heads: S = Q K^T (matmul_nt), softmax over each
// row's own keys, then O = P V as one product over the keys before the chunk (matmul_nn) continued row by row
// over the row's keys inside the chunk (gemv_acc), one fma chain per output. A later token's K and V are never
// read for an earlier one (an Inf or NaN there cannot reach it), and decode (T == 1) runs the same code, so a
// token's output does not depend on how the tokens were batched, bit for bit.
void attention(float* out, const float* q, const float* k_cache, const float* v_cache, int64_t T, int64_t pos0,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t ctx, float* scratch);

}  // namespace plainllama
