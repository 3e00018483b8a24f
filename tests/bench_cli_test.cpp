// `plainllama bench` end to end through the binary, and the bandwidth test and system facts behind it.
#include <gtest/gtest.h>
#include <omp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "plainllama/bench/fma_peak.h"
#include "plainllama/bench/read_bandwidth.h"
#include "plainllama/io/config.h"
#include "plainllama/io/dtype.h"
#include "plainllama/sys/error.h"
#include "plainllama/sys/sysinfo.h"
#include "plainllama/sys/threads.h"
#include "test_util.h"

namespace plainllama {
namespace {

using test::model_dir;
using test::run_binary;

size_t file_tensor_bytes(const test::fs::path& dir) {
    size_t n = 0;
    for (const auto& t : test::read_safetensors(dir / "model.safetensors")) n += t.bytes.size();
    return n;
}

nlohmann::json bench_json(const test::fs::path& dir, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"bench", "-m", dir.string(), "-p", "8", "-n", "4", "-r", "2", "--json", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_binary(args);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "");
    return nlohmann::json::parse(r.out);
}

TEST(BenchCli, JsonHasEveryKeyWithSaneValues) {
    // empty: the best variant, cpuid's tuning
    const test::ScopedEnv env("PLAINLLAMA_KERNELS", ""), tuning("PLAINLLAMA_TUNING", "");
    const auto j = bench_json(model_dir(), {"-t", "1"});
    for (const char* k : {"model", "dtype", "threads", "weight_bytes", "rss_bytes", "bandwidth_gb_s", "pp", "tg"})
        ASSERT_TRUE(j.contains(k)) << k << " in " << j.dump();
    for (const char* k : {"n", "tok_s", "stdev"}) {
        ASSERT_TRUE(j["pp"].contains(k)) << k;
        ASSERT_TRUE(j["tg"].contains(k)) << k;
    }
    ASSERT_TRUE(j["tg"].contains("gb_s"));
    EXPECT_EQ(j["model"], model_dir().string());
    EXPECT_EQ(j["dtype"], "F32");
    EXPECT_EQ(j["threads"], 1);
    EXPECT_EQ(j["pp"]["n"], 8);
    EXPECT_EQ(j["tg"]["n"], 4);
    const size_t weight_bytes = j["weight_bytes"].get<size_t>();
    EXPECT_EQ(weight_bytes, file_tensor_bytes(model_dir()));
    EXPECT_GT(j["rss_bytes"].get<size_t>(), weight_bytes);
    for (const char* t : {"pp", "tg"}) {
        EXPECT_GT(j[t]["tok_s"].get<double>(), 0) << t;
        EXPECT_GE(j[t]["stdev"].get<double>(), 0) << t;
        EXPECT_TRUE(std::isfinite(j[t]["tok_s"].get<double>())) << t;
    }
    // gb_s is bytes per token times tokens per second: the weights a token reads, as packed (the FFN's 172 rows
    // padded to 192, the tied embedding as lm_head), plus part of the cache. The tied model reads all its tensors.
    const double tg_tok_s = j["tg"]["tok_s"].get<double>(), gb_s = j["tg"]["gb_s"].get<double>();
    const double kv_per_pos = 5 * 2 * 4 * 8 * 4;  // layers * (K, V) * kv heads * head_dim * f32
    const double per_token = j["bytes_per_token"].get<double>();
    EXPECT_EQ(per_token, double(weight_bytes + 5 * 2 * 20 * 64 * 4));  // + the padding rows of gate and up
    EXPECT_GT(gb_s * 1e9 / tg_tok_s, per_token);
    EXPECT_LT(gb_s * 1e9 / tg_tok_s, per_token + kv_per_pos * 12);
    // The bandwidth: the mean of one pass before the runs and one after each (a model within the last-level cache:
    // no pass after each token).
    EXPECT_EQ(j["bandwidth_pass_bytes"].get<size_t>(), 0u);
    const double bw = j["bandwidth_gb_s"].get<double>();
    EXPECT_GT(bw, 0);
    EXPECT_TRUE(std::isfinite(bw));
    const auto passes = j["bandwidth_passes_gb_s"].get<std::vector<double>>();
    ASSERT_EQ(passes.size(), 3u);
    double sum = 0;
    for (double p : passes) {
        EXPECT_GT(p, 0);
        EXPECT_TRUE(std::isfinite(p));
        sum += p;
    }
    EXPECT_NEAR(bw, sum / 3, 1e-9 * sum);
    // The FMA peak of the run's one thread, and pp's operations per token: a multiply-add per weight of the layers'
    // matrices (q, o 64 x 64; k, v 32 x 64; gate, up, down 172 x 64; five layers), the output projection (512 x 64)
    // once for the eight prompt tokens, attention over 4.5 positions on average (5 layers x 8 heads x 8 dims x 4).
    EXPECT_EQ(j["fma_peak_threads"], 1);
    const double peak = j["fma_peak_gflops"].get<double>();
    EXPECT_TRUE(std::isfinite(peak) && peak > 0) << peak;
    EXPECT_GT(j["fma_peak_thread_gflops"].get<double>(), 0);
    const double flops =
        2.0 * 5 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 172 * 64) + 4.0 * 5 * 8 * 8 * 4.5 + 2.0 * 512 * 64 / 8;
    EXPECT_EQ(j["depths"][0]["pp_flops_per_token"].get<double>(), flops);
    EXPECT_NEAR(j["pp"]["gflops"].get<double>(), flops * j["pp"]["tok_s"].get<double>() / 1e9, 1e-9);
    // The best kernels this CPU runs.
    EXPECT_EQ(j["kernels"], kernel_variants().front());
    EXPECT_EQ(j["tuning"], tuning_name(cpu_tuning()));
}

