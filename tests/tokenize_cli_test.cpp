// `plainllama tokenize` end to end, on folders with config.json and a tokenizer but no weights.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;
using test::HasSubstr;
using test::run_binary;

// A folder with config.json (vocab_size) and the tokenizer files of `tokenizer_dir`, no weights.
fs::path tokenizer_folder(const test::TempDir& tmp, const fs::path& tokenizer_dir, int vocab_size) {
    const fs::path dir = tmp / "m";
    fs::create_directories(dir);
    for (const char* f : {"tokenizer.model", "tokenizer.json", "tokenizer_config.json"})
        if (fs::exists(tokenizer_dir / f)) fs::copy_file(tokenizer_dir / f, dir / f);
    test::write_file(dir / "config.json", nlohmann::json{{"architectures", {"LlamaForCausalLM"}},
                                                         {"hidden_size", 64},
                                                         {"intermediate_size", 128},
                                                         {"num_hidden_layers", 1},
                                                         {"num_attention_heads", 2},
                                                         {"vocab_size", vocab_size},
                                                         {"rms_norm_eps", 1e-5}}
                                              .dump());
    return dir;
}

// Meta's Llama 2 tokenizer (SentencePiece), the encoding of the reference Python tokenizer, BOS first.
TEST(TokenizeCli, SentencePieceFolder) {
    test::TempDir tmp;
    const fs::path dir = tokenizer_folder(tmp, test::shared_dir() / "tokenizers/llama2", 32000);
    const std::string text = "I believe the meaning of life is";
    auto r = run_binary({"tokenize", "-m", dir.string(), "-p", text});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "1 306 4658 278 6593 310 2834 338\n");
    EXPECT_EQ(r.err, "");
    r = run_binary({"tokenize", "-m", dir.string(), "-p", text, "--no-bos", "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out),
              (nlohmann::json{{"ids", {306, 4658, 278, 6593, 310, 2834, 338}}, {"n", 7}}));
    r = run_binary({"tokenize", "-m", dir.string(), "-p", "I believe", "--pieces"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out,
              "1\t<s>\n306\t\xE2\x96\x81I\n4658\t\xE2\x96\x81"
              "believe\n");
}

// Llama 3.1's tokenizer.json (BOS from its post-processor), from a file and from stdin.
TEST(TokenizeCli, TokenizerJsonFolder) {
    test::TempDir tmp;
    const fs::path dir = tokenizer_folder(tmp, test::shared_dir() / "tokenizers/llama3.1", 128256);
    auto r = run_binary({"tokenize", "-m", dir.string(), "-p", "Hello world"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "128000 9906 1917\n");
    test::write_file(tmp / "text.txt", "Hello, world!");
    r = run_binary({"tokenize", "-m", dir.string(), "-f", (tmp / "text.txt").string(), "--no-bos"});
    EXPECT_EQ(r.out, "9906 11 1917 0\n");
    r = run_binary({"tokenize", "-m", dir.string(), "-f", "-", "--json"}, "<|eot_id|>");  // text, not the control id
    ASSERT_EQ(r.status, 0) << r.err;
    const auto ids = nlohmann::json::parse(r.out)["ids"].get<std::vector<int>>();
    ASSERT_GE(ids.size(), 3u);
    EXPECT_EQ(ids[0], 128000);
    for (size_t i = 1; i < ids.size(); ++i) EXPECT_LT(ids[i], 128000);
}

TEST(TokenizeCli, Errors) {
    test::TempDir tmp;
    const fs::path dir = tokenizer_folder(tmp, test::shared_dir() / "tokenizers/llama3.1", 128256);
    auto r = run_binary({"tokenize", "-m", dir.string()});
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(HasSubstr(r.err, "-p/--prompt or -f/--file"));
    test::TempDir tmp2;
    const fs::path narrow = tokenizer_folder(tmp2, test::shared_dir() / "tokenizers/llama3.1", 512);
    r = run_binary({"tokenize", "-m", narrow.string(), "-p", "x"});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(HasSubstr(r.err, "tokenizer.json: has 128256 tokens but config.json vocab_size is 512")) << r.err;
    fs::remove(narrow / "tokenizer.json");
    r = run_binary({"tokenize", "-m", narrow.string(), "-p", "x"});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(HasSubstr(r.err, "no tokenizer.model or tokenizer.json")) << r.err;
}

}  // namespace
}  // namespace plainllama
