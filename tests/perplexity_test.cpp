// Perplexity: llama.cpp's method against the shared reference, the sliding window against a direct
// computation, and the errors.
#include "plainllama/run/perplexity.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cmath>
#include <memory>

#include "plainllama/tokenizer/sentencepiece_tokenizer.h"
#include "test_util.h"

namespace plainllama {
namespace {

using test::model_dir;
using test::run_binary;

nlohmann::json ppl_json(const std::string& model, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"perplexity",
                                     "-m",
                                     model_dir(model).string(),
                                     "-f",
                                     (test::shared_dir() / "data/tinystories_val.txt").string(),
                                     "-c",
                                     "256",
                                     "--chunks",
                                     "20",
                                     "--json",
                                     "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_binary(args);
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(r.out);
}

TEST(Perplexity, MatchesReferenceF32) {
    const auto ref = test::read_json(test::shared_dir() / "reference/stories260K/perplexity.json");
    const auto j = ppl_json("stories260K");
    EXPECT_EQ(j["n_scored"], ref["scored_tokens"]);
    EXPECT_NEAR(j["ppl"].get<double>(), ref["ppl"].get<double>(), 0.001 * ref["ppl"].get<double>());
    EXPECT_NEAR(j["ppl_stderr"].get<double>(), ref["ppl_stderr"].get<double>(), 0.01 * ref["ppl_stderr"].get<double>());
    EXPECT_EQ(j["chunk_ppl"].size(), 20u);
}

TEST(Perplexity, Bf16AndF16WithinOnePercentOfF32) {
    const double f32 = ppl_json("stories260K")["ppl"];
    for (const char* m : {"stories260K-bf16", "stories260K-f16"}) {
        const double p = ppl_json(m)["ppl"];
        EXPECT_NEAR(p, f32, 0.01 * f32) << m;
    }
}

TEST(Perplexity, FinalLineFormat) {
    const auto r = run_binary({"perplexity", "-m", model_dir().string(), "-f",
                               (test::shared_dir() / "data/tinystories_val.txt").string(), "-c", "256", "--chunks",
                               "20", "-t", "1"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "PPL = 3.6251 +/- 0.1282\n");
    EXPECT_NE(r.err.find("[20]3.6251"), std::string::npos) << r.err;
}

// The sliding window scores each token once, with the window start the stride gives; recompute each
// token's NLL directly from a fresh context holding exactly that window's prefix.
TEST(Perplexity, StrideMatchesDirectComputation) {
    SentencePieceTokenizer tok(model_dir() / "tokenizer.model");
    std::string text = test::read_file(test::shared_dir() / "data/tinystories_val.txt").substr(0, 600);
    const auto tokens = tok.encode(text, true);
    const int64_t n = int64_t(tokens.size()), W = 48, S = 16;
    ASSERT_GT(n, 3 * W);
    Model model(model_dir());
    Context ctx(model, ContextParams{W, W});
    const PerplexityResult r = perplexity_stride(ctx, tokens, W, S);
    double sum = 0;
    for (int64_t t = 1; t < n; ++t) {
        const int64_t w = t < W ? 0 : (t - W) / S + 1;  // first window whose end passes t
        const int64_t begin = w * S;
        ctx.reset();
        const float* logits = ctx.eval(tokens.data() + begin, t - begin);
        sum += token_nll(logits, model.config().vocab_size, tokens[size_t(t)]);
    }
    EXPECT_EQ(r.n_scored, n - 1);
    EXPECT_NEAR(r.ppl, std::exp(sum / double(n - 1)), 1e-5 * r.ppl);
}

// An abort inside a chunk/window stops there: the result covers the ones finished before it, with the figures
// an uninterrupted run had after them; aborted inside the first, nothing.
TEST(Perplexity, AbortKeepsTheFinishedChunks) {
    SentencePieceTokenizer tok(model_dir() / "tokenizer.model");
    const auto tokens =
        tok.encode(test::read_file(test::shared_dir() / "data/tinystories_val.txt").substr(0, 4000), true);
    const int64_t W = 64;
    ASSERT_GT(int64_t(tokens.size()), 4 * W);
    Model model(model_dir());
    const int64_t layers = model.config().num_hidden_layers;
    auto abort_at = [](int64_t n) {  // true from the n-th call on (one call per layer)
        return [n, calls = std::make_shared<std::atomic<int64_t>>(0)] { return ++*calls >= n; };
    };
    Context ctx(model, ContextParams{W, W}), ctx2(model, ContextParams{W, W});
    const PerplexityResult full = perplexity_chunks(ctx, tokens, W, 1, 4);
    ASSERT_EQ(full.n_windows, 4);
    for (const std::vector<Context*>& ctxs : {std::vector<Context*>{&ctx}, std::vector<Context*>{&ctx, &ctx2}}) {
        const PerplexityResult none = perplexity_chunks(ctxs, tokens, W, 1, 4, nullptr, abort_at(1));
        EXPECT_EQ(none.n_windows, 0);
        EXPECT_EQ(none.n_scored, 0);
    }
    // Two contexts, chunk i on thread i: the results stay in chunk order, so an aborted chunk 0 discards a
    // finished chunk 1, and an aborted chunk 1 keeps chunk 0.
    const PerplexityResult first_cut =
        perplexity_chunks({&ctx, &ctx2}, tokens, W, 1, 4, nullptr, [] { return omp_get_thread_num() == 0; });
    EXPECT_EQ(first_cut.n_windows, 0);
    const PerplexityResult second_cut =
        perplexity_chunks({&ctx, &ctx2}, tokens, W, 1, 4, nullptr, [] { return omp_get_thread_num() == 1; });
    ASSERT_EQ(second_cut.n_windows, 1);
    EXPECT_EQ(second_cut.ppl, full.running_ppl[0]);
    const PerplexityResult two = perplexity_chunks(ctx, tokens, W, 1, 4, nullptr, abort_at(2 * layers + 2));
    ASSERT_EQ(two.n_windows, 2);
    EXPECT_EQ(two.ppl, full.running_ppl[1]);
    const PerplexityResult strided = perplexity_stride(ctx, tokens, W, W / 2, nullptr, abort_at(layers + 1));
    EXPECT_EQ(strided.n_windows, 1);
}

TEST(Perplexity, TokenNllIsLogSoftmax) {
    const float logits[4] = {1.0f, 2.0f, 3.0f, 1000.0f};
    const double lse = 1000.0 + std::log(std::exp(-999.0) + std::exp(-998.0) + std::exp(-997.0) + 1.0);
    EXPECT_NEAR(token_nll(logits, 4, 0), lse - 1.0, 1e-9);
    EXPECT_NEAR(token_nll(logits, 4, 3), lse - 1000.0, 1e-9);  // no log(0) or overflow
}

TEST(Perplexity, Errors) {
    test::TempDir tmp;
    test::write_file(tmp / "short.txt", "Once upon a time there was a cat.");
    auto r = run_binary({"perplexity", "-m", model_dir().string(), "-f", (tmp / "short.txt").string(), "-c", "64"});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("needs at least 128"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" tokens"), std::string::npos) << r.err;
    r = run_binary({"perplexity", "-m", model_dir().string(), "-f",
                    (test::shared_dir() / "data/tinystories_val.txt").string(), "-c", "1024"});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("--ctx 1024"), std::string::npos) << r.err;
    r = run_binary({"perplexity", "-m", model_dir().string(), "-f", (tmp / "missing.txt").string()});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("missing.txt"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace plainllama