// The decode kernels' tuning that PLAINLLAMA_TUNING forces (here one other than cpuid's), in the JSON and beside the
// AVX-512 variants in the text.
TEST(BenchCli, ReportsTheTuningPlainllamaTuningForces) {
    const Tuning forced = cpu_tuning() == Tuning::zen5 ? Tuning::intel : Tuning::zen5;
    const test::ScopedEnv kernels("PLAINLLAMA_KERNELS", ""), env("PLAINLLAMA_TUNING", tuning_name(forced));
    EXPECT_EQ(bench_json(model_dir())["tuning"], tuning_name(forced));
    const auto r = run_binary({"bench", "-m", model_dir().string(), "-p", "8", "-n", "4", "-r", "1", "--quiet"});
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string isa = kernel_variants().front();
    const bool tuned = test::variant_has_tuning(isa);
    const std::string line = "; kernels: " + isa + (tuned ? " (tuning " + std::string(tuning_name(forced)) + ")" : "");
    EXPECT_NE(r.out.find(line + "\n"), std::string::npos) << r.out;
}

TEST(BenchCli, DtypeOfEachSharedModel) {
    EXPECT_EQ(bench_json(model_dir("stories260K-f16"))["dtype"], "F16");
    const auto j = bench_json(model_dir("stories260K-bf16"));
    EXPECT_EQ(j["dtype"], "BF16");
    EXPECT_EQ(j["weight_bytes"].get<size_t>(), file_tensor_bytes(model_dir("stories260K-bf16")));
}

// One projection stored in F16, the rest F32: "mixed", and weight_bytes follows the file.
TEST(BenchCli, MixedProjectionDtypes) {
    test::TempDir tmp;
    const auto dir = tmp / "m";
    test::copy_model(model_dir(), dir);
    auto tensors = test::read_safetensors(model_dir() / "model.safetensors");
    bool converted = false;
    for (auto& t : tensors) {
        if (t.name != "model.layers.2.mlp.up_proj.weight") continue;
        ASSERT_EQ(t.dtype, "F32");
        std::string half(t.bytes.size() / 2, '\0');
        for (size_t i = 0; i < t.bytes.size() / 4; ++i) {
            float f;
            std::memcpy(&f, &t.bytes[i * 4], 4);
            const uint16_t h = f32_to_f16(f);
            std::memcpy(&half[i * 2], &h, 2);
        }
        t.dtype = "F16";
        t.bytes = half;
        converted = true;
    }
    ASSERT_TRUE(converted);
    test::write_safetensors(dir / "model.safetensors", tensors);
    const auto j = bench_json(dir);
    EXPECT_EQ(j["dtype"], "mixed");
    EXPECT_EQ(j["weight_bytes"].get<size_t>(), file_tensor_bytes(dir));
    EXPECT_LT(j["weight_bytes"].get<size_t>(), file_tensor_bytes(model_dir()));
}

