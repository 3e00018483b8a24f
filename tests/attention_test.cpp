// Grouped-query attention over a KV cache against a double-precision reference written here, and its
// independence from batching: T tokens at once give the same output, bit for bit, as one token at a time.
#include "plainllama/kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "test_util.h"

namespace plainllama {
namespace {

using test::Threads;

struct Shape {
    int64_t n_heads, n_kv_heads, head_dim;
};

// out[t, h, :] = sum_{j <= pos0+t} softmax_j(q[t,h] . K[g,j] / sqrt(hd)) V[g,j], g = h / (n_heads / n_kv_heads).
std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& Kc, const std::vector<float>& Vc,
                              int64_t T, int64_t pos0, const Shape& s, int64_t ctx) {
    const int64_t hd = s.head_dim, group = s.n_heads / s.n_kv_heads;
    std::vector<double> out(size_t(T * s.n_heads * hd), 0.0);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < s.n_heads; ++h) {
            const int64_t g = h / group, n = pos0 + t + 1;
            const float* qv = &q[size_t((t * s.n_heads + h) * hd)];
            std::vector<double> w(static_cast<size_t>(n));
            double mx = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < n; ++j) {
                double d = 0.0;
                for (int64_t i = 0; i < hd; ++i) d += double(qv[i]) * double(Kc[size_t((g * ctx + j) * hd + i)]);
                w[size_t(j)] = d / std::sqrt(double(hd));
                mx = std::max(mx, w[size_t(j)]);
            }
            for (double& v : w) sum += (v = std::exp(v - mx));
            for (int64_t j = 0; j < n; ++j)
                for (int64_t i = 0; i < hd; ++i)
                    out[size_t((t * s.n_heads + h) * hd + i)] +=
                        w[size_t(j)] / sum * double(Vc[size_t((g * ctx + j) * hd + i)]);
        }
    return out;
}

// Runs attention for T tokens at pos0 with a scratch sized as documented, the keys Kc [n_kv_heads, ctx, head_dim]
// stored into a key cache (panels, see attention.h) whose slots past ctx hold NaN: they must not reach out.
std::vector<float> run(const std::vector<float>& q, const std::vector<float>& Kc, const std::vector<float>& Vc,
                       int64_t T, int64_t pos0, const Shape& s, int64_t ctx) {
    const int64_t hd = s.head_dim;
    std::vector<float> keys(size_t(s.n_kv_heads * key_cache_positions(ctx) * hd), NAN);
    for (int64_t g = 0; g < s.n_kv_heads; ++g)
        for (int64_t j = 0; j < ctx; ++j) store_key(keys.data(), &Kc[size_t((g * ctx + j) * hd)], g, j, hd, ctx);
    std::vector<float> out(size_t(T * s.n_heads * hd) + 8, -3.0f);
    std::vector<float> scratch(
        size_t(thread_count() * attention_scratch_per_thread(T, s.n_heads / s.n_kv_heads, ctx, hd)));
    attention(out.data(), q.data(), keys.data(), Vc.data(), T, pos0, s.n_heads, s.n_kv_heads, hd, ctx, scratch.data());
    for (size_t i = size_t(T * s.n_heads * hd); i < out.size(); ++i) EXPECT_EQ(out[i], -3.0f) << "wrote past out";
    out.resize(size_t(T * s.n_heads * hd));
    return out;
}

// Run once per kernel variant this CPU supports.
class Attention : public test::EveryKernel {};

