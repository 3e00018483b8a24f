#include "plainllama/sys/zeroed_pages.h"

#include <sys/mman.h>

namespace plainllama {

namespace {
constexpr size_t kHugePage = size_t(1) << 21;
}

void UnmapPages::operator()(uint8_t* p) const {
    if (p != nullptr) ::munmap(base, bytes);
}

ZeroedPages map_zeroed_pages(size_t bytes) {
    if (bytes > SIZE_MAX - 2 * kHugePage) return ZeroedPages(nullptr, UnmapPages{});
    // Under 2 MiB, 4 KiB pages (a huge one would commit more than the buffer); from 2 MiB, a huge page more than asked,
    // so that the buffer can start on a 2 MiB boundary inside the mapping.
    const bool huge = bytes >= kHugePage;
    const size_t n = huge ? (bytes + kHugePage - 1) / kHugePage * kHugePage + kHugePage : bytes == 0 ? 1 : bytes;
    void* base = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return ZeroedPages(nullptr, UnmapPages{});
    uintptr_t start = reinterpret_cast<uintptr_t>(base);
    if (huge) {
        start = (start + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
        // advice only: refused, the buffer stays on 4 KiB pages
        ::madvise(reinterpret_cast<void*>(start), n - (start - reinterpret_cast<uintptr_t>(base)), MADV_HUGEPAGE);
    }
    return ZeroedPages(reinterpret_cast<uint8_t*>(start), UnmapPages{base, n});
}

}  // namespace plainllama
