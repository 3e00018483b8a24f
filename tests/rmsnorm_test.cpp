// RMSNorm against a scalar double-precision reference for every storage type, thread count and odd size,
// plus one test per classic mistake, each built so the mistake would give a visibly different answer.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "plainllama/kernels/kernels.h"
#include "test_util.h"

namespace plainllama {
namespace {

// f32 outputs: the sum of squares is accumulated in double, so the statistic is exact to far below an f32 ulp
// whatever n and the SIMD width; what is left is three f32 roundings (the scale, x * s, * w), each at most u
// relative: 3 u (seen: 2.6 u), checked against 4 u. An f32 accumulation (~sqrt(n / lanes) u, ~30 u at n = 8192
// on 8 lanes) fails it; any wrong formula (see the mistake tests) is off by far more than 1e-3.
constexpr double kF32Rel = 4 * test::kU;

// ---- storage, decoded independently of the library's converters (test::decode_f16 / decode_bf16) ----
using test::decode_bf16;
using test::decode_f16;

// Distance between consecutive values of type t around |v| (the binade's ulp).
double ulp_of(DType t, double v) {
    const int e = v == 0 ? -1000 : std::ilogb(v);
    switch (t) {
        case DType::F32:
            return std::ldexp(1.0, std::max(e, -126) - 23);
        case DType::F16:
            return std::ldexp(1.0, std::max(e, -14) - 10);
        case DType::BF16:
            return std::ldexp(1.0, std::max(e, -126) - 7);
        case DType::U8:
            break;
    }
    return 0;
}

// A [n] buffer of storage type t followed by kGuard guard elements that the kernel must not touch.
constexpr size_t kGuard = 16;
constexpr uint8_t kGuardByte = 0xa5;

struct Buffer {
    DType t = DType::F32;
    size_t n = 0;
    std::vector<uint8_t> bytes;

