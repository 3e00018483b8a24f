// Hostile GGUF files end to end through the binary, built by hand from llama.cpp's stories260K-F32.gguf: truncated,
// a tensor outside the file or overlapping another, an unknown or unsupported type, a missing tensor or key, a shape
// that disagrees with the hyperparameters, another architecture. Each one ends with exit status 1, one line on
// stderr naming the file and the key or tensor, nothing on stdout.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include "gguf_builder.h"
#include "hostile_util.h"
#include "plainllama/io/gguf.h"
#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;
using test::expect_load_error;
using test::GgufBuilder;
using test::one_error;
using test::run_binary;
using test::TempDir;

fs::path stories() { return test::shared_gguf("stories260K-F32.gguf"); }

template <class F>
fs::path edited(const TempDir& tmp, const std::string& name, F&& edit) {
    GgufBuilder b = GgufBuilder::from(GgufFile(stories()));
    edit(b);
    test::write_file(tmp / name, b.bytes());
    return tmp / name;
}

TEST(HostileGguf, TruncatedFiles) {
    TempDir tmp;
    const std::string whole = test::read_file(stories());
    test::write_file(tmp / "header.gguf", whole.substr(0, 5000));
    expect_load_error(tmp / "header.gguf", {"header.gguf", "'tokenizer.ggml.tokens'", "remain in the file"});
    test::write_file(tmp / "data.gguf", whole.substr(0, whole.size() - 100));
    expect_load_error(tmp / "data.gguf", {"data.gguf", "tensor 'output_norm.weight'", "runs past the end"});
    test::write_file(tmp / "empty.gguf", "");
    expect_load_error(tmp / "empty.gguf", {"empty.gguf", "not a GGUF file"});
    test::write_file(tmp / "text.gguf", "Once upon a time");
    expect_load_error(tmp / "text.gguf", {"text.gguf", "not a GGUF file"});
}

TEST(HostileGguf, TensorsOutsideTheFileOrOverlapping) {
    TempDir tmp;
    expect_load_error(edited(tmp, "outside.gguf",
                             [](GgufBuilder& b) {
                                 b.tensor("blk.2.ffn_up.weight")->offset = uint64_t(1) << 40;
                                 b.tensor("blk.2.ffn_up.weight")->written = false;
                             }),
                      {"outside.gguf", "tensor 'blk.2.ffn_up.weight'", "runs past the end"});
    expect_load_error(edited(tmp, "overlap.gguf", [](GgufBuilder& b) { b.tensor("blk.2.ffn_up.weight")->offset = 0; }),
                      {"overlap.gguf", "'token_embd.weight'", "'blk.2.ffn_up.weight'", "overlap"});
    expect_load_error(
        edited(tmp, "misaligned.gguf", [](GgufBuilder& b) { b.tensor("output_norm.weight")->offset = 4; }),
        {"misaligned.gguf", "tensor 'output_norm.weight'", "not a multiple of the alignment (32)"});
    expect_load_error(edited(tmp, "huge.gguf",
                             [](GgufBuilder& b) {
                                 b.tensor("blk.0.attn_q.weight")->ne = {uint64_t(1) << 40, uint64_t(1) << 40};
                             }),
                      {"huge.gguf", "tensor 'blk.0.attn_q.weight'", "larger than the file"});
}

TEST(HostileGguf, TypesAndCounts) {
    TempDir tmp;
    expect_load_error(edited(tmp, "type.gguf", [](GgufBuilder& b) { b.tensor("blk.0.attn_v.weight")->type = 77; }),
                      {"type.gguf", "tensor 'blk.0.attn_v.weight'", "unknown tensor type 77"});
    expect_load_error(edited(tmp, "q4_1.gguf",
                             [](GgufBuilder& b) {  // a ggml type the engine does not read
                                 GgufBuilder::Tensor& t = *b.tensor("blk.0.attn_v.weight");
                                 t.type = 3;  // Q4_1: 32 elements in 20 bytes
                                 t.data.resize(size_t(t.ne[1] * t.ne[0] / 32 * 20));
                             }),
                      {"q4_1.gguf", "tensor 'blk.0.attn_v.weight' is Q4_1",
                       "supported: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K"});
    expect_load_error(edited(tmp, "q2_k.gguf",
                             [](GgufBuilder& b) {
                                 GgufBuilder::Tensor& t = *b.tensor("blk.0.attn_v.weight");
                                 t.type = kGgmlQ2_K;  // 256 elements in 84 bytes: one block a row of 64 is refused
                                 t.ne = {256, 16};    // first, as an unsupported type
                                 t.data.assign(16 * 84, '\0');
                             }),
                      {"q2_k.gguf", "tensor 'blk.0.attn_v.weight' is Q2_K, which is not supported"});
    // The block types beside Q8_0, Q4_K and Q6_K: a row length that is not a multiple of the block, and llama.cpp's
    // files cut short.
    expect_load_error(edited(tmp, "q5_0.gguf",
                             [](GgufBuilder& b) {
                                 GgufBuilder::Tensor& t = *b.tensor("blk.0.ffn_down.weight");  // [172, 64] F32
                                 t.type = kGgmlQ5_0;
                                 t.data.assign(64 * 6 * 22, '\0');  // as if 6 blocks a row
                             }),
                      {"q5_0.gguf", "tensor 'blk.0.ffn_down.weight'", "not a multiple of Q5_0's block of 32"});
    for (const char* name : {"tinystories3M-Q4_0.gguf", "tinystories3M-Q5_K_M.gguf"}) {
        const std::string whole = test::read_file(test::shared_gguf(name));
        test::write_file(tmp / name, whole.substr(0, whole.size() / 2));
        expect_load_error(tmp / name, {name, "runs past the end"});
    }
    expect_load_error(edited(tmp, "q5_k.gguf",
                             [](GgufBuilder& b) {
                                 GgufBuilder::Tensor& t = *b.tensor("blk.0.ffn_up.weight");  // [64, 172] F32
                                 t.type = kGgmlQ5_K;
                                 t.data.assign(172 * 176, '\0');  // as if one block of 256 a row
                             }),
                      {"q5_k.gguf", "tensor 'blk.0.ffn_up.weight'", "not a multiple of Q5_K's block of 256"});
    expect_load_error(edited(tmp, "keys.gguf", [](GgufBuilder& b) { b.claimed_kvs = uint64_t(1) << 50; }),
                      {"keys.gguf", "1125899906842624 metadata keys"});
    expect_load_error(edited(tmp, "nested.gguf",
                             [](GgufBuilder& b) {
                                 b.add("general.tags", GgufType::array,
                                       GgufBuilder::raw(uint32_t(GgufType::array)) + GgufBuilder::raw<uint64_t>(1));
                             }),
                      {"nested.gguf", "'general.tags' is an array of arrays"});
    expect_load_error(edited(tmp, "v1.gguf", [](GgufBuilder& b) { b.version = 1; }), {"v1.gguf", "version 1"});
    expect_load_error(edited(tmp, "be.gguf", [](GgufBuilder& b) { b.version = 0x03000000; }),
                      {"be.gguf", "big-endian"});
}

