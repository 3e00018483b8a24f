// The vector kernels against scalar references written here, for every kernel variant this CPU runs: softmax,
// silu_mul, add_inplace (alone and over the threads), the storage conversions and their rounding; and parallel_for.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "plainllama/io/dtype.h"
#include "plainllama/kernels/kernels.h"
#include "test_util.h"

namespace plainllama {
namespace {

// f32's unit roundoff, random inputs, and 16-bit storage decoded independently of the library (test_util.h).
using test::decode;
using test::decode_bf16;
using test::decode_f16;
using test::kU;
using test::random_floats;
using test::Threads;

// Every test here runs once per kernel variant this CPU supports (scalar, avx2, avx512, avx512_bf16).
class Softmax : public test::EveryKernel {};
class SiluMul : public test::EveryKernel {};
class VectorKernels : public test::EveryKernel {};
class Convert : public test::EveryKernel {};

// ---- softmax, silu_mul and the small vector kernels -------------------------------------------------

std::vector<double> softmax_ref(const std::vector<float>& x) {
    double mx = -INFINITY, s = 0;
    for (float v : x) mx = std::max(mx, double(v));
    std::vector<double> p(x.size());
    for (size_t i = 0; i < x.size(); ++i) s += p[i] = std::exp(double(x[i]) - mx);
    for (double& v : p) v /= s;
    return p;
}

// Relative tolerance per element: x - max rounds with error u |x - max| in the exponent (up to 40 u for
// inputs in [-20, 20]), exp adds ~2 u, the f32 sum of n terms n u, the reciprocal and product 2 u. With a
// scale, the reference takes the f32 products scale * x (what the kernel rounds first).
TEST_P(Softmax, MatchesDoubleReference) {
    std::mt19937 rng(3);
    for (float scale : {1.0f, 0.125f, 0.3f})
        for (int64_t n : {1, 2, 7, 16, 17, 100, 1000}) {
            auto x = random_floats(size_t(n), rng, -20.0f / scale, 20.0f / scale);
            std::vector<float> scaled(x.size());
            for (size_t i = 0; i < x.size(); ++i) scaled[i] = scale * x[i];
            const auto ref = softmax_ref(scaled);
            softmax(x.data(), n, scale);
            double sum = 0;
            for (int64_t i = 0; i < n; ++i) {
                const double tol = (40.0 + double(n) + 8.0) * kU * ref[size_t(i)];
                EXPECT_NEAR(x[size_t(i)], ref[size_t(i)], tol) << "scale " << scale << " n " << n << " element " << i;
                sum += x[size_t(i)];
            }
            EXPECT_NEAR(sum, 1.0, (double(n) + 8.0) * kU) << "scale " << scale << " n " << n;
        }
}

TEST_P(Softmax, SingleElementIsOne) {
    float x = -1234.5f;
    softmax(&x, 1);
    EXPECT_EQ(x, 1.0f);
}

// exp(1000) overflows f32: the max must be subtracted first.
TEST_P(Softmax, LargeInputsDoNotOverflow) {
    std::vector<float> x = {1000.0f, 1001.0f, 999.0f, 1001.0f};
    const auto ref = softmax_ref(x);
    softmax(x.data(), 4);
    for (size_t i = 0; i < 4; ++i) {
        ASSERT_TRUE(std::isfinite(x[i])) << i;
        EXPECT_NEAR(x[i], ref[i], 1e-6) << i;
    }
    std::vector<float> y = {-1000.0f, -1001.0f};  // exp(-1000) underflows without the shift
    softmax(y.data(), 2);
    EXPECT_NEAR(y[0], 1 / (1 + std::exp(-1.0)), 1e-6);
}

// A score more than 87.33 below the max gets exactly 0 (exp's underflow), one just above it a positive weight.
TEST_P(Softmax, ScoresFarBelowTheMaxGiveZero) {
    std::vector<float> x = {50.0f, -50.0f, -37.0f, -38.0f, 49.0f};  // shifted: 0, -100, -87, -88, -1
    softmax(x.data(), 5);
    EXPECT_EQ(x[1], 0.0f);
    EXPECT_EQ(x[3], 0.0f);
    EXPECT_GT(x[2], 0.0f);
    EXPECT_NEAR(x[2], std::exp(-87.0) / (1 + std::exp(-1.0)), 1e-6 * std::exp(-87.0));
    EXPECT_NEAR(x[0] + x[4], 1.0, 1e-6);
}

// A NaN score makes the whole row NaN, wherever it sits and whatever the max seen before it.
TEST_P(Softmax, NaNGivesNaN) {
    for (size_t at : {0, 1, 2, 16, 20}) {
        std::vector<float> x(21, 1.0f);
        x[0] = 1e30f, x[20] = -1e30f;
        x[at] = NAN;
        softmax(x.data(), int64_t(x.size()));
        for (size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(std::isnan(x[i])) << "NaN at " << at << ", element " << i;
    }
}

// A masked score (-inf) gets probability exactly 0; the others still sum to 1.
TEST_P(Softmax, MinusInfinityGivesZero) {
    std::vector<float> x = {0.5f, -INFINITY, 1.5f, -INFINITY};
    softmax(x.data(), 4);
    EXPECT_EQ(x[1], 0.0f);
    EXPECT_EQ(x[3], 0.0f);
    EXPECT_NEAR(x[0], 1 / (1 + std::exp(1.0)), 1e-6);
    EXPECT_NEAR(x[0] + x[2], 1.0, 1e-6);
}

// silu(g) * u = g / (1 + exp(-g)) * u. Relative tolerance 16 u: exp within 4 ulp (glibc's vector exp bound),
// then 1 +, /, * each round once; absolute 1e-37 for g -> -inf, where the exact value is below f32's range.
TEST_P(SiluMul, MatchesDoubleReference) {
    std::mt19937 rng(11);
    for (int64_t n : {1, 15, 16, 17, 172, 1000}) {
        auto g = random_floats(size_t(n), rng, -30.0f, 30.0f);
        const auto u = random_floats(size_t(n), rng, -3.0f, 3.0f);
        const float special[] = {0.0f, -0.0f, 1e-3f, -88.0f, -100.0f, 88.0f, 100.0f};
        for (size_t i = 0; i < std::size(special) && i < g.size(); ++i) g[i] = special[i];
        std::vector<double> ref(static_cast<size_t>(n));
        for (size_t i = 0; i < size_t(n); ++i) ref[i] = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * double(u[i]);
        silu_mul(g.data(), u.data(), n);
        for (size_t i = 0; i < size_t(n); ++i) {
            ASSERT_FALSE(std::isnan(g[i])) << "n " << n << " element " << i;
            EXPECT_NEAR(g[i], ref[i], 16 * kU * std::fabs(ref[i]) + 1e-37) << "n " << n << " element " << i;
        }
    }
}

// Above their thresholds silu_mul and add_inplace run over the threads: the same values as small calls.
TEST_P(VectorKernels, ParallelEqualsPiecewise) {
    std::mt19937 rng(12);
    const int64_t n = (int64_t(1) << 19) + 37, piece = 1000;
    const auto g = random_floats(size_t(n), rng, -10.0f, 10.0f), u = random_floats(size_t(n), rng);
    Threads scope(2);
    auto whole = g, parts = g;
    silu_mul(whole.data(), u.data(), n);
    for (int64_t i = 0; i < n; i += piece) silu_mul(parts.data() + i, u.data() + i, std::min(piece, n - i));
    ASSERT_EQ(whole, parts);
    add_inplace(whole.data(), u.data(), n);
    for (int64_t i = 0; i < n; i += piece) add_inplace(parts.data() + i, u.data() + i, std::min(piece, n - i));
    ASSERT_EQ(whole, parts);
}

TEST_P(VectorKernels, AddInplace) {
    std::mt19937 rng(8);
    for (int64_t n : {1, 7, 16, 33, 64, 1000}) {
        const auto a = random_floats(size_t(n), rng), b = random_floats(size_t(n), rng);
        auto y = b;
        add_inplace(y.data(), a.data(), n);
        for (size_t i = 0; i < size_t(n); ++i) EXPECT_EQ(y[i], b[i] + a[i]);
    }
}

// ---- conversions -------------------------------------------------------------------------------------

// Every one of the 65536 patterns: exact value, Inf, NaN and the sign of zero, in one call (SIMD body)
// and element by element at every tail length (masked tails), with a guard after the output.
void check_all_patterns(DType t) {
    std::vector<uint16_t> src(65536);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint16_t(i);
    std::vector<float> out(src.size() + 8, 7.0f);
    convert_to_f32(out.data(), src.data(), t, int64_t(src.size()));
    for (size_t i = 0; i < src.size(); ++i) {
        const double want = decode(t, src.data(), i);
        if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(out[i])) << dtype_name(t) << " pattern " << std::hex << i;
        } else {
            ASSERT_EQ(double(out[i]), want) << dtype_name(t) << " pattern " << std::hex << i;
            ASSERT_EQ(std::signbit(out[i]), std::signbit(want)) << dtype_name(t) << " pattern " << std::hex << i;
        }
    }
    for (size_t i = src.size(); i < out.size(); ++i) ASSERT_EQ(out[i], 7.0f) << "wrote past the output";
    // Tail lengths 1 .. 40 starting at an odd offset (unaligned).
    for (int64_t n = 1; n <= 40; ++n) {
        std::vector<float> o(size_t(n) + 8, 7.0f);
        convert_to_f32(o.data(), src.data() + 0x3c01, t, n);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(double(o[size_t(i)]), decode(t, src.data(), size_t(0x3c01 + i)));
        for (size_t i = size_t(n); i < o.size(); ++i) ASSERT_EQ(o[i], 7.0f) << "n " << n << ": wrote past the output";
    }
}

TEST_P(Convert, F16AllPatternsIncludingSubnormalsInfNan) {
    check_all_patterns(DType::F16);
    // Spot values that must hold whatever the decoder above says.
    const uint16_t h[] = {0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x8000};
    float o[9];
    convert_to_f32(o, h, DType::F16, 9);
    EXPECT_EQ(o[0], std::ldexp(1.0f, -24));     // smallest subnormal
    EXPECT_EQ(o[1], std::ldexp(1023.0f, -24));  // largest subnormal
    EXPECT_EQ(o[2], std::ldexp(1.0f, -14));     // smallest normal
    EXPECT_EQ(o[3], 1.0f);
    EXPECT_EQ(o[4], 65504.0f);
    EXPECT_EQ(o[5], INFINITY);
    EXPECT_EQ(o[6], -INFINITY);
    EXPECT_TRUE(std::isnan(o[7]));
    EXPECT_TRUE(o[8] == 0.0f && std::signbit(o[8]));
}

TEST_P(Convert, Bf16AllPatterns) {
    check_all_patterns(DType::BF16);
    const uint16_t h[] = {0x3f80, 0xc000, 0x7f80, 0x7fc0, 0x0001};
    float o[5];
    convert_to_f32(o, h, DType::BF16, 5);
    EXPECT_EQ(o[0], 1.0f);
    EXPECT_EQ(o[1], -2.0f);
    EXPECT_EQ(o[2], INFINITY);
    EXPECT_TRUE(std::isnan(o[3]));
    EXPECT_EQ(o[4], std::ldexp(1.0f, -133));
}

TEST_P(Convert, F32IsACopy) {
    std::mt19937 rng(2);
    const auto x = random_floats(37, rng);
    std::vector<float> o(37 + 4, 7.0f);
    convert_to_f32(o.data(), x.data(), DType::F32, 37);
    for (size_t i = 0; i < 37; ++i) EXPECT_EQ(o[i], x[i]);
    for (size_t i = 37; i < o.size(); ++i) EXPECT_EQ(o[i], 7.0f);
}

// The nearest 16-bit pattern to f, ties to the even pattern, found by binary search over the positive
// patterns [0, inf_bits) (monotonic in value). For rounding, Inf stands for `overflow` = max + ulp, so
// |f| >= max + ulp/2 goes to Inf (IEEE overflow under round-to-nearest).
uint16_t round_ref(float f, double (*dec)(uint16_t), uint16_t inf_bits, double overflow) {
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const double a = std::fabs(double(f));
    if (a >= overflow) return sign | inf_bits;
    uint16_t lo = 0, hi = inf_bits;  // dec(lo) <= a < value(hi)
    while (hi - lo > 1) {
        const uint16_t mid = uint16_t((lo + hi) / 2);
        if (dec(mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    const double vlo = dec(lo), vhi = hi == inf_bits ? overflow : dec(hi);
    const double dlo = a - vlo, dhi = vhi - a;  // exact: every value involved fits in 53 bits
    if (dlo < dhi) return sign | lo;
    if (dhi < dlo) return sign | hi;
    return sign | ((lo & 1) ? hi : lo);
}

// Inputs: for every finite positive pattern, its value, the midpoint to the next (a tie) and the floats
// just either side of that midpoint, with both signs; plus random f32 bit patterns of every exponent.
std::vector<float> rounding_inputs(double (*dec)(uint16_t), uint16_t inf_bits, double overflow) {
    std::vector<float> in;
    for (uint32_t h = 0; h < inf_bits; ++h) {
        const double v = dec(uint16_t(h)), next = h + 1 == inf_bits ? overflow : dec(uint16_t(h + 1));
        const float mid = float((v + next) / 2);
        EXPECT_EQ(double(mid), (v + next) / 2) << "midpoint not exact in f32";
        for (float f : {float(v), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
            in.push_back(f);
            in.push_back(-f);
        }
    }
    std::mt19937 rng(17);
    for (int i = 0; i < 500000; ++i) {
        const uint32_t u = uint32_t(rng());
        float f;
        std::memcpy(&f, &u, 4);
        if (!std::isnan(f)) in.push_back(f);
    }
    for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, std::numeric_limits<float>::max(),
                    std::numeric_limits<float>::denorm_min(), 1e-8f, 65519.99f, 65520.0f, 1e6f})
        in.push_back(f);
    return in;
}

TEST(Rounding, F32ToF16RoundsToNearestEven) {
    const auto in = rounding_inputs(decode_f16, 0x7c00, 65536.0);
    for (float f : in) {
        const uint16_t want = round_ref(f, decode_f16, 0x7c00, 65536.0), got = f32_to_f16(f);
        ASSERT_EQ(got, want) << std::hexfloat << f << ": got 0x" << std::hex << got << ", expected 0x" << want;
    }
    // Anchors that do not depend on round_ref.
    EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
    EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);      // tie, 0x3c00 even
    EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie, 0x3c01 odd -> up
    EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
    EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
    EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // tie with "65536": 0x7bff odd -> Inf
    EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);  // tie between 0 and 2^-24 -> 0
    EXPECT_EQ(f32_to_f16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
    EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);         // tie between 1 and 2 (x 2^-24) -> 2
    EXPECT_EQ(f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400);  // largest subnormal + half: tie -> 2^-14
    EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
    const uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
    EXPECT_TRUE((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0) << std::hex << nan;
}

TEST(Rounding, F32ToBf16RoundsToNearestEven) {
    const double overflow = std::ldexp(1.0, 128);
    const auto in = rounding_inputs(decode_bf16, 0x7f80, overflow);
    for (float f : in) {
        const uint16_t want = round_ref(f, decode_bf16, 0x7f80, overflow), got = f32_to_bf16(f);
        ASSERT_EQ(got, want) << std::hexfloat << f << ": got 0x" << std::hex << got << ", expected 0x" << want;
    }
    EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);      // tie, even
    EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie, odd -> up
    EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81);
    // NaN stays NaN even when its payload is only in the low 16 bits (truncation would give Inf).
    for (uint32_t u : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7f80ffffu}) {
        float f;
        std::memcpy(&f, &u, 4);
        const uint16_t h = f32_to_bf16(f);
        EXPECT_TRUE((h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0) << std::hex << u << " -> " << h;
    }
}