    Buffer(DType type, size_t count) : t(type), n(count), bytes((count + kGuard) * dtype_size(type), kGuardByte) {}
    void* data() { return bytes.data(); }
    const void* data() const { return bytes.data(); }
    double at(size_t i) const {
        if (t == DType::F32) {
            float f;
            std::memcpy(&f, &bytes[i * 4], 4);
            return f;
        }
        uint16_t h;
        std::memcpy(&h, &bytes[i * 2], 2);
        return t == DType::F16 ? decode_f16(h) : decode_bf16(h);
    }
    void set_f32(size_t i, float f) { std::memcpy(&bytes[i * 4], &f, 4); }
    void set_bits(size_t i, uint16_t h) { std::memcpy(&bytes[i * 2], &h, 2); }
    bool guards_intact() const {
        for (size_t i = n * dtype_size(t); i < bytes.size(); ++i)
            if (bytes[i] != kGuardByte) return false;
        return true;
    }
};

// Exactly representable f32 values (to be stored as f32, f16 or bf16 without rounding).
Buffer from_values(DType t, const std::vector<double>& v) {
    Buffer b(t, v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        if (t == DType::F32) {
            b.set_f32(i, float(v[i]));
            continue;
        }
        // Find the bit pattern by search over the positive patterns (monotonic in value), then the sign.
        const double a = std::fabs(v[i]);
        uint16_t lo = 0, hi = t == DType::F16 ? 0x7c00 : 0x7f80;
        while (lo < hi) {
            const uint16_t mid = uint16_t((lo + hi) / 2);
            const double m = t == DType::F16 ? decode_f16(mid) : decode_bf16(mid);
            if (m < a)
                lo = uint16_t(mid + 1);
            else
                hi = mid;
        }
        b.set_bits(i, uint16_t(lo | (v[i] < 0 ? 0x8000 : 0)));
        EXPECT_EQ(b.at(i), v[i]) << "test value " << v[i] << " is not representable in " << dtype_name(t);
    }
    return b;
}

// Random values of type t: random sign, binary exponent in [e_lo, e_hi], random significand.
Buffer random_buffer(DType t, size_t n, std::mt19937& rng, int e_lo, int e_hi, bool random_sign = true) {
    Buffer b(t, n);
    std::uniform_int_distribution<int> exp(e_lo, e_hi), sign(0, random_sign ? 1 : 0);
    std::uniform_int_distribution<uint32_t> mant(0, 0xffffffu);
    for (size_t i = 0; i < n; ++i) {
        const int s = sign(rng), e = exp(rng);
        const uint32_t m = mant(rng);
        switch (t) {
            case DType::F32: {
                const float f = std::ldexp(float(0x800000u | (m & 0x7fffffu)), e - 23);
                b.set_f32(i, s ? -f : f);
                break;
            }
            case DType::F16:
                b.set_bits(i, uint16_t(s << 15 | (e + 15) << 10 | (m & 0x3ff)));
                break;
            case DType::BF16:
                b.set_bits(i, uint16_t(s << 15 | (e + 127) << 7 | (m & 0x7f)));
                break;
            case DType::U8:
                break;
        }
    }
    return b;
}

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w[:], in double.     x: [rows, n], w: [n]
std::vector<double> rmsnorm_ref(const Buffer& x, const Buffer& w, int64_t rows, int64_t n, double eps) {
    std::vector<double> y(size_t(rows * n));
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += x.at(size_t(r * n + i)) * x.at(size_t(r * n + i));
        const double s = 1.0 / std::sqrt(ss / double(n) + eps);
        for (int64_t i = 0; i < n; ++i) y[size_t(r * n + i)] = x.at(size_t(r * n + i)) * s * w.at(size_t(i));
    }
    return y;
}

// Allowed |y - ref| for one element of an output of type t: f32 gets kF32Rel; f16/bf16 are the f32 result
// rounded once to nearest, so half an ulp of the type plus the f32 error.
double tolerance(DType t, double ref) {
    const double a = std::fabs(ref);
    return t == DType::F32 ? kF32Rel * a : 0.5 * ulp_of(t, a) + kF32Rel * a;
}

// Compares y (with its guards) to ref; reports the first bad element and the worst error / tolerance.
::testing::AssertionResult matches(const Buffer& y, const std::vector<double>& ref, double* worst_rel = nullptr) {
    if (!y.guards_intact()) return ::testing::AssertionFailure() << "wrote past the end of the output";
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double v = y.at(i), err = std::fabs(v - ref[i]);
        if (!(err <= tolerance(y.t, ref[i])))
            return ::testing::AssertionFailure() << "element " << i << ": got " << v << ", expected " << ref[i]
                                                 << " (|diff| " << err << " > " << tolerance(y.t, ref[i]) << ")";
        if (ref[i] != 0) worst = std::max(worst, err / std::fabs(ref[i]));
    }
    if (worst_rel) *worst_rel = std::max(*worst_rel, worst);
    return ::testing::AssertionSuccess();
}

using test::Threads;

const DType kDTypes[] = {DType::F32, DType::BF16, DType::F16};
const int64_t kSizes[] = {1, 3, 7, 63, 64, 65, 127, 1000, 4097, 8192};
const int kThreads[] = {1, 2, 4};

// y = rmsnorm(x) with a fresh guarded output of type xt.
Buffer run(const Buffer& x, const Buffer& w, int64_t rows, int64_t n, float eps) {
    Buffer y(x.t, size_t(rows * n));
    rmsnorm(y.data(), x.data(), x.t, w.data(), w.t, rows, n, eps);
    return y;
}

// Run once per kernel variant this CPU supports.
class RmsNorm : public test::EveryKernel {};
class RmsNormMistakes : public test::EveryKernel {};

