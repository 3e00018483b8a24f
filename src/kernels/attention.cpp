#include "plainllama/kernels/attention.h"

#include <algorithm>
#include <cmath>

#include "plainllama/kernels/kernels.h"
#include "plainllama/sys/team.h"

namespace plainllama {

namespace {
constexpr int64_t kTokenChunk = 32;  // query tokens per work item
// Decode's attention reads K and V rows that the weights streamed since the last token have pushed out of every cache:
// its work items go to the threads from a sixteenth of kParallelWork (QK multiply-adds), and each item prefetches the
// K and V lines it reads before its products, so that the misses overlap rather than follow one another (each helps
// alone, more together). At most the first kPrefetchBytes of each: the hardware prefetcher follows a run
// once started, and a long context's rows would not all stay in L2 until they are read (prefill reuses them too).
constexpr int64_t kParallelAttention = kParallelWork / 16;
constexpr size_t kPrefetchBytes = 64 << 10;

// The lines of [p, p + min(bytes, kPrefetchBytes)) on their way into the caches.
void prefetch_lines(const void* p, size_t bytes) {
    for (size_t o = 0; o < std::min(bytes, kPrefetchBytes); o += 64)
        __builtin_prefetch(static_cast<const char*>(p) + o, 0, 3);
}
}  // namespace

int64_t key_cache_positions(int64_t ctx) { return (ctx + kPanel - 1) / kPanel * kPanel; }

void store_key(float* k_cache, const float* k, int64_t g, int64_t j, int64_t head_dim, int64_t ctx) {
    float* dst = k_cache + key_cache_index(g, j, 0, head_dim, ctx);
    for (int64_t i = 0; i < head_dim; ++i) dst[i * kPanel] = k[i];
}

int64_t attention_scratch_per_thread(int64_t T, int64_t group, int64_t ctx, int64_t head_dim) {
    const int64_t rows = std::min(T, kTokenChunk) * group;
    return 2 * rows * head_dim + rows * ctx;
}

void attention(float* out, const float* q, const float* k_cache, const float* v_cache, int64_t T, int64_t pos0,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t ctx, float* scratch) {
    const int64_t group = n_heads / n_kv_heads, hd = head_dim;
    const float scale = 1.0f / std::sqrt(float(hd));
    const int64_t per_thread = attention_scratch_per_thread(T, group, ctx, hd);
    const int64_t chunks = (T + kTokenChunk - 1) / kTokenChunk;
    // Work items: (chunk of tokens, KV head, part of its query heads), the last chunks (most keys) first. The
    // group's query heads are split only when there are fewer (chunk, KV head) pairs than threads (decode with
    // few KV heads); each output row is computed alike either way.
    const int64_t threads = thread_count(), pairs = n_kv_heads * chunks;
    const int64_t want = (threads + pairs - 1) / pairs, per_part = pairs >= threads ? group : (group + want - 1) / want;
    const int64_t parts = (group + per_part - 1) / per_part, items = pairs * parts;
    auto item = [&](int64_t it, int slot) {  // slot: this thread's part of scratch
        const int64_t c = chunks - 1 - it / (n_kv_heads * parts), g = it / parts % n_kv_heads, part = it % parts;
        const int64_t h0 = g * group + part * per_part, nq = std::min(per_part, group - part * per_part);
        const int64_t t0 = c * kTokenChunk, t1 = std::min(T, t0 + kTokenChunk), rows = (t1 - t0) * nq;
        const int64_t n_keys = pos0 + t1;         // what the chunk's last token sees
        const PackedMatrix K{k_cache + g * key_cache_positions(ctx) * hd, DType::F32, n_keys, hd};  // [n_keys, hd]
        const float* V = v_cache + g * ctx * hd;                                                    // [ctx, hd]
        prefetch_lines(K.data, size_t(key_cache_positions(n_keys) * hd) * sizeof(float));  // whole key panels
        prefetch_lines(V, size_t(n_keys * hd) * sizeof(float));
        float* Q = scratch + slot * per_thread;  // [rows, hd]: row (t - t0) * nq + i is head h0 + i
        float* O = Q + rows * hd;                                 // [rows, hd]
        float* S = O + rows * hd;                                 // [rows, n_keys]
        for (int64_t t = t0; t < t1; ++t) std::copy_n(q + (t * n_heads + h0) * hd, nq * hd, Q + (t - t0) * nq * hd);
        matmul(S, Q, K, rows);  // in a team step or on one thread: runs on this thread
        for (int64_t r = 0; r < rows; ++r) {
            float* row = S + r * n_keys;
            softmax(row, pos0 + t0 + r / nq + 1, scale);  // causal: keys 0 .. pos0 + t
        }
        // O = P V over the keys each row sees: the ones before the chunk (every row's) as a product, then each
        // row's own keys inside the chunk continuing the same fma chain. A later token's V is never read, so
        // it cannot reach an earlier token (0 * Inf), and token t's sum is the one decoding t alone computes.
        const int64_t shared = pos0 + t0;
        if (shared > 0)
            matmul_nn(O, S, n_keys, V, rows, hd, shared);
        else
            std::fill_n(O, rows * hd, 0.0f);
        for (int64_t r = 0; r < rows; ++r)
            gemv_acc(O + r * hd, S + r * n_keys + shared, V + shared * hd, r / nq + 1, hd);
        for (int64_t t = t0; t < t1; ++t) std::copy_n(O + (t - t0) * nq * hd, nq * hd, out + (t * n_heads + h0) * hd);
    };
    if (!use_threads(n_heads * T * (pos0 + T) * hd >= kParallelAttention)) {
        for (int64_t it = 0; it < items; ++it) item(it, 0);
        return;
    }
    team_for_each(int(threads), items, item);
}

}  // namespace plainllama
