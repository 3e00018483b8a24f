// Corrupt safetensors files built by hand: each an Error naming the file and the tensor, never a crash.
#include "plainllama/io/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <random>

#include "loader_util.h"
#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;
using test::bytes_of;
using test::checkpoint_error;
using test::HasSubstr;
using test::model_dir;
using test::model_error;
using test::raw_file;
using test::RawTensor;
using test::read_safetensors;
using test::StartsWith;
using test::TempDir;
using test::write_safetensors;

// ---------------------------------------------------------------------------------------------------------
// Corrupt safetensors files, built by hand.

const std::string kGoodHeader = R"({"a.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
const std::string kData16(16, '\x01');

TEST(Corrupt, HandBuiltGoodFileLoads) {  // the base the corrupt cases edit
    TempDir tmp;
    test::write_file(tmp / "model.safetensors", raw_file(kGoodHeader, kData16));
    const Checkpoint c(tmp.path());
    ASSERT_NE(c.find("a.weight"), nullptr);
    EXPECT_EQ(c.find("a.weight")->shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(bytes_of(*c.find("a.weight")), kData16);
}

struct CorruptCase {
    std::string what;
    std::string file;                   // the whole model.safetensors
    std::vector<std::string> expected;  // substrings of the message, besides the file's path
};

std::string header_for(const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return R"({"a.weight":{"dtype":)" + dtype + R"(,"shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}";
}