// parallel_for runs every index exactly once: in a step of the team (sys/team.h) when asked (and there is more than
// one thread), else on the calling thread outside any step; inside an OpenMP region each thread's call stays on that
// thread.
TEST(ParallelFor, EveryIndexOnceOnATeamOnlyWhenAsked) {
    for (bool parallel : {false, true}) {
        std::vector<int> hits(1000, 0), in_team(1000, -1);
        parallel_for(1000, parallel, [&](int64_t i) {
            hits[size_t(i)] += 1;
            in_team[size_t(i)] = in_team_step();
        });
        EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 1000) << parallel;
        const int want = parallel && thread_count() > 1;
        EXPECT_EQ(std::count(in_team.begin(), in_team.end(), want), 1000) << parallel;
    }
    std::vector<std::thread::id> ran_on(2 * 100), caller(2);
#pragma omp parallel num_threads(2)
    {
        const int me = omp_get_thread_num();
        caller[size_t(me)] = std::this_thread::get_id();
        parallel_for(100, true, [&](int64_t i) { ran_on[size_t(me * 100 + i)] = std::this_thread::get_id(); });
    }
    for (int t = 0; t < 2; ++t) {
        if (caller[size_t(t)] == std::thread::id()) continue;  // (a team may have fewer threads than asked)
        for (int i = 0; i < 100; ++i) EXPECT_EQ(ran_on[size_t(t * 100 + i)], caller[size_t(t)]) << i;
    }
}

PL_FOR_EVERY_KERNEL(Softmax);
PL_FOR_EVERY_KERNEL(SiluMul);
PL_FOR_EVERY_KERNEL(VectorKernels);
PL_FOR_EVERY_KERNEL(Convert);

}  // namespace
}  // namespace plainllama
