// Grouped-query attention over a KV cache of each type against a double-precision reference written here, and its
// independence from batching: T tokens at once give the same output, bit for bit, as one token at a time (whatever
// the tiles of keys and the threads decode splits them over); the cache formats' rounding. Where the products run in
// BF16 (attention_bf16_products), the reference takes q rounded to BF16 as the kernels do, and the bound adds the
// rounding of each softmax weight: every p_j within 2^-8 of itself (relative) moves the weighted mean by at most
// 2^-8 max |v|.
#include "plainllama/kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "plainllama/io/dtype.h"
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

// A cache of ctx positions of type t holding Kc, Vc [n_kv_heads, ctx, head_dim] (rounded to t), its key panels' slots
// past ctx NaN (f32, f16, bf16) or garbage (q8_0): they must not reach out.
struct Cache {
    CacheType type;
    std::vector<uint8_t> k, v;
    KvView view;
    Cache(CacheType t, const std::vector<float>& Kc, const std::vector<float>& Vc, const Shape& s, int64_t ctx)
        : type(t),
          k(key_cache_bytes(t, s.n_kv_heads, s.head_dim, ctx), 0xff),
          v(value_cache_bytes(t, s.n_kv_heads, s.head_dim, ctx), 0xff) {
        view = KvView{t, k.data(), v.data(), s.n_kv_heads, s.head_dim, ctx};
        const int64_t hd = s.head_dim;
        std::vector<float> kj(size_t(s.n_kv_heads * hd)), vj(kj.size());
        for (int64_t j = 0; j < ctx; ++j) {
            for (int64_t g = 0; g < s.n_kv_heads; ++g)
                for (int64_t i = 0; i < hd; ++i) {
                    kj[size_t(g * hd + i)] = Kc[size_t((g * ctx + j) * hd + i)];
                    vj[size_t(g * hd + i)] = Vc[size_t((g * ctx + j) * hd + i)];
                }
            store_kv(view, j, kj.data(), vj.data());
        }
    }
    // What the cache holds, [n_kv_heads, ctx, head_dim] as f32.
    std::pair<std::vector<float>, std::vector<float>> read() const {
        const int64_t hd = view.head_dim, ctx = view.ctx;
        std::vector<float> K(size_t(view.n_kv_heads * ctx * hd)), V(K.size());
        for (int64_t g = 0; g < view.n_kv_heads; ++g)
            for (int64_t j = 0; j < ctx; ++j) {
                load_key(view, g, j, &K[size_t((g * ctx + j) * hd)]);
                load_value(view, g, j, &V[size_t((g * ctx + j) * hd)]);
            }
        return {K, V};
    }
};

// Runs attention for T tokens at pos0 with a scratch sized as documented.
std::vector<float> run(const std::vector<float>& q, const Cache& c, int64_t T, int64_t pos0, const Shape& s) {
    const int64_t hd = s.head_dim;
    std::vector<float> out(size_t(T * s.n_heads * hd) + 8, -3.0f);
    std::vector<float> scratch(size_t(attention_scratch(T, s.n_heads, s.n_kv_heads, c.view.ctx, hd, thread_count())));
    attention(out.data(), q.data(), c.view, T, pos0, s.n_heads, scratch.data());
    for (size_t i = size_t(T * s.n_heads * hd); i < out.size(); ++i) EXPECT_EQ(out[i], -3.0f) << "wrote past out";
    out.resize(size_t(T * s.n_heads * hd));
    return out;
}

const CacheType kCacheTypes[] = {CacheType::f32, CacheType::f16, CacheType::bf16, CacheType::q8_0};

// x rounded to nearest-even BF16, as the kernels' products in pairs take it.
std::vector<float> to_bf16(std::vector<float> x) {
    for (float& v : x) v = bf16_to_f32(f32_to_bf16(v));
    return x;
}
double max_abs(const std::vector<float>& x) {
    double m = 0;
    for (float v : x) m = std::max(m, double(std::fabs(v)));
    return m;
}

// Run once per kernel variant this CPU supports.
class Attention : public test::EveryKernel {};

