// plainllama quantize: a saved quantized folder holds GGUF-layout blocks as U8 tensors, loads without quantizing
// again and gives exactly what quantizing at load gives; broken saved folders and conflicting flags are errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "plainllama/io/safetensors.h"
#include "plainllama/kernels/quant.h"
#include "plainllama/model/model.h"
#include "test_util.h"

namespace plainllama {
namespace {

using test::HasSubstr;
using test::run_binary;
namespace fs = std::filesystem;

const std::string kValText = (test::shared_dir() / "data/tinystories_val.txt").string();

nlohmann::json ppl(const std::string& dir, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"perplexity", "-m",       dir, "-f",     kValText, "-c",
                                     "256",        "--chunks", "3", "--json", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_binary(args);
    EXPECT_EQ(r.status, 0) << r.err;
    return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
}

class SavedFolder : public ::testing::TestWithParam<const char*> {};

TEST_P(SavedFolder, EqualsQuantizingAtLoad) {
    const char* scheme = GetParam();
    const std::string src = test::model_dir("tinystories3M").string();
    test::TempDir tmp;
    const auto out = tmp / "q";
    const auto r = run_binary({"quantize", "-m", src, "-o", out.string(), "--quant", scheme});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(HasSubstr(r.err, scheme));
    for (const char* f : {"config.json", "tokenizer.model", "model.safetensors"}) EXPECT_TRUE(fs::exists(out / f)) << f;
    EXPECT_FALSE(fs::exists(out / ".model.safetensors.partial"));
    // the same figures as quantizing at load, to the last digit, with or without naming the scheme again
    const auto saved_ppl = ppl(out.string())["ppl"];
    EXPECT_EQ(saved_ppl, ppl(src, {"--quant", scheme})["ppl"]);
    EXPECT_EQ(ppl(out.string(), {"--quant", scheme})["ppl"], saved_ppl);

    // the blocks are the source rows quantized (GGUF's layout, quant.h), U8 [rows, row bytes], formats in
    // __metadata__
    const Checkpoint saved(out);
    const Checkpoint orig(src);
    const std::string name = "model.layers.3.mlp.down_proj.weight";
    const TensorView& t = *saved.find(name);
    const std::string fmt = saved.metadata().at("plainllama.quant:" + name);
    QuantType q;
    ASSERT_TRUE(parse_quant_type(fmt, &q));
    const bool km = std::string(scheme) == "q4_k_m" || std::string(scheme) == "q5_k_m";
    EXPECT_EQ(fmt, km ? "q6_k" : scheme);
    EXPECT_EQ(saved.metadata().at("plainllama.quant_scheme"), scheme);
    EXPECT_EQ(t.dtype, DType::U8);
    const TensorView& o = *orig.find(name);
    ASSERT_EQ(t.shape, (std::vector<int64_t>{o.shape[0], int64_t(quant_row_bytes(q, o.shape[1]))}));
    std::vector<uint8_t> row(quant_row_bytes(q, o.shape[1]));
    quantize_row(q, static_cast<const float*>(o.data) + 5 * o.shape[1], row.data(), o.shape[1]);
    EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(t.data) + 5 * row.size(), row.data(), row.size()), 0);
    // norms as in the source; the (untied) embedding in the scheme's base format, rows of blocks as the matrices
    EXPECT_EQ(saved.find("model.norm.weight")->dtype, DType::F32);
    const TensorView& e = *saved.find("model.embed_tokens.weight");
    const std::string efmt = saved.metadata().at("plainllama.quant:model.embed_tokens.weight");
    EXPECT_EQ(efmt, std::string(scheme) == "q4_k_m" ? "q4_k" : std::string(scheme) == "q5_k_m" ? "q5_k" : scheme);
    QuantType eq;
    ASSERT_TRUE(parse_quant_type(efmt, &eq));
    const TensorView& eo = *orig.find("model.embed_tokens.weight");
    ASSERT_EQ(e.dtype, DType::U8);
    ASSERT_EQ(e.shape, (std::vector<int64_t>{eo.shape[0], int64_t(quant_row_bytes(eq, eo.shape[1]))}));
    std::vector<uint8_t> erow(quant_row_bytes(eq, eo.shape[1]));
    quantize_row(eq, static_cast<const float*>(eo.data) + 7 * eo.shape[1], erow.data(), eo.shape[1]);
    EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(e.data) + 7 * erow.size(), erow.data(), erow.size()), 0);
}