TEST(Corrupt, SafetensorsFilesRejectedWithFileAndTensor) {
    const std::string a = "'a.weight'";
    const std::vector<CorruptCase> cases = {
        {"empty file", "", {"0 bytes"}},
        {"3 bytes", "\x10\0\0"s, {"3 bytes"}},
        {"7 bytes", std::string(7, '\0'), {"7 bytes"}},
        {"header length past EOF", raw_file(kGoodHeader, kData16, 1000), {"header length 1000"}},
        {"header length 2^64-1", raw_file(kGoodHeader, kData16, ~uint64_t(0) - 1), {"header length"}},
        {"header cut", raw_file(kGoodHeader, "").substr(0, 30), {"header length"}},
        {"invalid JSON", raw_file(R"({"a.weight":{"dtype":"F32",)", kData16), {"JSON"}},
        {"zero-length header", raw_file("", kData16), {"JSON"}},
        {"header is an array", raw_file("[1,2,3]", kData16), {"JSON object"}},
        {"header is a string", raw_file("\"hello\"", kData16), {"JSON object"}},
        {"entry not an object", raw_file(R"({"a.weight":5})", kData16), {a, "object"}},
        {"dtype I8", raw_file(header_for("\"I8\"", "[2,2]", "[0,4]"), kData16), {a, "I8"}},
        {"dtype F64", raw_file(header_for("\"F64\"", "[2,2]", "[0,32]"), kData16 + kData16), {a, "F64"}},
        {"dtype lowercase", raw_file(header_for("\"f32\"", "[2,2]", "[0,16]"), kData16), {a, "f32"}},
        {"dtype not a string", raw_file(header_for("32", "[2,2]", "[0,16]"), kData16), {a, "dtype"}},
        {"shape/bytes mismatch", raw_file(header_for("\"F32\"", "[2,3]", "[0,16]"), kData16), {a, "[2, 3]", "16"}},
        {"shape too small", raw_file(header_for("\"F16\"", "[2,2]", "[0,16]"), kData16), {a, "F16"}},
        {"negative dim", raw_file(header_for("\"F32\"", "[-2,2]", "[0,16]"), kData16), {a, "[-2,2]"}},
        {"negative dims product ok", raw_file(header_for("\"F32\"", "[-2,-2]", "[0,16]"), kData16), {a, "[-2,-2]"}},
        {"float dim", raw_file(header_for("\"F32\"", "[2.0,2]", "[0,16]"), kData16), {a, "shape"}},
        {"string dim", raw_file(header_for("\"F32\"", "[\"2\",2]", "[0,16]"), kData16), {a, "shape"}},
        {"shape not an array", raw_file(header_for("\"F32\"", "\"2x2\"", "[0,16]"), kData16), {a, "shape"}},
        {"shape missing", raw_file(R"({"a.weight":{"dtype":"F32","data_offsets":[0,16]}})", kData16), {a, "shape"}},
        {"9 dims", raw_file(header_for("\"F32\"", "[1,1,1,1,1,1,1,1,4]", "[0,16]"), kData16), {a, "dimensions"}},
        {"product overflows 2^80",
         raw_file(header_for("\"F32\"", "[1099511627776,1099511627776]", "[0,16]"), kData16),
         {a, "1099511627776"}},
        {"product wraps to 0",  // 2^32 * 2^32 = 2^64 = 0 mod 2^64, matching empty offsets
         raw_file(header_for("\"F32\"", "[4294967296,4294967296]", "[0,0]"), kData16),
         {a, "4294967296"}},
        {"bytes wrap to 4",  // (2^62 + 1) * 4 bytes = 4 mod 2^64, matching [0, 4]
         raw_file(header_for("\"F32\"", "[4611686018427387905]", "[0,4]"), kData16),
         {a, "4611686018427387905"}},
        {"dim past int64 after a 0",
         raw_file(header_for("\"F32\"", "[0,18446744073709551615]", "[0,0]"), kData16),
         {a, "18446744073709551615"}},
        {"end past the data", raw_file(header_for("\"F32\"", "[2,2]", "[0,32]"), kData16), {a, "[0, 32]"}},
        {"begin past the data", raw_file(header_for("\"F32\"", "[0]", "[17,17]"), kData16), {a, "[17, 17]"}},
        {"huge end",
         raw_file(header_for("\"F32\"", "[2,2]", "[0,18446744073709551615]"), kData16),
         {a, "data_offsets"}},
        {"begin > end", raw_file(header_for("\"F32\"", "[2,2]", "[16,0]"), kData16), {a, "[16, 0]"}},
        {"offsets one value", raw_file(header_for("\"F32\"", "[2,2]", "[16]"), kData16), {a, "data_offsets"}},
        {"negative offset", raw_file(header_for("\"F32\"", "[1]", "[-4,0]"), kData16), {a, "data_offsets"}},
        {"float offset", raw_file(header_for("\"F32\"", "[2,2]", "[0,16.0]"), kData16), {a, "data_offsets"}},
        {"offsets a string", raw_file(header_for("\"F32\"", "[2,2]", "\"0-16\""), kData16), {a, "data_offsets"}},
        {"offsets missing", raw_file(R"({"a.weight":{"dtype":"F32","shape":[2,2]}})", kData16), {a, "data_offsets"}},
        {"overlapping tensors",
         raw_file(R"({"a.weight":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                  R"("b.weight":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                  kData16 + std::string(8, '\0')),
         {a, "'b.weight'", "overlap"}},
        {"same range twice",
         raw_file(R"({"a.weight":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                  R"("b.weight":{"dtype":"F16","shape":[8],"data_offsets":[0,16]}})",
                  kData16),
         {a, "'b.weight'", "overlap"}},
        {"control bytes in the name",  // shown escaped, the message stays on one line
         raw_file(R"({"a\nb\u0000c":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}})", kData16),
         {"'a\\x0ab\\x00c'", "I8"}},
    };
    for (const CorruptCase& c : cases) {
        SCOPED_TRACE(c.what);
        TempDir tmp;
        const fs::path file = tmp / "model.safetensors";
        test::write_file(file, c.file);
        const std::string msg = checkpoint_error(tmp.path());
        EXPECT_TRUE(StartsWith(msg, file.string()));
        for (const std::string& s : c.expected) EXPECT_TRUE(HasSubstr(msg, s));
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
}

// Random byte changes and cuts of a small valid file: each parse succeeds with every tensor inside the
// buffer, or throws Error; nothing else (run under PLAINLLAMA_SANITIZE for memory errors).
TEST(Corrupt, RandomMutationsNeverCrash) {
    TempDir tmp;
    write_safetensors(tmp / "m.safetensors",
                      {{"a", "F32", {2, 3}, std::string(24, '\x11')},
                       {"b", "BF16", {5}, std::string(10, '\x22')},
                       {"c", "F16", {1, 1, 2}, std::string(4, '\x33')}},
                      1);
    const std::string good = test::read_file(tmp / "m.safetensors");
    ASSERT_EQ(parse_safetensors(reinterpret_cast<const uint8_t*>(good.data()), good.size(), "m").tensors.size(), 3u);
    std::mt19937 rng(12345);
    const char alphabet[] = "0123456789[]{},:\"-. eFBI\x00\xff";
    int accepted = 0, rejected = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        std::string f = good;
        const int edits = 1 + int(rng() % 3);
        for (int e = 0; e < edits; ++e) {
            const size_t at = rng() % f.size();
            if (rng() % 2)
                f[at] = alphabet[rng() % (sizeof alphabet - 1)];
            else
                f[at] = char(rng());
        }
        if (rng() % 4 == 0) f.resize(rng() % (f.size() + 1));
        std::vector<uint64_t> buf(f.size() / 8 + 1);
        std::memcpy(buf.data(), f.data(), f.size());
        const auto* base = reinterpret_cast<const uint8_t*>(buf.data());
        try {
            const SafetensorsContents c = parse_safetensors(base, f.size(), "m");
            ++accepted;
            for (const TensorView& t : c.tensors) {
                const auto* p = static_cast<const uint8_t*>(t.data);
                bool inside = p >= base && p + t.nbytes <= base + f.size();
                for (const auto& copy : c.copies) inside = inside || p == copy.get();
                ASSERT_TRUE(inside) << t.name;
                ASSERT_EQ(uint64_t(t.numel()) * dtype_size(t.dtype), t.nbytes) << t.name;
            }
        } catch (const Error& e) {
            ++rejected;
            ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
        } catch (const std::exception& e) {
            FAIL() << "not a plainllama::Error: " << e.what();
        }
    }
    EXPECT_GT(accepted, 0);
    EXPECT_GT(rejected, 0);
}

