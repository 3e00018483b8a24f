// The GGUF reader (io/gguf.h) on files built by hand: every metadata type read back, and each way a header can lie
// (counts, lengths, shapes, offsets, types, alignment, versions, split sets) refused with one line naming the file
// and the key or tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "fuzz/invariants.h"
#include "gguf_builder.h"
#include "loader_util.h"
#include "plainllama/io/gguf.h"
#include "test_util.h"

namespace plainllama {
namespace {

using test::error_of;
using test::GgufBuilder;
using test::HasSubstr;

// Parses b's bytes (copied into an 8-byte-aligned buffer, as a mapping is page-aligned) and checks the fuzzer's
// invariants on what comes out.
struct Parsed {
    std::vector<uint64_t> buf;
    std::unique_ptr<GgufFile> file;
};
Parsed parse(const std::string& bytes) {
    Parsed p;
    p.buf.assign(bytes.size() / 8 + 1, 0);
    std::memcpy(p.buf.data(), bytes.data(), bytes.size());
    p.file = std::make_unique<GgufFile>(reinterpret_cast<const uint8_t*>(p.buf.data()), bytes.size(), "t.gguf");
    return p;
}
std::string parse_error(const std::string& bytes) {
    const std::string e = error_of([&] { parse(bytes); });
    EXPECT_EQ(fuzz::error_violation(e), "");
    EXPECT_TRUE(test::StartsWith(e, "t.gguf: ")) << e;
    return e;
}

GgufBuilder tiny() {  // one key, one F32 tensor [4, 2]
    GgufBuilder b;
    b.string("general.architecture", "llama");
    std::string data(32, '\0');
    for (int i = 0; i < 8; ++i) {
        const float f = float(i);
        std::memcpy(&data[size_t(4 * i)], &f, 4);
    }
    b.add_tensor("w", {4, 2}, kGgmlF32, data);
    return b;
}

TEST(GgufReader, EveryValueTypeReadsBack) {
    GgufBuilder b;
    b.add("u8", GgufType::u8, GgufBuilder::raw<uint8_t>(200))
        .add("i8", GgufType::i8, GgufBuilder::raw<int8_t>(-5))
        .add("u16", GgufType::u16, GgufBuilder::raw<uint16_t>(60000))
        .add("i16", GgufType::i16, GgufBuilder::raw<int16_t>(-30000))
        .u32("u32", 4000000000u)
        .add("i32", GgufType::i32, GgufBuilder::raw<int32_t>(-2000000000))
        .f32("f32", 0.1f)
        .boolean("bool", true)
        .string("string", "llama")
        .add("u64", GgufType::u64, GgufBuilder::raw<uint64_t>(~uint64_t(0)))
        .add("i64", GgufType::i64, GgufBuilder::raw<int64_t>(-(int64_t(1) << 40)))
        .add("f64", GgufType::f64, GgufBuilder::raw<double>(1e-300))
        .strings("strings", {"a", "", "\xe2\x96\x81the"})
        .array<float>("floats", GgufType::f32, {1.5f, -2.0f})
        .array<int32_t>("ints", GgufType::i32, {1, -2, 3})
        .array<uint8_t>("bools", GgufType::boolean, {0, 1})
        .array<int64_t>("empty", GgufType::i64, {});
    const Parsed p = parse(b.bytes());
    const GgufFile& f = *p.file;
    EXPECT_EQ(f.version(), 3u);
    ASSERT_EQ(f.metadata().size(), 17u);
    EXPECT_EQ(f.metadata()[3].first, "i16");  // file order
    EXPECT_EQ(f.find("u8")->integer(), 200);
    EXPECT_EQ(f.find("i8")->integer(), -5);
    EXPECT_EQ(f.find("u16")->integer(), 60000);
    EXPECT_EQ(f.find("i16")->integer(), -30000);
    EXPECT_EQ(f.find("u32")->integer(), 4000000000);
    EXPECT_EQ(f.find("i32")->integer(), -2000000000);
    EXPECT_EQ(f.find("f32")->number(), double(0.1f));  // widened exactly
    EXPECT_TRUE(f.boolean("bool", false));
    EXPECT_EQ(f.string("string"), "llama");
    EXPECT_EQ(f.find("u64")->integer(), std::numeric_limits<int64_t>::max());
    EXPECT_EQ(f.find("u64")->number(), 18446744073709551615.0);
    EXPECT_EQ(f.find("i64")->integer(), -(int64_t(1) << 40));
    EXPECT_EQ(f.find("f64")->number(), 1e-300);
    const GgufValue& s = f.array("strings", GgufType::string, 3);
    EXPECT_EQ(s.strings[1], "");
    EXPECT_EQ(s.strings[2], "\xe2\x96\x81the");
    EXPECT_EQ(f.array("floats", GgufType::f64).number(1), -2.0);
    EXPECT_EQ(f.array("ints", GgufType::i64).integer(1), -2);
    EXPECT_EQ(f.find("bools")->integer(1), 1);
    EXPECT_EQ(f.find("empty")->count, 0u);
    EXPECT_EQ(f.find("strings")->brief(), "an array of 3 strings");
    EXPECT_EQ(f.find("u32")->brief(), "u32 4000000000");
    EXPECT_EQ(f.find("string")->brief(), "string \"llama\"");
    EXPECT_TRUE(f.tensors().empty());
    // Typed reads name the key and say what was expected.
    EXPECT_TRUE(HasSubstr(error_of([&] { f.integer("u32", 0, 100); }),
                          "t.gguf: 'u32' must be in [0, 100], found u32 4000000000"));
    EXPECT_TRUE(HasSubstr(error_of([&] { f.integer("string", 0, 100); }), "'string' must be an integer"));
    EXPECT_TRUE(HasSubstr(error_of([&] { f.integer("u64", 0, INT64_MAX); }), "'u64' must be in"));
    EXPECT_TRUE(HasSubstr(error_of([&] { f.string("missing"); }), "'missing' is missing (expected a string)"));
    EXPECT_TRUE(HasSubstr(error_of([&] { f.array("floats", GgufType::f64, 3); }),
                          "'floats' must be an array of numbers with 3 elements"));
    EXPECT_TRUE(HasSubstr(error_of([&] { f.boolean("u8", false); }), "'u8' must be a bool"));
    EXPECT_EQ(f.integer("missing", 0, 9, false, 7), 7);
}

TEST(GgufReader, VersionTwoReadsAsThree) {
    GgufBuilder b = tiny();
    b.version = 2;
    const Parsed p = parse(b.bytes());
    EXPECT_EQ(p.file->version(), 2u);
    EXPECT_EQ(p.file->string("general.architecture"), "llama");
    ASSERT_TRUE(p.file->tensor("w"));
    EXPECT_EQ(p.file->tensor("w")->nbytes, 32u);
}

TEST(GgufReader, TensorsPointIntoTheFileAtAlignedOffsets) {
    GgufBuilder b = tiny();
    b.add_tensor("q", {32, 3}, kGgmlQ8_0, std::string(3 * 34, '\x01'));
    b.u32("general.alignment", 64);
    b.alignment = 64;
    const std::string bytes = b.bytes();
    const Parsed p = parse(bytes);
    const GgufTensor* w = p.file->tensor("w");
    const GgufTensor* q = p.file->tensor("q");
    ASSERT_TRUE(w && q);
    EXPECT_EQ(p.file->alignment(), 64u);
    EXPECT_EQ(w->offset % 64, 0u);
    EXPECT_EQ(q->offset % 64, 0u);
    EXPECT_EQ(w->nbytes, 32u);
    EXPECT_EQ(q->nbytes, 102u);
    EXPECT_EQ(q->rows(), 3);
    EXPECT_EQ(std::string(q->type->name), "Q8_0");
    float f;
    std::memcpy(&f, w->data + 12, 4);
    EXPECT_EQ(f, 3.0f);
    EXPECT_EQ(reinterpret_cast<const char*>(w->data), reinterpret_cast<const char*>(p.buf.data()) + w->offset);
}

TEST(GgufReader, BadHeadersAreOneLineNamingWhat) {
    EXPECT_TRUE(HasSubstr(parse_error("GGU"), "not a GGUF file"));
    EXPECT_TRUE(HasSubstr(parse_error("GGML" + std::string(20, '\0')), "not a GGUF file"));
    for (uint32_t v : {1u, 4u, 0x03000000u}) {
        GgufBuilder b = tiny();
        b.version = v;
        const std::string e = parse_error(b.bytes());
        EXPECT_TRUE(HasSubstr(e, v == 1   ? "version 1 is not supported"
                                 : v == 4 ? "version 4 is not supported"
                                          : "big-endian"));
    }
    GgufBuilder many = tiny();
    many.claimed_kvs = uint64_t(1) << 62;
    EXPECT_TRUE(HasSubstr(parse_error(many.bytes()), "claims 4611686018427387904 metadata keys"));
    many = tiny();
    many.claimed_tensors = uint64_t(1) << 40;
    EXPECT_TRUE(HasSubstr(parse_error(many.bytes()), "tensors; the"));

    GgufBuilder nested;
    nested.add("a.nested", GgufType::array,
               GgufBuilder::raw(uint32_t(GgufType::array)) + GgufBuilder::raw<uint64_t>(1));
    EXPECT_TRUE(HasSubstr(parse_error(nested.bytes()), "'a.nested' is an array of arrays"));
    GgufBuilder bad_type;
    bad_type.add("k", GgufType(13), "x");
    EXPECT_TRUE(HasSubstr(parse_error(bad_type.bytes()), "'k' has an unknown value type 13"));
    GgufBuilder long_string;
    long_string.add("k", GgufType::string, GgufBuilder::raw<uint64_t>(uint64_t(1) << 63) + "abc");
    EXPECT_TRUE(HasSubstr(parse_error(long_string.bytes()), "claims 9223372036854775808 bytes"));
    GgufBuilder huge_array;
    huge_array.add("k", GgufType::array,
                   GgufBuilder::raw(uint32_t(GgufType::f64)) + GgufBuilder::raw<uint64_t>(~uint64_t(0) / 4));
    EXPECT_TRUE(HasSubstr(parse_error(huge_array.bytes()), "'k' claims"));
    GgufBuilder strings;
    strings.add("k", GgufType::array,
                GgufBuilder::raw(uint32_t(GgufType::string)) + GgufBuilder::raw<uint64_t>(uint64_t(1) << 61));
    EXPECT_TRUE(HasSubstr(parse_error(strings.bytes()), "'k' claims 2305843009213693952 strings"));
    GgufBuilder twice = tiny();
    twice.string("general.architecture", "llama");
    EXPECT_TRUE(HasSubstr(parse_error(twice.bytes()), "'general.architecture' appears twice"));
    GgufBuilder flag;
    flag.add("b", GgufType::boolean, GgufBuilder::raw<uint8_t>(2));
    EXPECT_TRUE(HasSubstr(parse_error(flag.bytes()), "'b' holds a bool that is neither 0 nor 1"));
    GgufBuilder empty_key;
    empty_key.u32("", 1);
    EXPECT_TRUE(HasSubstr(parse_error(empty_key.bytes()), "metadata key 0 has an empty name"));
    // general.alignment: a u32 power of two.
    for (uint32_t a : {0u, 3u, 48u}) {
        GgufBuilder b = tiny();
        b.u32("general.alignment", a);
        EXPECT_TRUE(HasSubstr(parse_error(b.bytes()), "'general.alignment' must be a power of 2"));
    }
    GgufBuilder a64 = tiny();
    a64.add("general.alignment", GgufType::u64, GgufBuilder::raw<uint64_t>(32));
    EXPECT_TRUE(HasSubstr(parse_error(a64.bytes()), "'general.alignment' must be a u32, found u64 32"));
}

TEST(GgufReader, BadTensorInfosNameTheTensor) {
    auto with = [](auto edit) {
        GgufBuilder b = tiny();
        edit(*b.tensor("w"), b);
        return parse_error(b.bytes());
    };
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto&) { t.type = 99; }), "tensor 'w': unknown tensor type 99"));
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto&) { t.ne = {}; }), "tensor 'w': 0 dimensions"));
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto&) { t.ne = {1, 1, 1, 1, 1}; }), "tensor 'w': 5 dimensions"));
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto&) { t.ne = {4, uint64_t(1) << 63}; }), "dimension 1 is negative"));
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto&) {
                              t.ne = {1u << 20, 1u << 20, 1u << 20};
                          }),
                          "tensor 'w': shape [1048576]... is larger than the file can hold"));
    // A zero dimension does not let the others grow past what the file could hold.
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto&) {
                              t.ne = {0, uint64_t(1) << 62, uint64_t(1) << 62};
                          }),
                          "is larger than the file can hold"));
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto&) {
                              t.type = kGgmlQ8_0, t.ne = {33, 1};
                          }),
                          "tensor 'w': rows of 33 elements are not a multiple of Q8_0's block of 32"));
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto&) { t.offset = 16; }),
                          "tensor 'w': offset 16 is not a multiple of the alignment (32)"));
    GgufBuilder far = tiny();
    far.tensor("w")->offset = 1024;
    const std::string cut = far.bytes();
    EXPECT_TRUE(HasSubstr(parse_error(cut.substr(0, cut.size() - 1)),
                          "tensor 'w' (32 bytes at offset 1024 of the data section) runs past the end"));
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto&) { t.ne = {4, 3}; }), "tensor 'w' (48 bytes at offset 0"));
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto&) { t.name = std::string(64, 'n'); }), "the name is 64 bytes"));
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto&) { t.name = "a\nb", t.type = 99; }), "tensor 'a\\x0ab'"));  // one line
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto& b) { b.tensors.push_back(t); }), "tensor 'w' appears twice"));
    EXPECT_TRUE(HasSubstr(with([](auto& t, auto& b) {
                              auto u = t;
                              u.name = "u";
                              u.offset = 0;
                              b.tensors.push_back(u);
                          }),
                          "tensors 'w' and 'u' overlap in the data section"));
}