INSTANTIATE_TEST_SUITE_P(Quantize, SavedFolder, ::testing::Values("q8_0", "q6_k", "q4_k_m", "q5_k_m", "q4_0"),
                         [](const auto& info) { return std::string(info.param); });

TEST(Quantize, Errors) {
    const std::string src = test::model_dir("tinystories3M").string();
    test::TempDir tmp;
    const auto out = tmp / "q";
    ASSERT_EQ(run_binary({"quantize", "-m", src, "-o", out.string(), "--quant", "q8_0"}).status, 0);
    // a second run into the same folder
    auto r = run_binary({"quantize", "-m", src, "-o", out.string(), "--quant", "q8_0"});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(HasSubstr(r.err, out.string() + ": is not empty (holds 'config.json' and ")) << r.err;
    // a folder holding other weights (a load would read the index, not the new file)
    test::TempDir stale;
    test::write_file(stale / "model.safetensors.index.json", "{}");
    r = run_binary({"quantize", "-m", src, "-o", stale.path().string(), "--quant", "q8_0"});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(HasSubstr(r.err, "(holds 'model.safetensors.index.json')")) << r.err;
    // --kl-divergence needs the unquantized weights, which a saved folder no longer has
    r = run_binary({"perplexity", "-m", out.string(), "-f", kValText, "-c", "256", "--chunks", "2", "--quant", "q8_0",
                    "--kl-divergence"});
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(HasSubstr(r.err, "is a saved quantized folder (q8_0)")) << r.err;
    // none is not a format to save
    r = run_binary({"quantize", "-m", src, "-o", (tmp / "n").string(), "--quant", "none"});
    EXPECT_EQ(r.status, 2);
    // loading a q8_0 folder as another scheme
    r = run_binary({"generate", "-m", out.string(), "-p", "Once", "-n", "2", "--quant", "q4_k_m"});
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(HasSubstr(r.err, "already quantized (q8_0)")) << r.err;
    // an unknown format in __metadata__, and a U8 tensor the metadata does not name (same-length edits)
    const std::string file = test::read_file(out / "model.safetensors");
    const std::string key = "\"plainllama.quant:model.layers.0.mlp.up_proj.weight\":\"q8_0\"";
    ASSERT_NE(file.find(key), std::string::npos);
    struct Case {
        std::string replacement, message;
    };
    for (const Case& c : {Case{"\"plainllama.quant:model.layers.0.mlp.up_proj.weight\":\"q9_9\"", "format 'q9_9'"},
                          Case{"\"plainllama.quant:model.layers.0.mlp.up_proj.weighX\":\"q8_0\"",
                               "'model.layers.0.mlp.up_proj.weight' is U8 but __metadata__ names no format"}}) {
        test::TempDir bad;
        test::copy_model(out, bad.path());
        std::string edited = file;
        edited.replace(edited.find(key), key.size(), c.replacement);
        test::write_file(bad / "model.safetensors", edited);
        r = run_binary({"generate", "-m", bad.path().string(), "-p", "Once", "-n", "2"});
        EXPECT_EQ(r.status, 1) << c.message;
        EXPECT_TRUE(HasSubstr(r.err, c.message)) << r.err;
    }
    // a q8_0 quant of -128, which the format's quantizer never writes (and which the sign trick of some kernels
    // would misread): refused at load, naming the tensor and block
    const size_t data_start = 8 + [&] {
        uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = n << 8 | uint8_t(file[size_t(i)]);
        return size_t(n);
    }();
    const auto header = nlohmann::json::parse(file.substr(8, data_start - 8));
    const size_t begin = header["model.layers.1.mlp.down_proj.weight"]["data_offsets"][0].get<size_t>();
    test::TempDir neg;
    test::copy_model(out, neg.path());
    std::string edited = file;
    edited[data_start + begin + 34 * 3 + 2 + 5] = char(0x80);  // block 3, quant 5
    test::write_file(neg / "model.safetensors", edited);
    r = run_binary({"generate", "-m", neg.path().string(), "-p", "Once", "-n", "2"});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(HasSubstr(r.err, "tensor 'model.layers.1.mlp.down_proj.weight': q8_0 block 3 holds the quant -128"))
        << r.err;
}

