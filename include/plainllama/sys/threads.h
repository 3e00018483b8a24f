// Thread count: of the kernels' team (team.h) and of OpenMP's (loading, perplexity's contexts), one for the process.
#pragma once

namespace plainllama {

// Physical cores (hyper-threads counted once), at least 1.
int physical_cores();
// Threads of this process that are runnable right now (state R in /proc/self/task/*/stat); 0 when unknown.
int own_running_threads();
// Cores that other processes keep busy right now: the fewest runnable tasks outside this process over
// `samples` readings of /proc/loadavg ("running/total" field) 1 ms apart; 0 when unknown.
int busy_cores(int samples = 5);
// Sets the thread count of the kernels (from any thread: serve's engine runs them on its own) and of this thread's
// OpenMP loops (omp_set_num_threads).
void set_threads(int n);
// The kernels' thread count: set_threads' n, or before any call omp_get_max_threads() (OMP_NUM_THREADS, else the CPUs).
int thread_count();

}  // namespace plainllama