TEST_P(RmsNorm, MatchesDoubleReferenceAllTypesSizesThreads) {
    std::mt19937 rng(1234);
    double worst_f32 = 0;
    for (DType xt : kDTypes)
        for (DType wt : kDTypes)
            for (int64_t n : kSizes)
                for (int64_t rows : {1, 2, 3, 5, 8, 17, 33}) {
                    // x spans 2^-4 .. 2^3 (an activation's range); w near 1 with both signs.
                    const Buffer x = random_buffer(xt, size_t(rows * n), rng, -4, 3);
                    const Buffer w = random_buffer(wt, size_t(n), rng, -1, 0);
                    const std::vector<double> ref = rmsnorm_ref(x, w, rows, n, 1e-5);
                    std::vector<uint8_t> first;
                    for (int th : kThreads) {
                        Threads scope(th);
                        const std::vector<uint8_t> x_before = x.bytes;
                        const Buffer y = run(x, w, rows, n, 1e-5f);
                        ASSERT_TRUE(matches(y, ref, xt == DType::F32 ? &worst_f32 : nullptr))
                            << "x " << dtype_name(xt) << ", w " << dtype_name(wt) << ", rows " << rows << ", n " << n
                            << ", threads " << th;
                        ASSERT_EQ(x.bytes, x_before) << "the input was modified";
                        // Rows are independent: the thread count must not change a single bit.
                        if (first.empty())
                            first = y.bytes;
                        else
                            ASSERT_EQ(y.bytes, first) << "result depends on the thread count (" << th << ")";
                    }
                }
    std::printf("rmsnorm f32: worst relative error %.3g (tolerance %.3g)\n", worst_f32, kF32Rel);
}

TEST_P(RmsNorm, EveryRowCountFrom1To33) {
    std::mt19937 rng(99);
    for (int64_t n : {63, 1000})
        for (int64_t rows = 1; rows <= 33; ++rows)
            for (int th : {1, 2}) {
                Threads scope(th);
                const Buffer x = random_buffer(DType::F32, size_t(rows * n), rng, -3, 2);
                const Buffer w = random_buffer(DType::F32, size_t(n), rng, -1, 0);
                ASSERT_TRUE(matches(run(x, w, rows, n, 1e-5f), rmsnorm_ref(x, w, rows, n, 1e-5)))
                    << "rows " << rows << ", n " << n << ", threads " << th;
            }
}

// Root-mean-square of row r of y.
double rms_of(const Buffer& y, int64_t r, int64_t n) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += y.at(size_t(r * n + i)) * y.at(size_t(r * n + i));
    return std::sqrt(ss / double(n));
}

// With unit weight every row comes out with root-mean-square 1 (up to eps), and its mean is NOT removed:
// x = 5 + noise has mean(y) = 5 / rms(x) ~ 0.98 and std ~ 0.19, not the mean 0 / std 1 of a LayerNorm.
TEST_P(RmsNorm, UnitWeightGivesUnitRmsAndKeepsTheMean) {
    const int64_t rows = 3, n = 4097;
    std::mt19937 rng(7);
    std::normal_distribution<double> noise(0.0, 1.0);
    std::vector<double> xv(size_t(rows * n));
    for (double& v : xv) v = double(float(5.0 + noise(rng)));
    for (DType xt : kDTypes) {
        std::vector<double> xr = xv;
        if (xt != DType::F32)  // multiples of 1/16 below 16: exact in bf16 (8 significant bits) and f16
            for (double& v : xr) v = std::ldexp(std::round(std::ldexp(v, 4)), -4);
        const Buffer x = from_values(xt, xr);
        const Buffer w = from_values(DType::F32, std::vector<double>(size_t(n), 1.0));
        const Buffer y = run(x, w, rows, n, 1e-5f);
        ASSERT_TRUE(matches(y, rmsnorm_ref(x, w, rows, n, 1e-5)));
        for (int64_t r = 0; r < rows; ++r) {
            double mean_x = 0, mean_y = 0, var_y = 0;
            for (int64_t i = 0; i < n; ++i) mean_x += x.at(size_t(r * n + i)) / double(n);
            for (int64_t i = 0; i < n; ++i) mean_y += y.at(size_t(r * n + i)) / double(n);
            for (int64_t i = 0; i < n; ++i) var_y += std::pow(y.at(size_t(r * n + i)) - mean_y, 2) / double(n);
            EXPECT_NEAR(rms_of(y, r, n), 1.0, 2e-3) << dtype_name(xt) << " row " << r;
            EXPECT_GT(mean_y, 0.9) << "the mean must be kept (mean(x) = " << mean_x << ")";
            EXPECT_NEAR(mean_y, mean_x / rms_of(x, r, n), 2e-3);
            EXPECT_LT(std::sqrt(var_y), 0.5) << "a unit std means a LayerNorm-style normalisation";
        }
    }
}

