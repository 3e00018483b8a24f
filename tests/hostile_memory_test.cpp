// A KV cache larger than the machine, end to end through the binary: refused before anything is allocated, in one
// line naming the bytes needed and available and a -c that would fit (the conventions of hostile_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hostile_util.h"
#include "plainllama/io/dtype.h"
#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::model_dir;
using test::one_error;
using test::RawTensor;
using test::run_binary;
using test::RunResult;
using test::TempDir;

// A small model whose KV cache at max_position_embeddings = 2^24 is 4 TiB:
// 2 (K, V) x 8 layers x 16 KV heads x head_dim 256 x 2^24 positions x 4 bytes = 2^42 bytes.
void make_huge_context_model(const fs::path& dir) {
    fs::create_directories(dir);
    const int64_t H = 8, F = 8, L = 8, heads = 16, hd = 256, V = 512;
    const json cfg = {{"hidden_size", H},
                      {"intermediate_size", F},
                      {"num_hidden_layers", L},
                      {"num_attention_heads", heads},
                      {"num_key_value_heads", heads},
                      {"head_dim", hd},
                      {"vocab_size", V},
                      {"max_position_embeddings", int64_t(1) << 24},
                      {"rms_norm_eps", 1e-5},
                      {"tie_word_embeddings", true}};
    test::write_file(dir / "config.json", cfg.dump());
    auto tensor = [](const std::string& name, std::vector<int64_t> shape) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        std::string bytes(size_t(n) * 2, '\0');
        for (int64_t i = 0; i < n; ++i) {
            const uint16_t h = f32_to_bf16(0.01f * float(i % 17));
            std::memcpy(&bytes[size_t(i) * 2], &h, 2);
        }
        return RawTensor{name, "BF16", shape, bytes};
    };
    std::vector<RawTensor> t = {tensor("model.embed_tokens.weight", {V, H})};
    for (int64_t l = 0; l < L; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        for (const char* n : {"input_layernorm", "post_attention_layernorm"})
            t.push_back(tensor(p + n + ".weight", {H}));
        for (const char* n : {"q_proj", "k_proj", "v_proj"})
            t.push_back(tensor(p + "self_attn." + n + ".weight", {heads * hd, H}));
        t.push_back(tensor(p + "self_attn.o_proj.weight", {H, heads * hd}));
        t.push_back(tensor(p + "mlp.gate_proj.weight", {F, H}));
        t.push_back(tensor(p + "mlp.up_proj.weight", {F, H}));
        t.push_back(tensor(p + "mlp.down_proj.weight", {H, F}));
    }
    t.push_back(tensor("model.norm.weight", {H}));
    test::write_safetensors(dir / "model.safetensors", t);
    fs::copy_file(model_dir() / "tokenizer.model", dir / "tokenizer.model");
}

// A KV cache the machine cannot hold is reported, with its size, before anything is allocated: not a crash,
// not an OOM kill after touching the memory of an overcommitted allocation. The size is the whole cache. Without -c
// the cache is the default 4096 positions (1 GiB here in f32), which fits. The line names the bytes needed and
// available, and a -c that would fit.
TEST(HostileMemory, KvCacheTooLargeIsReportedWithItsSize) {
    TempDir tmp;
    make_huge_context_model(tmp / "m");
    {  // the model itself is fine: it loads and inspects
        const RunResult r = run_binary({"inspect", "-m", (tmp / "m").string()});
        ASSERT_EQ(r.status, 0) << r.err;
    }
#ifdef PLAINLLAMA_ASAN
    const uint64_t limit = 0;  // ASan reserves terabytes of shadow address space; it refuses 2 TiB itself
#else
    const uint64_t limit = uint64_t(64) << 30;  // 64 GiB: on an overcommitting machine the test cannot hurt it
#endif
    const std::vector<std::string> args = {"generate", "-m", (tmp / "m").string(), "-p", "Once", "-n", "1"};
    {
        const RunResult r = run_binary(args, "", limit);
        EXPECT_EQ(r.status, 0) << r.err;
    }
    {
        std::vector<std::string> huge = args;
        huge.insert(huge.end(), {"-c", "16777216", "--cache-type", "f32"});
        const RunResult r = run_binary(huge, "", limit);
        EXPECT_TRUE(one_error(r, {"KV cache", "available", "-c 16777216", "--cache-type f32"}, 1));
        // what would fit: a smaller -c (the default 4096 does)
        EXPECT_NE(r.err.find(" would fit"), std::string::npos) << r.err;
        const size_t at = r.err.find("; -c ");
        ASSERT_NE(at, std::string::npos) << r.err;
        const long fits = std::stol(r.err.substr(at + 5));
        EXPECT_GE(fits, 4096) << r.err;
        EXPECT_LT(fits, 16777216) << r.err;
        // 2^42 bytes, in any of the usual units.
        bool sized = false;
        for (const char* s : {"4398046511104 bytes", "4194304 MiB", "4096 GiB", "4096.0 GiB", "4.0 TiB", "4 TiB",
                              "4.00 TiB", "4096.00 GiB"})
            sized |= r.err.find(s) != std::string::npos;
        EXPECT_TRUE(sized) << "the message should give the whole KV cache, 2^42 bytes: " << r.err;
    }
}

}  // namespace
}  // namespace plainllama
