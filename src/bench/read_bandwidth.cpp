#include "plainllama/bench/read_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include "plainllama/kernels/kernels.h"
#include "plainllama/sys/error.h"
#include "plainllama/sys/sysinfo.h"
#include "plainllama/sys/team.h"
#include "plainllama/sys/threads.h"

namespace plainllama {

namespace {

constexpr size_t kBlock = 64;  // floats per step of sum_stream (256 bytes)

// [begin, end) in floats of thread t's slice of n floats (n a multiple of kBlock).
void slice(size_t n, int t, int nt, size_t* begin, size_t* end) {
    const size_t blocks = n / kBlock;
    *begin = blocks * size_t(t) / size_t(nt) * kBlock;
    *end = blocks * size_t(t + 1) / size_t(nt) * kBlock;
}

volatile float g_sink;  // keeps the sums alive

// The ways a pass reads (see pass()).
constexpr ReadWay kWays[] = {ReadWay::plain, ReadWay::prefetch_lines, ReadWay::prefetch_pages};

// `sweeps` reads of the n floats of buffer p [n_total] from `first` on (on from the start past the end), every thread
// its own slice, sum_stream's way `way`: the rate in 1e9 bytes per second.
double timed_read(const float* p, size_t n_total, size_t first, size_t n, size_t sweeps, ReadWay way) {
    const int nt = thread_count();
    std::vector<float> sums(size_t(nt), 0.0f);
    const auto t0 = std::chrono::steady_clock::now();
    team_run(nt, [&](int t) {
        size_t b, e;
        slice(n, t, nt, &b, &e);
        b += first, e += first;
        float sum = 0.0f;
        for (size_t s = 0; s < sweeps; ++s) {
            if (b < n_total) sum += sum_stream(p + b, int64_t(std::min(e, n_total) - b), way);
            if (e > n_total)
                sum += sum_stream(p + std::max(b, n_total) - n_total, int64_t(e - std::max(b, n_total)), way);
        }
        sums[size_t(t)] = sum;
    });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    g_sink = std::accumulate(sums.begin(), sums.end(), 0.0f);
    return secs > 0 ? double(n * sizeof(float)) * double(sweeps) / secs / 1e9 : 0.0;
}

}  // namespace

ReadBandwidthTest::ReadBandwidthTest(size_t bytes) {
    if (bytes < 4096) throw Error("bandwidth test: buffer of " + std::to_string(bytes) + " bytes; expected >= 4096");
    n_ = bytes / sizeof(float) / kBlock * kBlock;  // floats read per sweep
    mem_ = map_zeroed_pages(n_ * sizeof(float));   // on huge pages, as the packed weights: no TLB miss per 4 KiB page
    if (!mem_)
        throw Error("out of memory allocating the bandwidth test buffer (" +
                    std::to_string((n_ * sizeof(float)) >> 20) + " MiB)");
    const size_t min_bytes_per_pass = size_t(64) << 20;
    sweeps_ = std::max<size_t>(1, (min_bytes_per_pass + n_ * sizeof(float) - 1) / (n_ * sizeof(float)));
    const int nt = thread_count();
    team_run(nt, [&](int t) {
        size_t b, e;
        slice(n_, t, nt, &b, &e);
        float* const x = p();
        for (size_t i = b; i < e; ++i) x[i] = float(i & 7) * 0.125f;
    });
}

// Each pass reads the bytes three times, with plain loads, with a prefetch of every line and with one of each 4 KiB
// page's first line, and reports the fastest: which reads fastest depends on the CPU, as for the decode kernels
// (src/kernels/isa/policy.h), so the roofline is the read the CPU's own best way gets.
double ReadBandwidthTest::pass() {
    double gbs = 0.0;
    for (ReadWay way : kWays) gbs = std::max(gbs, timed_read(p(), n_, 0, n_, sweeps_, way));
    return gbs;
}

double ReadBandwidthTest::pass(size_t bytes) {
    const size_t n = std::clamp<size_t>(bytes / sizeof(float) / kBlock, 1, n_ / kBlock) * kBlock;  // floats read
    double gbs = 0.0;
    for (ReadWay way : kWays) {  // each from where the last stopped: none finds another's bytes cached
        gbs = std::max(gbs, timed_read(p(), n_, next_, n, 1, way));
        next_ = (next_ + n) % n_;
    }
    return gbs;
}

size_t default_bandwidth_test_bytes() {
    return std::clamp(8 * last_level_cache_bytes(), size_t(1) << 30, size_t(4) << 30);
}

}  // namespace plainllama