// Against the reference on the values the cache holds, and prefill against decode, bit for bit, for every cache
// type: short contexts (one tile of keys) and long ones whose prompts cross tiles and whose decode splits a head's
// tiles over the threads.
TEST_P(Attention, MatchesReferenceAndDoesNotDependOnBatching) {
    std::mt19937 rng(21);
    std::normal_distribution<float> d(0.0f, 1.0f);
    struct Case {
        Shape s;
        int64_t pos0, T;
    };
    std::vector<Case> cases;
    for (const Shape& s : {Shape{4, 4, 32}, Shape{8, 2, 64}, Shape{6, 1, 96}, Shape{32, 4, 64}})
        for (int64_t pos0 : {0, 13})
            for (int64_t T : {1, 5, 40, 70}) cases.push_back({s, pos0, T});
    for (const Shape& s : {Shape{8, 2, 64}, Shape{4, 1, 32}})
        for (auto [pos0, T] : {std::pair<int64_t, int64_t>{240, 40}, {500, 3}, {700, 1}, {0, 270}, {740, 24}})
            cases.push_back({s, pos0, T});
    cases.push_back({Shape{16, 4, 64}, 500, 3});  // decode in one span a KV head (2 threads)
    for (const Case& cs : cases)
        for (CacheType type : kCacheTypes)
            for (int th : {1, 2, 3}) {
                const Shape& s = cs.s;
                const int64_t T = cs.T, pos0 = cs.pos0;
                if (th == 3 && pos0 + T > 256) continue;  // (time: 1 and 2 threads split long decodes alike)
                Threads scope(th);
                const int64_t ctx = pos0 + T + 3, hd = s.head_dim;
                std::vector<float> q(size_t(T * s.n_heads * hd)), Kc(size_t(s.n_kv_heads * ctx * hd)), Vc(Kc.size());
                for (float& v : q) v = d(rng);
                for (float& v : Kc) v = d(rng);
                for (float& v : Vc) v = d(rng);
                const Cache cache(type, Kc, Vc, s, ctx);
                const auto out = run(q, cache, T, pos0, s);
                const auto [Kr, Vr] = cache.read();  // a bf16 cache's values already as its products take them
                const bool bf16 = attention_bf16_products(type, hd);
                const auto ref = reference(bf16 ? to_bf16(q) : q, Kr, Vr, T, pos0, s, ctx);
                const double weights = bf16 ? std::ldexp(max_abs(Vr), -8) : 0.0;
                const std::string where = "heads " + std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) +
                                          " hd " + std::to_string(hd) + " T " + std::to_string(T) + " pos0 " +
                                          std::to_string(pos0) + " threads " + std::to_string(th) + " cache " +
                                          cache_type_name(type);
                for (size_t i = 0; i < out.size(); ++i)
                    ASSERT_NEAR(out[i], ref[i], weights + 2e-5 * (1.0 + std::fabs(ref[i]))) << where << " at " << i;
                // The same tokens one at a time (decode): identical, bit for bit.
                for (int64_t t = 0; t < T; ++t) {
                    const int64_t qd = s.n_heads * hd;
                    const std::vector<float> qt(q.begin() + t * qd, q.begin() + (t + 1) * qd);
                    const auto one = run(qt, cache, 1, pos0 + t, s);
                    for (int64_t i = 0; i < qd; ++i)
                        ASSERT_EQ(one[size_t(i)], out[size_t(t * qd + i)]) << where << " token " << t;
                }
            }
}

