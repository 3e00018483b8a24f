// Large zeroed buffers read whole and often (the KV cache): mapped from the system, so that pages are zero and
// committed only as they are written, and advised for transparent huge pages, so that reading a deep cache every
// token takes one TLB entry per 2 MiB rather than one per 4 KiB page.
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

// `bytes` of zeroed memory, 2 MiB-aligned; empty when the system refuses the mapping.
ZeroedPages map_zeroed_pages(size_t bytes);

}  // namespace plainllama
