// The subcommands on GGUF files: tokenize and inspect on llama.cpp's vocabulary-only files, inspect from the header
// alone, quantize -o NAME.gguf and every model command on what it wrote.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "gguf_builder.h"
#include "plainllama/io/gguf.h"
#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::GgufBuilder;
using test::run_binary;

TEST(GgufCli, TokenizeOnVocabularyOnlyFiles) {
    const std::string spm = test::shared_gguf("ggml-vocab-llama-spm.gguf").string();
    test::RunResult r = run_binary({"tokenize", "-m", spm, "-p", "I believe the meaning of life is"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "1 306 4658 278 6593 310 2834 338\n");
    const auto cases = test::read_json(test::shared_dir() / "reference/llama3_tokenizer/cases.json");
    const std::string l3 = test::shared_gguf("llama3-vocab.gguf").string();
    for (size_t i : {size_t(0), size_t(7), cases.size() - 1}) {
        r = run_binary({"tokenize", "-m", l3, "--no-bos", "--json", "-f", "-"}, cases[i][0].get<std::string>());
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(json::parse(r.out)["ids"], cases[i][1]) << cases[i][0];
    }
    r = run_binary({"tokenize", "-m", l3, "-p", "Hello world"});
    EXPECT_EQ(r.out, "128000 9906 1917\n");
}

TEST(GgufCli, InspectShowsMetadataAndTensorsOfAFileOrAVocabulary) {
    test::RunResult r = run_binary({"inspect", "-m", test::shared_gguf("llama3-vocab.gguf").string(), "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["n_tensors"], 0);
    EXPECT_EQ(j["tokenizer"]["kind"], "bpe");
    EXPECT_EQ(j["tokenizer"]["vocab_size"], 128256);
    EXPECT_EQ(j["gguf"]["metadata"]["tokenizer.ggml.pre"], "string \"llama-bpe\"");
    EXPECT_EQ(j["gguf"]["metadata"]["tokenizer.ggml.merges"], "an array of 280147 strings");
    EXPECT_EQ(j["config"]["vocab_size"], 128256);

    r = run_binary({"inspect", "-m", test::shared_gguf("tinystories3M-Q4_K_M.gguf").string(), "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    j = json::parse(r.out);
    EXPECT_EQ(j["gguf"]["file_type"], "Q4_K_M");
    EXPECT_EQ(j["gguf"]["version"], 3);
    EXPECT_EQ(j["quant"], "q4_k_m");
    EXPECT_EQ(j["n_tensors"], 39);
    const json& first = j["tensors"][0];
    EXPECT_EQ(first["name"], "token_embd.weight");
    EXPECT_EQ(first["dtype"], "Q4_K");
    EXPECT_EQ(first["shape"], json({256, 512}));
    EXPECT_EQ(first["bytes"], 512 * 144);
    size_t bytes = 0;
    for (const auto& t : j["tensors"]) bytes += t["bytes"].get<size_t>();
    EXPECT_EQ(j["n_bytes"], bytes);
    r = run_binary({"inspect", "-m", test::shared_gguf("stories260K-F32.gguf").string()});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(test::HasSubstr(r.out, "gguf: version 3, F32, 1 parts"));
    EXPECT_TRUE(test::HasSubstr(r.out, "blk.4.ffn_down.weight"));
    EXPECT_TRUE(test::HasSubstr(r.out, "tokenizer: sentencepiece (tokenizer.ggml.*), 512 tokens"));
}

TEST(GgufCli, InspectReadsTheHeaderAlone) {
    // A TinyLlama-sized model whose 3.9 GB of F32 tensor data is a hole in a sparse file: inspect answers with a few
    // MB of memory (reading the data would take gigabytes).
    test::TempDir tmp;
    GgufBuilder b = GgufBuilder::from(GgufFile(test::shared_gguf("stories260K-F32.gguf")));
    auto set = [&](const char* k, uint32_t v) { b.find(k)->value = GgufBuilder::raw(v); };
    set("llama.embedding_length", 2048);
    set("llama.feed_forward_length", 5632);
    set("llama.block_count", 22);
    set("llama.attention.head_count", 32);
    set("llama.attention.head_count_kv", 4);
    set("llama.rope.dimension_count", 64);
    b.u32("llama.vocab_size", 512);
    b.tensors.clear();
    auto add = [&](const std::string& name, std::vector<uint64_t> ne) {
        uint64_t n = 4;
        for (uint64_t d : ne) n *= d;
        b.add_tensor(name, ne, kGgmlF32, "");
        b.tensors.back().size = n;
    };
    add("token_embd.weight", {2048, 512});
    for (int l = 0; l < 22; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        add(p + "attn_norm.weight", {2048});
        add(p + "attn_q.weight", {2048, 2048});
        add(p + "attn_k.weight", {2048, 256});
        add(p + "attn_v.weight", {2048, 256});
        add(p + "attn_output.weight", {2048, 2048});
        add(p + "ffn_norm.weight", {2048});
        add(p + "ffn_gate.weight", {2048, 5632});
        add(p + "ffn_up.weight", {2048, 5632});
        add(p + "ffn_down.weight", {5632, 2048});
    }
    add("output_norm.weight", {2048});
    const std::string header = b.bytes(/*header_only=*/true);
    uint64_t data = 0, sizes = 0;
    for (const auto& t : b.tensors) data += (t.size + 31) / 32 * 32, sizes += t.size;
    test::write_file(tmp / "big.gguf", header);
    fs::resize_file(tmp / "big.gguf", header.size() + data);
    ASSERT_GT(data, uint64_t(3) << 30);
    const test::RunResult r = run_binary({"inspect", "-m", (tmp / "big.gguf").string(), "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["n_bytes"], sizes);
    // The same run's peak memory (its own rusage, not that of the test's other children).
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 1);
        const std::string bin = test::binary().string(), model = (tmp / "big.gguf").string();
        ::execl(bin.c_str(), bin.c_str(), "inspect", "-m", model.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    int status = 0;
    struct rusage ru {};
    ASSERT_EQ(::wait4(pid, &status, 0, &ru), pid);
    EXPECT_EQ(status, 0);
    EXPECT_LT(ru.ru_maxrss, 200 * 1024) << "KiB";  // the binary and its libraries; not the 3.9 GB
}

TEST(GgufCli, QuantizeToGgufAndRunIt) {
    test::TempDir tmp;
    const std::string dir = test::model_dir("tinystories3M").string(), out = (tmp / "t.gguf").string();
    test::RunResult r = run_binary({"quantize", "-m", dir, "-o", out, "--quant", "q4_k_m", "--quiet"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);  // no partial file
    const std::vector<std::string> gen = {"generate", "-p", "Once upon a time", "-n", "24", "--temp", "0", "--quiet"};
    auto with = [&](std::vector<std::string> args, std::vector<std::string> more) {
        args.insert(args.end(), more.begin(), more.end());
        return run_binary(args);
    };
    const test::RunResult a = with(gen, {"-m", out}), b = with(gen, {"-m", dir, "--quant", "q4_k_m"});
    ASSERT_EQ(a.status, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_GT(a.out.size(), 40u);
    const std::string text = (test::shared_dir() / "data/tinystories_val.txt").string();
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"perplexity", "-m", out, "-f", text, "-c", "64", "--chunks", "2", "--quiet"},
             {"chat", "-m", out, "-n", "8", "--temp", "0", "--quiet"}}) {
        r = run_binary(args, "Hello\n");
        EXPECT_EQ(r.status, 0) << args[0] << ": " << r.err;
    }
    // --quant none writes the weights as they are; a folder output needs a quantized format.
    r = run_binary({"quantize", "-m", dir, "-o", (tmp / "none.gguf").string(), "--quant", "none", "--quiet"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(GgufFile(tmp / "none.gguf").integer("general.file_type", 0, 99), 0);
    r = run_binary({"quantize", "-m", dir, "-o", (tmp / "folder").string(), "--quant", "none"});
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(test::HasSubstr(r.err, "--quant none: a folder is written quantized"));
}

}  // namespace
}  // namespace plainllama
