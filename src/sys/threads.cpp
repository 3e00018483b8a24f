#include "plainllama/sys/threads.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace plainllama {

int physical_cores() {
    // Distinct (physical id, core id) pairs in /proc/cpuinfo; fall back to the logical count.
    std::ifstream in("/proc/cpuinfo");
    std::set<std::pair<int, int>> cores;
    std::string line;
    int phys = 0;
    while (std::getline(in, line)) {
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        try {
            if (line.rfind("physical id", 0) == 0)
                phys = std::stoi(line.substr(colon + 1));
            else if (line.rfind("core id", 0) == 0)
                cores.insert({phys, std::stoi(line.substr(colon + 1))});
        } catch (...) {
        }
    }
    const int logical = int(std::thread::hardware_concurrency());
    if (!cores.empty() && int(cores.size()) <= logical) return int(cores.size());
    return logical > 0 ? logical : 1;
}

int own_running_threads() {
    int n = 0;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
        std::ifstream in(task.path() / "stat");
        std::string stat;
        std::getline(in, stat);
        const size_t close = stat.rfind(')');  // "tid (comm) S ...": comm may hold spaces and parentheses
        if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'R') ++n;
    }
    return n;
}

int fewest_others(int samples, std::chrono::milliseconds gap, const std::function<int()>& others) {
    int fewest = -1;
    for (int i = 0; i < samples && fewest != 0; ++i) {
        if (i) std::this_thread::sleep_for(gap);
        const int n = others();
        if (n < 0) return 0;
        fewest = fewest < 0 ? n : std::min(fewest, n);
    }
    return std::max(fewest, 0);
}

int busy_cores(int samples) {
    return fewest_others(samples, std::chrono::milliseconds(10), [] {
        std::ifstream in("/proc/loadavg");
        double a1, a5, a15;
        int running = 0;
        char slash = 0;
        if (!(in >> a1 >> a5 >> a15 >> running >> slash) || slash != '/' || running < 1) return -1;
        return std::max(running - std::max(own_running_threads(), 1), 0);
    });
}

namespace {
std::atomic<int> g_threads{0};  // set_threads' n; 0 before
}  // namespace

void set_threads(int n) {
    n = std::max(n, 1);
    omp_set_dynamic(0);
    omp_set_num_threads(n);
    omp_set_max_active_levels(1);  // no nested OpenMP teams (a kernel in perplexity's loop keeps to its thread anyway)
    g_threads.store(n, std::memory_order_relaxed);
}

int thread_count() {
    const int n = g_threads.load(std::memory_order_relaxed);
    return n > 0 ? n : std::max(omp_get_max_threads(), 1);
}

}  // namespace plainllama
