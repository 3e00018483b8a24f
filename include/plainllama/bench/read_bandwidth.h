// A short streaming-read bandwidth test: the roofline that memory-bound decoding is measured against (bench). It
// reads through the kernels' sum_stream, so that it reads as the decode kernels do.
#pragma once
#include <cstddef>

#include "plainllama/sys/zeroed_pages.h"

namespace plainllama {

// A streaming-read bandwidth test: every thread of the kernels' team (sys/team.h) sums its own contiguous slice of a
// `bytes` buffer with the active kernels' vector loads (sum_stream), once in each ReadWay (kernels.h): plain loads, a
// software prefetch of every line, a prefetch of each 4 KiB page's first line, the decode kernels' ways on different
// CPUs; a pass reports the fastest (which one is fastest depends on the CPU). The buffer
// sits on 2 MiB pages where the kernel allows (as the packed weights do), is allocated when the test is made and first
// touched by the threads that run its passes (so its pages sit near them), and is held until the test is destroyed, so
// that passes can be timed between other work. A pass over a buffer smaller than 64 MiB reads it several times, so the
// timer sees at least 64 MiB. The constructor throws Error when bytes < 4096 or the buffer cannot be allocated.
class ReadBandwidthTest {
   public:
    explicit ReadBandwidthTest(size_t bytes);

    // One timed pass: its rate in 1e9 bytes per second.
    double pass();
    // A timed pass over the next `bytes` of the buffer (whole 256-byte blocks, at least one, at most the buffer; no
    // 64 MiB minimum), from where the last one stopped and on from the start when it reaches the end, one way of
    // reading, then the next `bytes` the next way, and so on for the three (the same bytes when `bytes` is the whole
    // buffer): the fastest rate, in 1e9 bytes per second.
    // Between steps of other work, as long as the buffer is larger than the caches, each finds its bytes in memory.
    double pass(size_t bytes);

   private:
    float* p() const { return reinterpret_cast<float*>(mem_.get()); }  // [n_]
    ZeroedPages mem_;
    size_t n_ = 0, sweeps_ = 1;
    size_t next_ = 0;  // where pass(bytes) starts, in floats
};

// A buffer size for ReadBandwidthTest well beyond the caches: 8x the total last-level cache,
// at least 1 GiB and at most 4 GiB.
size_t default_bandwidth_test_bytes();

}  // namespace plainllama
