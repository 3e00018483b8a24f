// The sampler's stages on hand-made logits, with the expected answers worked out here, and the whole chain.
#include "plainllama/run/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "plainllama/run/grammar_constraint.h"
#include "plainllama/sys/error.h"

namespace plainllama {
namespace {

std::vector<Candidate> cands_of(const std::vector<float>& logits) {
    std::vector<Candidate> c;
    for (size_t i = 0; i < logits.size(); ++i) c.push_back({int32_t(i), logits[i]});
    return c;
}

// logit_i = log(p_i), so the softmax at temperature 1 gives back p.
std::vector<float> logits_of_probs(const std::vector<double>& p) {
    std::vector<float> l;
    for (double x : p) l.push_back(float(std::log(x)));
    return l;
}

std::vector<int32_t> ids(const std::vector<Candidate>& c) {
    std::vector<int32_t> r;
    for (const Candidate& x : c) r.push_back(x.id);
    return r;
}

std::set<int32_t> id_set(const std::vector<Candidate>& c) {
    const auto r = ids(c);
    return {r.begin(), r.end()};
}

std::vector<float> random_logits(size_t n, uint32_t seed, float stddev) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> d(0.0f, stddev);
    std::vector<float> l(n);
    for (float& x : l) x = d(gen);
    return l;
}

// Plain softmax(logits / temp) in long double, as the reference.
std::vector<double> ref_softmax(const std::vector<float>& logits, double temp) {
    long double sum = 0;
    for (float l : logits) sum += std::exp((long double)l / temp);
    std::vector<double> p;
    for (float l : logits) p.push_back(double(std::exp((long double)l / temp) / sum));
    return p;
}

SamplerParams plain_params(float temp, uint64_t seed = 0) {
    SamplerParams p;
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.seed = seed;
    return p;
}

std::vector<int32_t> draw_n(Sampler& s, const std::vector<float>& logits, int n) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) out.push_back(s.sample(logits.data(), int32_t(logits.size()), {}));
    return out;
}

// ---- top-k ----

TEST(SamplerTopK, KeepsExactlyTheKLargestSortedDescending) {
    //                      0     1     2     3     4     5     6     7
    const auto logits = {0.1f, 3.0f, -1.f, 2.5f, 2.9f, 0.0f, 5.0f, -3.f};
    auto c = cands_of(logits);
    apply_top_k(c, 3);
    EXPECT_EQ(ids(c), (std::vector<int32_t>{6, 1, 4}));
    c = cands_of(logits);
    apply_top_k(c, 1);
    EXPECT_EQ(ids(c), (std::vector<int32_t>{6}));
    c = cands_of(logits);
    apply_top_k(c, 5);
    EXPECT_EQ(ids(c), (std::vector<int32_t>{6, 1, 4, 3, 0}));

    // Ties: the lower id first.
    c = cands_of({1.0f, 2.0f, 2.0f, 0.0f});
    apply_top_k(c, 1);
    EXPECT_EQ(ids(c), (std::vector<int32_t>{1}));
}

TEST(SamplerTopK, ZeroNegativeOrAtLeastSizeKeepsAll) {
    const auto logits = {0.1f, 3.0f, -1.f, 2.5f};
    for (int32_t k : {0, -1, 4, 100}) {
        auto c = cands_of(logits);
        apply_top_k(c, k);
        EXPECT_EQ(ids(c), (std::vector<int32_t>{1, 3, 0, 2})) << "k=" << k;
    }
}

