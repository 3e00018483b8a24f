// The row and element-wise kernels (RMSNorm, softmax, SwiGLU, residual add, RoPE, conversions): the work split
// over threads here, the loops in the active ISA table (isa.h, elementwise.inc).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "isa/isa.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/kernels/testing.h"
#include "plainllama/sys/error.h"
#include "plainllama/sys/team.h"

namespace plainllama {
namespace {

// f32 [n] back to 16-bit storage, rounding to nearest even.
void narrow(void* out, const float* src, DType t, int64_t n) {
    uint16_t* o = static_cast<uint16_t*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = t == DType::F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
}

// f(begin, end) over [0, n): in pieces of `piece` over the threads when n >= threshold (use_threads), else at once.
template <class F>
void split(int64_t n, int64_t piece, int64_t threshold, const F& f) {
    if (!use_threads(n >= threshold)) return f(int64_t(0), n);
    parallel_for((n + piece - 1) / piece, true, [&](int64_t i) { f(i * piece, std::min(n, (i + 1) * piece)); });
}

}  // namespace

void rmsnorm(void* y, const void* x, DType xt, const void* w, DType wt, int64_t rows, int64_t n, float eps) {
    const isa::Kernels& ks = isa::active();
    static thread_local std::vector<float> w_buf;  // [n] w widened once per call, not once per row
    if (w_buf.size() < size_t(n)) w_buf.resize(size_t(n));
    const float* wf = w_buf.data();
    convert_to_f32(w_buf.data(), w, wt, n);
    const size_t es = dtype_size(xt);
    parallel_for(rows, rows * n >= kParallelWork && rows > 1, [&](int64_t r) {
        // F32 rows are read and written in place; 16-bit ones through a per-thread f32 row.
        const float* xr;
        float* yr;
        if (xt == DType::F32) {
            xr = static_cast<const float*>(x) + r * n;
            yr = static_cast<float*>(y) + r * n;
        } else {
            yr = isa::thread_buffer(size_t(n));
            convert_to_f32(yr, static_cast<const uint8_t*>(x) + size_t(r * n) * es, xt, n);
            xr = yr;
        }
        // The mean square in double (ISA table): exact to about an f32 ulp whatever n, and no overflow.
        const double ss = ks.sum_squares(xr, n);
        const float scale = float(1.0 / std::sqrt(ss / double(n) + double(eps)));
        ks.scale_mul(yr, xr, scale, wf, n);
        if (xt != DType::F32) narrow(static_cast<uint8_t*>(y) + size_t(r * n) * es, yr, xt, n);
    });
}

void convert_to_f32(float* out, const void* src, DType t, int64_t n) {
    switch (t) {
        case DType::F32:
            return void(std::memcpy(out, src, size_t(n) * sizeof(float)));
        case DType::F16:
            return isa::active().widen_f16(out, static_cast<const isa::F16*>(src), n);
        case DType::BF16:
            return isa::active().widen_bf16(out, static_cast<const isa::BF16*>(src), n);
        case DType::U8:
            break;
    }
    PL_CHECK(false && "convert_to_f32 of U8 (quantized blocks have no element type)");
}

void rope_rotate_half(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) {
    isa::active().rope_rotate_half(x, n_heads, head_dim, cos, sin);
}

void softmax(float* x, int64_t n, float scale) { isa::active().softmax(x, n, scale); }

void silu_mul(float* g, const float* u, int64_t n) {
    const isa::Kernels& ks = isa::active();
    split(n, 4096, kParallelWork, [&](int64_t b, int64_t e) { ks.silu_mul(g + b, u + b, e - b); });
}

void add_inplace(float* y, const float* x, int64_t n) {
    const isa::Kernels& ks = isa::active();
    split(n, 16384, 4 * kParallelWork, [&](int64_t b, int64_t e) { ks.add(y + b, x + b, e - b); });
}

float sum_stream(const float* p, int64_t n, ReadWay way) { return isa::active().sum_stream(p, n, way); }

float fma_burst(int64_t reps, double* ops) { return isa::active().fma_burst(reps, ops); }

void matmul_reference(float* out, const float* x, const void* W, DType wt, int64_t T, int64_t N, int64_t K) {
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t r = 0; r < N; ++r) {
        convert_to_f32(row.data(), static_cast<const uint8_t*>(W) + r * K * int64_t(dtype_size(wt)), wt, K);
        for (int64_t t = 0; t < T; ++t) {
            double a = 0.0;
            for (int64_t k = 0; k < K; ++k) a += double(x[t * K + k]) * double(row[size_t(k)]);
            out[t * N + r] = float(a);
        }
    }
}

}  // namespace plainllama
