// Thread count: of the kernels' team (team.h) and of OpenMP's (loading, perplexity's contexts), one for the process.
#pragma once
#include <chrono>
#include <functional>

namespace plainllama {

// Physical cores (hyper-threads counted once), at least 1.
int physical_cores();
// Threads of this process that are runnable right now (state R in /proc/self/task/*/stat); 0 when unknown.
int own_running_threads();
// Cores that other processes keep busy right now: the fewest runnable tasks outside this process over up to
// `samples` readings of /proc/loadavg ("running/total" field) 10 ms apart, stopping at the first with none; 0 when
// unknown. A process runnable for a moment, as the reader at the other end of a pipe starting, is not counted.
int busy_cores(int samples = 5);
// busy_cores' readings over any count: the fewest of up to `samples` values of others() taken `gap` apart, stopping
// at the first 0; 0 as soon as one is negative (unknown).
int fewest_others(int samples, std::chrono::milliseconds gap, const std::function<int()>& others);
// Sets the thread count of the kernels (from any thread: serve's engine runs them on its own) and of this thread's
// OpenMP loops (omp_set_num_threads).
void set_threads(int n);
// The kernels' thread count: set_threads' n, or before any call omp_get_max_threads() (OMP_NUM_THREADS, else the CPUs).
int thread_count();

}  // namespace plainllama
