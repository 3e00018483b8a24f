#include "plainllama/membw.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "plainllama/error.h"
#include "plainllama/sysinfo.h"

namespace plainllama {

namespace {

constexpr size_t kBlock = 64;  // floats per loop step (256 bytes, four 64-byte lines)

// sum(p[0 .. n))     p: 64-byte aligned, n a multiple of kBlock. Four independent accumulators.
float sum_block_aligned(const float* p, size_t n) {
#if defined(__AVX512F__)
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += kBlock) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    alignas(64) float lanes[16];  // (GCC 12's _mm512_reduce_add_ps warns of an uninitialised temporary)
    _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    float s = 0.0f;
    for (float v : lanes) s += v;
    return s;
#elif defined(__AVX2__)
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += kBlock / 2) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
#else
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; ++i) s += p[i];
    return s;
#endif
}

// [begin, end) in floats of thread t's slice of n floats (n a multiple of kBlock).
void slice(size_t n, int t, int nt, size_t* begin, size_t* end) {
    const size_t blocks = n / kBlock;
    *begin = blocks * size_t(t) / size_t(nt) * kBlock;
    *end = blocks * size_t(t + 1) / size_t(nt) * kBlock;
}

struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
};

volatile float g_sink;  // keeps the sums alive

}  // namespace

double measure_read_bandwidth_gbs(size_t bytes, int passes) {
    if (bytes < 4096) throw Error("bandwidth test: buffer of " + std::to_string(bytes) + " bytes; expected >= 4096");
    if (passes < 1) throw Error("bandwidth test: " + std::to_string(passes) + " passes; expected >= 1");
    const size_t n = bytes / sizeof(float) / kBlock * kBlock;  // floats read per sweep
    const size_t alloc_bytes = n * sizeof(float);              // a multiple of 256, as aligned_alloc needs
    std::unique_ptr<float, FreeDeleter> buf(static_cast<float*>(std::aligned_alloc(64, alloc_bytes)));
    if (!buf) throw Error("out of memory allocating the bandwidth test buffer (" + std::to_string(alloc_bytes >> 20) +
                          " MiB)");
    float* p = buf.get();  // [n]
    const size_t min_bytes_per_pass = size_t(64) << 20;
    const size_t sweeps = std::max<size_t>(1, (min_bytes_per_pass + alloc_bytes - 1) / alloc_bytes);

#pragma omp parallel
    {
        size_t b, e;
        slice(n, omp_get_thread_num(), omp_get_num_threads(), &b, &e);
        for (size_t i = b; i < e; ++i) p[i] = float(i & 7) * 0.125f;
    }

    double best = 0.0;
    float total = 0.0f;
    for (int pass = 0; pass < passes; ++pass) {
        const auto t0 = std::chrono::steady_clock::now();
        float sum = 0.0f;
#pragma omp parallel reduction(+ : sum)
        {
            size_t b, e;
            slice(n, omp_get_thread_num(), omp_get_num_threads(), &b, &e);
            for (size_t s = 0; s < sweeps; ++s) sum += sum_block_aligned(p + b, e - b);
        }
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        total += sum;
        if (secs > 0) best = std::max(best, double(alloc_bytes) * double(sweeps) / secs / 1e9);
    }
    g_sink = total;
    return best;
}

size_t default_bandwidth_test_bytes() {
    const size_t llc = last_level_cache_bytes();
    if (llc == 0) return size_t(1) << 30;
    return std::clamp(8 * llc, size_t(256) << 20, size_t(4) << 30);
}

}  // namespace plainllama