TEST(GgufReader, EveryTruncationOfARealFileIsAnError) {
    const std::string whole = test::read_file(test::shared_dir() / "models/gguf/stories260K-F32.gguf");
    const size_t header = parse(whole).file->header_bytes();
    for (size_t n = 0; n < header + 4096; n += n < header ? 37 : 331) {
        SCOPED_TRACE(n);
        const std::string e = parse_error(whole.substr(0, n));
        EXPECT_TRUE(n < 4 ? HasSubstr(e, "not a GGUF file")
                          : HasSubstr(e, "truncated") || HasSubstr(e, "past the end") || HasSubstr(e, "cannot hold") ||
                                HasSubstr(e, "claims") || HasSubstr(e, "larger than the"))
            << e;
    }
    EXPECT_EQ(parse(whole).file->tensors().size(), 47u);
}

TEST(GgufReader, FloatTensorsAtOddOffsetsAreCopiedAligned) {
    GgufBuilder b = tiny();
    b.u32("general.alignment", 1);
    b.alignment = 1;
    b.add_tensor("pad", {1}, 24 /* I8 */, "x");
    b.tensor("pad")->offset = 0;
    b.tensor("w")->offset = 1;  // after the 1-byte tensor: not a multiple of 4
    const Parsed p = parse(b.bytes());
    const GgufTensor* w = p.file->tensor("w");
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w->data) % 4, 0u);
    float f;
    std::memcpy(&f, w->data + 28, 4);
    EXPECT_EQ(f, 7.0f);
}

