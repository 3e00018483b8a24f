// The compute kernels against scalar references written here, for every kernel variant this CPU runs: matmul
// (matvec and GEMM paths on packed weights, every weight type, odd shapes, 1 and 2 threads; rows independent of the
// batch), softmax, silu_mul, the storage conversions and their rounding; and the variants against each other.
#include "plainllama/kernels/kernels.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "plainllama/io/dtype.h"
#include "plainllama/sys/error.h"
#include "test_util.h"

namespace plainllama {
namespace {

constexpr double kU = 0x1p-24;  // unit roundoff of f32

// ---- 16-bit storage decoded independently of the library (test::decode_f16 / decode_bf16) -----------
using test::decode_bf16;
using test::decode_f16;

double decode(DType t, const void* p, size_t i) {
    if (t == DType::F32) return double(static_cast<const float*>(p)[i]);
    const uint16_t h = static_cast<const uint16_t*>(p)[i];
    return t == DType::F16 ? decode_f16(h) : decode_bf16(h);
}

using test::Threads;

// Every test here runs once per kernel variant this CPU supports (scalar, avx2, avx512, avx512_bf16).
class Matmul : public test::EveryKernel {};
class Softmax : public test::EveryKernel {};
class SiluMul : public test::EveryKernel {};
class VectorKernels : public test::EveryKernel {};
class Convert : public test::EveryKernel {};

// Random weights [n] of type t: random sign, exponent in [-6, 0], random significand (all exactly stored).
std::vector<uint8_t> random_weights(DType t, size_t n, std::mt19937& rng) {
    std::vector<uint8_t> b(n * dtype_size(t));
    std::uniform_int_distribution<int> exp(-6, 0), sign(0, 1);
    std::uniform_int_distribution<uint32_t> mant(0, 0x7fffffu);
    for (size_t i = 0; i < n; ++i) {
        const int s = sign(rng), e = exp(rng);
        const uint32_t m = mant(rng);
        if (t == DType::F32) {
            const float f = std::ldexp(float(0x800000u | m), e - 23) * (s ? -1.0f : 1.0f);
            std::memcpy(&b[i * 4], &f, 4);
        } else {
            const uint16_t h = t == DType::F16 ? uint16_t(s << 15 | (e + 15) << 10 | (m & 0x3ff))
                                               : uint16_t(s << 15 | (e + 127) << 7 | (m & 0x7f));
            std::memcpy(&b[i * 2], &h, 2);
        }
    }
    return b;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

// ---- matmul ----------------------------------------------------------------------------------------

const DType kTypes[] = {DType::F32, DType::F16, DType::BF16};

// sum_k |x[t, k] W[r, k]| per output [T, N]: the reference on |x| and |W| (sign bits cleared), W row-major [N, K] of
// type t. The scale of the terms, so cancellation cannot defeat a bound relative to it: a product dropped or counted
// twice moves its output by |x w|, while an f32 accumulation of K products in any order (fused, or the scalar kernels'
// multiply then add: one rounding more per product) errs by at most (K + 1) u times it, (K + 2) u with the
// reference's own rounding.
std::vector<float> abs_products(const float* x, const void* W, DType t, int64_t T, int64_t N, int64_t K) {
    std::vector<float> xa(size_t(T * K)), scale(size_t(T * N));
    for (size_t i = 0; i < xa.size(); ++i) xa[i] = std::fabs(x[i]);
    const size_t bytes = size_t(N * K) * dtype_size(t);
    std::vector<uint8_t> Wa(static_cast<const uint8_t*>(W), static_cast<const uint8_t*>(W) + bytes);
    for (size_t i = dtype_size(t) - 1; i < Wa.size(); i += dtype_size(t)) Wa[i] &= 0x7f;
    matmul_reference(scale.data(), xa.data(), Wa.data(), t, T, N, K);
    return scale;
}

// matmul_reference itself against a dot product in double written here (the weights decoded independently).
TEST_P(Matmul, ReferenceIsADoubleDotProduct) {
    std::mt19937 rng(5);
    for (DType t : kTypes) {
        const int64_t T = 3, N = 17, K = 33;
        const auto W = random_weights(t, size_t(N * K), rng);
        const auto x = random_floats(size_t(T * K), rng);
        std::vector<float> out(size_t(T * N));
        matmul_reference(out.data(), x.data(), W.data(), t, T, N, K);
        for (int64_t i = 0; i < T; ++i)
            for (int64_t r = 0; r < N; ++r) {
                double a = 0;
                for (int64_t k = 0; k < K; ++k)
                    a += double(x[size_t(i * K + k)]) * decode(t, W.data(), size_t(r * K + k));
                EXPECT_EQ(out[size_t(i * N + r)], float(a)) << dtype_name(t) << " t " << i << " r " << r;
            }
    }
}

// out = x . W^T for every weight type and odd/even shapes, T = 1 (matvec) and T > 1 (GEMM with its
// 6-row tiles, 32-column blocks and 2048-wide K blocks), with 1 and 2 threads.
// Tolerance, relative to sum_k |x_k W_rk| (abs_products): the weights are converted exactly to f32, so the only error
// is the f32 accumulation, (K + 2) u of it. A wrong or missing element costs about sum / K, which is far above it for
// every K here.
TEST_P(Matmul, MatchesReferenceAllTypesShapesThreads) {
    std::mt19937 rng(42);
    const int64_t kT[] = {1, 2, 5, 6, 7, 8, 13, 14, 64};
    const int64_t kNK[] = {1, 15, 16, 17, 33, 100, 300, 1000};
    constexpr size_t kGuard = 37;
    double worst = 0;  // max |out - ref| / (u sum |x w|)
    for (DType t : kTypes)
        for (int64_t N : kNK)
            for (int64_t K : kNK) {
                const auto W = random_weights(t, size_t(N * K), rng);
                const PackedWeight packed(W.data(), t, N, K);
                for (int64_t T : kT) {
                    const auto x = random_floats(size_t(T * K), rng);
                    std::vector<float> ref(size_t(T * N));
                    matmul_reference(ref.data(), x.data(), W.data(), t, T, N, K);
                    const std::vector<float> scale = abs_products(x.data(), W.data(), t, T, N, K);
                    for (int th : {1, 2})
                        for (bool exact : {true, false}) {
                            Threads scope(th);
                            std::vector<float> out(size_t(T * N) + kGuard, -12345.0f);
                            matmul(out.data(), x.data(), packed.matrix(), T, exact);
                            // BF16 prefill rounds x to BF16 unless exact: at most 2^-8 relative per product.
                            const double x_rounding = !exact && t == DType::BF16 && T > 1 ? 1.0 / 256 : 0.0;
                            for (size_t i = size_t(T * N); i < out.size(); ++i)
                                ASSERT_EQ(out[i], -12345.0f) << "wrote past the output: " << dtype_name(t) << " T " << T
                                                             << " N " << N << " K " << K;
                            for (size_t i = 0; i < ref.size(); ++i) {
                                const double err = std::fabs(double(out[i]) - double(ref[i]));
                                const double tol = (double(K + 2) * kU + x_rounding) * double(scale[i]);
                                ASSERT_LE(err, tol)
                                    << dtype_name(t) << " T " << T << " N " << N << " K " << K << " threads " << th
                                    << " exact " << exact << " at [" << i / size_t(N) << ", " << i % size_t(N)
                                    << "]: got " << out[i] << ", expected " << ref[i];
                                if (scale[i] > 0 && x_rounding == 0)
                                    worst = std::max(worst, err / (kU * double(scale[i])));
                            }
                        }
                }
            }
    std::printf("matmul: worst |out - ref| = %.3g u * sum|x w| (bound K + 2 <= 1002)\n", worst);
}

// K past one K block (2048): partial sums go through out between blocks (and a 16-bit panel block starts
// mid-panel, BF16 mid-pair-row); N with partial 16-column halves; T = 60 with N = 300 makes F16 tiles of 60 rows
// (widened into a buffer on AVX-512), T = 13 short ones (widened in registers). Each output still matches the
// reference within (K + 2) u sum_k |x w| (abs_products; |x| <= 1, the weights' magnitudes reach 2), and a batch row
// equals decode.
TEST_P(Matmul, LongKAcrossBlocks) {
    std::mt19937 rng(21);
    const std::pair<int64_t, int64_t> kTN[] = {{13, 25}, {13, 47}, {60, 300}};
    for (DType t : kTypes)
        for (auto [T, N] : kTN)
            for (int64_t K : {2049, 4099}) {
                const auto W = random_weights(t, size_t(N * K), rng);
                const PackedWeight packed(W.data(), t, N, K);
                const auto x = random_floats(size_t(T * K), rng);
                std::vector<float> ref(static_cast<size_t>(T * N)), out(ref.size()), one(static_cast<size_t>(N));
                matmul_reference(ref.data(), x.data(), W.data(), t, T, N, K);
                const std::vector<float> scale = abs_products(x.data(), W.data(), t, T, N, K);
                matmul(out.data(), x.data(), packed.matrix(), T, /*exact=*/true);
                for (size_t i = 0; i < ref.size(); ++i)
                    ASSERT_LE(std::fabs(double(out[i]) - double(ref[i])), double(K + 2) * kU * double(scale[i]))
                        << dtype_name(t) << " N " << N << " K " << K << " at " << i << ": got " << out[i]
                        << ", expected " << ref[i];
                for (int64_t r : {int64_t(0), T - 1}) {
                    matmul(one.data(), x.data() + r * K, packed.matrix(), 1);
                    for (int64_t j = 0; j < N; ++j)
                        ASSERT_EQ(one[size_t(j)], out[size_t(r * N + j)])
                            << dtype_name(t) << " N " << N << " K " << K << " row " << r << " col " << j;
                }
            }
}

// Decode's three tunings (use_tuning) prefetch differently and compute the same: each output equal bit for bit,
// whichever one this CPU would choose, for each weight type, K odd (BF16's last pair on its own) and long enough to
// cross pages, N not a multiple of the panel, 1 and 2 threads. Only the AVX-512 variants have tunings.
TEST_P(Matmul, EveryTuningGivesTheSameBits) {
    if (!test::variant_has_tuning(GetParam()))
        GTEST_SKIP() << "the " << GetParam() << " kernels have no tuning (only the AVX-512 ones follow it)";
    std::mt19937 rng(31);
    const int64_t N = 70, K = 2049;
    for (DType t : kTypes) {
        const auto W = random_weights(t, size_t(N * K), rng);
        const PackedWeight packed(W.data(), t, N, K);
        const auto x = random_floats(size_t(K), rng);
        for (int th : {1, 2}) {
            Threads scope(th);
            std::vector<float> out[3];
            for (Tuning k : {Tuning::intel, Tuning::zen4, Tuning::zen5}) {
                test::UseTuning tuned(k);
                std::vector<float>& o = out[int(k)];
                o.assign(size_t(N), -1.0f);
                matmul(o.data(), x.data(), packed.matrix(), 1);
                EXPECT_EQ(std::count(o.begin(), o.end(), -1.0f), 0) << dtype_name(t) << " " << tuning_name(k);
            }
            EXPECT_EQ(out[0], out[1]) << dtype_name(t) << " threads " << th;
            EXPECT_EQ(out[0], out[2]) << dtype_name(t) << " threads " << th;
        }
    }
}

// matmul_many runs all its products in one tile space: each output equals matmul of that job alone, bit for
// bit, for mixed types and sizes, decode and prefill, exact or not (unquantized: see QuantDot for quantized jobs);
// and naming the product that follows (MatmulNext, a prefetch hint) changes nothing. Jobs 0 and 2 are large enough
// (15 and 14 panels of 32 rows at K = 300: at least kParallelWork) that decode with 2 threads splits both hinted
// steps, so the worker takes the hint (prefetch_after_step) after its part.
TEST_P(Matmul, ManyEqualsOneAtATime) {
    std::mt19937 rng(13);
    const int64_t K = 300;
    const std::vector<std::pair<DType, int64_t>> shapes = {
        {DType::F16, 450}, {DType::F32, 5}, {DType::BF16, 448}, {DType::F32, 33}};
    std::vector<PackedWeight> W;
    for (const auto& [t, N] : shapes) {
        const auto w = random_weights(t, size_t(N * K), rng);
        W.emplace_back(w.data(), t, N, K);
    }
    for (int64_t T : {1, 2, 37, 130})
        for (bool exact : {true, false})
            for (int th : {1, 2}) {
                Threads scope(th);
                const auto x = random_floats(size_t(T * K), rng);
                std::vector<std::vector<float>> many, one;
                std::vector<MatmulJob> jobs;
                for (size_t i = 0; i < W.size(); ++i) {
                    many.emplace_back(size_t(T * W[i].matrix().N), -1.0f);
                    one.emplace_back(size_t(T * W[i].matrix().N), -2.0f);
                    matmul(one.back().data(), x.data(), W[i].matrix(), T, exact);
                }
                for (size_t i = 0; i < W.size(); ++i) jobs.push_back({many[i].data(), &W[i].matrix()});
                matmul_many(jobs.data(), int(jobs.size()), x.data(), T, exact);
                for (size_t i = 0; i < W.size(); ++i)
                    ASSERT_EQ(many[i], one[i]) << "job " << i << " T " << T << " exact " << exact;
                for (auto& m : many) std::fill(m.begin(), m.end(), -1.0f);
                // one step after another, each naming the next, as in a layer: jobs 0-1, then 2-3, then 0-1 again
                matmul_many(jobs.data(), 2, x.data(), T, exact, {jobs.data() + 2, 2});
                matmul_many(jobs.data() + 2, 2, x.data(), T, exact, {jobs.data(), 2});
                for (size_t i = 0; i < W.size(); ++i)
                    ASSERT_EQ(many[i], one[i]) << "job " << i << " T " << T << " exact " << exact << ", hinted";
            }
}

// The panels hold W[r, k] exactly where kernels.h says, and zeros in the padding.
TEST_P(Matmul, PackedLayoutIsAsDocumented) {
    std::mt19937 rng(3);
    for (DType t : kTypes)
        for (int64_t N : {1, 31, 32, 33, 70})
            for (int64_t K : {1, 2, 7, 64, 65}) {
                const auto W = random_weights(t, size_t(N * K), rng);
                // Also from a source 2 bytes off 4-byte alignment (safetensors only aligns to the element).
                std::vector<uint8_t> shifted(W.size() + 2);
                std::memcpy(shifted.data() + 2, W.data(), W.size());
                const bool odd = t != DType::F32 && N % 2;
                const PackedWeight p(odd ? static_cast<const void*>(shifted.data() + 2) : W.data(), t, N, K);
                const int64_t panels = (N + kPanel - 1) / kPanel, Ks = t == DType::BF16 ? (K + 1) / 2 * 2 : K;
                ASSERT_EQ(packed_bytes(t, N, K), size_t(panels * kPanel * Ks) * dtype_size(t));
                ASSERT_EQ(reinterpret_cast<uintptr_t>(p.matrix().data) % 64, 0u);
                for (int64_t r = 0; r < panels * kPanel; ++r)
                    for (int64_t k = 0; k < Ks; ++k) {
                        const int64_t pj = r / kPanel, j = r % kPanel;
                        const int64_t at = pj * kPanel * Ks +
                                           (t == DType::BF16 ? (k / 2) * 2 * kPanel + j * 2 + k % 2 : k * kPanel + j);
                        const double want = r < N && k < K ? decode(t, W.data(), size_t(r * K + k)) : 0.0;
                        ASSERT_EQ(decode(t, p.matrix().data, size_t(at)), want)
                            << dtype_name(t) << " N " << N << " K " << K << " at [" << r << ", " << k << "]";
                    }
            }
}

// Several matrices in one PackedWeights (how the model stores them): each as packed alone, 64-byte aligned,
// end to end; a capacity of 2 MiB or more (huge pages) too; past the capacity is refused.
TEST_P(Matmul, PackedWeightsHoldsMatricesEndToEnd) {
    std::mt19937 rng(4);
    const std::vector<std::tuple<DType, int64_t, int64_t>> shapes = {
        {DType::F32, 33, 7}, {DType::BF16, 5, 65}, {DType::F16, 70, 3}, {DType::BF16, 64, 64}, {DType::F32, 1024, 600}};
    std::vector<std::vector<uint8_t>> sources;
    size_t capacity = 0;
    for (const auto& [t, N, K] : shapes) {
        sources.push_back(random_weights(t, size_t(N * K), rng));
        capacity += packed_bytes(t, N, K);
    }
    ASSERT_GE(capacity, size_t(1) << 21);
    PackedWeights store(capacity);
    const char* end = nullptr;
    for (size_t i = 0; i < shapes.size(); ++i) {
        const auto& [t, N, K] = shapes[i];
        const PackedMatrix m = store.add(sources[i].data(), t, N, K);
        const PackedWeight alone(sources[i].data(), t, N, K);
        ASSERT_EQ(reinterpret_cast<uintptr_t>(m.data) % 64, 0u) << i;
        if (end) {
            ASSERT_EQ(static_cast<const char*>(m.data), end) << i;
        }
        end = static_cast<const char*>(m.data) + packed_bytes(t, N, K);
        ASSERT_EQ(m.dtype, t);
        ASSERT_EQ(m.N, N);
        ASSERT_EQ(m.K, K);
        ASSERT_EQ(std::memcmp(m.data, alone.matrix().data, packed_bytes(t, N, K)), 0) << i;
    }
    EXPECT_THROW(store.add(sources[0].data(), DType::F32, 1, 1), std::length_error);
}

// Each output is one chain of multiply-adds over k in order, so row t of a batched product equals the product of row t
// alone, bit for bit (what makes decode reproduce prefill exactly): the packed weights (every type; BF16 in
// exact mode, its vdpbf16ps path rounds x) and the row-major products attention uses, 1 and 2 threads.
// T = 130 with N = 300 (10 panels: one tile of all 130 rows each) makes tiles taller than the avx512 table's
// f16_direct_rows (48), T = 37 shorter ones: both ways of reading a 16-bit panel (widened in registers, or
// into a buffer first) must give the single row's bits.
TEST_P(Matmul, ARowDoesNotDependOnTheBatch) {
    std::mt19937 rng(9);
    for (int64_t T : {37, 130})
        for (int64_t N : {5, 32, 70, 300})
            for (int64_t K : {3, 64, 300, 600})
                for (int th : {1, 2}) {
                    Threads scope(th);
                    const auto x = random_floats(size_t(T * K), rng);
                    auto check = [&](const char* what, const std::function<void(float*, const float*, int64_t)>& mm) {
                        std::vector<float> batch(static_cast<size_t>(T * N)), one(static_cast<size_t>(N));
                        mm(batch.data(), x.data(), T);
                        for (int64_t t = 0; t < T; ++t) {
                            mm(one.data(), x.data() + t * K, 1);
                            for (int64_t r = 0; r < N; ++r)
                                ASSERT_EQ(one[size_t(r)], batch[size_t(t * N + r)])
                                    << what << " N " << N << " K " << K << " threads " << th << " at [" << t << ", "
                                    << r << "]";
                        }
                    };
                    for (DType t : kTypes) {
                        const auto W = random_weights(t, size_t(N * K), rng);
                        const PackedWeight p(W.data(), t, N, K);
                        check(dtype_name(t),
                              [&](float* o, const float* xx, int64_t n) { matmul(o, xx, p.matrix(), n, true); });
                        if (t != DType::BF16)
                            check(dtype_name(t),
                                  [&](float* o, const float* xx, int64_t n) { matmul(o, xx, p.matrix(), n); });
                    }
                    const auto B = random_floats(size_t(N * K), rng);
                    check("matmul_nn",
                          [&](float* o, const float* xx, int64_t n) { matmul_nn(o, xx, K, B.data(), n, N, K); });
                }
}

// The row-major f32 product (B [K, N]) against the reference within (K + 2) u sum_k |x b| (abs_products), and against
// matmul on B's packed panels: the same sums in the same order, bit for bit.
TEST_P(Matmul, RowMajorProductsMatchReference) {
    std::mt19937 rng(11);
    for (int64_t T : {1, 7, 40})
        for (int64_t N : {1, 16, 25, 33, 47, 100})
            for (int64_t K : {1, 17, 300, 2049}) {
                const auto x = random_floats(size_t(T * K), rng);
                const auto B = random_floats(size_t(N * K), rng);  // [N, K]
                std::vector<float> Bt(B.size());                   // [K, N]
                for (int64_t r = 0; r < N; ++r)
                    for (int64_t k = 0; k < K; ++k) Bt[size_t(k * N + r)] = B[size_t(r * K + k)];
                std::vector<float> ref(size_t(T * N)), mm(ref.size() + 16, -7.0f), nn(ref.size() + 16, -7.0f);
                matmul_reference(ref.data(), x.data(), B.data(), DType::F32, T, N, K);
                const std::vector<float> scale = abs_products(x.data(), B.data(), DType::F32, T, N, K);
                const PackedWeight packed(B.data(), DType::F32, N, K);
                matmul(mm.data(), x.data(), packed.matrix(), T);
                matmul_nn(nn.data(), x.data(), K, Bt.data(), T, N, K);
                for (size_t i = 0; i < ref.size(); ++i) {
                    const double tol = double(K + 2) * kU * double(scale[i]);
                    ASSERT_LE(std::fabs(double(mm[i]) - double(ref[i])), tol)
                        << "matmul T " << T << " N " << N << " K " << K << " at " << i << ": got " << mm[i]
                        << ", expected " << ref[i];
                    ASSERT_LE(std::fabs(double(nn[i]) - double(ref[i])), tol)
                        << "matmul_nn T " << T << " N " << N << " K " << K << " at " << i << ": got " << nn[i]
                        << ", expected " << ref[i];
                    ASSERT_EQ(mm[i], nn[i]) << "same order, same sums: T " << T << " N " << N << " K " << K;
                }
                for (size_t i = ref.size(); i < mm.size(); ++i)
                    ASSERT_TRUE(mm[i] == -7.0f && nn[i] == -7.0f) << "wrote past out";
            }
}

// matmul_nn with x's rows ldx apart, and gemv_acc continuing its chains: a row over K1 keys then K2 more equals
// the row over all K1 + K2 at once, bit for bit (what attention relies on to leave later tokens out).
TEST_P(Matmul, GemvAccContinuesMatmulNnChains) {
    std::mt19937 rng(12);
    for (int64_t N : {1, 8, 40, 64, 70})
        for (int64_t K1 : {0, 1, 5, 2049})
            for (int64_t K2 : {0, 1, 3, 33}) {
                const int64_t K = K1 + K2, T = 3, ldx = K + 5;
                if (K == 0) continue;
                const auto x = random_floats(size_t(T * ldx), rng);
                const auto B = random_floats(size_t(K * N), rng);  // [K, N]
                std::vector<float> whole(size_t(T * N)), split(size_t(T * N) + 16, -7.0f);
                matmul_nn(whole.data(), x.data(), ldx, B.data(), T, N, K);
                if (K1 > 0)
                    matmul_nn(split.data(), x.data(), ldx, B.data(), T, N, K1);
                else
                    std::fill_n(split.begin(), T * N, 0.0f);
                for (int64_t t = 0; t < T; ++t)
                    gemv_acc(split.data() + t * N, x.data() + t * ldx + K1, B.data() + K1 * N, K2, N);
                for (size_t i = 0; i < whole.size(); ++i)
                    ASSERT_EQ(split[i], whole[i]) << "N " << N << " K1 " << K1 << " K2 " << K2 << " at " << i;
                for (size_t i = whole.size(); i < split.size(); ++i) ASSERT_EQ(split[i], -7.0f) << "wrote past y";
            }
}

// The variants with fused multiply-adds (all but scalar) sum every matmul output in the same order with the same
// roundings, so they agree bit for bit, decode and prefill, every weight type (BF16 exact), both ways of reading
// 16-bit panels. (Not the f32 sums of softmax and RMSNorm: their reduction order follows the lane count.)
TEST(KernelVariants, FmaVariantsAgreeBitForBit) {
    std::vector<std::string> fma;
    for (const std::string& v : kernel_variants())
        if (v != "scalar") fma.push_back(v);
    if (fma.size() < 2) GTEST_SKIP() << "this CPU runs fewer than two FMA variants";
    std::mt19937 rng(31);
    for (DType t : kTypes)
        for (int64_t T : {1, 7, 60})
            for (int64_t K : {300, 2049}) {
                const int64_t N = 70;
                const auto W = random_weights(t, size_t(N * K), rng);
                const auto x = random_floats(size_t(T * K), rng);
                std::vector<float> first;
                for (const std::string& v : fma) {
                    test::UseKernels scope(v);
                    const PackedWeight p(W.data(), t, N, K);
                    std::vector<float> out(size_t(T * N));
                    matmul(out.data(), x.data(), p.matrix(), T, /*exact=*/true);
                    if (first.empty())
                        first = out;
                    else
                        ASSERT_EQ(out, first)
                            << v << " vs " << fma[0] << ": " << dtype_name(t) << " T " << T << " K " << K;
                }
            }
}

// use_kernels takes exactly the names of kernel_variants(), best first, and refuses any other (the active variant
// unchanged).
TEST(KernelVariants, UseKernelsTakesOnlyTheVariantsOfThisCpu) {
    const std::vector<std::string> runs = kernel_variants();
    ASSERT_FALSE(runs.empty());
    EXPECT_EQ(runs.back(), "scalar");
    const std::string before = kernels_isa();
    for (const char* bad : {"", "avx9", "AVX2", "scalar "}) {
        EXPECT_THROW(use_kernels(bad), UsageError) << bad;
        EXPECT_EQ(kernels_isa(), before);
    }
    for (const char* v : {"avx512_bf16", "avx512", "avx2"})
        if (std::find(runs.begin(), runs.end(), v) == runs.end()) {
            EXPECT_THROW(use_kernels(v), UsageError) << v;
        }
    for (const std::string& v : runs) {
        test::UseKernels scope(v);
        EXPECT_EQ(kernels_isa(), v);
    }
    EXPECT_EQ(kernels_isa(), before);
}

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

PL_FOR_EVERY_KERNEL(Matmul);
PL_FOR_EVERY_KERNEL(Softmax);
PL_FOR_EVERY_KERNEL(SiluMul);
PL_FOR_EVERY_KERNEL(VectorKernels);
PL_FOR_EVERY_KERNEL(Convert);

}  // namespace
}  // namespace plainllama
