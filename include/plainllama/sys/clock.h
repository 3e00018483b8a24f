// A monotonic clock in seconds, for timings.
#pragma once
#include <chrono>

namespace plainllama {

inline double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace plainllama
