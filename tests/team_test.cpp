// The kernels' team (sys/team.h): every part of a step runs once, the caller's on the caller and each other on a
// thread of its own; a step inside a step, or while another thread's step holds the team, runs on its caller; an
// exception from any part arrives on the caller after every part is done; kernels called from two threads at once
// (one gets the team, the other runs alone) give the bits of one call. ctest runs these with the workers spinning
// between steps (Team.*, OMP_WAIT_POLICY unset) and asleep (passive, as every test).
#include "plainllama/sys/team.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "plainllama/kernels/kernels.h"
#include "plainllama/kernels/testing.h"

namespace plainllama {
namespace {

TEST(Team, EveryPartOnceTheFirstOnTheCaller) {
    const std::thread::id me = std::this_thread::get_id();
    for (int n : {1, 2, 3, 5, 2, 1}) {  // the team grows to the largest n and serves smaller steps after
        for (int step = 0; step < 200; ++step) {
            std::vector<int> ran(size_t(n), 0);
            std::vector<std::thread::id> on(static_cast<size_t>(n));
            std::vector<char> inside(static_cast<size_t>(n), 0);
            team_run(n, [&](int t) {
                ran[size_t(t)] += 1;
                on[size_t(t)] = std::this_thread::get_id();
                inside[size_t(t)] = in_team_step();
            });
            for (int t = 0; t < n; ++t) {
                ASSERT_EQ(ran[size_t(t)], 1) << "n " << n << " part " << t;
                ASSERT_TRUE(inside[size_t(t)]) << "n " << n << " part " << t;
            }
            ASSERT_EQ(on[0], me) << n;
            for (int t = 1; t < n; ++t) {  // each on a thread of its own (the team was free)
                ASSERT_NE(on[size_t(t)], me) << "n " << n << " part " << t;
                for (int u = 1; u < t; ++u) ASSERT_NE(on[size_t(t)], on[size_t(u)]) << "n " << n << " part " << t;
            }
        }
    }
    EXPECT_FALSE(in_team_step());
}

// prefetch_after_step: a worker prefetches after its part (more ranges than kAfterStepRanges are dropped, the caller's
// own and those outside a step ignored) and still takes every step after.
TEST(Team, PrefetchesAfterAStepLeaveTheStepsAsTheyWere) {
    std::vector<char> buf(size_t(1) << 20, 1);
    prefetch_after_step(buf.data(), buf.size());  // outside a step: nothing
    for (int n : {2, 3}) {
        for (int step = 0; step < 500; ++step) {
            std::vector<int> ran(size_t(n), 0);
            team_run(n, [&](int t) {
                ran[size_t(t)] += 1;
                for (int i = 0; i < kAfterStepRanges + 2; ++i)
                    prefetch_after_step(buf.data() + (size_t(step * 7 + t + i) << 14) % buf.size(), size_t(16) << 10);
            });
            for (int t = 0; t < n; ++t) ASSERT_EQ(ran[size_t(t)], 1) << "n " << n << " step " << step << " part " << t;
        }
    }
}

TEST(Team, AStepInsideAStepRunsOnItsCaller) {
    std::vector<std::thread::id> outer(2), inner(2 * 3);
    team_run(2, [&](int t) {
        outer[size_t(t)] = std::this_thread::get_id();
        team_run(3, [&](int u) { inner[size_t(3 * t + u)] = std::this_thread::get_id(); });
    });
    for (int t = 0; t < 2; ++t)
        for (int u = 0; u < 3; ++u) EXPECT_EQ(inner[size_t(3 * t + u)], outer[size_t(t)]) << t << " " << u;
}

TEST(Team, TwoCallersAtOnceBothFinish) {
    std::atomic<int64_t> total{0};
    auto caller = [&] {
        for (int step = 0; step < 2000; ++step) team_run(2, [&](int t) { total += t + 1; });
    };
    std::thread other(caller);
    caller();
    other.join();
    EXPECT_EQ(total.load(), 2 * 2000 * 3);
}

TEST(Team, AWorkersExceptionArrivesOnTheCaller) {
    EXPECT_THROW(team_run(3,
                          [&](int t) {
                              if (t == 2) throw std::runtime_error("part 2");
                          }),
                 std::runtime_error);
    int ran = 0;
    team_run(3, [&](int t) {
        if (t == 0) ++ran;
    });
    EXPECT_EQ(ran, 1);
}

TEST(Team, TheCallersExceptionAfterTheWorkersAreDone) {
    std::atomic<int> done{0};
    EXPECT_THROW(team_run(2,
                          [&](int t) {
                              if (t == 0) throw std::runtime_error("part 0");
                              std::this_thread::sleep_for(std::chrono::milliseconds(20));
                              done = 1;
                          }),
                 std::runtime_error);
    EXPECT_EQ(done.load(), 1);
    EXPECT_FALSE(in_team_step());
    int ran = 0;
    team_run(2, [&](int t) {
        if (t == 0) ++ran;
    });  // the team still serves steps
    EXPECT_EQ(ran, 1);
}

TEST(Team, KernelsFromTwoThreadsAtOnceGiveTheBitsOfOne) {
    const int64_t N = 256, K = 512;
    std::vector<float> W(size_t(N * K)), x(size_t(3 * K));
    for (size_t i = 0; i < W.size(); ++i) W[i] = float(int(i * 7919 % 2003) - 1001) / 997.0f;
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 104729 % 1009) - 504) / 251.0f;
    for (QuantType q : {QuantType::none, QuantType::q4_k}) {
        const PackedWeight w(W.data(), DType::F32, N, K, q);
        for (int64_t T : {1, 3}) {
            std::vector<float> want(size_t(T * N));
            matmul(want.data(), x.data(), w.matrix(), T);
            std::vector<float> got[2] = {std::vector<float>(want.size()), std::vector<float>(want.size())};
            auto caller = [&](int c) {
                for (int rep = 0; rep < 300; ++rep) {
                    matmul(got[c].data(), x.data(), w.matrix(), T);
                    if (std::memcmp(got[c].data(), want.data(), want.size() * sizeof(float)) != 0) return;
                }
            };
            std::thread other(caller, 1);
            caller(0);
            other.join();
            for (int c = 0; c < 2; ++c)
                EXPECT_EQ(std::memcmp(got[c].data(), want.data(), want.size() * sizeof(float)), 0)
                    << quant_name(q) << " T " << T << " caller " << c;
        }
    }
}

}  // namespace
}  // namespace plainllama
