// The matmul kernels against scalar references written here, for every kernel variant this CPU runs: matvec and GEMM
// paths on packed weights, every weight type, odd shapes, 1 and 2 threads; rows independent of the batch; the packed
// layout; and the variants against each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "plainllama/io/dtype.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/sys/error.h"
#include "test_util.h"

namespace plainllama {
namespace {

// f32's unit roundoff, random inputs, and weights decoded independently of the library (test_util.h).
using test::decode;
using test::kU;
using test::random_floats;
using test::Threads;

// Every test here runs once per kernel variant this CPU supports (scalar, avx2, avx512, avx512_bf16).
class Matmul : public test::EveryKernel {};

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

PL_FOR_EVERY_KERNEL(Matmul);

}  // namespace
}  // namespace plainllama
