// Causal grouped-query attention over a KV cache (kv_cache.h; a kernel: it knows heads, not the model).
#pragma once
#include <cstdint>

#include "plainllama/kernels/kernels.h"
#include "plainllama/kernels/kv_cache.h"

namespace plainllama {

// The summation order. Keys are cut into tiles of kKeyTile positions at fixed places (tile i: keys kKeyTile i ..
// kKeyTile (i + 1) - 1). For each query row and each tile it sees, attention computes the tile's partial softmax state:
// the scores s_j = q . k_j (one fma chain over head_dim, as matmul), m = max(s_j / sqrt(head_dim)), p_j = e^(s_j /
// sqrt(head_dim) - m), l = sum p_j (the kernel's lanes), o = sum_j p_j v_j (one fma chain over the tile's keys in
// order). The states of the tiles then fold left in tile order: M = max(m, m'), o = o e^(m - M) + o' e^(m' - M),
// l likewise, and out = o / l. A prompt's token and the same token decoded alone see the same tiles and fold them the
// same way, whichever thread computed which tile, so decode equals prefill bit for bit.
constexpr int64_t kKeyTile = 256;

// Whether attention over a cache of this type and head_dim takes its products in BF16 (on the active kernels): for a
// bf16 cache on CPUs with AVX512_BF16 (head_dim a multiple of 32), q and e^(s - m) are rounded to nearest BF16 and
// multiplied with the stored keys and values by vdpbf16ps in pairs, twice the multiply-adds per instruction: each score
// and each o a chain of vdpbf16ps over pairs of dimensions (of keys) in order, the instruction's own way of adding a
// pair's two exact products (inputs and results below the normal range flushed to zero), and a row's last key alone
// when it sees an odd number; the tiles and the fold as above, so decode still equals prefill bit for bit. Elsewhere
// a bf16 cache is widened exactly to f32.
bool attention_bf16_products(CacheType type, int64_t head_dim);

// Floats of scratch attention needs for up to T tokens' queries against a cache of ctx positions, with `threads`
// threads.
int64_t attention_scratch(int64_t T, int64_t n_heads, int64_t n_kv_heads, int64_t ctx, int64_t head_dim,
                          int64_t threads);

// For T new tokens at positions pos0 .. pos0+T-1, whose keys and values are already in the cache:
//   out[t, h, :] = sum_{j <= pos0+t} softmax_j(q[t, h, :] . K[g, j, :] / sqrt(head_dim)) V[g, j, :]
// with g = h / (n_heads / n_kv_heads): consecutive query heads share one KV head.
//   q, out: [T, n_heads, head_dim]     scratch: attention_scratch(T, ..., thread_count()) floats
// Work items are (chunk of 32 tokens, KV head, part of its query heads), flash-attention style: each goes over its
// tiles of keys in order, S = Q K^T for one tile (never a [tokens x positions] matrix), its partial softmax and P V,
// folded as above. Decode (T == 1) with several tiles splits a head's tiles over the threads (flash-decoding): each
// tile's state is kept, and the calling thread folds them in order. Inside a tile, a later token of a chunk gets a
// score in an earlier token's row of S, but it never enters that row's softmax or P V (an Inf or NaN in its K or V
// cannot reach the earlier token).
void attention(float* out, const float* q, const KvView& kv, int64_t T, int64_t pos0, int64_t n_heads, float* scratch);

}  // namespace plainllama