TEST(BenchCli, TableHasPpAndTgRows) {
    const auto r = run_binary({"bench", "-m", model_dir().string(), "-p", "16", "-n", "5", "-r", "2", "-t", "1"});
    ASSERT_EQ(r.status, 0) << r.err;
    std::istringstream in(r.out);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    ASSERT_GE(lines.size(), 6u) << r.out;
    // | stories260K | F32 | 260.03 K | 0.99 MiB | 1 | pp16 | 123.45 ± 6.78 |
    auto cells = [](const std::string& l) {
        std::vector<std::string> c;
        std::istringstream s(l.substr(1));
        for (std::string cell; std::getline(s, cell, '|');) {
            const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
            c.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
        }
        return c;
    };
    EXPECT_EQ(cells(lines[0]), (std::vector<std::string>{"model", "dtype", "params", "size", "threads", "test", "t/s"}))
        << lines[0];
    EXPECT_EQ(lines[1].rfind("| ---", 0), 0u) << lines[1];
    const auto pp = cells(lines[2]), tg = cells(lines[3]);
    ASSERT_EQ(pp.size(), 7u) << lines[2];
    ASSERT_EQ(tg.size(), 7u) << lines[3];
    EXPECT_EQ(pp[0], "stories260K");
    EXPECT_EQ(pp[1], "F32");
    EXPECT_EQ(pp[4], "1");
    EXPECT_EQ(pp[5], "pp16");
    EXPECT_EQ(tg[5], "tg5");
    for (const auto& row : {pp, tg}) {
        const size_t pm = row[6].find(" ± ");
        ASSERT_NE(pm, std::string::npos) << row[6];
        EXPECT_GT(std::stod(row[6].substr(0, pm)), 0) << row[6];
        EXPECT_GE(std::stod(row[6].substr(pm + std::strlen(" ± "))), 0) << row[6];
    }
    bool gbs = false, rss = false;
    for (const auto& l : lines) {
        gbs |= l.rfind("tg: ", 0) == 0 && l.find(" GB/s effective of ") != std::string::npos &&
               l.find(" GB/s measured read bandwidth (") != std::string::npos &&
               l.find("% of roofline)") != std::string::npos;
        rss |= l.rfind("rss: ", 0) == 0 && l.find(" MiB") != std::string::npos;
    }
    EXPECT_TRUE(gbs) << r.out;
    EXPECT_TRUE(rss) << r.out;
    EXPECT_NE(r.err.find("run 2/2"), std::string::npos) << "progress goes to stderr";
}