TEST_P(RmsNorm, ZeroInputGivesExactZeros) {
    for (DType xt : kDTypes)
        for (int64_t n : {1, 7, 65, 8192}) {
            const Buffer x = from_values(xt, std::vector<double>(size_t(2 * n), 0.0));
            const Buffer w = from_values(DType::F32, std::vector<double>(size_t(n), 1.5));
            const Buffer y = run(x, w, 2, n, 1e-5f);
            ASSERT_TRUE(y.guards_intact());
            for (size_t i = 0; i < size_t(2 * n); ++i) {
                ASSERT_FALSE(std::isnan(y.at(i))) << dtype_name(xt) << " n " << n << " element " << i;
                ASSERT_EQ(y.at(i), 0.0) << dtype_name(xt) << " n " << n << " element " << i;
            }
        }
}

// 1e-30: x^2 = 1e-60 underflows in f32 but eps dominates anyway, so y = x / sqrt(eps) * w exactly as in the
// reference. 1e30: x^2 overflows f32 but not the double sum: the output matches the reference too.
TEST_P(RmsNorm, TinyAndHugeInputsStayFinite) {
    const int64_t n = 65;
    std::vector<double> wv(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) wv[size_t(i)] = 0.5 + double(i % 7) / 8.0;
    const Buffer w = from_values(DType::F32, wv);
    for (double mag : {1e-30, 1e30}) {
        std::vector<double> xv(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
            xv[size_t(i)] = double(float(mag * (i % 2 ? -1.0 : 1.0) * (1.0 + double(i) / n)));
        for (float eps : {1e-5f, 1e-6f}) {
            const Buffer x = from_values(DType::F32, xv);
            const Buffer y = run(x, w, 1, n, eps);
            ASSERT_TRUE(y.guards_intact());
            for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(y.at(size_t(i)))) << mag << " element " << i;
            EXPECT_TRUE(matches(y, rmsnorm_ref(x, w, 1, n, double(eps)))) << mag;
        }
    }
    // The same for bf16 storage, whose range is f32's.
    const Buffer xb = from_values(DType::BF16, std::vector<double>(size_t(n), std::ldexp(1.0, 100)));
    const Buffer yb = run(xb, w, 1, n, 1e-5f);
    for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(yb.at(size_t(i)))) << "bf16 element " << i;
    EXPECT_TRUE(matches(yb, rmsnorm_ref(xb, w, 1, n, 1e-5)));
}

// ---- classic mistakes ------------------------------------------------------------------------------

// x = (3, -3, 1, -1): mean(x)^2 = 0 but mean(x^2) = 5. The mistake would give x / sqrt(eps) (~ +-950).
TEST_P(RmsNormMistakes, UsesMeanOfSquaresNotSquareOfMean) {
    const Buffer x = from_values(DType::F32, {3, -3, 1, -1});
    const Buffer w = from_values(DType::F32, {1, 1, 1, 1});
    const Buffer y = run(x, w, 1, 4, 1e-5f);
    const double s = 1.0 / std::sqrt(5.0 + 1e-5);
    EXPECT_NEAR(y.at(0), 3 * s, 1e-6);
    EXPECT_NEAR(y.at(1), -3 * s, 1e-6);
    EXPECT_NEAR(y.at(2), 1 * s, 1e-6);
    EXPECT_NEAR(y.at(3), -1 * s, 1e-6);
}

