// Thread count: one OpenMP team for the whole process.
#pragma once

namespace plainllama {

// Physical cores (hyper-threads counted once), at least 1.
int physical_cores();
// Threads of this process that are runnable right now (state R in /proc/self/task/*/stat); 0 when unknown.
int own_running_threads();
// Cores that other processes keep busy right now: the fewest runnable tasks outside this process over
// `samples` readings of /proc/loadavg ("running/total" field) 1 ms apart; 0 when unknown.
int busy_cores(int samples = 5);
// Sets the OpenMP team size used by every kernel.
void set_threads(int n);

}  // namespace plainllama
