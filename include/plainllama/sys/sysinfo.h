// Facts about the machine and this process, for the benchmark report: resident memory, CPU model,
// SIMD flags and the size of the last-level cache. Linux (/proc, /sys); unknown values are 0 or "".
#pragma once
#include <cstddef>
#include <string>

namespace plainllama {

// Resident set size of this process in bytes (/proc/self/statm, file-backed mapped pages included).
size_t resident_set_bytes();

// "model name" of the first CPU in /proc/cpuinfo, e.g. "AMD EPYC 7B13".
std::string cpu_model_name();

// The SIMD flags of /proc/cpuinfo that matter to the kernels, space-separated in a fixed order,
// e.g. "avx2 fma f16c avx512f avx512bw avx512_bf16".
std::string cpu_simd_flags();

// Total bytes of the highest cache level over all its instances (one L3 per CCX or socket counted
// once each), from /sys/devices/system/cpu/cpu*/cache; 0 when unknown.
size_t last_level_cache_bytes();

// A cache size as /sys spells it: "32768K", "2M", "512" (bytes); 0 when it cannot be parsed.
size_t parse_cache_size(const std::string& s);

}  // namespace plainllama
