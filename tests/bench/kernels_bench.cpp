// Micro-benchmarks of the hot kernels (Google Benchmark): matmul as decode (T = 1, memory-bound matvec), as a
// short prompt or chat turn (T = 2, 8, 32) and as prefill (T = 128: the GEMM, or for quantized matrices the integer
// products, tiled, and the dequantizing GEMM for N = 1000, not tiled) on LLaMA-7B-like shapes for every weight type,
// rmsnorm, and the element-wise steps (SwiGLU, softmax, the residual add); decode's quantized products streaming from
// memory beside the read bandwidth of the same minutes (BM_decode_stream), what a stream with a set amount of
// arithmetic per line reaches beside the same read (BM_stream_overlap), and attention at a depth.
//   bytes_per_second = weight bytes read per call (the honest figure for the memory-bound T = 1 case)
//   FLOP/s           = 2 T N K per call;  items_per_second = tokens
// Run e.g.: plainllama_microbench --benchmark_min_time=0.05 --benchmark_filter=matmul
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "plainllama/bench/read_bandwidth.h"
#include "plainllama/io/dtype.h"
#include "plainllama/kernels/attention.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/kernels/testing.h"
#include "plainllama/sys/team.h"
#include "plainllama/sys/threads.h"
#include "plainllama/sys/zeroed_pages.h"

