// `plainllama inspect` end to end: the tensor table, JSON, the kernels it reports, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "plainllama/io/config.h"
#include "plainllama/io/safetensors.h"
#include "plainllama/model/weights.h"
#include "plainllama/sys/threads.h"
#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::HasSubstr;
using test::model_dir;
using test::read_safetensors;
using test::TempDir;
using test::write_safetensors;

bool one_error_line(const std::string& err) {
    return err.rfind("plainllama: error: ", 0) == 0 && err.find('\n') == err.size() - 1;
}

TEST(InspectCli, PrintsTensorTable) {
    for (const char* folder : {"stories260K", "stories260K-bf16", "stories260K-f16"}) {
        SCOPED_TRACE(folder);
        const auto r = test::run_binary({"inspect", "-m", model_dir(folder).string()});
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.err, "");
        EXPECT_TRUE(HasSubstr(r.out, "\n47 tensors, 260032 parameters"));
        const LlamaConfig c = load_config(model_dir(folder) / "config.json");
        const std::string dtype = read_safetensors(model_dir(folder) / "model.safetensors").front().dtype;
        for (const TensorSpec& s : llama_tensor_table(c)) {
            // One row per tensor: name, dtype, shape.
            const size_t at = r.out.find("\n" + s.name + " ");
            ASSERT_NE(at, std::string::npos) << s.name;
            const std::string row = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
            EXPECT_TRUE(HasSubstr(row, " " + dtype + " "));
            EXPECT_TRUE(HasSubstr(row, shape_str(s.shape)));
        }
    }
}