// The cache's rounding: f16 to nearest (half an ulp: 2^-11 relative, 2^-25 among subnormals), bf16 likewise (2^-8
// relative, 2^-134 among subnormals), q8_0 within d (0.5 + 127
// * 2^-11) of each value, d = max|x| / 127 of its block of 32 (half a step, and the fp16 rounding of d times |q| <=
// 127).
TEST(KvCacheFormat, StoredValuesWithinTheFormatsRounding) {
    std::mt19937 rng(5);
    std::normal_distribution<float> d(0.0f, 3.0f);
    const Shape s{4, 2, 64};
    const int64_t ctx = 70, hd = s.head_dim;
    std::vector<float> Kc(size_t(s.n_kv_heads * ctx * hd)), Vc(Kc.size());
    for (float& v : Kc) v = d(rng);
    for (float& v : Vc) v = d(rng) * 0.01f;
    for (CacheType type : kCacheTypes) {
        const auto [K, V] = Cache(type, Kc, Vc, s, ctx).read();
        for (int pass = 0; pass < 2; ++pass) {
            const std::vector<float>&x = pass ? Vc : Kc, &y = pass ? V : K;
            for (size_t b = 0; b < x.size(); b += 32) {
                float amax = 0;
                for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
                for (size_t i = b; i < b + 32; ++i) {
                    const double err = std::fabs(double(y[i]) - double(x[i]));
                    const double bound = type == CacheType::f32 ? 0.0
                                         : type == CacheType::f16
                                             ? std::max(std::ldexp(double(std::fabs(x[i])), -11), std::ldexp(1.0, -25))
                                         : type == CacheType::bf16
                                             ? std::max(std::ldexp(double(std::fabs(x[i])), -8), std::ldexp(1.0, -134))
                                             : amax / 127.0 * (0.5 + 127.0 / 2048.0);
                    ASSERT_LE(err, bound) << cache_type_name(type) << (pass ? " V" : " K") << " at " << i;
                }
            }
        }
        if (type == CacheType::f32) {
            EXPECT_EQ(K, Kc);
        }
    }
    EXPECT_EQ(kv_row_bytes(CacheType::f32, 64), 256u);
    EXPECT_EQ(kv_row_bytes(CacheType::f16, 64), 128u);
    EXPECT_EQ(kv_row_bytes(CacheType::bf16, 64), 128u);
    EXPECT_EQ(kv_row_bytes(CacheType::q8_0, 64), 68u);  // llama.cpp's q8_0 rows
    EXPECT_FALSE(cache_type_unsupported(CacheType::q8_0, 8).empty());
    EXPECT_TRUE(cache_type_unsupported(CacheType::f16, 8).empty());
}

// Attention on an f16 or q8_0 cache against the same on the f32 cache of the unrounded values: within the bound the
// rounding implies. Each output is a softmax-weighted mean of V rows, so rounding V moves it by at most max |dV|;
// rounding K moves each score by at most delta = max_j |q . dK_j| / sqrt(head_dim), so each weight by a factor within
// e^(+-2 delta), and the mean by at most max |V| (e^(2 delta) - 1) more; plus the f32 arithmetic's own error. With the
// products in BF16, dV, dK and q take that rounding too (delta = max_j |q' . K'_j - q . K_j| / sqrt(head_dim)), and
// the weights' own rounding adds 2^-8 max |V|.
TEST_P(Attention, RoundedCachesStayWithinTheirRoundingOfTheF32Cache) {
    std::mt19937 rng(8);
    std::normal_distribution<float> d(0.0f, 1.0f);
    const Shape s{8, 2, 64};
    for (auto [pos0, T] : {std::pair<int64_t, int64_t>{0, 40}, {600, 1}, {290, 20}}) {
        Threads scope(2);
        const int64_t ctx = pos0 + T, hd = s.head_dim, group = s.n_heads / s.n_kv_heads;
        std::vector<float> q(size_t(T * s.n_heads * hd)), Kc(size_t(s.n_kv_heads * ctx * hd)), Vc(Kc.size());
        for (float& v : q) v = d(rng);
        for (float& v : Kc) v = d(rng);
        for (float& v : Vc) v = d(rng);
        const auto exact = run(q, Cache(CacheType::f32, Kc, Vc, s, ctx), T, pos0, s);
        for (CacheType type : {CacheType::f16, CacheType::bf16, CacheType::q8_0}) {
            const Cache cache(type, Kc, Vc, s, ctx);
            const auto [K, V] = cache.read();
            const bool bf16 = attention_bf16_products(type, hd);
            const std::vector<float> qe = bf16 ? to_bf16(q) : q;
            double dv = 0, vmax = 0;
            for (size_t i = 0; i < V.size(); ++i) {
                dv = std::max(dv, std::fabs(double(V[i]) - double(Vc[i])));
                vmax = std::max({vmax, std::fabs(double(Vc[i])), std::fabs(double(V[i]))});
            }
            const auto out = run(q, cache, T, pos0, s);
            double worst = 0, worst_bound = 0;
            for (int64_t t = 0; t < T; ++t)
                for (int64_t h = 0; h < s.n_heads; ++h) {
                    const int64_t g = h / group;
                    double delta = 0;
                    for (int64_t j = 0; j <= pos0 + t; ++j) {
                        double e = 0;
                        for (int64_t i = 0; i < hd; ++i) {
                            const size_t qi = size_t((t * s.n_heads + h) * hd + i), ki = size_t((g * ctx + j) * hd + i);
                            e += double(qe[qi]) * double(K[ki]) - double(q[qi]) * double(Kc[ki]);
                        }
                        delta = std::max(delta, std::fabs(e) / std::sqrt(double(hd)));
                    }
                    const double bound =
                        dv + vmax * std::expm1(2 * delta) + (bf16 ? std::ldexp(vmax, -8) : 0.0) + 1e-5 * (1 + vmax);
                    for (int64_t i = 0; i < hd; ++i) {
                        const size_t at = size_t((t * s.n_heads + h) * hd + i);
                        const double err = std::fabs(double(out[at]) - double(exact[at]));
                        ASSERT_LE(err, bound)
                            << cache_type_name(type) << " pos0 " << pos0 << " T " << T << " at " << at;
                        if (err > worst) worst = err, worst_bound = bound;
                    }
                }
            std::printf("%s pos0 %lld T %lld: largest difference from the f32 cache %.3g (its bound %.3g)\n",
                        cache_type_name(type), (long long)pos0, (long long)T, worst, worst_bound);
        }
    }
}