// Invalid input: one line on stderr, exit 2 for usage, 1 for runtime; nothing on stdout.
// -d: pp and tg after that many tokens in the cache, one entry per depth (sorted, each once), the top-level pp and tg
// the shallowest's; a token's bytes count the cache it reads at that depth in the cache's type.
TEST(BenchCli, DepthsEachGetTheirOwnResultsAndCacheBytes) {
    struct Case {
        const char* folder;
        const char* type;
        double row_bytes;  // one position's K (or V) row of one KV head
    };
    for (const Case& cs :
         {Case{"stories260K", "f16", 8 * 2}, Case{"stories260K", "f32", 8 * 4}, Case{"tinystories3M", "q8_0", 34}}) {
        SCOPED_TRACE(cs.type);
        const auto j = bench_json(model_dir(cs.folder), {"-d", "200", "-d", "0", "-d", "200", "--cache-type", cs.type});
        EXPECT_EQ(j["cache_type"], cs.type);
        const LlamaConfig c = load_config(model_dir(cs.folder) / "config.json");
        const double kv_per_pos = double(c.num_hidden_layers * 2 * c.num_key_value_heads) * cs.row_bytes;
        EXPECT_EQ(j["kv_bytes_per_position"].get<double>(), kv_per_pos);
        EXPECT_EQ(j["n_ctx"], 208);  // the deepest -d + the larger of -p and -n
        ASSERT_EQ(j["depths"].size(), 2u) << j.dump();
        const double weights = j["bytes_per_token"].get<double>();
        for (size_t i = 0; i < 2; ++i) {
            const auto& d = j["depths"][i];
            const int64_t depth = i == 0 ? 0 : 200;
            EXPECT_EQ(d["depth"], depth);
            EXPECT_EQ(d["bytes_per_token"].get<double>(), weights + kv_per_pos * (double(depth) + 2.5));
            EXPECT_EQ(d["pp"]["n"], 8);
            EXPECT_EQ(d["tg"]["n"], 4);
            for (const char* t : {"pp", "tg"}) EXPECT_GT(d[t]["tok_s"].get<double>(), 0) << t;
            EXPECT_NEAR(d["tg"]["gb_s"].get<double>(),
                        d["tg"]["tok_s"].get<double>() * d["bytes_per_token"].get<double>() / 1e9, 1e-9);
            EXPECT_GT(d["bandwidth_gb_s"].get<double>(), 0);
        }
        EXPECT_EQ(j["pp"], j["depths"][0]["pp"]);
        EXPECT_EQ(j["tg"], j["depths"][0]["tg"]);
    }
}

TEST(BenchCli, InvalidFlags) {
    const std::string m = model_dir().string();
    const std::vector<std::pair<std::vector<std::string>, int>> cases = {
        {{"bench", "-m", m, "-p", "0"}, 2},
        {{"bench", "-m", m, "-p", "-3"}, 2},
        {{"bench", "-m", m, "-n", "0"}, 2},
        {{"bench", "-m", m, "-r", "0"}, 2},
        {{"bench", "-m", m, "-r", "x"}, 2},
        {{"bench", "-m", m, "-t", "0"}, 2},
        {{"bench", "-m", m, "-p", "600", "-n", "100"}, 2},  // beyond max_position_embeddings 512
        {{"bench", "-m", m, "-p", "10", "-n", "12", "-c", "11"}, 2},
        {{"bench", "-m", m, "-p", "10", "-n", "10", "-d", "100", "-c", "109"}, 2},
        {{"bench", "-m", m, "-p", "10", "-n", "10", "-d", "503"}, 2},  // 503 + 10 > 512
        {{"bench", "-m", m, "-d", "-1"}, 2},
        {{"bench", "-m", m, "--cache-type", "q4_0"}, 2},
        {{"bench", "-m", m, "--cache-type", "q8_0"}, 2},  // head_dim 8: not blocks of 32
        {{"bench", "-m", m, "--bogus"}, 2},
        {{"bench", "-m", "/nonexistent/model", "-p", "4", "-n", "2", "-r", "1"}, 1},
    };
    for (const auto& [args, status] : cases) {
        std::string joined;
        for (const auto& a : args) joined += a + " ";
        const auto r = run_binary(args);
        EXPECT_EQ(r.status, status) << joined << "\n" << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << joined << "\n" << r.err;
        EXPECT_EQ(r.err.rfind("plainllama: error: ", 0), 0u) << joined << "\n" << r.err;
        EXPECT_EQ(r.out, "") << joined;
    }
}

// Every kernel variant's multiply-add chains, on one and on two threads: a finite positive rate; on the two at once,
// the team's thread count.
TEST(FmaPeak, EveryVariantGivesFinitePositive) {
    for (const std::string& v : kernel_variants()) {
        const test::UseKernels kernels(v);
        for (int threads : {1, 2}) {
            Threads scope(threads);
            const FmaPeak p = measure_fma_peak(0.002);
            EXPECT_EQ(p.threads, threads) << v;
            EXPECT_TRUE(std::isfinite(p.gflops) && p.gflops > 0) << v << " " << p.gflops;
            EXPECT_TRUE(std::isfinite(p.thread_gflops) && p.thread_gflops > 0) << v << " " << p.thread_gflops;
        }
    }
}

