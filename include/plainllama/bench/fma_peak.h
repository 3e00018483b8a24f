// A short FMA peak test: the roofline that compute-bound prompt processing is measured against (bench). It runs the
// active kernels' widest multiply-add chains (kernels.h, fma_burst), so that it computes as the prefill tiles do.
#pragma once

namespace plainllama {

struct FmaPeak {
    double gflops = 0;         // every thread of the team at once, 1e9 floating-point operations per second
    double thread_gflops = 0;  // one thread alone
    int threads = 0;           // the team's threads in the first figure
};

// The best of a few timed bursts of independent multiply-add chains held in registers (a multiply-add counts two
// operations): on one thread, then on every thread of the kernels' team (sys/team.h) at once, each burst lasting at
// least `seconds`.
FmaPeak measure_fma_peak(double seconds = 0.05);

}  // namespace plainllama
