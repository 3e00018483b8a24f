// RoPE: inverse frequencies (default, linear and llama3 scaling) against HF's formulas reimplemented here,
// the cos/sin tables, and the rotate_half pairing (element i with i + head_dim/2, not adjacent pairs).
#include "plainllama/model/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "plainllama/io/config.h"
#include "plainllama/kernels/kernels.h"
#include "test_util.h"

namespace plainllama {
namespace {

// transformers' _compute_default_rope_parameters: 1 / base^(arange(0, dim, 2) / dim).
std::vector<double> hf_default(double base, int64_t dim) {
    std::vector<double> f;
    for (int64_t i = 0; i < dim; i += 2) f.push_back(1.0 / std::pow(base, double(i) / double(dim)));
    return f;
}

// transformers' _compute_llama3_parameters, line by line (torch.where on each element).
std::vector<double> hf_llama3(double base, int64_t dim, double factor, double low_freq_factor, double high_freq_factor,
                              double old_context_len) {
    const double pi = 3.14159265358979323846;
    std::vector<double> inv_freq = hf_default(base, dim), out;
    const double low_freq_wavelen = old_context_len / low_freq_factor;
    const double high_freq_wavelen = old_context_len / high_freq_factor;
    for (double f : inv_freq) {
        const double wavelen = 2 * pi / f;
        double llama = wavelen > low_freq_wavelen ? f / factor : f;
        const double smooth_factor =
            (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
        const double smoothed = (1 - smooth_factor) * llama / factor + smooth_factor * llama;
        const bool is_medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
        out.push_back(is_medium ? smoothed : llama);
    }
    return out;
}

LlamaConfig rope_config(double theta, int64_t head_dim) {
    LlamaConfig c;
    c.rope_theta = theta;
    c.head_dim = head_dim;
    c.hidden_size = head_dim * 4;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 4;
    return c;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rel, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], rel * want[i]) << what << " i " << i;
}

// The engine computes in double like this reference; 1e-14 relative allows for pow's last bits only.
TEST(RopeInvFreq, DefaultMatchesHf) {
    for (auto [theta, hd] : {std::pair<double, int64_t>{10000, 8}, {10000, 64}, {500000, 128}, {1e6, 96}}) {
        const auto f = rope_inv_freq(rope_config(theta, hd));
        expect_close(f, hf_default(theta, hd), 1e-14, "default");
        EXPECT_EQ(f[0], 1.0);
    }
}

TEST(RopeInvFreq, LinearFactorTwoHalvesEveryFrequency) {
    LlamaConfig c = rope_config(10000, 64);
    const auto base = rope_inv_freq(c);
    c.rope_scaling.rope_type = RopeType::linear;
    c.rope_scaling.factor = 2.0;
    const auto f = rope_inv_freq(c);
    ASSERT_EQ(f.size(), base.size());
    for (size_t i = 0; i < f.size(); ++i) EXPECT_NEAR(f[i], base[i] / 2, 1e-15 * base[i]) << "i " << i;
}

// Llama 3.1's settings: factor 8, low 1, high 4, original 8192, theta 500000, head_dim 128.
TEST(RopeInvFreq, Llama3MatchesHf) {
    LlamaConfig c = rope_config(500000, 128);
    c.rope_scaling.rope_type = RopeType::llama3;
    c.rope_scaling.factor = 8;
    c.rope_scaling.low_freq_factor = 1;
    c.rope_scaling.high_freq_factor = 4;
    c.rope_scaling.original_max_position_embeddings = 8192;
    const auto f = rope_inv_freq(c);
    expect_close(f, hf_llama3(500000, 128, 8, 1, 4, 8192), 1e-14, "llama3");

    // The three bands are all present: high frequencies kept, low ones divided by 8, a blend between.
    const auto base = hf_default(500000, 128);
    int kept = 0, divided = 0, blended = 0;
    for (size_t i = 0; i < f.size(); ++i) {
        if (std::fabs(f[i] - base[i]) <= 1e-15 * base[i])
            ++kept;
        else if (std::fabs(f[i] - base[i] / 8) <= 1e-15 * base[i])
            ++divided;
        else if (f[i] < base[i] && f[i] > base[i] / 8)
            ++blended;
        if (i > 0) {
            EXPECT_LT(f[i], f[i - 1]) << "not decreasing at " << i;
        }
    }
    EXPECT_EQ(kept + divided + blended, 64);
    EXPECT_GT(kept, 0);
    EXPECT_GT(divided, 0);
    EXPECT_GT(blended, 0);
    EXPECT_EQ(f[0], 1.0);
    EXPECT_NEAR(f[63], base[63] / 8, 1e-15 * base[63]);
}

// The same through config.json parsing (HF field names, nested rope_scaling object).
TEST(RopeInvFreq, Llama3FromConfigJson) {
    const auto j = nlohmann::json::parse(R"({
        "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 128256, "rms_norm_eps": 1e-5, "max_position_embeddings": 131072,
        "rope_theta": 500000.0, "tie_word_embeddings": false, "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009],
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
    const LlamaConfig c = parse_config(j, "config.json");
    ASSERT_EQ(c.head_dim, 128);
    expect_close(rope_inv_freq(c), hf_llama3(500000, 128, 8, 1, 4, 8192), 1e-14, "llama3 from json");
}

TEST(RopeTables, CosSinOfPositionTimesFrequency) {
    const std::vector<double> inv = hf_default(10000, 16);
    std::vector<float> cs, sn;
    rope_tables(inv, 300, &cs, &sn);
    ASSERT_EQ(cs.size(), 300u * 8u);
    ASSERT_EQ(sn.size(), 300u * 8u);
    for (int64_t p : {0, 1, 2, 17, 299})
        for (size_t i = 0; i < 8; ++i) {
            EXPECT_NEAR(cs[size_t(p) * 8 + i], std::cos(double(p) * inv[i]), 1e-7) << p << " " << i;
            EXPECT_NEAR(sn[size_t(p) * 8 + i], std::sin(double(p) * inv[i]), 1e-7) << p << " " << i;
        }
}

// Run once per kernel variant this CPU supports.
class RopeRotateHalf : public test::EveryKernel {};

// x: [2 heads, head_dim 8]. Element i rotates with i + 4 in its own head:
//   out[i] = x[i] cos_i - x[i+4] sin_i,   out[i+4] = x[i+4] cos_i + x[i] sin_i.
TEST_P(RopeRotateHalf, PairsIWithIPlusHalf) {
    const int64_t nh = 2, hd = 8, half = 4;
    std::vector<float> x(size_t(nh * hd));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i + 1) * (i % 3 ? 1.0f : -0.5f);
    const std::vector<float> cs = {0.9f, 0.1f, -0.6f, 0.0f}, sn = {0.43589f, 0.99499f, 0.8f, 1.0f};
    std::vector<float> y = x;
    rope_rotate_half(y.data(), nh, hd, cs.data(), sn.data());
    for (int64_t h = 0; h < nh; ++h)
        for (int64_t i = 0; i < half; ++i) {
            const double a = x[size_t(h * hd + i)], b = x[size_t(h * hd + i + half)];
            EXPECT_NEAR(y[size_t(h * hd + i)], a * cs[size_t(i)] - b * sn[size_t(i)], 1e-5)
                << "head " << h << " i " << i;
            EXPECT_NEAR(y[size_t(h * hd + i + half)], b * cs[size_t(i)] + a * sn[size_t(i)], 1e-5)
                << "head " << h << " i " << i + half;
        }
    // A quarter turn on pair 3 (cos 0, sin 1): out[3] = -x[7], out[7] = x[3]. Adjacent pairs (2k, 2k+1)
    // would give out[3] = x[2] instead.
    EXPECT_EQ(y[3], -x[7]);
    EXPECT_EQ(y[7], x[3]);
    EXPECT_NE(y[3], x[2]);
}

TEST_P(RopeRotateHalf, PositionZeroIsIdentity) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-2, 2);
    std::vector<float> x(3 * 64);
    for (float& v : x) v = d(rng);
    std::vector<float> cs, sn;
    rope_tables(hf_default(10000, 64), 1, &cs, &sn);
    std::vector<float> y = x;
    rope_rotate_half(y.data(), 3, 64, cs.data(), sn.data());
    EXPECT_EQ(y, x);
}

