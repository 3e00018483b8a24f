// Large zeroed buffers read whole and often (the KV cache, packed weights, the bandwidth test): mapped from the system,
// zero and committed as they are first written, and advised for transparent huge pages, so that reading them takes
// one TLB entry per 2 MiB rather than one per 4 KiB page (and memory is then committed 2 MiB at a time).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace plainllama {

// Unmaps what map_zeroed_pages mapped (the pointer held lies inside it).
struct UnmapPages {
    void* base = nullptr;
    size_t bytes = 0;
    void operator()(uint8_t* p) const;
};
using ZeroedPages = std::unique_ptr<uint8_t, UnmapPages>;

// `bytes` of zeroed memory, 2 MiB-aligned from 2 MiB on (4 KiB below); empty when the system refuses the mapping.
ZeroedPages map_zeroed_pages(size_t bytes);

}  // namespace plainllama