// stories260K-F32.gguf as two parts (tensors shared out, split.* keys as llama.cpp's gguf-split writes them).
void write_split(const test::fs::path& dir, const std::string& stem, int count_key = 2) {
    const GgufFile whole(test::shared_dir() / "models/gguf/stories260K-F32.gguf");
    GgufBuilder a = GgufBuilder::from(whole), b;
    b.tensors.assign(a.tensors.begin() + 20, a.tensors.end());
    a.tensors.resize(20);
    a.add("split.no", GgufType::u16, GgufBuilder::raw<uint16_t>(0));
    a.add("split.count", GgufType::u16, GgufBuilder::raw<uint16_t>(uint16_t(count_key)));
    a.add("split.tensors.count", GgufType::i32, GgufBuilder::raw<int32_t>(47));
    b.add("split.no", GgufType::u16, GgufBuilder::raw<uint16_t>(1));
    b.add("split.count", GgufType::u16, GgufBuilder::raw<uint16_t>(uint16_t(count_key)));
    b.add("split.tensors.count", GgufType::i32, GgufBuilder::raw<int32_t>(47));
    test::write_file(dir / (stem + "-00001-of-00002.gguf"), a.bytes());
    test::write_file(dir / (stem + "-00002-of-00002.gguf"), b.bytes());
}

