// Helpers shared by the tests: paths to ../shared, JSON files, temp folders, running the binary; the kernel tests'
// random inputs and stored elements decoded independently.
#pragma once
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "plainllama/io/config.h"
#include "plainllama/io/dtype.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/kernels/testing.h"
#include "plainllama/run/chat_template.h"
#include "plainllama/sys/team.h"

// PLAINLLAMA_ASAN: defined in a build with AddressSanitizer (the sanitizer job's), for tests that cannot run there or
// that it would only slow down.
#if defined(__SANITIZE_ADDRESS__)
#define PLAINLLAMA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PLAINLLAMA_ASAN 1
#endif
#endif

namespace plainllama::test {

namespace fs = std::filesystem;

// Substring checks that print the whole message on failure (plain gtest: gmock is not a dependency).
inline ::testing::AssertionResult HasSubstr(const std::string& s, const std::string& sub) {
    if (s.find(sub) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "\"" << sub << "\" not in \"" << s << "\"";
}
inline ::testing::AssertionResult StartsWith(const std::string& s, const std::string& prefix) {
    if (s.rfind(prefix, 0) == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "\"" << s << "\" does not start with \"" << prefix << "\"";
}

// IEEE half and bfloat16 bit patterns as doubles, decoded independently of the library's converters.
inline double decode_f16(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double v = e == 0    ? std::ldexp(double(m), -24)
                     : e == 31 ? (m ? std::numeric_limits<double>::quiet_NaN() : INFINITY)
                               : std::ldexp(double(1024 + m), e - 25);
    return s ? -v : v;
}
inline double decode_bf16(uint16_t h) {
    const int s = h >> 15, e = (h >> 7) & 0xff, m = h & 0x7f;
    const double v = e == 0     ? std::ldexp(double(m), -133)
                     : e == 255 ? (m ? std::numeric_limits<double>::quiet_NaN() : INFINITY)
                                : std::ldexp(double(128 + m), e - 134);
    return s ? -v : v;
}

inline constexpr double kU = 0x1p-24;  // unit roundoff of f32

// Element i of a buffer of type t (F32, F16 or BF16) as a double, decoded independently of the library.
inline double decode(DType t, const void* p, size_t i) {
    if (t == DType::F32) return double(static_cast<const float*>(p)[i]);
    const uint16_t h = static_cast<const uint16_t*>(p)[i];
    return t == DType::F16 ? decode_f16(h) : decode_bf16(h);
}

// [n] floats drawn uniformly from [lo, hi).
inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

// A setting of the kernels for a scope: Set(value) when made, Set(what Get() returned before) when destroyed.
template <class T, auto Get, auto Set>
class Scoped {
   public:
    explicit Scoped(const T& value) : saved_(Get()) { Set(value); }
    ~Scoped() { Set(saved_); }
    Scoped(const Scoped&) = delete;
    Scoped& operator=(const Scoped&) = delete;

   private:
    T saved_;
};
using Threads = Scoped<int, thread_count, set_threads>;            // the thread count
using UseKernels = Scoped<std::string, kernels_isa, use_kernels>;  // the kernel variant
using UseTuning = Scoped<Tuning, tuning, use_tuning>;              // the AVX-512 kernels' tuning

// Whether a kernel variant's decode kernels follow the tuning, as kernels.h says: the AVX-512 ones.
inline bool variant_has_tuning(const std::string& variant) { return variant.rfind("avx512", 0) == 0; }

// A test suite that runs once per kernel variant this CPU supports (kernel_variants()): `class Suite : public
// test::EveryKernel {};`, TEST_P(Suite, Name), then PL_FOR_EVERY_KERNEL(Suite). Test names end in the variant.
class EveryKernel : public ::testing::TestWithParam<std::string> {
   private:
    UseKernels scope_{GetParam()};
};
#define PL_FOR_EVERY_KERNEL(Suite)                                                                 \
    INSTANTIATE_TEST_SUITE_P(Kernels, Suite, ::testing::ValuesIn(::plainllama::kernel_variants()), \
                             [](const ::testing::TestParamInfo<std::string>& i) { return i.param; })

// Sets an environment variable for a scope (for the binaries a test runs), restoring it after.
class ScopedEnv {
   public:
    ScopedEnv(const char* name, const std::string& value);
    ~ScopedEnv();

   private:
    std::string name_, saved_;
    bool had_ = false;
};

inline fs::path shared_dir() { return PLAINLLAMA_SHARED_DIR; }
inline fs::path model_dir(const std::string& name = "stories260K") { return shared_dir() / "models" / name; }
inline fs::path binary() { return PLAINLLAMA_BINARY; }
inline fs::path source_dir() { return PLAINLLAMA_SOURCE_DIR; }

nlohmann::json read_json(const fs::path& p);
std::string read_file(const fs::path& p);
void write_file(const fs::path& p, const std::string& bytes);
// dir/config.json with `key` set to `value`.
void set_config(const fs::path& dir, const std::string& key, const nlohmann::json& value);

// Chat messages: the user's, and an assistant reply the model generated as `ids`.
ChatMessage user(const std::string& text);
ChatMessage generated(const std::string& text, std::vector<int32_t> ids);

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
   public:
    TempDir();
    ~TempDir();
    const fs::path& path() const { return path_; }
    fs::path operator/(const std::string& name) const { return path_ / name; }

   private:
    fs::path path_;
};

// The config values of the shared stories260K folders (all three dtypes), as gtest expectations.
void expect_stories260K_config(const LlamaConfig& c);

// Copies a model folder's files into dir (so a test can edit one of them).
void copy_model(const fs::path& from, const fs::path& to);

// A tensor to write: raw little-endian bytes of `dtype` ("F32", "F16", "BF16", or anything, for
// corrupt files), and its shape.
struct RawTensor {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::string bytes;
};
// Writes a safetensors file: 8-byte header length, JSON header, then the tensors in order.
// `pad` extra bytes are put before each tensor (to test unaligned offsets).
void write_safetensors(const fs::path& p, const std::vector<RawTensor>& tensors, size_t pad = 0);
// Reads every tensor of a (valid) safetensors file, in data order.
std::vector<RawTensor> read_safetensors(const fs::path& p);

struct RunResult {
    int status = -1;  // exit status, or 128 + signal
    std::string out, err;
};
// Runs the plainllama binary with args (no shell), stdin from `input`; with its address space limited to
// `address_space_bytes` when not 0 (so an overcommitting machine cannot let it touch terabytes).
RunResult run_binary(const std::vector<std::string>& args, const std::string& input = "",
                     uint64_t address_space_bytes = 0);

}  // namespace plainllama::test
