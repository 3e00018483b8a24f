// Command-line flags refuse what they cannot mean, with exit status 2 and one line saying why: non-finite floats,
// integers that are not integers or do not fit, an unknown subcommand; --version; perplexity's --chunks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace plainllama {
namespace {

using test::HasSubstr;
using test::run_binary;

const std::string kModel = test::model_dir().string();
const std::string kVal = (test::shared_dir() / "data/tinystories_val.txt").string();

void expect_usage_error(const std::vector<std::string>& args, const std::string& message) {
    const auto r = run_binary(args);
    EXPECT_EQ(r.status, 2) << args[0] << " " << args.back() << ": " << r.err;
    EXPECT_TRUE(HasSubstr(r.err, message)) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line
    EXPECT_EQ(r.out, "");
}

TEST(Flags, NonFiniteFloatsAreRefused) {
    for (const char* flag : {"--temp", "--top-p", "--min-p", "--repeat-penalty"})
        for (const char* v : {"nan", "NaN", "inf", "-inf"})
            expect_usage_error({"generate", "-m", kModel, "-p", "Once", "-n", "2", flag, v}, "is not a finite number");
    expect_usage_error({"generate", "-m", kModel, "-p", "Once", "--temp", "0.5x"}, "0.5x is not a number");
    expect_usage_error({"generate", "-m", kModel, "-p", "Once", "--top-p", "1.5"}, "1.5 is out of range");
}

TEST(Flags, IntegersMustBeIntegersThatFit) {
    expect_usage_error({"generate", "-m", kModel, "-p", "Once", "-n", "abc"}, "abc is not an integer");
    expect_usage_error({"generate", "-m", kModel, "-p", "Once", "-n", "12abc"}, "12abc is not an integer");
    expect_usage_error({"generate", "-m", kModel, "-p", "Once", "--seed", "18446744073709551615"},
                       "18446744073709551615 is out of range");
    expect_usage_error({"generate", "-m", kModel, "-p", "Once", "--seed", "9223372036854775808"}, "is out of range");
    expect_usage_error({"generate", "-m", kModel, "-p", "Once", "--seed", "-2"}, "-2 is out of range");
    // a leading zero is decimal, as checked (CLI11 alone would read 010 as octal 8); a leading + is taken
    auto gen = [](const std::string& n) {
        const auto r =
            run_binary({"generate", "-m", kModel, "-p", "Once", "-n", n, "--temp", "0", "--json", "--quiet"});
        EXPECT_EQ(r.status, 0) << r.err;
        return r.status == 0 ? nlohmann::json::parse(r.out)["n_generated"].get<int>() : -1;
    };
    EXPECT_EQ(gen("10"), 10);
    EXPECT_EQ(gen("010"), 10);
    EXPECT_EQ(gen("+10"), 10);
    // the largest seed is taken as it is
    const auto r = run_binary(
        {"generate", "-m", kModel, "-p", "Once", "-n", "2", "--seed", "9223372036854775807", "--json", "--quiet"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["seed"], 9223372036854775807ull);
}

TEST(Flags, VersionAndUnknownSubcommand) {
    const auto v = run_binary({"--version"});
    EXPECT_EQ(v.status, 0);
    EXPECT_TRUE(test::StartsWith(v.out, "plainllama ")) << v.out;
    const auto u = run_binary({"generat", "-p", "x"});
    EXPECT_EQ(u.status, 2);
    EXPECT_TRUE(HasSubstr(u.err, "unknown subcommand 'generat'")) << u.err;
    EXPECT_TRUE(HasSubstr(u.err, "generate")) << u.err;
}

TEST(Flags, PerplexityChunks) {
    expect_usage_error({"perplexity", "-m", kModel, "-f", kVal, "-c", "64", "--chunks", "0"}, "--chunks 0");
    // --chunks limits the windows of --stride too
    const auto r = run_binary(
        {"perplexity", "-m", kModel, "-f", kVal, "-c", "64", "--stride", "32", "--chunks", "3", "--json", "--quiet"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["n_chunks"], 3);
}

// Errors name the file and say what is wrong in words, never a library's source location; advice is only what
// can be followed.
TEST(Errors, InWordsAndFollowable) {
    test::TempDir tmp;
    test::copy_model(test::model_dir(), tmp.path());
    const std::string full = test::read_file(tmp / "tokenizer.model");
    test::write_file(tmp / "tokenizer.model", full.substr(0, 3000));
    auto r = run_binary({"generate", "-m", tmp.path().string(), "-p", "Once", "-n", "2"});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(HasSubstr(r.err, "tokenizer.model: not a SentencePiece model")) << r.err;
    EXPECT_EQ(r.err.find(".cc("), std::string::npos) << r.err;
    // a prompt longer than the model's whole context: no "raise -c" (stories260K: 512 positions)
    std::string longer;
    for (int i = 0; i < 200; ++i) longer += "Once upon a time ";
    r = run_binary({"generate", "-m", kModel, "-p", longer, "-n", "2"});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(HasSubstr(r.err, "shorten the prompt")) << r.err;
    EXPECT_EQ(r.err.find("raise -c"), std::string::npos) << r.err;
    r = run_binary({"generate", "-m", kModel, "-p", longer, "-n", "2", "-c", "64"});
    EXPECT_TRUE(HasSubstr(r.err, "raise -c")) << r.err;
    // invalid UTF-8 on the command line is a usage error
    r = run_binary({"generate", "-m", kModel, "-p", "\xff\xfe", "-n", "2"});
    EXPECT_EQ(r.status, 2) << r.err;
}

}  // namespace
}  // namespace plainllama
