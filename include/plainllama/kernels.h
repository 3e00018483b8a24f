// Compute kernels. They know nothing of the model: plain arrays, shapes and storage types.
// Row-major throughout; weights may be F32, F16 or BF16 and are converted inside the kernels.
#pragma once
#include <cstdint>

#include "plainllama/dtype.h"

namespace plainllama {

// y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w[:]     x, y: [rows, n] of type xt; w: [n] of wt.
// The mean square is accumulated in f32 (double across SIMD lanes' partial sums is not needed).
void rmsnorm(void* y, const void* x, DType xt, const void* w, DType wt, int64_t rows, int64_t n, float eps);

// out[t, r] = sum_k x[t, k] * W[r, k]     x: [T, K] f32, W: [N, K] of wt, out: [T, N] f32.
// T == 1 runs the memory-bound matvec, T > 1 a packed, register-blocked GEMM. OpenMP inside.
// BF16 weights with T > 1: unless `exact`, x is rounded to BF16 so that AVX512_BF16's vdpbf16ps (exact
// products, f32 sums, twice the f32 FMA rate) can run: what llama.cpp does for BF16 weights. The extra
// error is at most 2^-8 * sum_k |x[t, k] W[r, k]|.
void matmul(float* out, const float* x, const void* W, DType wt, int64_t T, int64_t N, int64_t K, bool exact = false);

// Several products of the same input x [T, K]: jobs[i].out [T, N_i] = x W_i^T. With T == 1 the rows of
// all W_i are split over the threads in one parallel region (one barrier instead of one per matrix).
struct MatmulJob {
    float* out;
    const void* W;  // [N, K]
    DType wt;
    int64_t N;
};
void matmul_many(const MatmulJob* jobs, int n_jobs, const float* x, int64_t T, int64_t K, bool exact = false);

// Scalar reference of matmul, in double: the tests' yardstick.
void matmul_reference(float* out, const float* x, const void* W, DType wt, int64_t T, int64_t N, int64_t K);

// out[i] = float(src[i])     src: [n] of type t.
void convert_to_f32(float* out, const void* src, DType t, int64_t n);

// Rotate-half RoPE on one token: x [n_heads, head_dim]; element i pairs with i + head_dim/2:
// (a, b) -> (a*cos - b*sin, b*cos + a*sin), cos/sin: [head_dim/2] for this position.
void rope_rotate_half(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin);

// x = softmax(x) in place, subtracting the max first.     x: [n]
void softmax(float* x, int64_t n);

// g[i] = silu(g[i]) * u[i]     g, u: [n]
void silu_mul(float* g, const float* u, int64_t n);

// y[i] += x[i]     x, y: [n]
void add_inplace(float* y, const float* x, int64_t n);

// sum_i a[i] * b[i]     a, b: [n] f32
float dot_f32(const float* a, const float* b, int64_t n);

// y[i] += s * x[i]     x, y: [n] f32
void axpy_f32(float* y, float s, const float* x, int64_t n);

}  // namespace plainllama
