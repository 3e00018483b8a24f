#include "plainllama/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "plainllama/kernels.h"

namespace plainllama {

int64_t attention_scratch_per_thread(int64_t T, int64_t ctx, int64_t head_dim) {
    return T == 1 ? ctx : 2 * T * head_dim + head_dim * ctx + T * ctx;
}

namespace {

// One query against keys 0 .. n-1 of one KV head.     q, out: [head_dim]; K, V: [ctx, head_dim]; s: [n]
void attend_one(float* out, const float* q, const float* K, const float* V, int64_t n, int64_t hd, float scale,
                float* s) {
    for (int64_t j = 0; j < n; ++j) {
        const float* k = K + j * hd;
        float d = 0.0f;
#pragma omp simd reduction(+ : d)
        for (int64_t i = 0; i < hd; ++i) d += q[i] * k[i];
        s[j] = d * scale;
    }
    softmax(s, n);
    std::fill(out, out + hd, 0.0f);
    for (int64_t j = 0; j < n; ++j) {
        const float* v = V + j * hd;
        const float p = s[j];
#pragma omp simd
        for (int64_t i = 0; i < hd; ++i) out[i] += p * v[i];
    }
}

}  // namespace

void attention(float* out, const float* q, const float* k_cache, const float* v_cache, int64_t T, int64_t pos0,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t ctx, float* scratch) {
    const int64_t group = n_heads / n_kv_heads, hd = head_dim, n_keys = pos0 + T;
    const float scale = 1.0f / std::sqrt(float(hd));
    const int64_t per_thread = attention_scratch_per_thread(T, ctx, hd);
    if (T == 1) {
#pragma omp parallel for schedule(static) if (n_heads * n_keys * hd >= (1 << 17))
        for (int64_t h = 0; h < n_heads; ++h) {
            const int64_t g = h / group;
            attend_one(out + h * hd, q + h * hd, k_cache + g * ctx * hd, v_cache + g * ctx * hd, n_keys, hd, scale,
                       scratch + omp_get_thread_num() * per_thread);
        }
        return;
    }
#pragma omp parallel for schedule(dynamic, 1) if (T * n_keys * hd >= (1 << 17))
    for (int64_t h = 0; h < n_heads; ++h) {
        const int64_t g = h / group;
        const float* K = k_cache + g * ctx * hd;  // [n_keys, hd] used
        const float* V = v_cache + g * ctx * hd;
        float* Qh = scratch + omp_get_thread_num() * per_thread;  // [T, hd]
        float* Oh = Qh + T * hd;                                   // [T, hd]
        float* Vt = Oh + T * hd;                                   // [hd, n_keys]
        float* S = Vt + hd * ctx;                                  // [T, n_keys]
        for (int64_t t = 0; t < T; ++t) std::copy_n(q + (t * n_heads + h) * hd, hd, Qh + t * hd);
        matmul(S, Qh, K, DType::F32, T, n_keys, hd);  // inside this parallel loop: runs on this thread
        for (int64_t t = 0; t < T; ++t) {
            float* row = S + t * n_keys;
            const int64_t n = pos0 + t + 1;  // causal: keys 0 .. pos0+t
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) row[j] *= scale;
            softmax(row, n);
            std::fill(row + n, row + n_keys, 0.0f);
        }
        for (int64_t j = 0; j < n_keys; ++j)
            for (int64_t i = 0; i < hd; ++i) Vt[i * n_keys + j] = V[j * hd + i];
        matmul(Oh, S, Vt, DType::F32, T, hd, n_keys);
        for (int64_t t = 0; t < T; ++t) std::copy_n(Oh + t * hd, hd, out + (t * n_heads + h) * hd);
    }
}

}  // namespace plainllama