// The output folder must be new or empty: a user's files there are never overwritten or mixed with the new model (a
// stale tokenizer.json beside a new tokenizer.model would be read first); a folder that a killed run left with only its
// partial file is ours, and is cleaned and used.
TEST(Quantize, OutputFolderMustBeNewOrEmpty) {
    const std::string src = test::model_dir("stories260K").string();
    test::TempDir tmp;
    const fs::path mine = tmp / "mine";
    fs::create_directory(mine);
    test::write_file(mine / "config.json", "{\"mine\": true}");
    auto r = run_binary({"quantize", "-m", src, "-o", mine.string(), "--quant", "q8_0"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "plainllama: error: " + mine.string() +
                         ": is not empty (holds 'config.json'); the output folder must be new or empty\n");
    EXPECT_EQ(test::read_file(mine / "config.json"), "{\"mine\": true}");
    EXPECT_EQ(std::distance(fs::directory_iterator(mine), fs::directory_iterator()), 1);

    const fs::path empty = tmp / "empty";  // an empty folder is fine
    fs::create_directory(empty);
    EXPECT_EQ(run_binary({"quantize", "-m", src, "-o", empty.string(), "--quant", "q8_0", "--quiet"}).status, 0);
    EXPECT_TRUE(fs::exists(empty / "model.safetensors"));

    const fs::path killed = tmp / "killed";  // a run killed while writing left its partial file (pid long gone)
    fs::create_directory(killed);
    test::write_file(killed / ".model.safetensors.99999999.partial", "half a file");
    r = run_binary({"quantize", "-m", src, "-o", killed.string(), "--quant", "q8_0", "--quiet"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_FALSE(fs::exists(killed / ".model.safetensors.99999999.partial"));
    for (const auto& e : fs::directory_iterator(killed))
        EXPECT_FALSE(e.path().string().ends_with(".partial")) << e.path();

    // a model that fails to load: the folder made for it is removed again
    r = run_binary(
        {"quantize", "-m", (tmp / "no-model").string(), "-o", (tmp / "new" / "q").string(), "--quant", "q8_0"});
    EXPECT_EQ(r.status, 1);
    EXPECT_FALSE(fs::exists(tmp / "new"));
}

// generation_config.json is copied (Llama 3's stop ids come from it), with the tokenizer files and config.json, and
// the saved folder stops where it says.
TEST(Quantize, CopiesGenerationConfig) {
    test::TempDir tmp;
    const fs::path src = tmp / "src", out = tmp / "q";
    test::copy_model(test::model_dir("stories260K"), src);
    auto generate = [&](const fs::path& m, std::vector<std::string> extra) {
        std::vector<std::string> args = {"generate", "-m",     m.string(), "-p",     "Once upon a time", "-n",
                                         "32",       "--temp", "0",        "--json", "--quiet"};
        args.insert(args.end(), extra.begin(), extra.end());
        const auto g = run_binary(args);
        EXPECT_EQ(g.status, 0) << g.err;
        return g.status == 0 ? nlohmann::json::parse(g.out) : nlohmann::json{};
    };
    // a stop id from the reply itself: the first token from the fourth on that did not come before
    const std::vector<int32_t> reply = generate(src, {"--quant", "q8_0"})["tokens"];
    size_t at = 3;
    while (at < reply.size() &&
           std::find(reply.begin(), reply.begin() + long(at), reply[at]) != reply.begin() + long(at))
        ++at;
    ASSERT_LT(at, reply.size());
    const std::string gen = "{\"eos_token_id\": [2, " + std::to_string(reply[at]) + "], \"temperature\": 0.6}\n";
    test::write_file(src / "generation_config.json", gen);
    const auto r = run_binary({"quantize", "-m", src.string(), "-o", out.string(), "--quant", "q8_0", "--quiet"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(test::read_file(out / "generation_config.json"), gen);
    EXPECT_EQ(test::read_file(out / "config.json"), test::read_file(src / "config.json"));
    EXPECT_EQ(test::read_file(out / "tokenizer.model"), test::read_file(src / "tokenizer.model"));
    const auto saved = generate(out, {});
    EXPECT_EQ(saved["stop"], "eos");
    EXPECT_EQ(saved["tokens"], std::vector<int32_t>(reply.begin(), reply.begin() + long(at) + 1));
}

}  // namespace
}  // namespace plainllama
