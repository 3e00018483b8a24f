// The kernels' team: threads kept for the whole process that run a parallel step f(0) .. f(n-1), the caller taking
// f(0). Between steps a worker spins on a cache line of its own for a while (kSpin in team.cpp), then sleeps, so the
// steps of a decoded token (about five per layer) start and end without a system call: an empty step costs about a
// round trip of a cache line between two cores, several times less than an empty OpenMP region (libgomp makes two
// futex calls per region, whatever OMP_WAIT_POLICY says).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "plainllama/sys/threads.h"

namespace plainllama {

// Runs f(t) for t in [0, n) and returns when all have returned: f(0) on the calling thread, the others on workers
// 1 .. n-1 of the team (made at the first call that needs them; those past n - 1 sit the step out). Inside a step
// (in_team_step()), while another thread's step runs, or with n <= 1, every f(t) runs in turn on the calling thread.
// An exception from any f(t) is rethrown on the calling thread once every part has returned.
void team_run(int n, void (*f)(void* ctx, int t), void* ctx);
template <class F>
void team_run(int n, const F& f) {
    team_run(
        n, [](void* ctx, int t) { (*static_cast<const F*>(ctx))(t); }, const_cast<F*>(&f));
}

// f(i, t) for every i in [0, n), in one step of nt parts (team_run: t is the part running it), the items handed out one
// at a time from a shared counter, so a part that finishes early takes more.
template <class F>
void team_for_each(int nt, int64_t n, const F& f) {
    std::atomic<int64_t> next{0};
    team_run(nt, [&](int t) {
        for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) f(i, t);
    });
}

// From a part of a step: [p, p + bytes) sent on its way into this core's L2 once the part has returned and this worker
// has reported it done (other parts may still run), before it waits for its next step (so the caller goes on meanwhile;
// the next step's part starts when the prefetches are issued). A hint for what this thread will read next; on the
// calling thread (part 0), and outside a step, nothing. At most kAfterStepRanges ranges per part (more are dropped).
constexpr int kAfterStepRanges = 4;
void prefetch_after_step(const void* p, size_t bytes);

// Whether this thread is running a step's f(t) (a kernel there keeps to this thread).
bool in_team_step();

// Whether work with `enough_work` for the threads runs as a step of the team: only with more than one thread
// (thread_count()) and not already inside a step or an OpenMP region (perplexity's contexts). Otherwise it runs in
// turn on the calling thread.
bool use_threads(bool enough_work);

// f(i) for i in [0, n): over the threads (an even split of [0, n), in order) when use_threads(parallel), else in turn
// on this thread.
template <class F>
void parallel_for(int64_t n, bool parallel, const F& f) {
    if (!use_threads(parallel)) {
        for (int64_t i = 0; i < n; ++i) f(i);
        return;
    }
    const int nt = thread_count();
    team_run(nt, [&](int t) {
        for (int64_t i = n * t / nt, end = n * (t + 1) / nt; i < end; ++i) f(i);
    });
}

}  // namespace plainllama
