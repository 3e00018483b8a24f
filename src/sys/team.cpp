// The kernels' team (team.h): workers that each wait for their next step on a cache line of their own, spinning, then
// asleep.
#include "plainllama/sys/team.h"

#include <immintrin.h>
#include <omp.h>
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace plainllama {
namespace {

thread_local bool t_in_step = false;
thread_local bool t_worker = false;

// What this worker prefetches after its part of the current step (prefetch_after_step).
struct Range {
    const char* p;
    size_t bytes;
};
thread_local Range t_after[kAfterStepRanges];
thread_local int t_n_after = 0;

// (The ranges may have been freed by the time they are prefetched, as a test's matrices right after its call: a
// prefetch never faults.)
void prefetch_after() {
    for (int i = 0; i < t_n_after; ++i)
        for (size_t o = 0; o < t_after[i].bytes; o += 64) __builtin_prefetch(t_after[i].p + o, 0, 2);
    t_n_after = 0;
}

// How long an idle worker spins before it sleeps: longer than the gaps between the steps of a token (the one-thread
// steps between two products, sampling between tokens: tens of microseconds), short enough that a worker gives its
// core back soon when the kernels stop. A sleeping worker takes a futex wake-up, some microseconds, for its next step.
// With OMP_WAIT_POLICY=passive (as libgomp's threads; the tests set it for each other's sake) a worker sleeps at once.
// libgomp's own threads (loading, perplexity's contexts) follow their own settings (GOMP_SPINCOUNT), not this.
constexpr auto kSpin = std::chrono::microseconds(500);
std::chrono::microseconds spin_time() {
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    return policy && strcasecmp(policy, "passive") == 0 ? std::chrono::microseconds(0) : kSpin;
}

// Parts 0 and skip + 1 .. n-1 of a step, in turn on this thread, inside the step (in_team_step); every one runs, and
// the first exception is returned.
std::exception_ptr run_here(void (*f)(void*, int), void* ctx, int skip, int n) {
    const bool outer = t_in_step;
    t_in_step = true;
    std::exception_ptr error;
    for (int t = 0; t < n; t = t == 0 ? skip + 1 : t + 1) try {
            f(ctx, t);
        } catch (...) {
            if (!error) error = std::current_exception();
        }
    t_in_step = outer;
    return error;
}

// Made at the first step and never destroyed: the process ends its workers (another thread's step may still be
// running while exit() runs the static destructors).
class Team {
   public:
    // false when another thread's step holds the team
    bool try_run(int n, void (*f)(void*, int), void* ctx) {
        std::unique_lock<std::mutex> lock(run_mutex_, std::try_to_lock);
        if (!lock) return false;
        if (int(workers_.size()) < n - 1) workers_.reserve(size_t(n - 1));  // no throw once a thread is made
        while (int(workers_.size()) < n - 1) {
            auto w = std::make_unique<Worker>();
            try {
                w->thread = std::thread([this, p = w.get(), id = int(workers_.size()) + 1] { work(p, id); });
            } catch (const std::system_error&) {
                break;  // no more threads: the caller runs the parts that have none
            }
            workers_.push_back(std::move(w));
        }
        const int helped = std::min(n - 1, int(workers_.size()));  // parts 1 .. helped go to workers 1 .. helped
        f_ = f, ctx_ = ctx, error_ = nullptr;
        pending_.store(helped, std::memory_order_relaxed);
        ++step_;
        bool wake = false;
        for (int i = 0; i < helped; ++i) {
            workers_[size_t(i)]->step.store(step_);  // seq_cst: against its `asleep`
            wake = wake || workers_[size_t(i)]->asleep.load();
        }
        if (wake) {
            std::lock_guard<std::mutex> sleep_lock(sleep_mutex_);
            wake_.notify_all();
        }
        std::exception_ptr error = run_here(f, ctx, helped, n);
        for (unsigned i = 0; pending_.load(std::memory_order_acquire) != 0; i = std::min(i + 1, 1u << 20)) {
            _mm_pause();
            if (i >= 4096) std::this_thread::yield();  // a worker without a core (a busy machine): let it run
        }
        if (!error) error = error_;
        if (error) std::rethrow_exception(error);
        return true;
    }

   private:
    struct alignas(64) Worker {         // a cache line of its own: the caller writes it, the worker spins on it
        std::atomic<uint64_t> step{0};  // the last step it was given
        std::atomic<bool> asleep{false};
        std::thread thread;
    };

    [[noreturn]] void work(Worker* w, int id) {
        t_in_step = true;  // a worker runs nothing but parts of steps
        t_worker = true;
        for (uint64_t seen = 0;;) {
            seen = next_step(w, seen);
            try {
                f_(ctx_, id);
            } catch (...) {
                std::lock_guard<std::mutex> lock(error_mutex_);
                if (!error_) error_ = std::current_exception();
            }
            pending_.fetch_sub(1, std::memory_order_release);
            prefetch_after();
        }
    }

    // The worker's step after `seen`: spinning for spin_, then asleep.
    uint64_t next_step(Worker* w, uint64_t seen) {
        const auto until = std::chrono::steady_clock::now() + spin_;
        for (int i = 1; spin_.count() > 0; ++i) {
            const uint64_t s = w->step.load(std::memory_order_acquire);
            if (s != seen) return s;
            _mm_pause();
            if (i % 256 == 0) {
                if (std::chrono::steady_clock::now() > until) break;
                i = 0;
            }
        }
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        w->asleep.store(true);  // seq_cst: the caller reads it after giving the step
        wake_.wait(lock, [&] { return w->step.load() != seen; });
        w->asleep.store(false);
        return w->step.load(std::memory_order_acquire);
    }

    void (*f_)(void*, int) = nullptr;  // the step (written before the workers' `step` is raised)
    void* ctx_ = nullptr;
    uint64_t step_ = 0;
    std::exception_ptr error_;                 // the first a worker's part threw
    alignas(64) std::atomic<int> pending_{0};  // workers yet to finish the step
    std::mutex run_mutex_, sleep_mutex_, error_mutex_;
    std::condition_variable wake_;
    std::vector<std::unique_ptr<Worker>> workers_;
    const std::chrono::microseconds spin_ = spin_time();
};

Team& team() {
    static Team* t = new Team;
    return *t;
}

}  // namespace

void team_run(int n, void (*f)(void* ctx, int t), void* ctx) {
    if (n > 1 && !t_in_step && team().try_run(n, f, ctx)) return;
    if (std::exception_ptr error = run_here(f, ctx, 0, n)) std::rethrow_exception(error);
}

bool in_team_step() { return t_in_step; }

bool use_threads(bool enough_work) {
    return enough_work && thread_count() > 1 && !omp_in_parallel() && !in_team_step();
}

void prefetch_after_step(const void* p, size_t bytes) {
    if (t_worker && t_n_after < kAfterStepRanges) t_after[t_n_after++] = {static_cast<const char*>(p), bytes};
}

}  // namespace plainllama
