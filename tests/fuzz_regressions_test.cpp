// The fuzzers' regression inputs (tests/fuzz/regressions/) replayed through the parsers they target (safetensors,
// config.json, GGUF), and json_brief on the values that once broke it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz/invariants.h"
#include "plainllama/io/config.h"
#include "plainllama/io/safetensors.h"
#include "plainllama/sys/error.h"
#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Every file in tests/fuzz/regressions/<target>/ through the parser its fuzzer targets, with the fuzzer's
// invariants (fuzz/invariants.h): an Error with one line, or a parse that keeps them. (A crash here is a crash.)
std::vector<fs::path> regression_inputs(const std::string& target) {
    const fs::path dir = test::source_dir() / "tests/fuzz/regressions" / target;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
}

TEST(FuzzRegressions, SafetensorsInputsReplay) {
    const auto files = regression_inputs("safetensors");
    EXPECT_GE(files.size(), 10u);
    for (const fs::path& file : files) {
        SCOPED_TRACE(file.filename().string());
        const std::string f = test::read_file(file);
        std::vector<uint64_t> buf(f.size() / 8 + 1);
        std::memcpy(buf.data(), f.data(), f.size());
        const auto* base = reinterpret_cast<const uint8_t*>(buf.data());
        try {
            const SafetensorsContents c = parse_safetensors(base, f.size(), file.filename().string());
            EXPECT_EQ(fuzz::safetensors_violation(c, base, f.size()), "");
        } catch (const Error& e) {
            EXPECT_EQ(fuzz::error_violation(e.what()), "");
        }
    }
}

TEST(FuzzRegressions, ConfigInputsReplay) {
    const auto files = regression_inputs("config");
    EXPECT_GE(files.size(), 10u);
    for (const fs::path& file : files) {
        SCOPED_TRACE(file.filename().string());
        const json j = json::parse(test::read_file(file), nullptr, false);
        if (j.is_discarded()) continue;
        try {
            EXPECT_EQ(fuzz::config_violation(parse_config(j, "config.json")), "");
        } catch (const Error& e) {
            EXPECT_EQ(fuzz::error_violation(e.what()), "");
        }
    }
}

TEST(FuzzRegressions, GgufInputsReplay) {
    const auto files = regression_inputs("gguf");
    EXPECT_GE(files.size(), 10u);
    for (const fs::path& file : files) {
        SCOPED_TRACE(file.filename().string());
        const std::string f = test::read_file(file);
        std::vector<uint64_t> buf(f.size() / 8 + 1);
        std::memcpy(buf.data(), f.data(), f.size());
        EXPECT_EQ(fuzz::gguf_input_violation(reinterpret_cast<const uint8_t*>(buf.data()), f.size()), "");
    }
}

TEST(FuzzRegressions, JsonBriefIsShortAndOneLine) {
    const size_t depth = 1000000;
    const json deep = json::parse(std::string(depth, '[') + std::string(depth, ']'));
    EXPECT_EQ(json_brief(deep), "an array of 1 elements");
    EXPECT_EQ(json_brief(json{1, 2, 3}), "[1,2,3]");
    EXPECT_EQ(json_brief(json("a\nb")), "\"a\\nb\"");
    const std::string s = json_brief(json(std::string(1000, 'x')));
    EXPECT_EQ(s.size(), 80u);
    EXPECT_EQ(s.substr(77), "...");
    const std::string u = json_brief(json(std::string(200, 'x') + "\xe6\x97\xa5"));  // never cuts a character
    EXPECT_LE(u.size(), 80u);
    EXPECT_EQ(json_brief(json::object({{"k", std::string(300, 'v')}})).size(), 80u);
    json wide = json::array();
    for (int i = 0; i < 100000; ++i) wide.push_back(i);
    EXPECT_EQ(json_brief(wide), "an array of 100000 elements");
}

}  // namespace
}  // namespace plainllama
