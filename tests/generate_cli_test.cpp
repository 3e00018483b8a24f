// `plainllama generate` end to end through the binary.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "plainllama/io/dtype.h"
#include "plainllama/model/model.h"
#include "plainllama/run/sampler.h"
#include "plainllama/tokenizer/sentencepiece_tokenizer.h"
#include "test_util.h"

namespace plainllama {
namespace {

using test::model_dir;
using test::run_binary;

int count_lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

TEST(GenerateCli, GreedyPrintsLlama2cText) {
    const auto ref = test::read_json(test::shared_dir() / "reference/stories260K/greedy.json");
    for (const auto& c : ref["cases"]) {
        const int n = int(c["sequence"].size() - c["prompt_ids"].size());
        const auto r = run_binary({"generate", "-m", model_dir().string(), "-p", c["prompt"].get<std::string>(),
                                   "--temp", "0", "-n", std::to_string(n), "-t", "1"});
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.out, c["text"].get<std::string>());
        EXPECT_NE(r.err.find("eval time"), std::string::npos) << "timings go to stderr";
    }
}

// The same binary with each kernel variant the CPU runs, forced through PLAINLLAMA_KERNELS: llama2.c's text.
TEST(GenerateCli, GreedyWithEveryKernelVariant) {
    const auto ref = test::read_json(test::shared_dir() / "reference/stories260K/greedy.json");
    for (const std::string& v : kernel_variants()) {
        test::ScopedEnv env("PLAINLLAMA_KERNELS", v);
        for (const auto& c : ref["cases"]) {
            const int n = int(c["sequence"].size() - c["prompt_ids"].size());
            const auto r = run_binary({"generate", "-m", model_dir().string(), "-p", c["prompt"].get<std::string>(),
                                       "--temp", "0", "-n", std::to_string(n), "--quiet"});
            ASSERT_EQ(r.status, 0) << v << ": " << r.err;
            EXPECT_EQ(r.out, c["text"].get<std::string>()) << v;
        }
    }
}

TEST(GenerateCli, JsonHasIdsAndCounts) {
    const auto ref = test::read_json(test::shared_dir() / "reference/stories260K/greedy.json");
    const auto& c = ref["cases"][1];
    const auto r = run_binary({"generate", "-m", model_dir().string(), "-p", c["prompt"].get<std::string>(), "--temp",
                               "0", "-n", "20", "--json", "--quiet"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "");
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["prompt_tokens"], c["prompt_ids"]);
    std::vector<int> expected(c["sequence"].begin() + long(c["prompt_ids"].size()),
                              c["sequence"].begin() + long(c["prompt_ids"].size()) + 20);
    EXPECT_EQ(j["tokens"].get<std::vector<int>>(), expected);
    EXPECT_EQ(j["n_generated"], 20);
    EXPECT_EQ(j["stop"], "n_predict");
}

TEST(GenerateCli, SameSeedSameText) {
    auto gen = [](const std::string& seed) {
        return run_binary({"generate", "-m", model_dir().string(), "-p", "Once upon", "-n", "40", "--temp", "1.0",
                           "--seed", seed, "--quiet"});
    };
    const auto a = gen("123"), b = gen("123"), c = gen("124");
    ASSERT_EQ(a.status, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_NE(a.out, c.out);
}

TEST(GenerateCli, PromptFromFileAndStdin) {
    test::TempDir tmp;
    test::write_file(tmp / "p.txt", "One day, Tom");
    const auto a = run_binary(
        {"generate", "-m", model_dir().string(), "-f", (tmp / "p.txt").string(), "--temp", "0", "-n", "10", "--quiet"});
    const auto b = run_binary({"generate", "-m", model_dir().string(), "-f", "-", "--temp", "0", "-n", "10", "--quiet"},
                              "One day, Tom");
    const auto c = run_binary(
        {"generate", "-m", model_dir().string(), "-p", "One day, Tom", "--temp", "0", "-n", "10", "--quiet"});
    ASSERT_EQ(a.status, 0) << a.err;
    EXPECT_EQ(a.out, c.out);
    EXPECT_EQ(b.out, c.out);
}

TEST(GenerateCli, StopsWhenContextIsFull) {
    const auto r = run_binary({"generate", "-m", model_dir().string(), "-p", "One day, Tom", "--temp", "0", "-n", "100",
                               "-c", "16", "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["stop"], "context");
    EXPECT_EQ(j["n_prompt"].get<int>() + j["n_generated"].get<int>(), 17);  // 16 evaluated + the last sampled
}

nlohmann::json generate_json(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"generate", "-m", model_dir().string(), "-n", "48", "--json", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_binary(args);
    EXPECT_EQ(r.status, 0) << r.err;
    return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
}

// --no-bos: the prompt's ids as the tokenizer gives them, without BOS (and a different continuation); an empty prompt
// without BOS has nothing to start from: a usage error. With BOS, the empty prompt is BOS alone.
TEST(GenerateCli, NoBos) {
    SentencePieceTokenizer tok(model_dir() / "tokenizer.model");
    const auto with = generate_json({"-p", "Once upon a time", "--temp", "0"});
    const auto without = generate_json({"-p", "Once upon a time", "--temp", "0", "--no-bos"});
    EXPECT_EQ(with["prompt_tokens"].get<std::vector<int32_t>>(), tok.encode("Once upon a time", true));
    EXPECT_EQ(without["prompt_tokens"].get<std::vector<int32_t>>(), tok.encode("Once upon a time", false));
    EXPECT_NE(with["tokens"], without["tokens"]);
    EXPECT_EQ(generate_json({"-p", "", "--temp", "0"})["prompt_tokens"], std::vector<int32_t>{tok.bos_id()});
    const auto r = run_binary({"generate", "-m", model_dir().string(), "-p", "", "--no-bos"});
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(test::StartsWith(r.err, "plainllama: error: the prompt is empty and no BOS is prepended")) << r.err;
    EXPECT_EQ(r.out, "");
}

// --repeat-last-n: the repetition penalty looks back that many tokens (0: off, -1: all), as the sampler given the
// same parameters on the same model does (sampler_test checks the window itself).
TEST(GenerateCli, RepeatLastN) {
    const Model model(model_dir());
    SentencePieceTokenizer tok(model_dir() / "tokenizer.model");
    auto library = [&](int64_t last_n) {
        SamplerParams p;
        p.temp = 0;
        p.repeat_penalty = 2.0f;
        p.repeat_last_n = int32_t(last_n);
        Sampler sampler(p);
        Context ctx(model);
        std::vector<int32_t> ids = tok.encode("Once upon a time", true);
        const size_t n0 = ids.size();
        const float* logits = ctx.eval(ids);
        while (ids.size() < n0 + 48) {
            ids.push_back(sampler.sample(logits, int32_t(model.config().vocab_size), ids));
            if (ids.back() == tok.eos_id()) break;
            logits = ctx.eval(&ids.back(), 1);
        }
        return std::vector<int32_t>(ids.begin() + long(n0), ids.end());
    };
    std::map<int64_t, std::vector<int32_t>> got;
    for (int64_t n : {0, 8, -1}) {
        SCOPED_TRACE(n);
        got[n] = generate_json({"-p", "Once upon a time", "--temp", "0", "--repeat-penalty", "2", "--repeat-last-n",
                                std::to_string(n)})["tokens"]
                     .get<std::vector<int32_t>>();
        EXPECT_EQ(got[n], library(n));
    }
    EXPECT_EQ(got[0], generate_json({"-p", "Once upon a time", "--temp", "0"})["tokens"].get<std::vector<int32_t>>());
    EXPECT_NE(got[8], got[-1]);  // the window matters here
    EXPECT_NE(got[0], got[8]);
}

// Without --seed (or with -1) the seed is random and printed on stderr ("seed = N"), so a reply can be had again with
// --seed N; --quiet and greedy decoding print none.
TEST(GenerateCli, RandomSeedIsPrinted) {
    const std::vector<std::string> args = {"generate", "-m", model_dir().string(), "-p", "Once upon", "-n", "24",
                                           "--temp",   "1"};
    const auto r = run_binary(args);
    ASSERT_EQ(r.status, 0) << r.err;
    const size_t at = r.err.find("seed = ");
    ASSERT_NE(at, std::string::npos) << r.err;
    const std::string seed = r.err.substr(at + 7, r.err.find('\n', at) - at - 7);
    EXPECT_EQ(seed.find_first_not_of("0123456789"), std::string::npos) << seed;
    std::vector<std::string> again = args;
    again.insert(again.end(), {"--seed", seed, "--quiet"});
    const auto a = run_binary(again);
    EXPECT_EQ(a.out, r.out);
    EXPECT_EQ(a.err, "");
    for (const std::vector<std::string>& extra : {std::vector<std::string>{"--quiet"}, {"--temp", "0"}}) {
        std::vector<std::string> b = args;
        b.insert(b.end(), extra.begin(), extra.end());
        EXPECT_EQ(run_binary(b).err.find("seed ="), std::string::npos) << extra[0];
    }
}

// Invalid input: one line on stderr, exit 2 for usage, 1 for runtime; nothing on stdout.
TEST(GenerateCli, InvalidFlags) {
    const std::string m = model_dir().string();
    const std::vector<std::pair<std::vector<std::string>, int>> cases = {
        {{"generate", "-m", m, "-p", "x", "--temp", "-1"}, 2},
        {{"generate", "-m", m, "-p", "x", "--top-p", "2"}, 2},
        {{"generate", "-m", m, "-p", "x", "--min-p", "-0.5"}, 2},
        {{"generate", "-m", m, "-p", "x", "-n", "-5"}, 2},
        {{"generate", "-m", m, "-p", "x", "--top-k", "-3"}, 2},
        {{"generate", "-m", m, "-p", "x", "-t", "0"}, 2},
        {{"generate", "-m", m, "-p", "x", "-t", "10000"}, 2},
        {{"generate", "-m", m, "-p", "x", "-c", "0"}, 2},
        {{"generate", "-m", m, "-p", "x", "-c", "100000"}, 2},
        {{"generate", "-m", m, "-p", "x", "--bogus"}, 2},
        {{"generate", "-m", m, "-p", "x", "-f", "y"}, 2},
        {{"frobnicate"}, 2},
        {{"generate", "-m", "/nonexistent/model", "-p", "x"}, 1},
        {{"generate", "-m", m, "-f", "/nonexistent/prompt.txt"}, 1},
        {{"generate", "-m", m, "-p", "\xff\xfe bad utf8"}, 2},  // the command line's own text: a usage error
        {{"generate", "-m", m, "-p", std::string(3000, 'a') + " long", "-c", "64"}, 1},
    };
    for (const auto& [args, status] : cases) {
        std::string joined;
        for (const auto& a : args) joined += a.substr(0, 40) + " ";
        const auto r = run_binary(args);
        EXPECT_EQ(r.status, status) << joined << "\n" << r.err;
        EXPECT_EQ(count_lines(r.err), 1) << joined << "\n" << r.err;
        EXPECT_EQ(r.err.rfind("plainllama: error: ", 0), 0u) << joined << "\n" << r.err;
        EXPECT_EQ(r.out, "") << joined;
    }
}

TEST(Tokenizer, Llama2KnownIds) {
    SentencePieceTokenizer tok(test::shared_dir() / "tokenizers/llama2/tokenizer.model");
    EXPECT_EQ(tok.encode("I believe the meaning of life is", true),
              (std::vector<int32_t>{1, 306, 4658, 278, 6593, 310, 2834, 338}));
    EXPECT_EQ(tok.encode("I believe", false), (std::vector<int32_t>{306, 4658}));
    EXPECT_EQ(tok.vocab_size(), 32000);
}

// Streaming one id at a time gives exactly the text of decoding the whole sequence: leading spaces kept,
// multi-byte characters (byte-fallback tokens) never split.
TEST(Tokenizer, StreamingKeepsSpacesAndUtf8) {
    SentencePieceTokenizer tok(test::shared_dir() / "tokenizers/llama2/tokenizer.model");
    const std::string text = "Café naïve — 日本語 🦙🙂 x  y\nnew line ﬁ 𝔘";
    const auto ids = tok.encode(text, true);
    StreamDecoder dec(tok);
    std::string streamed;
    for (int32_t id : ids) {
        const std::string piece = dec.push(id);
        // every emitted piece is complete UTF-8 on its own
        for (size_t i = 0; i < piece.size();) {
            const unsigned char c = static_cast<unsigned char>(piece[i]);
            const size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            ASSERT_LE(i + n, piece.size()) << "split character in piece of id " << id;
            i += n;
        }
        streamed += piece;
    }
    streamed += dec.flush();
    EXPECT_EQ(streamed, tok.decode(ids));
    // Byte fallback really happened for the emoji (else the test would not exercise the hold-back).
    bool has_byte_piece = false;
    for (int32_t id : ids) has_byte_piece |= tok.piece(id).rfind("<0x", 0) == 0;
    EXPECT_TRUE(has_byte_piece);
}

// A tiny random-weight model with the Llama 2 tokenizer (vocab 32000), so a UTF-8 prompt goes through
// the binary's echo and streaming path.
void make_tiny_llama2_vocab_model(const test::fs::path& dir) {
    test::fs::create_directories(dir);
    const int64_t H = 16, F = 32, V = 32000, L = 1;
    nlohmann::json cfg = {{"hidden_size", H},
                          {"intermediate_size", F},
                          {"num_hidden_layers", L},
                          {"num_attention_heads", 2},
                          {"num_key_value_heads", 1},
                          {"vocab_size", V},
                          {"max_position_embeddings", 128},
                          {"rms_norm_eps", 1e-5},
                          {"tie_word_embeddings", true},
                          {"bos_token_id", 1},
                          {"eos_token_id", 2}};
    test::write_file(dir / "config.json", cfg.dump());
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 0.5f);
    auto tensor = [&](const std::string& name, std::vector<int64_t> shape, bool ones = false) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        std::string bytes(size_t(n) * 4, '\0');
        for (int64_t i = 0; i < n; ++i) {
            const float v = ones ? 1.0f : nd(rng);
            std::memcpy(&bytes[size_t(i) * 4], &v, 4);
        }
        return test::RawTensor{name, "F32", shape, bytes};
    };
    const std::string p = "model.layers.0.";
    test::write_safetensors(
        dir / "model.safetensors",
        {tensor("model.embed_tokens.weight", {V, H}), tensor(p + "input_layernorm.weight", {H}, true),
         tensor(p + "self_attn.q_proj.weight", {H, H}), tensor(p + "self_attn.k_proj.weight", {8, H}),
         tensor(p + "self_attn.v_proj.weight", {8, H}), tensor(p + "self_attn.o_proj.weight", {H, H}),
         tensor(p + "post_attention_layernorm.weight", {H}, true), tensor(p + "mlp.gate_proj.weight", {F, H}),
         tensor(p + "mlp.up_proj.weight", {F, H}), tensor(p + "mlp.down_proj.weight", {H, F}),
         tensor("model.norm.weight", {H}, true)});
    test::fs::copy_file(test::shared_dir() / "tokenizers/llama2/tokenizer.model", dir / "tokenizer.model");
}

TEST(GenerateCli, Utf8PromptRoundTripsThroughTheBinary) {
    test::TempDir tmp;
    make_tiny_llama2_vocab_model(tmp / "m");
    const std::string prompt = "Ça va? Olá, 日本語 🦙 ok";
    const auto r =
        run_binary({"generate", "-m", (tmp / "m").string(), "-p", prompt, "-n", "8", "--seed", "1", "--quiet"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.substr(0, prompt.size()), prompt);
}

}  // namespace
}  // namespace plainllama
