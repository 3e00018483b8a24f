// The hostile-input tests' contract, shared by their files: a run of the binary that ends in one error line.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test_util.h"

namespace plainllama::test {

inline std::string shown(const std::vector<std::string>& args) {
    std::string s;
    for (const auto& a : args) s += (a.size() > 60 ? a.substr(0, 60) + "..." : a) + " ";
    return s;
}

// The error contract: status 1 or 2 (or exactly `status` when given), one line on stderr starting with
// "plainllama: error:" and containing every one of `names`, nothing on stdout.
inline ::testing::AssertionResult one_error(const RunResult& r, const std::vector<std::string>& names = {},
                                            int status = 0) {
    auto fail = [&](const std::string& why) {
        return ::testing::AssertionFailure()
               << why << "\n  status " << r.status << "\n  stderr: " << r.err << "\n  stdout: " << r.out.substr(0, 300);
    };
    if (status ? r.status != status : r.status != 1 && r.status != 2)
        return fail(status ? "expected status " + std::to_string(status) : "expected status 1 or 2");
    if (std::count(r.err.begin(), r.err.end(), '\n') != 1 || r.err.back() != '\n')
        return fail("expected exactly one line on stderr");
    if (r.err.rfind("plainllama: error: ", 0) != 0) return fail("stderr does not start with 'plainllama: error: '");
    for (const std::string& n : names)
        if (r.err.find(n) == std::string::npos) return fail("'" + n + "' not in the message");
    if (!r.out.empty()) return fail("stdout is not empty");
    return ::testing::AssertionSuccess();
}

// Every subcommand that loads a model, on `model`: each must fail with one error line naming `names`.
inline void expect_load_error(const fs::path& model, const std::vector<std::string>& names) {
    const std::string m = model.string();
    const std::string text = (test::shared_dir() / "data/tinystories_val.txt").string();
    const std::vector<std::vector<std::string>> commands = {
        {"generate", "-m", m, "-p", "Once upon a time", "-n", "4"},
        {"perplexity", "-m", m, "-f", text, "-c", "64", "--chunks", "1"},
        {"bench", "-m", m, "-p", "8", "-n", "4", "-r", "1"},
        {"inspect", "-m", m},
    };
    for (const auto& args : commands) {
        SCOPED_TRACE(shown(args));
        EXPECT_TRUE(one_error(run_binary(args), names, 1));
    }
}

}  // namespace plainllama::test