TEST(InspectCli, JsonParses) {
    for (const char* folder : {"stories260K", "stories260K-bf16", "stories260K-f16"}) {
        SCOPED_TRACE(folder);
        const auto r = test::run_binary({"inspect", "--json", "-m", model_dir(folder).string()});
        ASSERT_EQ(r.status, 0) << r.err;
        const json j = json::parse(r.out, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << r.out;
        EXPECT_EQ(j["n_tensors"], 47);
        EXPECT_EQ(j["n_params"], 260032);
        ASSERT_EQ(j["tensors"].size(), 47u);
        EXPECT_EQ(j["tensors"][0]["name"], "model.embed_tokens.weight");
        EXPECT_EQ(j["tensors"][0]["shape"], json::array({512, 64}));
        EXPECT_EQ(j["tensors"][46]["name"], "model.norm.weight");
        EXPECT_EQ(j["config"]["hidden_size"], 64);
        EXPECT_EQ(j["config"]["num_key_value_heads"], 4);
        EXPECT_EQ(j["config"]["tie_word_embeddings"], true);
        EXPECT_EQ(j["tokenizer"]["kind"], "sentencepiece");
        EXPECT_EQ(j["tokenizer"]["vocab_size"], 512);
        EXPECT_EQ(j["tokenizer"]["bos"], (json{{"id", 1}, {"text", "<s>"}}));
    }
}

TEST(InspectCli, CorruptFolderOneErrorLine) {
    TempDir tmp;
    const std::string whole = test::read_file(model_dir() / "model.safetensors");
    struct Case {
        const char* what;
        std::function<void(const fs::path&)> corrupt;
        std::string names;
    };
    const std::vector<Case> cases = {
        {"truncated data",
         [&](const fs::path& d) { test::write_file(d / "model.safetensors", whole.substr(0, whole.size() / 2)); },
         "model.safetensors"},
        {"5-byte file", [](const fs::path& d) { test::write_file(d / "model.safetensors", "abcde"); },
         "model.safetensors"},
        {"bad config", [](const fs::path& d) { test::write_file(d / "config.json", "{\"hidden_size\": 64"); },
         "config.json"},
        {"missing tensor",
         [](const fs::path& d) {
             auto v = read_safetensors(d / "model.safetensors");
             v.pop_back();
             write_safetensors(d / "model.safetensors", v);
         },
         "is missing"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        const fs::path dir = tmp / c.what;
        test::copy_model(model_dir(), dir);
        c.corrupt(dir);
        for (bool as_json : {false, true}) {
            std::vector<std::string> args = {"inspect", "-m", dir.string()};
            if (as_json) args.push_back("--json");
            const auto r = test::run_binary(args);
            EXPECT_EQ(r.status, 1);
            EXPECT_TRUE(one_error_line(r.err)) << r.err;
            EXPECT_TRUE(HasSubstr(r.err, c.names));
            EXPECT_EQ(r.out, "");
        }
    }
}

// The kernels in use: the best this CPU runs, or the variant PLAINLLAMA_KERNELS names; an unknown variant, or one
// this CPU cannot run, is one error line naming it and exit status 2.
TEST(InspectCli, ReportsTheKernelsPlainllamaKernelsChooses) {
    const test::ScopedEnv tuning("PLAINLLAMA_TUNING", "");  // cpuid's: a bad one would be the error here
    auto kernels = [] {
        const auto r = test::run_binary({"inspect", "-m", model_dir().string(), "--json"});
        EXPECT_EQ(r.status, 0) << r.err;
        return r.status == 0 ? nlohmann::json::parse(r.out)["kernels"].get<std::string>() : "";
    };
    {
        const test::ScopedEnv env("PLAINLLAMA_KERNELS", "");  // empty: the best variant
        EXPECT_EQ(kernels(), kernel_variants().front());
    }
    for (const std::string& v : kernel_variants()) {
        test::ScopedEnv env("PLAINLLAMA_KERNELS", v);
        EXPECT_EQ(kernels(), v);
    }
    std::vector<std::string> refused = {"avx9", "AVX2", "scalar "};
    for (const char* v : {"avx512_bf16", "avx512", "avx2"}) {
        const auto runs = kernel_variants();
        if (std::find(runs.begin(), runs.end(), v) == runs.end()) refused.push_back(v);  // this CPU lacks it
    }
    for (const std::string& v : refused) {
        test::ScopedEnv env("PLAINLLAMA_KERNELS", v);
        const auto r = test::run_binary({"inspect", "-m", model_dir().string()});
        EXPECT_EQ(r.status, 2) << v;
        EXPECT_TRUE(one_error_line(r.err)) << r.err;
        EXPECT_TRUE(HasSubstr(r.err, "PLAINLLAMA_KERNELS=" + v + ":"));
        EXPECT_EQ(r.out, "");
    }
}

// The physical cores, as the default thread count counts them (tests that depend on that rule ask the binary).
TEST(InspectCli, ReportsThePhysicalCores) {
    const auto r = test::run_binary({"inspect", "-m", model_dir().string(), "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["physical_cores"], physical_cores());
}

// The decode kernels' tuning: cpuid's, or the one PLAINLLAMA_TUNING names; any other value is one error line naming it
// and exit status 2. The text names it beside the AVX-512 variants alone (the others have no tuning).
TEST(InspectCli, ReportsTheTuningPlainllamaTuningChooses) {
    const test::ScopedEnv best("PLAINLLAMA_KERNELS", "");  // the best variant (each one in the last loop)
    auto run = [] { return test::run_binary({"inspect", "-m", model_dir().string(), "--json"}); };
    {
        const test::ScopedEnv env("PLAINLLAMA_TUNING", "");  // empty: cpuid's
        const auto r = run();
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(nlohmann::json::parse(r.out)["tuning"], tuning_name(cpu_tuning()));
    }
    for (const char* t : {"intel", "zen4", "zen5"}) {
        const test::ScopedEnv env("PLAINLLAMA_TUNING", t);
        const auto r = run();
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(nlohmann::json::parse(r.out)["tuning"], t);
    }
    for (const std::string& k : kernel_variants()) {
        const test::ScopedEnv kernels("PLAINLLAMA_KERNELS", k.c_str()), env("PLAINLLAMA_TUNING", "zen5");
        const auto r = test::run_binary({"inspect", "-m", model_dir().string()});
        ASSERT_EQ(r.status, 0) << r.err;
        const bool tuned = test::variant_has_tuning(k);
        EXPECT_TRUE(HasSubstr(r.out, "\nkernels: " + k + (tuned ? " (tuning zen5)\n" : "\n"))) << r.out;
    }
    for (const char* t : {"zen3", "Intel", "zen4 "}) {
        const test::ScopedEnv env("PLAINLLAMA_TUNING", t);
        const auto r = run();
        EXPECT_EQ(r.status, 2) << t;
        EXPECT_TRUE(one_error_line(r.err)) << r.err;
        EXPECT_TRUE(HasSubstr(r.err, std::string("PLAINLLAMA_TUNING=") + t + ":")) << r.err;
        EXPECT_EQ(r.out, "");
    }
}

// --quant: the format each matrix takes at load and its bytes then, from the headers alone: llama.cpp's q4_k_m mix on
// tinystories3M (4 layers: q6_k for v_proj and down_proj of layers 2 and 3, and lm_head; the embedding q4_k), the
// block fallbacks of stories260K (FFN 172: down_proj stays F32; hidden 64: q5_0), and without --quant every tensor as
// stored.
TEST(InspectCli, QuantShowsEachMatrixFormatAndTheBytesLoaded) {
    auto inspect = [](const std::string& model, const std::string& quant) {
        const auto r = test::run_binary({"inspect", "-m", test::model_dir(model).string(), "--json", "--quant", quant});
        EXPECT_EQ(r.status, 0) << r.err;
        const auto j = nlohmann::json::parse(r.out);
        std::map<std::string, nlohmann::json> by_name;
        for (const auto& t : j["tensors"]) by_name[t["name"]] = t;
        return std::make_pair(j, by_name);
    };
    auto [j, t] = inspect("tinystories3M", "q4_k_m");
    EXPECT_EQ(j["quant"], "q4_k_m");
    EXPECT_EQ(t["model.layers.1.self_attn.v_proj.weight"]["format"], "q4_k");
    EXPECT_EQ(t["model.layers.2.self_attn.v_proj.weight"]["format"], "q6_k");
    EXPECT_EQ(t["model.layers.3.mlp.down_proj.weight"]["format"], "q6_k");
    EXPECT_EQ(t["lm_head.weight"]["format"], "q6_k");
    EXPECT_EQ(t["model.norm.weight"]["format"], "F32");
    EXPECT_EQ(t["model.embed_tokens.weight"]["format"], "q4_k");
    // [256, 256] q4_k: 16 groups of 16 rows, one tile each (quant.h)
    EXPECT_EQ(t["model.layers.0.self_attn.q_proj.weight"]["loaded_bytes"], 256 / 16 * kQ4x16Tile);
    EXPECT_EQ(t["model.layers.3.mlp.down_proj.weight"]["loaded_bytes"], 256 * 768 / 256 * 210);  // [256, 768] q6_k
    size_t sum = 0;
    for (const auto& entry : t) sum += size_t(entry.second["loaded_bytes"]);
    EXPECT_EQ(j["n_loaded_bytes"], sum);
    EXPECT_LT(size_t(j["n_loaded_bytes"]), size_t(j["n_bytes"]) / 5);

    auto [s, st] = inspect("stories260K", "q4_k_m");
    EXPECT_EQ(st["model.layers.0.mlp.down_proj.weight"]["format"], "F32");
    EXPECT_EQ(st["model.layers.0.mlp.gate_proj.weight"]["format"], "q5_0");

    auto [n, nt] = inspect("tinystories3M", "none");
    EXPECT_EQ(nt["model.layers.0.self_attn.q_proj.weight"]["format"], "F32");
    EXPECT_EQ(n["n_loaded_bytes"], n["n_bytes"]);
}

// The KV cache's bytes per token in each type that fits the model's head_dim (stories260K's 8: no q8_0), and at the
// default and the largest context; the text lists the same.
TEST(InspectCli, ShowsKvCacheBytesPerTokenPerCacheType) {
    struct Case {
        const char* folder;
        std::vector<std::pair<std::string, double>> types;  // name, bytes of one K or V row of one head
    };
    for (const Case& cs : {Case{"stories260K", {{"f32", 8 * 4}, {"f16", 8 * 2}, {"bf16", 8 * 2}}},
                           Case{"tinystories3M", {{"f32", 32 * 4}, {"f16", 32 * 2}, {"bf16", 32 * 2}, {"q8_0", 34}}}}) {
        SCOPED_TRACE(cs.folder);
        const LlamaConfig c = load_config(model_dir(cs.folder) / "config.json");
        const auto r = test::run_binary({"inspect", "--json", "-m", model_dir(cs.folder).string()});
        ASSERT_EQ(r.status, 0) << r.err;
        const auto kv = nlohmann::json::parse(r.out)["kv_cache"];
        ASSERT_EQ(kv.size(), cs.types.size()) << kv.dump();
        for (size_t i = 0; i < kv.size(); ++i) {
            const double per_token = double(c.num_hidden_layers * 2 * c.num_key_value_heads) * cs.types[i].second;
            EXPECT_EQ(kv[i]["cache_type"], cs.types[i].first);
            EXPECT_EQ(kv[i]["bytes_per_token"].get<double>(), per_token);
            EXPECT_EQ(kv[i]["bytes_at_max_position_embeddings"].get<double>(),
                      per_token * double(c.max_position_embeddings));
        }
        const auto text = test::run_binary({"inspect", "-m", model_dir(cs.folder).string()});
        EXPECT_TRUE(HasSubstr(text.out, "KV cache (--cache-type): bytes per token"));
        EXPECT_TRUE(HasSubstr(text.out, "\n  f16 "));
    }
}

TEST(InspectCli, MissingFolder) {
    TempDir tmp;
    const auto r = test::run_binary({"inspect", "-m", (tmp / "nope").string()});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(one_error_line(r.err)) << r.err;
    EXPECT_TRUE(HasSubstr(r.err, (tmp / "nope").string()));
    EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace plainllama
