// Thread count: one OpenMP team for the whole process.
#pragma once

namespace plainllama {

// Physical cores (hyper-threads counted once), at least 1.
int physical_cores();
// Cores that other processes keep busy right now: the fewest runnable tasks besides the calling thread over a
// few samples of /proc/loadavg ("running/total" field) 1 ms apart; 0 when unknown. Call it before the OpenMP
// team exists: its threads, spinning between regions, count as running.
int busy_cores();
// Sets the OpenMP team size used by every kernel.
void set_threads(int n);

}  // namespace plainllama