TEST(GgufSplit, PartsLoadAsOneModel) {
    test::TempDir tmp;
    write_split(tmp.path(), "s");
    for (const char* part : {"s-00001-of-00002.gguf", "s-00002-of-00002.gguf"}) {
        const GgufModel m(tmp / part);
        EXPECT_EQ(m.parts().size(), 2u);
        EXPECT_EQ(m.tensors().size(), 47u);
        EXPECT_TRUE(m.tensor("output_norm.weight"));
        EXPECT_EQ(m.meta().string("general.architecture"), "llama");
    }
    EXPECT_TRUE(is_gguf_model(tmp.path()));  // a folder holding one split set
    std::filesystem::remove(tmp / "s-00002-of-00002.gguf");
    EXPECT_TRUE(HasSubstr(error_of([&] { GgufModel m(tmp / "s-00001-of-00002.gguf"); }),
                          "s-00002-of-00002.gguf: missing (part 2 of the 2 of a split GGUF model)"));
    test::TempDir bad;
    write_split(bad.path(), "s", 3);
    std::filesystem::rename(bad / "s-00001-of-00002.gguf", bad / "one.gguf");
    EXPECT_TRUE(HasSubstr(error_of([&] { GgufModel m(bad / "one.gguf"); }),
                          "one.gguf: 'split.count' is 3 but 1 parts were given (give the first part"));
}