// RoPE makes attention scores depend only on the distance: q(m) . k(n) == q(m + d) . k(n + d).
// Rotations preserve each pair's norm, too.
TEST_P(RopeRotateHalf, ScoresDependOnRelativePositionOnly) {
    const int64_t hd = 64;
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> d(-1, 1);
    std::vector<float> q(hd), k(hd);
    for (float& v : q) v = d(rng);
    for (float& v : k) v = d(rng);
    std::vector<float> cs, sn;
    rope_tables(hf_default(10000, hd), 512, &cs, &sn);
    auto rotated = [&](const std::vector<float>& v, int64_t pos) {
        std::vector<float> r = v;
        rope_rotate_half(r.data(), 1, hd, &cs[size_t(pos * hd / 2)], &sn[size_t(pos * hd / 2)]);
        return r;
    };
    auto dot = [&](const std::vector<float>& a, const std::vector<float>& b) {
        double s = 0;
        for (int64_t i = 0; i < hd; ++i) s += double(a[size_t(i)]) * double(b[size_t(i)]);
        return s;
    };
    for (auto [m, n] : {std::pair<int64_t, int64_t>{5, 2}, {40, 40}, {100, 3}}) {
        const double s0 = dot(rotated(q, m), rotated(k, n));
        for (int64_t shift : {1, 7, 300}) EXPECT_NEAR(dot(rotated(q, m + shift), rotated(k, n + shift)), s0, 2e-4);
        // A wrong pairing breaks this (and usually also the norm check below).
        const auto r = rotated(q, m);
        for (int64_t i = 0; i < hd / 2; ++i)
            EXPECT_NEAR(std::hypot(r[size_t(i)], r[size_t(i + hd / 2)]),
                        std::hypot(q[size_t(i)], q[size_t(i + hd / 2)]), 1e-5);
    }
    EXPECT_GT(std::fabs(dot(rotated(q, 0), rotated(k, 50)) - dot(q, k)), 1e-3) << "the rotation did nothing";
}

PL_FOR_EVERY_KERNEL(RopeRotateHalf);

}  // namespace
}  // namespace plainllama
