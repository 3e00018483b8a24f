// The forward pass against independent references on the real stories260K weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "plainllama/model/model.h"
#include "test_util.h"

namespace plainllama {
namespace {

using test::model_dir;
using test::read_json;
using test::shared_dir;

std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

int32_t argmax(const float* x, int64_t n) { return int32_t(std::max_element(x, x + n) - x); }

// Max |a - b| over a [rows, n] block.
double max_abs_diff(const float* a, const float* b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
    return m;
}

// Run once per kernel variant this CPU supports.
class Forward : public test::EveryKernel {};

TEST_P(Forward, LogitsMatchFloat64Reference) {
    const auto ref = read_json(shared_dir() / "reference/stories260K/logits.json");
    const auto ids = ids_of(ref["ids"]);
    Model model(model_dir());
    ContextParams f32;  // the reference's K and V are unrounded
    f32.cache_type = CacheType::f32;
    Context ctx(model, f32);
    const float* logits = ctx.eval(ids, /*all_logits=*/true);
    const int64_t V = model.config().vocab_size;
    double worst = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
        const auto row = ref["logits"][t].get<std::vector<float>>();
        ASSERT_EQ(int64_t(row.size()), V);
        const double d = max_abs_diff(logits + t * size_t(V), row.data(), row.size());
        EXPECT_LE(d, 1e-4) << "position " << t;
        worst = std::max(worst, d);
    }
    std::printf("max |logit - reference| over %zu positions: %.3g\n", ids.size(), worst);
}

TEST_P(Forward, GreedyMatchesLlama2c) {
    const auto ref = read_json(shared_dir() / "reference/stories260K/greedy.json");
    Model model(model_dir());
    ContextParams f32;  // llama2.c's cache is f32
    f32.cache_type = CacheType::f32;
    Context ctx(model, f32);
    for (const auto& c : ref["cases"]) {
        const auto prompt = ids_of(c["prompt_ids"]);
        const auto expected = ids_of(c["sequence"]);
        ctx.reset();
        std::vector<int32_t> seq = prompt;
        const float* logits = ctx.eval(prompt);
        while (seq.size() < expected.size()) {
            const int32_t next = argmax(logits, model.config().vocab_size);
            seq.push_back(next);
            if (seq.size() == expected.size()) break;
            logits = ctx.eval(&seq.back(), 1);
        }
        EXPECT_EQ(seq, expected) << "prompt '" << c["prompt"].get<std::string>() << "'";
    }
}

PL_FOR_EVERY_KERNEL(Forward);

}  // namespace
}  // namespace plainllama