TEST(Corrupt, TruncatedInTheData) {
    const std::vector<RawTensor> all = read_safetensors(model_dir() / "model.safetensors");
    const std::string whole = test::read_file(model_dir() / "model.safetensors");
    for (size_t cut : {size_t(1), size_t(4), all.back().bytes.size() / 2}) {
        SCOPED_TRACE(cut);
        TempDir tmp;
        test::write_file(tmp / "model.safetensors", whole.substr(0, whole.size() - cut));
        const std::string msg = checkpoint_error(tmp.path());
        EXPECT_TRUE(StartsWith(msg, (tmp / "model.safetensors").string()));
        EXPECT_TRUE(HasSubstr(msg, "'" + all.back().name + "'"));  // the last tensor in the data
        EXPECT_TRUE(HasSubstr(msg, "not within"));
    }
}

TEST(Corrupt, DirectoryInsteadOfFile) {
    TempDir tmp;
    fs::create_directory(tmp / "model.safetensors");
    const std::string msg = checkpoint_error(tmp.path());
    EXPECT_TRUE(StartsWith(msg, (tmp / "model.safetensors").string()));
    EXPECT_TRUE(HasSubstr(msg, "not a regular file"));
}

TEST(Corrupt, FifoInsteadOfFile) {  // must not block waiting for a writer
    TempDir tmp;
    ASSERT_EQ(::mkfifo((tmp / "model.safetensors").c_str(), 0600), 0);
    const std::string msg = checkpoint_error(tmp.path());
    EXPECT_TRUE(StartsWith(msg, (tmp / "model.safetensors").string()));
    EXPECT_TRUE(HasSubstr(msg, "not a regular file"));
}

TEST(Corrupt, NoCheckpointInFolder) {
    TempDir tmp;
    fs::copy_file(model_dir() / "config.json", tmp / "config.json");
    const std::string msg = checkpoint_error(tmp.path());
    EXPECT_TRUE(StartsWith(msg, tmp.path().string()));
    EXPECT_TRUE(HasSubstr(msg, "model.safetensors"));
    EXPECT_TRUE(StartsWith(model_error(tmp / "no-such-folder"), (tmp / "no-such-folder").string()));
}

}  // namespace
}  // namespace plainllama