TEST(GgufSplit, OnlyNamesOfTheSplitPatternAreSplitSets) {
    test::TempDir tmp;
    for (const char* name :
         {"m-00001-of-00002.gguf", "m-00002-of-00002.gguf", "m-0001-of-00002.gguf", "m-00001-of-0002.gguf",
          "m-0000a-of-00002.gguf", "m-00001_of-00002.gguf", "m-00001-of-00002.ggml", "00001-of-00002.gguf"})
        test::write_file(tmp / name, "GGUF");
    // not of the pattern: the file alone
    for (const char* name : {"m-0001-of-00002.gguf", "m-00001-of-0002.gguf", "m-0000a-of-00002.gguf",
                             "m-00001_of-00002.gguf", "00001-of-00002.gguf", "plain.gguf"})
        EXPECT_EQ(gguf_parts(tmp / name), std::vector<std::filesystem::path>{tmp / name}) << name;
    const std::vector<std::filesystem::path> both{tmp / "m-00001-of-00002.gguf", tmp / "m-00002-of-00002.gguf"};
    EXPECT_EQ(gguf_parts(tmp / "m-00002-of-00002.gguf"), both);
    EXPECT_TRUE(HasSubstr(error_of([&] { gguf_parts(tmp / "m-00003-of-00002.gguf"); }),
                          "m-00003-of-00002.gguf: a split GGUF's name must be NAME-0000K-of-0000N.gguf"));
    EXPECT_TRUE(HasSubstr(error_of([&] { gguf_parts(tmp / "m-00000-of-00000.gguf"); }), "1 <= K <= N"));
    EXPECT_TRUE(HasSubstr(error_of([&] { gguf_parts(tmp / "x-00001-of-00003.gguf"); }),
                          "x-00001-of-00003.gguf: missing (part 1 of the 3"));
}

TEST(GgufSplit, AFolderWithSeveralGgufFilesIsAnError) {
    test::TempDir tmp;
    EXPECT_FALSE(is_gguf_model(tmp.path()));
    test::write_file(tmp / "a.gguf", "GGUF");
    std::filesystem::path file;
    EXPECT_TRUE(is_gguf_model(tmp.path(), &file));
    EXPECT_EQ(file.filename(), "a.gguf");
    test::write_file(tmp / "b.gguf", "GGUF");
    EXPECT_TRUE(HasSubstr(error_of([&] { is_gguf_model(tmp.path()); }), "holds 2 .gguf files (a.gguf, b.gguf"));
    test::write_file(tmp / "model.safetensors", "");  // a safetensors folder is not a GGUF one
    EXPECT_FALSE(is_gguf_model(tmp.path()));
    test::write_file(tmp / "noext", "GGUF....");  // by its magic
    EXPECT_TRUE(is_gguf_model(tmp / "noext"));
}

}  // namespace
}  // namespace plainllama
