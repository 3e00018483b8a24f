#include "plainllama/sys/sysinfo.h"

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

namespace plainllama {

namespace {

std::string read_line(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::string s;
    std::getline(in, s);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
}

// The value after "key<spaces>: " of the first /proc/cpuinfo line that starts with key, or "".
std::string cpuinfo_field(const std::string& key) {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(key, 0) != 0) continue;
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        size_t b = colon + 1;
        while (b < line.size() && line[b] == ' ') ++b;
        return line.substr(b);
    }
    return "";
}

}  // namespace

size_t resident_set_bytes() {
    std::ifstream in("/proc/self/statm");
    size_t size_pages = 0, resident_pages = 0;
    if (!(in >> size_pages >> resident_pages)) return 0;
    const long page = ::sysconf(_SC_PAGESIZE);
    return resident_pages * size_t(page > 0 ? page : 4096);
}

std::string cpu_model_name() { return cpuinfo_field("model name"); }

std::string cpu_simd_flags() {
    std::istringstream ss(cpuinfo_field("flags"));
    std::set<std::string> have;
    for (std::string f; ss >> f;) have.insert(f);
    static const char* wanted[] = {"avx2",     "fma",         "f16c",        "avx512f",  "avx512bw",
                                   "avx512vl", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile"};
    std::string out;
    for (const char* w : wanted) {
        if (!have.count(w)) continue;
        if (!out.empty()) out += ' ';
        out += w;
    }
    return out;
}

size_t parse_cache_size(const std::string& s) {
    size_t i = 0, v = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        if (v > (size_t(1) << 50)) return 0;
        v = v * 10 + size_t(s[i] - '0');
        ++i;
    }
    if (i == 0) return 0;
    const std::string unit = s.substr(i);
    if (unit.empty()) return v;
    if (unit == "K") return v << 10;
    if (unit == "M") return v << 20;
    if (unit == "G") return v << 30;
    return 0;
}

size_t last_level_cache_bytes() {
    namespace fs = std::filesystem;
    // level -> {shared_cpu_list of each instance -> size}
    std::map<int, std::map<std::string, size_t>> levels;
    std::error_code ec;
    for (const auto& cpu : fs::directory_iterator("/sys/devices/system/cpu", ec)) {
        const std::string name = cpu.path().filename().string();
        if (name.size() < 4 || name.rfind("cpu", 0) != 0 || !std::isdigit(static_cast<unsigned char>(name[3])))
            continue;
        for (const auto& idx : fs::directory_iterator(cpu.path() / "cache", ec)) {
            if (idx.path().filename().string().rfind("index", 0) != 0) continue;
            const std::string type = read_line(idx.path() / "type");
            if (type != "Unified" && type != "Data") continue;
            int level = 0;
            try {
                level = std::stoi(read_line(idx.path() / "level"));
            } catch (...) {
                continue;
            }
            const size_t bytes = parse_cache_size(read_line(idx.path() / "size"));
            std::string shared = read_line(idx.path() / "shared_cpu_list");
            if (shared.empty()) shared = name;
            if (bytes > 0) levels[level][shared] = bytes;
        }
    }
    if (levels.empty()) return 0;
    size_t total = 0;
    for (const auto& kv : levels.rbegin()->second) total += kv.second;
    return total;
}

}  // namespace plainllama
