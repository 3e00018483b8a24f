// A NaN or Inf where the model holds a number: --check-tensors finds a bad fp16 scale in the quantized blocks of each
// format (naming the tensor, the scale and the block), and without it every path (generate, chat, perplexity) stops
// with the error instead of printing what the garbage logits give.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "plainllama/kernels/quant.h"
#include "test_util.h"

namespace plainllama {
namespace {

using test::HasSubstr;
using test::run_binary;
namespace fs = std::filesystem;

// tinystories3M quantized with `scheme` by the binary, once per test process.
const fs::path& quantized(const std::string& scheme) {
    static test::TempDir tmp;
    static std::map<std::string, fs::path> done;
    if (!done.count(scheme)) {
        const fs::path out = tmp / scheme;
        const auto r = run_binary({"quantize", "-m", test::model_dir("tinystories3M").string(), "-o", out.string(),
                                   "--quant", scheme, "--quiet"});
        EXPECT_EQ(r.status, 0) << r.err;
        done[scheme] = out;
    }
    return done[scheme];
}

struct SavedFile {
    std::string bytes;
    nlohmann::json header;
    size_t data_start = 0;

    explicit SavedFile(const fs::path& dir) : bytes(test::read_file(dir / "model.safetensors")) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = n << 8 | uint8_t(bytes[size_t(i)]);
        data_start = 8 + size_t(n);
        header = nlohmann::json::parse(bytes.substr(8, size_t(n)));
    }
    // The first matrix stored in format `fmt` (not the embedding, of which a prompt reads a few rows).
    std::string first_in(const std::string& fmt) const {
        for (const auto& [key, value] : header["__metadata__"].items())
            if (key.rfind("plainllama.quant:", 0) == 0 && value == fmt && key.find("embed_tokens") == std::string::npos)
                return key.substr(17);
        ADD_FAILURE() << "no tensor in " << fmt;
        return "";
    }
    // Sets the fp16 at byte `at` of tensor `name`.
    void set_f16(const std::string& name, size_t at, uint16_t h) {
        const size_t begin = header[name]["data_offsets"][0].get<size_t>();
        bytes[data_start + begin + at] = char(h & 0xff);
        bytes[data_start + begin + at + 1] = char(h >> 8);
    }
};

// A copy of `from` in `to` with the fp16 scale `scale` (its offset in the block) of block `block` of the first tensor
// in format `fmt` set to h; the tensor's name.
std::string bad_copy(const fs::path& from, const fs::path& to, const std::string& fmt, size_t scale, int64_t block,
                     uint16_t h) {
    test::copy_model(from, to);
    SavedFile f(from);
    QuantType q;
    EXPECT_TRUE(parse_quant_type(fmt, &q));
    const std::string name = f.first_in(fmt);
    f.set_f16(name, size_t(block) * quant_block_bytes(q) + scale, h);
    test::write_file(to / "model.safetensors", f.bytes);
    return name;
}

constexpr uint16_t kPlusInf = 0x7c00, kMinusInf = 0xfc00, kNaN = 0x7e00;

TEST(CheckTensors, NamesTheBadScaleOfAQuantizedBlock) {
    struct Case {
        const char *scheme, *fmt;
        size_t offset;  // of the scale in the block
        uint16_t value;
        const char* says;
    };
    // row bytes: q8_0 816 or 272 (K 768 or 256), q4_0 432 or 144; the k formats one or three blocks a row: block 4 is
    // in row 0, 1 or 4
    for (const Case& c : {Case{"q8_0", "q8_0", 0, kNaN, "NaN in the scale d"},
                          Case{"q4_k_m", "q4_k", 0, kPlusInf, "+Inf in the scale d"},
                          Case{"q4_k_m", "q4_k", 2, kMinusInf, "-Inf in the scale dmin"},
                          Case{"q6_k", "q6_k", 208, kNaN, "NaN in the scale d"},
                          Case{"q4_0", "q4_0", 0, kMinusInf, "-Inf in the scale d"},
                          Case{"q5_k_m", "q5_k", 0, kNaN, "NaN in the scale d"},
                          Case{"q5_k_m", "q5_k", 2, kPlusInf, "+Inf in the scale dmin"}}) {
        SCOPED_TRACE(std::string(c.fmt) + " at " + std::to_string(c.offset));
        test::TempDir bad;
        const std::string name = bad_copy(quantized(c.scheme), bad.path(), c.fmt, c.offset, 4, c.value);
        auto r = run_binary({"generate", "-m", bad.path().string(), "-p", "Once", "-n", "2", "--check-tensors"});
        EXPECT_EQ(r.status, 1);
        EXPECT_TRUE(HasSubstr(r.err, (bad / "model.safetensors").string() + ": tensor '" + name + "'")) << r.err;
        EXPECT_TRUE(HasSubstr(r.err, std::string("(") + c.fmt + " blocks) has " + c.says + " of block 4 (row "))
            << r.err;
        EXPECT_TRUE(HasSubstr(r.err, "(--check-tensors)")) << r.err;
    }
    // the sound folders pass
    for (const char* scheme : {"q8_0", "q4_k_m", "q6_k", "q4_0", "q5_k_m"}) {
        const auto r = run_binary(
            {"generate", "-m", quantized(scheme).string(), "-p", "Once", "-n", "2", "--check-tensors", "--quiet"});
        EXPECT_EQ(r.status, 0) << scheme << ": " << r.err;
    }
}

// One q4_k scale flipped to +Inf (the case): the quantized products would turn the NaN it makes into finite
// logits (token 0 every time), so the hidden states are checked, and every path stops with the error.
TEST(NonFinite, EveryPathStopsWithTheError) {
    test::TempDir bad;
    bad_copy(quantized("q4_k_m"), bad.path(), "q4_k", 0, 0, kPlusInf);
    const std::string m = bad.path().string();
    const std::string val = (test::shared_dir() / "data/tinystories_val.txt").string();
    const std::vector<std::vector<std::string>> runs = {
        {"generate", "-m", m, "-p", "Once upon a time", "-n", "16", "--temp", "0"},
        {"generate", "-m", m, "-p", "Once upon a time", "-n", "16", "--json"},
        {"chat", "-m", m, "-n", "16"},
        {"perplexity", "-m", m, "-f", val, "-c", "64", "--chunks", "2", "-t", "2"},  // a context per thread
        {"perplexity", "-m", m, "-f", val, "-c", "64", "--chunks", "2", "--stride", "32"},
    };
    for (const auto& args : runs) {
        std::string shown;
        for (const auto& a : args) shown += a + " ";
        SCOPED_TRACE(shown);
        const auto r = run_binary(args, "Once upon a time\n");
        EXPECT_EQ(r.status, 1) << r.out;
        EXPECT_TRUE(HasSubstr(r.err, "is not finite at position 0")) << r.err;
        EXPECT_TRUE(HasSubstr(r.err, "--check-tensors finds it at load")) << r.err;
    }
}

}  // namespace
}  // namespace plainllama