TEST(HostileGguf, MetadataThatDisagreesWithTheTensors) {
    TempDir tmp;
    expect_load_error(edited(tmp, "notensor.gguf",
                             [](GgufBuilder& b) {
                                 b.tensors.erase(b.tensors.begin() + 5);  // blk.0.attn_output.weight
                             }),
                      {"notensor.gguf", "tensor 'blk.0.attn_output.weight' is missing (expected [64, 64])"});
    expect_load_error(edited(tmp, "nokey.gguf", [](GgufBuilder& b) { b.remove("llama.attention.head_count"); }),
                      {"nokey.gguf", "'llama.attention.head_count' is missing"});
    expect_load_error(
        edited(tmp, "shape.gguf",
               [](GgufBuilder& b) { b.find("llama.feed_forward_length")->value = GgufBuilder::raw(128u); }),
        {"shape.gguf", "tensor 'blk.0.ffn_gate.weight' has shape [64, 172]", "implies [64, 128]"});
    expect_load_error(edited(tmp, "arch.gguf",
                             [](GgufBuilder& b) { b.find("general.architecture")->value = GgufBuilder::str("qwen2"); }),
                      {"arch.gguf", "'general.architecture' is \"qwen2\"; only \"llama\" is supported"});
    expect_load_error(
        edited(tmp, "ctx.gguf", [](GgufBuilder& b) { b.find("llama.context_length")->value = GgufBuilder::raw(0u); }),
        {"ctx.gguf", "'llama.context_length' must be in [1, 16777216], found u32 0"});
    expect_load_error(
        edited(tmp, "extra.gguf",
               [](GgufBuilder& b) { b.add_tensor("blk.0.attn_q.bias", {64}, kGgmlF32, std::string(256, '\0')); }),
        {"extra.gguf", "unexpected tensor 'blk.0.attn_q.bias'"});
    expect_load_error(edited(tmp, "vocab.gguf", [](GgufBuilder& b) { b.u32("llama.vocab_size", 600); }),
                      {"vocab.gguf", "tensor 'token_embd.weight' has shape [64, 512]", "implies [64, 600]"});
}

TEST(HostileGguf, FoldersAndSplitSets) {
    TempDir tmp;
    fs::create_directories(tmp / "two");
    fs::copy_file(stories(), tmp / "two/a.gguf");
    fs::copy_file(stories(), tmp / "two/b.gguf");
    expect_load_error(tmp / "two", {"two: holds 2 .gguf files", "give one with -m FILE.gguf"});
    fs::copy_file(stories(), tmp / "m-00001-of-00002.gguf");
    expect_load_error(tmp / "m-00001-of-00002.gguf", {"m-00002-of-00002.gguf: missing (part 2 of the 2"});
    expect_load_error(tmp / "nothing.gguf", {"nothing.gguf", "cannot open"});
}

TEST(HostileGguf, QuantOnAQuantizedFileAndWritingTheWrongOutput) {
    TempDir tmp;
    const std::string q4 = test::shared_gguf("tinystories3M-Q4_K_M.gguf").string();
    EXPECT_TRUE(one_error(run_binary({"generate", "-m", q4, "-p", "Once", "-n", "2", "--quant", "q8_0"}),
                          {"--quant q8_0", "is already quantized (Q4_K_M)"}, 2));
    EXPECT_TRUE(one_error(run_binary({"quantize", "-m", q4, "-o", (tmp / "out").string(), "--quant", "q8_0"}),
                          {"-o", "a GGUF model is saved as a GGUF file"}, 2));
    test::write_file(tmp / "exists.gguf", "x");
    EXPECT_TRUE(one_error(run_binary({"quantize", "-m", test::model_dir().string(), "-o",
                                      (tmp / "exists.gguf").string(), "--quant", "q8_0"}),
                          {"exists.gguf: exists"}, 1));
    EXPECT_EQ(test::read_file(tmp / "exists.gguf"), "x");
    EXPECT_TRUE(one_error(run_binary({"tokenize", "-m", (tmp / "exists.gguf").string(), "-p", "hi"}),
                          {"exists.gguf", "not a GGUF file"}, 1));
}

}  // namespace
}  // namespace plainllama
