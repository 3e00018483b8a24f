// Causal grouped-query attention over a KV cache (a kernel: it knows heads, not the model).
#pragma once
#include <cstdint>

namespace plainllama {

// Floats of scratch one thread needs for up to T queries against a cache of ctx positions.
int64_t attention_scratch_per_thread(int64_t T, int64_t ctx, int64_t head_dim);

// For T new tokens at positions pos0 .. pos0+T-1, whose keys and values are already in the cache:
//   out[t, h, :] = sum_{j <= pos0+t} softmax_j(q[t, h, :] . K[g, j, :] / sqrt(head_dim)) V[g, j, :]
// with g = h / (n_heads / n_kv_heads): consecutive query heads share one KV head.
//   q, out: [T, n_heads, head_dim]     k_cache, v_cache: [n_kv_heads, ctx, head_dim]
//   scratch: [omp_get_max_threads(), attention_scratch_per_thread(T, ctx, head_dim)]
// T > 1 (prefill) runs two GEMMs per head, S = Q K^T then O = softmax(S) V; T == 1 a direct loop.
void attention(float* out, const float* q, const float* k_cache, const float* v_cache, int64_t T, int64_t pos0,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t ctx, float* scratch);

}  // namespace plainllama
