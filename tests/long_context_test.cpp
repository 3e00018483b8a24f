// Long contexts: what the KV cache types cost in accuracy (perplexity against the f32 cache, on a folder and on a GGUF
// file), which type a context takes without --cache-type, decode against prefill in each type, and the line refusing a
// cache the memory cannot hold.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "logits_util.h"
#include "plainllama/model/model.h"
#include "plainllama/sys/zeroed_pages.h"
#include "test_util.h"

namespace plainllama {
namespace long_context_test {

using test::HasSubstr;

// perplexity --json of `model` (a folder or a GGUF file) on the first 40 chunks of 256 tokens of TinyStories.
nlohmann::json perplexity(const test::fs::path& model, const std::string& cache_type) {
    const auto r = test::run_binary({"perplexity", "-m", model.string(), "-f",
                                     (test::shared_dir() / "data/tinystories_val.txt").string(), "-c", "256",
                                     "--chunks", "40", "--cache-type", cache_type, "--json", "--quiet"});
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(r.out);
}

double relative(double a, double b) { return std::fabs(a - b) / b; }

// The accuracy the default rests on: on tinystories3M the f16 cache's perplexity is within 0.01% of the f32 cache's,
// the bf16 (BF16 products where the CPU has them) and q8_0 caches' within 0.1%. The bf16 and q8_0 figures differ from
// f32's (the flag reached the cache), and so does the per-chunk list.
TEST(KvCacheAccuracy, PerplexityOfEachTypeNearTheF32Caches) {
#ifdef PLAINLLAMA_ASAN
    GTEST_SKIP() << "sanitizer build: numbers, checked by the normal build (the cache types' code paths run in the "
                    "kernel and decode tests here)";
#endif
    const test::fs::path m = test::model_dir("tinystories3M");
    const auto f32 = perplexity(m, "f32"), f16 = perplexity(m, "f16"), q8 = perplexity(m, "q8_0"),
               bf16 = perplexity(m, "bf16");
    const double p32 = f32["ppl"].get<double>();
    EXPECT_EQ(f16["n_scored"], f32["n_scored"]);
    EXPECT_EQ(q8["n_scored"], f32["n_scored"]);
    EXPECT_LT(relative(f16["ppl"].get<double>(), p32), 1e-4) << f16["ppl"] << " vs " << p32;
    EXPECT_LT(relative(q8["ppl"].get<double>(), p32), 1e-3) << q8["ppl"] << " vs " << p32;
    EXPECT_NE(q8["ppl"].get<double>(), p32);
    EXPECT_NE(q8["chunk_ppl"], f32["chunk_ppl"]);
    EXPECT_EQ(bf16["n_scored"], f32["n_scored"]);
    EXPECT_LT(relative(bf16["ppl"].get<double>(), p32), 1e-3) << bf16["ppl"] << " vs " << p32;
    EXPECT_NE(bf16["chunk_ppl"], f32["chunk_ppl"]);
}

// A GGUF model takes --cache-type too: llama.cpp's q8_0 weights, the q8_0 cache within 0.1% of the f32 cache.
TEST(KvCacheAccuracy, GgufModelTakesTheCacheType) {
    const test::fs::path m = test::shared_dir() / "models/gguf/tinystories3M-Q8_0.gguf";
    const auto f32 = perplexity(m, "f32"), q8 = perplexity(m, "q8_0");
    const double p32 = f32["ppl"].get<double>();
    EXPECT_NE(q8["ppl"].get<double>(), p32);
    EXPECT_LT(relative(q8["ppl"].get<double>(), p32), 1e-3) << q8["ppl"] << " vs " << p32;
}

// Without a type: f16, except in exact mode (the float64 references' comparisons), which keeps f32. A type given
// wins in both.
TEST(KvCacheType, F16ByDefaultF32WhenExact) {
    Model model(test::model_dir("stories260K"));
    {
        Context ctx(model, ContextParams{64});
        EXPECT_EQ(ctx.cache_type(), CacheType::f16);
        EXPECT_EQ(ctx.kv_bytes(), kv_cache_bytes(model.config(), CacheType::f16, 64));
    }
    ContextParams exact{64};
    exact.exact = true;
    EXPECT_EQ(Context(model, exact).cache_type(), CacheType::f32);
    exact.cache_type = CacheType::f16;
    EXPECT_EQ(Context(model, exact).cache_type(), CacheType::f16);
}

using test::decode_one_by_one;
using test::max_abs_diff;
using test::prefill_logits;

constexpr double kDecodeVsPrefill = 0.0;  // bit for bit

// Run once per kernel variant this CPU supports.
class KvCacheTypes : public test::EveryKernel {};

// Within one cache type, decode equals prefill bit for bit: both store the same rounded K and V and read them in the
// same order (kv_cache.h, attention.h), also across tiles of keys (stories260K: 270 positions, two tiles) and with
// prompts split into batches that end inside a tile. tinystories3M (head_dim 32) takes q8_0 too.
TEST_P(KvCacheTypes, DecodeMatchesPrefillForEveryCacheType) {
    struct Case {
        const char* folder;
        int64_t n;
    };
    for (const Case& cs : {Case{"tinystories3M", 100}, Case{"stories260K", 270}})
        for (CacheType type : {CacheType::f32, CacheType::f16, CacheType::bf16, CacheType::q8_0}) {
            Model model(test::model_dir(cs.folder));
            if (!cache_type_unsupported(type, model.config().head_dim).empty()) continue;
            std::vector<int32_t> ids(static_cast<size_t>(cs.n));
            for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((7 * i + 3) % size_t(model.config().vocab_size));
            ContextParams p;
            p.cache_type = type;
            Context ctx(model, p);
            EXPECT_EQ(ctx.cache_type(), type);
            const std::vector<float> prefill = prefill_logits(ctx, ids);
            Context dec(model, p);
            EXPECT_EQ(max_abs_diff(decode_one_by_one(dec, ids, 0), prefill), kDecodeVsPrefill)
                << cs.folder << " " << cache_type_name(type);
            p.n_batch = 93;
            Context split(model, p);
            EXPECT_EQ(max_abs_diff(prefill_logits(split, ids), prefill), kDecodeVsPrefill)
                << cs.folder << " " << cache_type_name(type) << " n_batch 93";
            // and the rounding does something: f16, bf16 and q8_0 differ from f32 somewhere, but not by much
            if (type != CacheType::f32) {
                ContextParams pf;
                pf.cache_type = CacheType::f32;
                Context f32(model, pf);
                const double d = max_abs_diff(prefill_logits(f32, ids), prefill);
                EXPECT_GT(d, 0.0) << cs.folder << " " << cache_type_name(type);
                EXPECT_LT(d, 0.5) << cs.folder << " " << cache_type_name(type);
                std::printf("%s %s: logits differ from the f32 cache's by %.3g at most\n", cs.folder,
                            cache_type_name(type), d);
            }
        }
}

// The Llama-3.2-1B shape: 16 layers, 8 KV heads of 64, so a position takes 64 KiB in f32, 32 KiB in f16 and 17 KiB
// in q8_0 (every layer's K and V).
LlamaConfig llama32_1b() {
    LlamaConfig c;
    c.hidden_size = 2048, c.intermediate_size = 8192, c.num_hidden_layers = 16, c.num_attention_heads = 32;
    c.num_key_value_heads = 8, c.head_dim = 64, c.max_position_embeddings = 131072, c.vocab_size = 128256;
    return c;
}

// One line with the bytes needed and available, the largest -c that fits (whole multiples of 256 positions) and the
// smallest-first cache type that fits at the asked -c.
TEST(KvCacheRefusal, NamesTheBytesAndWhatWouldFit) {
    const LlamaConfig c = llama32_1b();
    EXPECT_EQ(kv_bytes_per_position(c, CacheType::f32), size_t(65536));
    EXPECT_EQ(kv_bytes_per_position(c, CacheType::f16), size_t(32768));
    EXPECT_EQ(kv_bytes_per_position(c, CacheType::q8_0), size_t(17408));
    const uint64_t gib = uint64_t(1) << 30;
    {  // f32 at 32768 positions: 2 GiB against 1.5; f16 (1 GiB) fits, and 24576 positions of f32
        const std::string s = kv_cache_refusal(c, CacheType::f32, 32768, 1, 2 * gib, 3 * gib / 2);
        EXPECT_TRUE(HasSubstr(s, "-c 32768 with --cache-type f32")) << s;
        EXPECT_TRUE(HasSubstr(s, "needs 2.0 GiB (65536 bytes per position)")) << s;
        EXPECT_TRUE(HasSubstr(s, "1.5 GiB of memory is available")) << s;
        EXPECT_TRUE(HasSubstr(s, "; -c 24576 or --cache-type f16 would fit")) << s;
        EXPECT_EQ(s.find('\n'), std::string::npos) << s;
    }
    {  // f16 at 32768 positions, 8 sequences: 8 GiB against 5; q8_0 (4.25 GiB) fits
        const std::string s = kv_cache_refusal(c, CacheType::f16, 32768, 8, 8 * gib, 5 * gib);
        EXPECT_TRUE(HasSubstr(s, "(32768 bytes per position x 8 sequences)")) << s;
        EXPECT_TRUE(HasSubstr(s, "; -c 20480 or --cache-type q8_0 would fit")) << s;
    }
    {  // q8_0 has nothing smaller; 100 KiB holds no 256 positions
        const std::string s = kv_cache_refusal(c, CacheType::q8_0, 4096, 1, 4096 * 17408, 100 << 10);
        EXPECT_TRUE(HasSubstr(s, "; no context fits")) << s;
        EXPECT_EQ(s.find("would fit"), std::string::npos) << s;
    }
    {  // only a shorter context: f16 at 8192 positions (256 MiB) with 100 MiB, where q8_0 would need 136 MiB
        const std::string s = kv_cache_refusal(c, CacheType::f16, 8192, 1, 8192 * 32768, 100 << 20);
        EXPECT_TRUE(HasSubstr(s, "; -c 3072 would fit")) << s;
    }
}

// The cache's memory: zero, writable to its last byte, on a 2 MiB boundary from 2 MiB on (where huge pages can back
// it), and the whole mapping given back on release (msync on an unmapped range fails with ENOMEM).
TEST(KvCacheMemory, ZeroedPagesAreZeroAlignedAndWritable) {
    for (const size_t n : {size_t(100), (size_t(5) << 20) + 123}) {
        ZeroedPages p = map_zeroed_pages(n);
        ASSERT_TRUE(p) << n;
        if (n >= size_t(1) << 21) {
            EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % (size_t(1) << 21), 0u);
        }
        EXPECT_TRUE(std::all_of(p.get(), p.get() + n, [](uint8_t b) { return b == 0; })) << n;
        std::fill_n(p.get(), n, uint8_t(0xA5));
        EXPECT_EQ(p.get()[n - 1], 0xA5);
        const UnmapPages m = p.get_deleter();
        ASSERT_LE(p.get() + n, static_cast<uint8_t*>(m.base) + m.bytes);
        ASSERT_EQ(::msync(m.base, m.bytes, MS_ASYNC), 0) << n;
        p.reset();
        errno = 0;
        EXPECT_EQ(::msync(m.base, m.bytes, MS_ASYNC), -1) << n;
        EXPECT_EQ(errno, ENOMEM) << n;
    }
    EXPECT_FALSE(map_zeroed_pages(SIZE_MAX - 100));
}

PL_FOR_EVERY_KERNEL(KvCacheTypes);

}  // namespace long_context_test
}  // namespace plainllama