// x: [2, 3] with row 1 = 10 * row 0. Each row is normalised over its own 3 columns, so both rows come out
// identical (RMSNorm is scale invariant); normalising each column over the 2 rows would give
// row 0 = 1/sqrt(50.5) * (1, 2, 3)-ish and row 1 ten times that, and a square input could not tell them apart.
TEST_P(RmsNormMistakes, NormalisesEachRowOverItsColumns) {
    const Buffer x = from_values(DType::F32, {1, 2, 3, 10, 20, 30});
    const Buffer w = from_values(DType::F32, {1, 1, 1});
    const Buffer y = run(x, w, 2, 3, 1e-6f);
    const double s = 1.0 / std::sqrt(14.0 / 3.0);
    for (int i = 0; i < 3; ++i) {
        EXPECT_NEAR(y.at(size_t(i)), (i + 1) * s, 1e-5) << "row 0, column " << i;
        EXPECT_NEAR(y.at(size_t(3 + i)), (i + 1) * s, 1e-5) << "row 1, column " << i;
    }
    // The transposed shape [3, 2]: rows (1, 10), (2, 20), (3, 30) all normalise to the same pair.
    const Buffer xt = from_values(DType::F32, {1, 10, 2, 20, 3, 30});
    const Buffer w2 = from_values(DType::F32, {1, 1});
    const Buffer yt = run(xt, w2, 3, 2, 1e-6f);
    for (int r = 0; r < 3; ++r) {
        EXPECT_NEAR(yt.at(size_t(2 * r)), 1 / std::sqrt(50.5), 1e-5) << "row " << r;
        EXPECT_NEAR(yt.at(size_t(2 * r + 1)), 10 / std::sqrt(50.5), 1e-5) << "row " << r;
    }
}

// eps = 1 with mean(x^2) = 1: correct 1/sqrt(1 + 1) = 0.7071; eps outside the root 1/(1 + 1) = 0.5;
// eps missing 1/1 = 1.
TEST_P(RmsNormMistakes, EpsIsInsideTheSquareRoot) {
    const Buffer x = from_values(DType::F32, {1, -1, 1, -1, 1});
    const Buffer w = from_values(DType::F32, {1, 1, 1, 1, 1});
    const Buffer y = run(x, w, 1, 5, 1.0f);
    for (int i = 0; i < 5; ++i) {
        const double a = std::fabs(y.at(size_t(i)));
        EXPECT_NEAR(a, 1 / std::sqrt(2.0), 1e-6) << "element " << i;
        EXPECT_GT(std::fabs(a - 0.5), 0.1) << "eps added outside the square root";
        EXPECT_GT(std::fabs(a - 1.0), 0.1) << "eps ignored";
    }
    // And eps is the caller's, not a constant: a large eps shrinks the output, a tiny one does not.
    const Buffer y2 = run(x, w, 1, 5, 3.0f);
    EXPECT_NEAR(y2.at(0), 0.5, 1e-6);
}

// A constant row has zero variance: a LayerNorm (x - mean) would output zeros, RMSNorm outputs sign(x) * w.
TEST_P(RmsNormMistakes, DoesNotSubtractTheMean) {
    const Buffer x = from_values(DType::F32, {2, 2, 2, 2, 2, 2, 2, 2});
    const Buffer w = from_values(DType::F32, {1, 2, 3, 4, 5, 6, 7, 8});
    const Buffer y = run(x, w, 1, 8, 1e-6f);
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(y.at(size_t(i)), (i + 1) / std::sqrt(1 + 1e-6 / 4), 1e-5);
}

// The weight multiplies (HF LLaMA), it is not an offset (1 + w, Gemma): w = 0 gives zeros.
TEST_P(RmsNormMistakes, WeightMultipliesNotOnePlusWeight) {
    const Buffer x = from_values(DType::F32, {1, -2, 3});
    const Buffer w = from_values(DType::F32, {0, 0, 0});
    const Buffer y = run(x, w, 1, 3, 1e-5f);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(std::fabs(y.at(size_t(i))), 0.0);
}

PL_FOR_EVERY_KERNEL(RmsNorm);
PL_FOR_EVERY_KERNEL(RmsNormMistakes);

}  // namespace
}  // namespace plainllama