TEST(SamplerTopK, LargeVocabMatchesFullSort) {
    const auto logits = random_logits(32000, 7, 3.0f);
    std::vector<int32_t> order(logits.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    auto c = cands_of(logits);
    apply_top_k(c, 40);
    EXPECT_EQ(ids(c), std::vector<int32_t>(order.begin(), order.begin() + 40));
}

// ---- top-p ----

TEST(SamplerTopP, KeepsSmallestPrefixReachingP) {
    // ids 0..3 have p = 0.05, 0.5, 0.15, 0.3. By descending p: 1 (0.5), 3 (0.3), 2 (0.15), 0 (0.05);
    // cumulative 0.5, 0.8, 0.95, 1.0.
    const auto logits = logits_of_probs({0.05, 0.5, 0.15, 0.3});
    const std::vector<std::pair<float, std::vector<int32_t>>> cases = {
        {0.9f, {1, 3, 2}}, {0.6f, {1, 3}}, {0.45f, {1}}, {0.99f, {1, 3, 2, 0}}, {0.85f, {1, 3, 2}}};
    for (const auto& [p, want] : cases) {
        auto c = cands_of(logits);
        apply_top_p(c, p);
        EXPECT_EQ(ids(c), want) << "p=" << p;
    }
    // p >= 1 is off: nothing is removed or reordered.
    auto c = cands_of(logits);
    apply_top_p(c, 1.0f);
    EXPECT_EQ(ids(c), (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(SamplerTopP, Boundaries) {
    // Four equal logits: every p is exactly 0.25, so the cumulative masses 0.25, 0.5, 0.75, 1 are exact.
    const std::vector<float> flat = {1.5f, 1.5f, 1.5f, 1.5f};
    auto c = cands_of(flat);
    apply_top_p(c, 0.5f);  // mass exactly p after two tokens: two kept (>=)
    EXPECT_EQ(ids(c), (std::vector<int32_t>{0, 1}));
    c = cands_of(flat);
    apply_top_p(c, 0.75f);
    EXPECT_EQ(ids(c), (std::vector<int32_t>{0, 1, 2}));
    c = cands_of(flat);
    apply_top_p(c, 0.5001f);  // just above: a third is needed
    EXPECT_EQ(ids(c), (std::vector<int32_t>{0, 1, 2}));

    // p tiny (or 0): only the most probable token survives.
    const auto logits = logits_of_probs({0.05, 0.5, 0.15, 0.3});
    for (float p : {1e-6f, 0.0f}) {
        c = cands_of(logits);
        apply_top_p(c, p);
        EXPECT_EQ(ids(c), (std::vector<int32_t>{1})) << "p=" << p;
    }
    // A single candidate is always kept.
    c = cands_of({-3.0f});
    apply_top_p(c, 0.5f);
    EXPECT_EQ(ids(c), (std::vector<int32_t>{0}));
}

TEST(SamplerTopP, LargeUnsortedVocabMatchesReference) {
    // 32000 logits in id (unsorted) order; reference: full sort, long-double softmax, cumulative sum.
    const auto logits = random_logits(32000, 11, 1.0f);
    const auto probs = ref_softmax(logits, 1.0);
    std::vector<int32_t> order(logits.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    for (float p : {0.05f, 0.5f, 0.9f, 0.99f}) {
        size_t n = 0;
        double cum = 0;
        while (n < order.size() && cum < p) cum += probs[size_t(order[n++])];
        auto c = cands_of(logits);
        apply_top_p(c, p);
        EXPECT_EQ(ids(c), std::vector<int32_t>(order.begin(), order.begin() + std::ptrdiff_t(n))) << "p=" << p;
        if (p == 0.9f) {
            EXPECT_GT(n, 1000u);  // many sort blocks were needed
        }
    }
    // Already sorted input (as after top-k) gives the same result.
    auto c = cands_of(logits);
    apply_top_k(c, 0);
    apply_top_p(c, 0.5f);
    auto d = cands_of(logits);
    apply_top_p(d, 0.5f);
    EXPECT_EQ(ids(c), ids(d));
}

// ---- min-p ----

TEST(SamplerMinP, KeepsTokensAboveFractionOfMax) {
    // p = 0.05, 0.5, 0.15, 0.3; p_max = 0.5. Kept tokens stay in their order.
    const auto logits = logits_of_probs({0.05, 0.5, 0.15, 0.3});
    const std::vector<std::pair<float, std::vector<int32_t>>> cases = {
        {0.2f, {1, 2, 3}},      // threshold 0.1
        {0.35f, {1, 3}},        // threshold 0.175
        {0.05f, {0, 1, 2, 3}},  // threshold 0.025
        {0.7f, {1}},            // threshold 0.35
        {0.0f, {0, 1, 2, 3}},   // off
    };
    for (const auto& [min_p, want] : cases) {
        auto c = cands_of(logits);
        apply_min_p(c, min_p);
        EXPECT_EQ(ids(c), want) << "min_p=" << min_p;
    }
}

TEST(SamplerMinP, Boundaries) {
    // Equal logits: p == p_max exactly, so min_p = 1 keeps all; min_p > 1 still keeps one (the lowest id).
    auto c = cands_of({0.5f, 0.5f, 0.5f});
    apply_min_p(c, 1.0f);
    EXPECT_EQ(ids(c), (std::vector<int32_t>{0, 1, 2}));
    c = cands_of({0.2f, 0.5f, 0.5f});
    apply_min_p(c, 2.0f);
    EXPECT_EQ(ids(c), (std::vector<int32_t>{1}));
}

// ---- repetition penalty ----

TEST(SamplerRepeatPenalty, DividesPositiveMultipliesNegativeOncePerToken) {
    const std::vector<float> logits = {2.0f, -2.0f, 3.0f, -1.0f, 0.5f, 0.0f};
    // 0 and 1 appear twice (penalised once), 5 has logit 0 (0 * p = 0), 99 and -3 are not candidates.
    const std::vector<int32_t> recent = {0, 1, 1, 0, 5, 99, -3};
    const std::vector<float> want = {1.0f, -4.0f, 3.0f, -1.0f, 0.5f, 0.0f};
    auto c = cands_of(logits);
    apply_repeat_penalty(c, recent, 2.0f);
    for (size_t i = 0; i < c.size(); ++i) {
        EXPECT_EQ(c[i].id, int32_t(i));
        EXPECT_FLOAT_EQ(c[i].logit, want[i]) << "id " << i;
    }
    // Candidates in another order (and fewer of them) are found by id.
    c = cands_of(logits);
    std::reverse(c.begin(), c.end());
    c.pop_back();  // id 0 gone
    apply_repeat_penalty(c, recent, 2.0f);
    ASSERT_EQ(c.size(), 5u);
    for (const Candidate& x : c) EXPECT_FLOAT_EQ(x.logit, want[size_t(x.id)]) << "id " << x.id;
    // Penalty 1 and an empty window change nothing.
    for (auto [pen, rec] : {std::pair<float, std::vector<int32_t>>{1.0f, recent}, {2.0f, {}}}) {
        c = cands_of(logits);
        apply_repeat_penalty(c, rec, pen);
        for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c[i].logit, logits[i]);
    }
}

TEST(SamplerRepeatPenalty, WindowRespectedInSampler) {
    // Greedy. Token 0 leads by a little: 2.0 / 1.1 = 1.818 < 1.9 once penalised.
    const std::vector<float> logits = {2.0f, 1.9f, 1.0f, 0.0f, -1.0f, -2.0f};
    const std::vector<int32_t> history = {0, 4, 5};
    auto greedy = [&](int32_t last_n, const std::vector<float>& l, const std::vector<int32_t>& h) {
        SamplerParams p = plain_params(0.0f);
        p.repeat_penalty = 1.1f;
        p.repeat_last_n = last_n;
        Sampler s(p);
        return s.sample(l.data(), int32_t(l.size()), h);
    };
    EXPECT_EQ(greedy(3, logits, history), 1);   // 0 in the last 3
    EXPECT_EQ(greedy(2, logits, history), 0);   // 0 outside the last 2
    EXPECT_EQ(greedy(64, logits, history), 1);  // window longer than the history
    EXPECT_EQ(greedy(-1, logits, history), 1);  // whole history
    EXPECT_EQ(greedy(0, logits, history), 0);   // off
    // Negative logits are multiplied: -1.0 * 1.1 = -1.1 < -1.05.
    EXPECT_EQ(greedy(-1, {-1.0f, -1.05f, -3.0f}, {0}), 1);
    // A token repeated four times is penalised once: 2.0 / 1.1 > 1.7 (four times would be 1.366).
    EXPECT_EQ(greedy(-1, {2.0f, 1.7f}, {0, 0, 0, 0}), 0);
}

// ---- temperature ----

TEST(SamplerTemperature, ScalesTheDistribution) {
    const std::vector<float> logits = {1.0f, 0.2f, -0.7f, 2.3f, 0.0f};
    for (double temp : {0.5, 1.0, 2.0}) {
        // temp 0.5 is softmax(2 * logits), computed directly.
        double sum = 0;
        for (float l : logits) sum += std::exp(double(l) / temp);
        const auto got = candidate_probs(cands_of(logits), float(temp));
        ASSERT_EQ(got.size(), logits.size());
        for (size_t i = 0; i < logits.size(); ++i)
            EXPECT_NEAR(got[i], std::exp(double(logits[i]) / temp) / sum, 1e-12) << "temp " << temp << " id " << i;
    }
    // Lower temperature sharpens: the top token's probability grows.
    EXPECT_GT(candidate_probs(cands_of(logits), 0.5f)[3], candidate_probs(cands_of(logits), 1.0f)[3]);
    // temp 0: all mass on the argmax.
    EXPECT_EQ(candidate_probs(cands_of(logits), 0.0f), (std::vector<double>{0, 0, 0, 1, 0}));
    // Large logits do not overflow (max-subtracted): 1000 and 999 -> 1 / (1 + e^-1).
    const auto big = candidate_probs(cands_of({1000.0f, 999.0f}), 1.0f);
    EXPECT_NEAR(big[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-12);
}

// ---- the Sampler ----

TEST(Sampler, GreedyReturnsArgmaxAndIgnoresSeed) {
    const auto logits = random_logits(1000, 3, 2.0f);
    const int32_t want = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    for (uint64_t seed : {0u, 1u, 12345u}) {
        SamplerParams p;  // defaults: top_k 40, top_p 0.95, min_p 0.05
        p.temp = 0.0f;
        p.seed = seed;
        Sampler s(p);
        for (int i = 0; i < 5; ++i) EXPECT_EQ(s.sample(logits.data(), 1000, {}), want);
    }
    Sampler s(plain_params(0.0f));
    const std::vector<float> ties = {1.0f, 3.0f, 3.0f};
    EXPECT_EQ(s.sample(ties.data(), 3, {}), 1);  // the lowest id among ties
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedsDiffer) {
    const auto logits = random_logits(32000, 5, 1.0f);
    auto run = [&](uint64_t seed) {
        SamplerParams p;  // the default chain, with a penalty over the growing history
        p.seed = seed;
        p.repeat_penalty = 1.1f;
        Sampler s(p);
        std::vector<int32_t> hist;
        for (int i = 0; i < 200; ++i) hist.push_back(s.sample(logits.data(), int32_t(logits.size()), hist));
        return hist;
    };
    const auto a = run(42), b = run(42), c = run(43);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 10u);  // it really samples
}

TEST(Sampler, DrawFollowsDocumentedAlgorithm) {
    // u = (mt19937_64() >> 11) * 2^-53; the first token whose cumulative probability exceeds u.
    const std::vector<float> logits = {0.3f, -1.2f, 2.0f, 0.0f, 1.1f, -0.4f, 0.9f, 1.7f};
    const auto probs = ref_softmax(logits, 1.0);
    Sampler s(plain_params(1.0f, 2024));
    std::mt19937_64 rng(2024);
    for (int i = 0; i < 2000; ++i) {
        const double u = double(rng() >> 11) / 9007199254740992.0;
        int32_t want = 7;
        double cum = 0;
        for (int32_t t = 0; t < 8; ++t) {
            cum += probs[size_t(t)];
            if (u < cum) {
                want = t;
                break;
            }
        }
        ASSERT_EQ(s.sample(logits.data(), 8, {}), want) << "draw " << i;
    }
}

// Chi-square statistic of observed counts against expected probabilities.
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
    double x2 = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
        const double e = probs[i] * n;
        x2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    return x2;
}

TEST(Sampler, ChiSquareMatchesSoftmax) {
    const int n = 100000;
    const std::vector<float> logits = {0.3f, -1.2f, 2.0f, 0.0f, 1.1f, -0.4f, 0.9f, 1.7f};
    {
        // Temperature 1, nothing cut: 8 tokens, 7 degrees of freedom, 0.999 critical value 24.32.
        Sampler s(plain_params(1.0f, 7));
        std::vector<int> counts(8, 0);
        for (int32_t t : draw_n(s, logits, n)) ++counts[size_t(t)];
        const double x2 = chi_square(counts, ref_softmax(logits, 1.0), n);
        EXPECT_LT(x2, 24.32);
        RecordProperty("chi_square_temp1", std::to_string(x2));
    }
    {
        // top_k 5 at temperature 0.7: the 5 largest are ids 2, 7, 4, 6, 0; softmax(logit / 0.7) over them.
        // 4 degrees of freedom, 0.999 critical value 18.47.
        SamplerParams p = plain_params(0.7f, 8);
        p.top_k = 5;
        Sampler s(p);
        const std::vector<int32_t> kept = {2, 7, 4, 6, 0};
        std::vector<float> kept_logits;
        for (int32_t t : kept) kept_logits.push_back(logits[size_t(t)]);
        std::vector<int> counts(5, 0);
        for (int32_t t : draw_n(s, logits, n)) {
            const auto it = std::find(kept.begin(), kept.end(), t);
            ASSERT_NE(it, kept.end()) << "token " << t << " is outside the top 5";
            ++counts[size_t(it - kept.begin())];
        }
        const double x2 = chi_square(counts, ref_softmax(kept_logits, 0.7), n);
        EXPECT_LT(x2, 18.47);
        RecordProperty("chi_square_topk5_temp07", std::to_string(x2));
    }
}

TEST(Sampler, ChainOrderTopKThenTopPThenMinP) {
    // p = 0.30, 0.20, 0.15, 0.12, 0.10, 0.08, 0.03, 0.02 for ids 0..7.
    const auto logits = logits_of_probs({0.30, 0.20, 0.15, 0.12, 0.10, 0.08, 0.03, 0.02});
    auto chain = [&](int32_t k, float p, float min_p) {
        auto c = cands_of(logits);
        apply_top_k(c, k);
        apply_top_p(c, p);
        apply_min_p(c, min_p);
        return id_set(c);
    };
    // top_k 4 -> {0,1,2,3}, mass renormalised to .390 .260 .195 .156 (cum .390 .649 .844) -> top_p 0.7 keeps 3;
    // min_p 0.35 on .30 .20 .15: ratios 1 .67 .5 all pass -> {0,1,2}.
    EXPECT_EQ(chain(4, 0.7f, 0.35f), (std::set<int32_t>{0, 1, 2}));
    // top_p first would see cum .30 .50 .65 .77 and keep 4; top_k 4 keeps them; min_p 0.35 (ratio .12/.30 = .4)
    // keeps all -> {0,1,2,3}.
    {
        auto c = cands_of(logits);
        apply_top_p(c, 0.7f);
        apply_top_k(c, 4);
        apply_min_p(c, 0.35f);
        EXPECT_EQ(id_set(c), (std::set<int32_t>{0, 1, 2, 3}));
    }
    // min_p 0.45: the chain gives {0,1,2} (ratio .15/.30 = .5 passes); min_p first would keep .30 .20 .15, then
    // top_p 0.7 renormalised (.46 .77) keeps 2 -> {0,1}.
    EXPECT_EQ(chain(4, 0.7f, 0.45f), (std::set<int32_t>{0, 1, 2}));
    {
        auto c = cands_of(logits);
        apply_min_p(c, 0.45f);
        apply_top_k(c, 4);
        apply_top_p(c, 0.7f);
        EXPECT_EQ(id_set(c), (std::set<int32_t>{0, 1}));
    }

    // The Sampler draws from exactly the chain's set. Temperature comes last: at temp 0.2 the cut is still made
    // at temperature 1 (temperature first would make p(0) ~ 0.86 and top_p keep only {0}); id 2 then has
    // p ~ 0.027, so 5000 draws see it.
    for (float min_p : {0.35f, 0.45f}) {
        for (float temp : {0.2f, 100.0f}) {
            SamplerParams sp = plain_params(temp, 99);
            sp.top_k = 4;
            sp.top_p = 0.7f;
            sp.min_p = min_p;
            Sampler s(sp);
            const auto drawn = draw_n(s, logits, 5000);
            EXPECT_EQ(std::set<int32_t>(drawn.begin(), drawn.end()), (std::set<int32_t>{0, 1, 2}))
                << "min_p " << min_p << " temp " << temp;
        }
    }
}

TEST(Sampler, RejectsEmptyVocabulary) {
    Sampler s(SamplerParams{});
    const float one = 0.0f;
    EXPECT_THROW(s.sample(&one, 0, {}), Error);
    EXPECT_THROW(s.sample(&one, -5, {}), Error);
    EXPECT_THROW(s.sample(nullptr, 4, {}), Error);
    EXPECT_EQ(s.sample(&one, 1, {0, 0}), 0);  // one token is always the answer
}

TEST(Sampler, OddLogitsDoNotCrash) {
    // -inf everywhere but one, and all -inf: a token in range comes back. NaN or +inf (a broken model): an error
    // that names the cause and --check-tensors.
    const float inf = INFINITY;
    for (const std::vector<float>& l : {std::vector<float>{NAN, 1.0f, 0.0f}, {NAN, NAN, NAN}, {0.0f, inf, 1.0f}})
        for (float temp : {0.0f, 1.0f}) {
            SamplerParams p;
            p.temp = temp;
            Sampler s(p);
            try {
                s.sample(l.data(), 3, {});
                ADD_FAILURE() << "no error";
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find("--check-tensors"), std::string::npos) << e.what();
            }
        }
    const std::vector<std::vector<float>> cases = {{-inf, 1.0f, -inf}, {-inf, -inf, -inf}};
    for (const auto& l : cases) {
        for (float temp : {0.0f, 1.0f}) {
            SamplerParams p;
            p.temp = temp;
            p.repeat_penalty = 1.3f;
            Sampler s(p);
            const int32_t t = s.sample(l.data(), 3, {0, 1, 7, -2});
            EXPECT_GE(t, 0);
            EXPECT_LT(t, 3);
        }
    }
    SamplerParams p = plain_params(1.0f);
    Sampler s(p);
    const std::vector<float> l = {-inf, 1.0f, -inf};
    for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(l.data(), 3, {}), 1);
}

// A mask of allowed tokens (constrained decoding): the same as -inf logits for the others, greedy and sampled, the
// repetition penalty applied as before; a mask that allows nothing, or of the wrong size, is an error.
TEST(Sampler, MaskEqualsMinusInfinityForTheOthers) {
    const size_t n = 300;
    const std::vector<float> logits = random_logits(n, 11, 2.0f);
    TokenMask mask;
    mask.clear(int32_t(n));
    std::vector<float> masked(n, -INFINITY);
    for (size_t i = 0; i < n; i += 7) {
        mask.set(int32_t(i));
        masked[i] = logits[i];
    }
    const std::vector<int32_t> history = {0, 7, 14, 3, 21};
    for (float temp : {0.0f, 0.7f, 1.5f}) {
        SamplerParams p;
        p.temp = temp;
        p.top_k = 20;
        p.repeat_penalty = 1.3f;
        p.seed = 5;
        Sampler with_mask(p), with_inf(p);
        for (int i = 0; i < 200; ++i) {
            const int32_t a = with_mask.sample(logits.data(), int32_t(n), history, &mask);
            const int32_t b = with_inf.sample(masked.data(), int32_t(n), history);
            ASSERT_EQ(a, b) << "temp " << temp << ", draw " << i;
            ASSERT_TRUE(mask.test(a));
        }
    }
    TokenMask none;
    none.clear(int32_t(n));
    Sampler s(plain_params(1.0f));
    EXPECT_THROW(s.sample(logits.data(), int32_t(n), {}, &none), Error);
    TokenMask small;
    small.clear(int32_t(n - 1));
    small.set(0);
    EXPECT_THROW(s.sample(logits.data(), int32_t(n), {}, &small), Error);
}

}  // namespace
}  // namespace plainllama