namespace plainllama {
namespace {

// Random weights [n] of type t in [-1, 1).
std::vector<uint8_t> random_weights(DType t, size_t n) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<uint8_t> b(n * dtype_size(t));
    for (size_t i = 0; i < n; ++i) {
        const float f = d(rng);
        if (t == DType::F32) {
            std::memcpy(&b[i * 4], &f, 4);
        } else {
            const uint16_t h = t == DType::F16 ? f32_to_f16(f) : f32_to_bf16(f);
            std::memcpy(&b[i * 2], &h, 2);
        }
    }
    return b;
}

// Args: dtype (0 F32, 1 F16, 2 BF16, 3 BF16 with exact = true), T, N; K = 2048.
void BM_matmul(benchmark::State& state) {
    const DType t = state.range(0) == 0 ? DType::F32 : state.range(0) == 1 ? DType::F16 : DType::BF16;
    const bool exact = state.range(0) == 3;
    const int64_t T = state.range(1), N = state.range(2), K = 2048;
    const auto W = random_weights(t, size_t(N * K));  // [N, K]
    std::vector<float> x(size_t(T * K), 0.5f);        // [T, K]
    std::vector<float> out(size_t(T * N));            // [T, N]
    const PackedWeight packed(W.data(), t, N, K);
    matmul(out.data(), x.data(), packed.matrix(), T, exact);  // warm-up
    for (auto _ : state) {
        matmul(out.data(), x.data(), packed.matrix(), T, exact);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(W.size()));
    state.SetItemsProcessed(int64_t(state.iterations()) * T);
    state.counters["FLOP/s"] =
        benchmark::Counter(2.0 * double(T) * double(N) * double(K), benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(std::string(dtype_name(t)) + (exact ? " exact" : "") + " [" + std::to_string(N) + " x " +
                   std::to_string(K) + "] T=" + std::to_string(T));
}
BENCHMARK(BM_matmul)
    ->ArgNames({"dtype", "T", "N"})
    ->ArgsProduct({{0, 1, 2, 3}, {1, 2, 8, 32, 128}, {2048, 5632}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Quantized weights [N, 2048] from BF16 (Args: format 1 q8_0, 2 q4_k, 3 q6_k; T; N): bytes = the quantized matrix.
// N 1024 fits one core's L2 (about 1.2 MB in q4_k): with OMP_NUM_THREADS=1, the kernel's own rate.
void BM_matmul_quant(benchmark::State& state) {
    const QuantType q = QuantType(state.range(0));
    const int64_t T = state.range(1), N = state.range(2), K = 2048;
    const auto W = random_weights(DType::BF16, size_t(N * K));  // [N, K]
    std::vector<float> x(size_t(T * K));                        // [T, K]
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (float& v : x) v = d(rng);
    std::vector<float> out(size_t(T * N));  // [T, N]
    const PackedWeight packed(W.data(), DType::BF16, N, K, q);
    matmul(out.data(), x.data(), packed.matrix(), T);  // warm-up
    for (auto _ : state) {
        matmul(out.data(), x.data(), packed.matrix(), T);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(matrix_bytes(DType::BF16, q, N, K)));
    state.SetItemsProcessed(int64_t(state.iterations()) * T);
    state.counters["FLOP/s"] =
        benchmark::Counter(2.0 * double(T) * double(N) * double(K), benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(std::string(quant_name(q)) + " [" + std::to_string(N) + " x " + std::to_string(K) +
                   "] T=" + std::to_string(T));
}
BENCHMARK(BM_matmul_quant)
    ->ArgNames({"quant", "T", "N"})
    ->ArgsProduct({{1, 2, 3}, {1, 128}, {1000, 1024, 2048, 5632}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The read bandwidth of the same minutes beside a memory-bound benchmark: a streaming-read pass over `bytes` after each
// iteration with the timer paused, their mean reported as read_GB/s.
class ReadBeside {
   public:
    explicit ReadBeside(size_t bytes) : read_(bytes), bytes_(bytes) {}
    void pass(benchmark::State& state) {
        state.PauseTiming();
        sum_ += read_.pass(bytes_), ++passes_;
        state.ResumeTiming();
    }
    void report(benchmark::State& state) const {
        state.counters["read_GB/s"] = sum_ / double(std::max<int64_t>(1, passes_));
    }

   private:
    ReadBandwidthTest read_;
    size_t bytes_;
    double sum_ = 0;
    int64_t passes_ = 0;
};

// Decode's products as decode meets them: quantized [5632, 2048] matrices (TinyLlama's gate_proj), as many copies as
// make several times the last-level cache, each read once per iteration, so that every product streams from memory
// (Arg: the QuantType: 1 q8_0, 2 q4_k, 3 q6_k, 4 q4_0, 5 q5_0, 6 q5_k). Beside it, the read bandwidth of the same
// minutes: a streaming-read pass over as many bytes after each iteration (untimed); share = the products' bytes per
// second over the read's.
void BM_decode_stream(benchmark::State& state) {
    const QuantType q = QuantType(state.range(0));
    const int64_t N = 5632, K = 2048;
    const auto W = random_weights(DType::BF16, size_t(N * K));  // [N, K]
    std::vector<uint8_t> rows(size_t(N) * quant_row_bytes(q, K));
    quantize_rows(rows.data(), W.data(), DType::BF16, N, K, q);
    const size_t bytes = matrix_bytes(DType::BF16, q, N, K), total = size_t(4) * default_bandwidth_test_bytes() / 8;
    const size_t copies = std::max<size_t>(2, total / bytes);
    PackedWeights packed((bytes + 63) / 64 * 64 * copies);
    std::vector<PackedMatrix> mats;
    for (size_t i = 0; i < copies; ++i) mats.push_back(packed.add_quantized(rows.data(), q, N, K));
    std::vector<float> x(static_cast<size_t>(K), 0.5f), out(static_cast<size_t>(N));  // [K], [N]
    ReadBeside read(bytes * copies);
    for (auto _ : state) {
        for (const PackedMatrix& m : mats) matmul(out.data(), x.data(), m, 1);
        benchmark::DoNotOptimize(out.data());
        read.pass(state);
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes * copies));
    read.report(state);
    state.counters["GB/s"] =
        benchmark::Counter(double(bytes * copies) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(std::string(quant_name(q)) + " x" + std::to_string(copies));
}
BENCHMARK(BM_decode_stream)
    ->ArgName("quant")
    ->Arg(1)
    ->Arg(2)
    ->Arg(3)
    ->Arg(4)
    ->Arg(5)
    ->Arg(6)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Quantizing a BF16 matrix [1024, 2048] as at load (Arg: format as above): bytes = the BF16 source.
void BM_quantize(benchmark::State& state) {
    const QuantType q = QuantType(state.range(0));
    const int64_t N = 1024, K = 2048;
    const auto W = random_weights(DType::BF16, size_t(N * K));
    PackedWeights store((matrix_bytes(DType::BF16, q, N, K) + 63) / 64 * 64);
    for (auto _ : state) {
        store = PackedWeights((matrix_bytes(DType::BF16, q, N, K) + 63) / 64 * 64);
        benchmark::DoNotOptimize(store.add(W.data(), DType::BF16, N, K, q).data);
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(W.size()));
    state.SetLabel(quant_name(q));
}
BENCHMARK(BM_quantize)->ArgName("quant")->DenseRange(1, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

// rmsnorm on x: [512, 4096] f32; bytes = x read + y written + w read.
void BM_rmsnorm(benchmark::State& state) {
    const int64_t rows = 512, n = 4096;
    std::vector<float> x(size_t(rows * n)), y(size_t(rows * n)), w(size_t(n), 1.0f);
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> d(-2.0f, 2.0f);
    for (float& v : x) v = d(rng);
    rmsnorm(y.data(), x.data(), DType::F32, w.data(), DType::F32, rows, n, 1e-5f);  // warm-up
    for (auto _ : state) {
        rmsnorm(y.data(), x.data(), DType::F32, w.data(), DType::F32, rows, n, 1e-5f);
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t((2 * rows * n + n) * sizeof(float)));
    state.SetItemsProcessed(int64_t(state.iterations()) * rows);
}
BENCHMARK(BM_rmsnorm)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The element-wise steps of a prefill batch: silu_mul on gate, up [128, 5632] (TinyLlama's FFN) and add_inplace
// on [128, 2048]; items = elements. Each iteration restores g first (silu_mul works in place), timed with it.
void BM_silu_mul(benchmark::State& state) {
    const int64_t n = 128 * 5632;
    std::vector<float> g0(static_cast<size_t>(n)), g(static_cast<size_t>(n)), u(static_cast<size_t>(n));
    std::mt19937 rng(3);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (float& v : g0) v = d(rng);
    for (float& v : u) v = d(rng);
    for (auto _ : state) {
        std::copy(g0.begin(), g0.end(), g.begin());
        silu_mul(g.data(), u.data(), n);
        benchmark::DoNotOptimize(g.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * n);
}
BENCHMARK(BM_silu_mul)->Unit(benchmark::kMicrosecond)->UseRealTime();

// softmax over decode's attention scores: 32 query heads' rows of 2048 keys (TinyLlama at 2048 positions), one row
// after another on this thread, as attention's work items run them; items = elements. Each iteration restores the
// scores first (softmax works in place), timed with it.
void BM_softmax(benchmark::State& state) {
    const int64_t rows = 32, n = 2048;
    std::vector<float> s0(static_cast<size_t>(rows * n)), s(static_cast<size_t>(rows * n));
    std::mt19937 rng(4);
    std::normal_distribution<float> d(0.0f, 8.0f);
    for (float& v : s0) v = d(rng);
    for (auto _ : state) {
        std::copy(s0.begin(), s0.end(), s.begin());
        for (int64_t r = 0; r < rows; ++r) softmax(s.data() + r * n, n, 0.125f);
        benchmark::DoNotOptimize(s.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * rows * n);
}
BENCHMARK(BM_softmax)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_add_inplace(benchmark::State& state) {
    const int64_t n = 128 * 2048;
    std::vector<float> x(static_cast<size_t>(n), 1e-3f), y(static_cast<size_t>(n), 1.0f);
    for (auto _ : state) {
        add_inplace(y.data(), x.data(), n);
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * n);
}
BENCHMARK(BM_add_inplace)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Attention of one token (decode) or a 512-token batch (prefill) at a depth, TinyLlama's shape (32 query heads, 4 KV
// heads, head_dim 64), over 22 layers' caches in turn, as a decoded token reads them (cold: more than the last-level
// cache). Args: cache type (0 f32, 1 f16, 2 q8_0, 3 bf16), depth, tokens. bytes_per_second = the K and V bytes read.
void BM_attention(benchmark::State& state) {
    const CacheType type = CacheType(state.range(0));
    const int64_t depth = state.range(1), T = state.range(2), layers = 22, nh = 32, nkv = 4, hd = 64;
    const int64_t ctx = depth + T;
    std::vector<ZeroedPages> k, v;  // as a Context maps its cache
    std::vector<KvView> views;
    std::mt19937 rng(3);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> row(size_t(nkv * hd));
    for (int64_t l = 0; l < layers; ++l) {
        const size_t kb = key_cache_bytes(type, nkv, hd, ctx), vb = value_cache_bytes(type, nkv, hd, ctx);
        k.push_back(map_zeroed_pages(kb));
        v.push_back(map_zeroed_pages(vb));
        if (!k.back() || !v.back()) return state.SkipWithError("cannot map the caches");
        std::memset(k.back().get(), 0, kb);  // every page resident, whatever its size (not the shared zero page)
        std::memset(v.back().get(), 0, vb);
        views.push_back({type, k.back().get(), v.back().get(), nkv, hd, ctx});
        for (int64_t j = 0; j < ctx; j += 97) {  // a sample of positions: the rest stay zero
            for (float& x : row) x = d(rng);
            store_kv(views.back(), j, row.data(), row.data());
        }
    }
    std::vector<float> q(size_t(T * nh * hd)), out(q.size());
    for (float& x : q) x = d(rng);
    std::vector<float> scratch(size_t(attention_scratch(T, nh, nkv, ctx, hd, thread_count())));
    for (auto _ : state) {
        for (int64_t l = 0; l < layers; ++l)
            attention(out.data(), q.data(), views[size_t(l)], T, depth, nh, scratch.data());
        benchmark::DoNotOptimize(out.data());
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * layers * int64_t(kv_row_bytes(type, hd)) * 2 * nkv *
                            (depth + T));
    state.counters["us_per_layer"] = benchmark::Counter(double(state.iterations()) * double(layers) * 1e-6,
                                                        benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_attention)
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1024, 4096}, {1}})
    ->Args({1, 8192, 1})
    ->Args({1, 0, 512})
    ->Args({1, 3584, 512})
    ->Args({3, 0, 512})
    ->Args({3, 3584, 512})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// How much arithmetic a memory stream carries before it falls behind the read bandwidth, on this machine: every thread
// streams its half of a buffer several times the last-level cache once, two 64-byte lines per step, each line followed
// by kOps vpdpbusd (8 independent chains), with a prefetch of each line 4 KiB on (every) or of each page's first line
// a page on (page), or none. Beside it, the read bandwidth of the same minutes, as BM_decode_stream; Arg 1: the same
// stream over 256 KiB in L2, read 256 times (its rate in L2: the arithmetic alone). The decode kernels' shares of the
// read are measured against what a stream with as little arithmetic per line reaches here.
enum class Ahead { none, every, page };
template <int kOps, Ahead kAhead>
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) int64_t overlap_sweep(const uint8_t* p, size_t n) {
    __m512i a[8];
    for (__m512i& x : a) x = _mm512_setzero_si512();
    const __m512i s = _mm512_set1_epi8(3);
    for (size_t o = 0; o < n; o += 128) {
        const char* ahead = reinterpret_cast<const char*>(p + o + 4096);
        if constexpr (kAhead == Ahead::every) _mm_prefetch(ahead, _MM_HINT_T0), _mm_prefetch(ahead + 64, _MM_HINT_T0);
        if constexpr (kAhead == Ahead::page)
            if ((o & 4095) == 0) _mm_prefetch(ahead, _MM_HINT_T0);
        const __m512i v = _mm512_load_si512(p + o), w = _mm512_load_si512(p + o + 64);
        a[0] = _mm512_xor_si512(a[0], v), a[1] = _mm512_xor_si512(a[1], w);
        for (int i = 0; i < kOps; ++i) {
            a[(2 * i) % 8] = _mm512_dpbusd_epi32(a[(2 * i) % 8], v, s);
            a[(2 * i + 1) % 8] = _mm512_dpbusd_epi32(a[(2 * i + 1) % 8], w, s);
        }
    }
    for (int i = 1; i < 8; ++i) a[0] = _mm512_add_epi32(a[0], a[i]);
    alignas(64) int32_t lanes[16];
    _mm512_store_si512(lanes, a[0]);
    return std::accumulate(lanes, lanes + 16, int64_t(0));
}
template <int kOps, Ahead kAhead>
void BM_stream_overlap(benchmark::State& state) {
    if (!__builtin_cpu_supports("avx512vnni")) return state.SkipWithError("needs AVX512_VNNI");
    const bool in_l2 = state.range(0) == 1;
    const size_t total = in_l2 ? size_t(256) << 10 : size_t(4) * default_bandwidth_test_bytes() / 8;
    const int nt = thread_count(), reps = in_l2 ? 256 : 1;
    const size_t part = total / size_t(nt) / 128 * 128;
    const ZeroedPages mem = map_zeroed_pages(total);
    if (!mem) return state.SkipWithError("out of memory");
    uint8_t* buf = mem.get();
    team_run(nt, [&](int t) { std::memset(buf + size_t(t) * part, t + 1, part); });  // each part near its thread
    std::optional<ReadBeside> read;
    if (!in_l2) read.emplace(total);
    std::vector<int64_t> sums(static_cast<size_t>(nt));
    for (auto _ : state) {
        team_run(nt, [&](int t) {
            for (int r = 0; r < reps; ++r) sums[size_t(t)] += overlap_sweep<kOps, kAhead>(buf + size_t(t) * part, part);
        });
        benchmark::DoNotOptimize(sums.data());
        if (read) read->pass(state);
    }
    if (read) read->report(state);
    state.counters["GB/s"] =
        benchmark::Counter(double(part) * nt * reps * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
#define PL_OVERLAP(ops, ahead) \
    BENCHMARK(BM_stream_overlap<ops, Ahead::ahead>)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()
PL_OVERLAP(0, none);
PL_OVERLAP(2, none);
PL_OVERLAP(2, every);
PL_OVERLAP(2, page);
PL_OVERLAP(4, none);
PL_OVERLAP(6, none);
PL_OVERLAP(6, every);
PL_OVERLAP(10, none);
PL_OVERLAP(10, every);
#undef PL_OVERLAP

}  // namespace
}  // namespace plainllama
