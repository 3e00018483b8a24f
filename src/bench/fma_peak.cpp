#include "plainllama/bench/fma_peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "plainllama/kernels/kernels.h"
#include "plainllama/sys/team.h"
#include "plainllama/sys/threads.h"

namespace plainllama {

namespace {

volatile float g_fma_sink;  // keeps the chains alive

// One burst of reps steps on each of nt threads at once: the operations per second of them all.
double timed_burst(int nt, int64_t reps) {
    std::vector<double> flops(size_t(nt), 0.0);
    std::vector<float> sums(size_t(nt), 0.0f);
    const auto t0 = std::chrono::steady_clock::now();
    team_run(nt, [&](int t) { sums[size_t(t)] = fma_burst(reps, &flops[size_t(t)]); });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    float s = 0.0f;
    for (float v : sums) s += v;
    g_fma_sink = s;
    double total = 0.0;
    for (double f : flops) total += f;
    return secs > 0 ? total / secs : 0.0;
}

// The best rate of a few bursts on nt threads, each at least `seconds` long.
double best_rate(int nt, double seconds) {
    int64_t reps = 1 << 12;
    for (;;) {  // grow the burst until it lasts long enough to time
        const auto t0 = std::chrono::steady_clock::now();
        timed_burst(nt, reps);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (secs >= seconds || reps >= (int64_t(1) << 40)) break;
        reps = secs > 0 ? std::max(reps * 2, int64_t(double(reps) * seconds / secs * 1.2)) : reps * 16;
    }
    double best = 0.0;
    for (int i = 0; i < 5; ++i) best = std::max(best, timed_burst(nt, reps));
    return best;
}

}  // namespace

FmaPeak measure_fma_peak(double seconds) {
    FmaPeak p;
    p.threads = thread_count();
    p.thread_gflops = best_rate(1, seconds) / 1e9;
    p.gflops = best_rate(p.threads, seconds) / 1e9;
    return p;
}

}  // namespace plainllama