TEST(MemBandwidth, SmallBufferGivesFinitePositive) {
    for (size_t bytes : {size_t(4096), size_t(1) << 20, (size_t(1) << 20) + 100}) {
        ReadBandwidthTest test(bytes);
        for (int pass = 0; pass < 2; ++pass) {
            const double gbs = test.pass();
            EXPECT_TRUE(std::isfinite(gbs)) << bytes;
            EXPECT_GT(gbs, 0) << bytes;
        }
    }
}

// Passes over part of the buffer go on from where the last stopped, wrapping at its end (ASan, in CI, checks that no
// thread reads past it: the buffer is a whole number of the 2 MiB pages it is allocated in): sizes below a block,
// between blocks, beyond the buffer, with 1 to 3 threads.
TEST(MemBandwidth, PartialPassesWrapAround) {
    for (int threads : {1, 2, 3}) {
        Threads scope(threads);
        ReadBandwidthTest test(size_t(2) << 20);
        for (size_t bytes : {size_t(0), size_t(100), size_t(256), size_t(300000), size_t(700000), size_t(5) << 20}) {
            for (int pass = 0; pass < 3; ++pass) {
                const double gbs = test.pass(bytes);
                EXPECT_TRUE(std::isfinite(gbs)) << bytes << " bytes, " << threads << " threads";
                EXPECT_GT(gbs, 0) << bytes << " bytes, " << threads << " threads";
            }
        }
    }
}

TEST(MemBandwidth, RejectsBadArguments) {
    EXPECT_THROW(ReadBandwidthTest(100), Error);
    EXPECT_THROW(ReadBandwidthTest(4095), Error);
}

TEST(MemBandwidth, DefaultSizeIsBeyondTheCache) {
    const size_t b = default_bandwidth_test_bytes(), llc = last_level_cache_bytes();
    EXPECT_GE(b, size_t(256) << 20);
    EXPECT_LE(b, size_t(4) << 30);
    if (llc == 0) GTEST_SKIP() << "machine: no last-level cache size in /sys (the default size is not beyond it)";
    if (8 * llc > (size_t(4) << 30))
        EXPECT_EQ(b, size_t(4) << 30);  // capped
    else
        EXPECT_GE(b, 8 * llc);
}

TEST(SysInfo, ParseCacheSize) {
    EXPECT_EQ(parse_cache_size("32768K"), size_t(32) << 20);
    EXPECT_EQ(parse_cache_size("2M"), size_t(2) << 20);
    EXPECT_EQ(parse_cache_size("1G"), size_t(1) << 30);
    EXPECT_EQ(parse_cache_size("512"), 512u);
    EXPECT_EQ(parse_cache_size(""), 0u);
    EXPECT_EQ(parse_cache_size("K"), 0u);
    EXPECT_EQ(parse_cache_size("12X"), 0u);
    EXPECT_EQ(parse_cache_size("99999999999999999999999K"), 0u);
}

// The last-level cache is at least as large as any one cache cpu0 reports.
TEST(SysInfo, LastLevelCacheCoversCpu0Caches) {
    const test::fs::path dir = "/sys/devices/system/cpu/cpu0/cache";
    if (!test::fs::exists(dir)) GTEST_SKIP() << "machine: no " << dir;
    size_t largest = 0;
    for (const auto& idx : test::fs::directory_iterator(dir)) {
        if (idx.path().filename().string().rfind("index", 0) != 0) continue;
        std::string size = test::read_file(idx.path() / "size");
        while (!size.empty() && std::isspace(static_cast<unsigned char>(size.back()))) size.pop_back();
        largest = std::max(largest, parse_cache_size(size));
    }
    EXPECT_GT(largest, 0u);
    EXPECT_GE(last_level_cache_bytes(), largest);
}

