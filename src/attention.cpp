#include "plainllama/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "plainllama/kernels.h"

namespace plainllama {

void attention(float* out, const float* q, const float* k_cache, const float* v_cache, int64_t T, int64_t pos0,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t ctx, float* scratch) {
    const int64_t group = n_heads / n_kv_heads;
    const float scale = 1.0f / std::sqrt(float(head_dim));
    const int64_t work = T * n_heads * (pos0 + T) * head_dim;
#pragma omp parallel for collapse(2) schedule(dynamic, 4) if (work >= (1 << 15))
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < n_heads; ++h) {
            const int64_t n = pos0 + t + 1;  // causal: keys 0 .. pos0+t
            const float* K = k_cache + (h / group) * ctx * head_dim;
            const float* V = v_cache + (h / group) * ctx * head_dim;
            const float* qh = q + (t * n_heads + h) * head_dim;
            float* s = scratch + int64_t(omp_get_thread_num()) * ctx;
            for (int64_t j = 0; j < n; ++j) s[j] = dot_f32(qh, K + j * head_dim, head_dim) * scale;
            softmax(s, n);
            float* o = out + (t * n_heads + h) * head_dim;
            std::fill(o, o + head_dim, 0.0f);
            for (int64_t j = 0; j < n; ++j) axpy_f32(o, s[j], V + j * head_dim, head_dim);
        }
    }
}

}  // namespace plainllama