// A prompt's later token never reaches an earlier one, not even as 0 * Inf: with Inf and NaN in the last
// token's K and V rows, every earlier token's output stays finite and equal to decoding it alone.
TEST_P(Attention, ALaterTokensInfOrNaNDoesNotReachEarlierTokens) {
    std::mt19937 rng(22);
    std::normal_distribution<float> d(0.0f, 1.0f);
    const Shape s{8, 2, 64};
    for (CacheType type : kCacheTypes)
        for (int64_t pos0 : {0, 13, 250})
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
                    const Cache cache(type, Kc, Vc, s, ctx);
                    const auto out = run(q, cache, T, pos0, s);
                    for (int64_t t = 0; t + 1 < T; ++t) {
                        const std::vector<float> qt(q.begin() + t * qd, q.begin() + (t + 1) * qd);
                        const auto one = run(qt, cache, 1, pos0 + t, s);
                        for (int64_t i = 0; i < qd; ++i) {
                            ASSERT_TRUE(std::isfinite(out[size_t(t * qd + i)]))
                                << cache_type_name(type) << " T " << T << " pos0 " << pos0 << " threads " << th
                                << " token " << t << " at " << i;
                            ASSERT_EQ(one[size_t(i)], out[size_t(t * qd + i)])
                                << cache_type_name(type) << " T " << T << " pos0 " << pos0 << " threads " << th
                                << " token " << t << " at " << i;
                        }
                    }
                }
}

// The products run in BF16 pairs for a bf16 cache on the kernels with vdpbf16ps alone, head_dim a multiple of 32;
// every other cache type keeps f32 products.
TEST_P(Attention, Bf16ProductsForTheBf16CacheWhereVdpbf16psIs) {
    const bool bf16 = GetParam() == std::string("avx512_bf16");
    EXPECT_EQ(attention_bf16_products(CacheType::bf16, 64), bf16);
    EXPECT_EQ(attention_bf16_products(CacheType::bf16, 128), bf16);
    EXPECT_FALSE(attention_bf16_products(CacheType::bf16, 48));
    for (CacheType t : {CacheType::f32, CacheType::f16, CacheType::q8_0})
        EXPECT_FALSE(attention_bf16_products(t, 64)) << cache_type_name(t);
}

PL_FOR_EVERY_KERNEL(Attention);

}  // namespace
}  // namespace plainllama