TEST_P(Attention, MatchesReferenceAndDoesNotDependOnBatching) {
    std::mt19937 rng(21);
    std::normal_distribution<float> d(0.0f, 1.0f);
    const Shape shapes[] = {{4, 4, 8}, {8, 2, 64}, {6, 1, 40}, {32, 4, 64}};
    for (const Shape& s : shapes)
        for (int64_t pos0 : {0, 13})
            for (int64_t T : {1, 5, 40, 70})
                for (int th : {1, 2, 3}) {
                    Threads scope(th);
                    const int64_t ctx = pos0 + T + 3, hd = s.head_dim;
                    std::vector<float> q(size_t(T * s.n_heads * hd)), Kc(size_t(s.n_kv_heads * ctx * hd)),
                        Vc(Kc.size());
                    for (float& v : q) v = d(rng);
                    for (float& v : Kc) v = d(rng);
                    for (float& v : Vc) v = d(rng);
                    const auto out = run(q, Kc, Vc, T, pos0, s, ctx);
                    const auto ref = reference(q, Kc, Vc, T, pos0, s, ctx);
                    for (size_t i = 0; i < out.size(); ++i)
                        ASSERT_NEAR(out[i], ref[i], 2e-5 * (1.0 + std::fabs(ref[i])))
                            << "heads " << s.n_heads << "/" << s.n_kv_heads << " hd " << hd << " T " << T << " pos0 "
                            << pos0 << " threads " << th << " at " << i;
                    // The same tokens one at a time (decode): identical, bit for bit.
                    for (int64_t t = 0; t < T; ++t) {
                        const int64_t qd = s.n_heads * hd;
                        const std::vector<float> qt(q.begin() + t * qd, q.begin() + (t + 1) * qd);
                        const auto one = run(qt, Kc, Vc, 1, pos0 + t, s, ctx);
                        for (int64_t i = 0; i < qd; ++i)
                            ASSERT_EQ(one[size_t(i)], out[size_t(t * qd + i)])
                                << "heads " << s.n_heads << "/" << s.n_kv_heads << " hd " << hd << " T " << T
                                << " pos0 " << pos0 << " threads " << th << " token " << t;
                    }
                }
}

// A prompt's later token never reaches an earlier one, not even as 0 * Inf: with Inf and NaN in the last
// token's K and V rows, every earlier token's output stays finite and equal to decoding it alone.
TEST_P(Attention, ALaterTokensInfOrNaNDoesNotReachEarlierTokens) {
    std::mt19937 rng(22);
    std::normal_distribution<float> d(0.0f, 1.0f);
    const Shape s{8, 2, 64};
    for (int64_t pos0 : {0, 13})
        for (int64_t T : {2, 40})
            for (int th : {1, 2}) {
                Threads scope(th);
                const int64_t ctx = pos0 + T, hd = s.head_dim, qd = s.n_heads * hd, last = pos0 + T - 1;
                std::vector<float> q(size_t(T * qd)), Kc(size_t(s.n_kv_heads * ctx * hd)), Vc(Kc.size());
                for (float& v : q) v = d(rng);
                for (float& v : Kc) v = d(rng);
                for (float& v : Vc) v = d(rng);
                for (int64_t g = 0; g < s.n_kv_heads; ++g)
                    for (int64_t i = 0; i < hd; ++i) {
                        Kc[size_t((g * ctx + last) * hd + i)] = i % 2 ? INFINITY : NAN;
                        Vc[size_t((g * ctx + last) * hd + i)] = i % 2 ? -INFINITY : NAN;
                    }
                const auto out = run(q, Kc, Vc, T, pos0, s, ctx);
                for (int64_t t = 0; t + 1 < T; ++t) {
                    const std::vector<float> qt(q.begin() + t * qd, q.begin() + (t + 1) * qd);
                    const auto one = run(qt, Kc, Vc, 1, pos0 + t, s, ctx);
                    for (int64_t i = 0; i < qd; ++i) {
                        ASSERT_TRUE(std::isfinite(out[size_t(t * qd + i)]))
                            << "T " << T << " pos0 " << pos0 << " threads " << th << " token " << t << " at " << i;
                        ASSERT_EQ(one[size_t(i)], out[size_t(t * qd + i)])
                            << "T " << T << " pos0 " << pos0 << " threads " << th << " token " << t << " at " << i;
                    }
                }
            }
}

PL_FOR_EVERY_KERNEL(Attention);

}  // namespace
}  // namespace plainllama