TEST(SysInfo, ResidentSetGrowsWhenMemoryIsTouched) {
    const size_t before = resident_set_bytes();
    EXPECT_GT(before, 0u);
    std::vector<char> big(size_t(64) << 20);
    for (size_t i = 0; i < big.size(); i += 4096) big[i] = char(i);
    const size_t after = resident_set_bytes();
    EXPECT_GE(after, before + (size_t(56) << 20)) << before << " -> " << after;
    EXPECT_EQ(big[4096], char(4096));
}

// Another process that keeps a core busy is seen by busy_cores() and by the binary, which then leaves that core
// out of its default thread count and says so (not with -t).
TEST(Threads, BusyCoresSeesABusyProcess) {
    if (!test::fs::exists("/proc/loadavg")) GTEST_SKIP() << "machine: no /proc/loadavg (busy_cores reads it)";
    if (physical_cores() < 2) GTEST_SKIP() << "machine: 1 physical core: none is left to other work";
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        volatile unsigned spin = 0;
        for (;;) spin = spin + 1u;  // (a volatile read and write; C++20 deprecates += on volatile)
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int busy = busy_cores();
    const auto r = run_binary({"generate", "-m", model_dir().string(), "-p", "Once", "-n", "2", "--temp", "0"});
    const auto t =
        run_binary({"generate", "-m", model_dir().string(), "-p", "Once", "-n", "2", "--temp", "0", "-t", "2"});
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    EXPECT_GE(busy, 1);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("cores busy with other work; -t N to override)"), std::string::npos) << r.err;
    ASSERT_EQ(t.status, 0) << t.err;
    EXPECT_EQ(t.err.find("cores busy"), std::string::npos) << t.err;
}

// busy_cores' readings: a process runnable for a moment only (a pipe's reader starting: `bench --json | jq`) shows in
// the first readings and not in a later one, and is not counted; one runnable in every reading is; an unknown reading
// counts none. The readings stop at the first without another task (an idle machine costs one) and lie `gap` apart.
TEST(Threads, BusyCoresTakesTheFewestAndStopsAtNone) {
    auto run = [](std::vector<int> readings, int samples, int* calls) {
        *calls = 0;
        return fewest_others(samples, std::chrono::milliseconds(2), [&] { return readings[size_t((*calls)++)]; });
    };
    int calls = 0;
    EXPECT_EQ(run({1, 1, 0, 1, 1}, 5, &calls), 0);
    EXPECT_EQ(calls, 3);
    EXPECT_EQ(run({0, 1}, 5, &calls), 0);
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(run({2, 1, 3, 1, 2}, 5, &calls), 1);
    EXPECT_EQ(calls, 5);
    EXPECT_EQ(run({1, 1, 1}, 2, &calls), 1);
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(run({1, -1, 0}, 5, &calls), 0);
    EXPECT_EQ(calls, 2);
    const auto t0 = std::chrono::steady_clock::now();
    run({1, 1, 1, 1, 1}, 5, &calls);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(8));  // 4 gaps of 2 ms at least
}

// This process's runnable threads: at least the caller and a spinning thread (busy_cores leaves them out, so a
// team spinning between regions does not count as other work).
TEST(Threads, OwnRunningThreadsCountsThisProcess) {
    if (!test::fs::exists("/proc/self/task")) GTEST_SKIP() << "machine: no /proc/self/task";
    std::atomic<bool> stop{false};
    std::thread spinner([&] {
        while (!stop.load(std::memory_order_relaxed)) {
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    int most = 0;
    for (int i = 0; i < 5; ++i) most = std::max(most, own_running_threads());
    stop = true;
    spinner.join();
    EXPECT_GE(most, 2);
}

TEST(SysInfo, CpuModelAndFlags) {
    if (!test::fs::exists("/proc/cpuinfo")) GTEST_SKIP() << "machine: no /proc/cpuinfo";
    EXPECT_FALSE(cpu_model_name().empty());
#if defined(__AVX2__)
    EXPECT_NE((" " + cpu_simd_flags() + " ").find(" avx2 "), std::string::npos) << cpu_simd_flags();
#endif
}

}  // namespace
}  // namespace plainllama
