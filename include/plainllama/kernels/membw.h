// A short streaming-read bandwidth test: the roofline that memory-bound decoding is measured against.
#pragma once
#include <cstddef>

namespace plainllama {

// Best-of-`passes` read bandwidth in GB/s (1e9 bytes per second): every thread of the OpenMP team
// sums its own contiguous slice of a `bytes` buffer with the active kernels' vector loads. The buffer sits on
// 2 MiB pages where the kernel allows (as the packed weights do) and is first touched by the same threads (so its
// pages sit near them). A pass over a buffer smaller than 64 MiB reads it
// several times, so the timer sees at least 64 MiB. Throws Error when bytes < 4096 or passes < 1, or
// when the buffer cannot be allocated.
double measure_read_bandwidth_gbs(size_t bytes, int passes);

// A buffer size for measure_read_bandwidth_gbs well beyond the caches: 8x the total last-level cache,
// at least 1 GiB and at most 4 GiB.
size_t default_bandwidth_test_bytes();

}  // namespace plainllama
