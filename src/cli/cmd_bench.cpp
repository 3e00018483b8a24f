// plainllama bench: prompt-processing and generation speed (llama-bench's pp/tg), with generation's effective read
// rate set against the machine's read bandwidth measured in the same run.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "commands.h"
#include "common.h"
#include "plainllama/bench/fma_peak.h"
#include "plainllama/bench/read_bandwidth.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/run/grammar_constraint.h"
#include "plainllama/sys/error.h"
#include "plainllama/sys/sysinfo.h"

namespace plainllama::cli {

namespace {

struct Stats {
    double mean = 0, stdev = 0;  // stdev: sample (n - 1), 0 for one run
};

Stats stats(const std::vector<double>& v) {
    Stats s;
    for (double x : v) s.mean += x;
    s.mean /= double(v.size());
    if (v.size() > 1) {
        double ss = 0;
        for (double x : v) ss += (x - s.mean) * (x - s.mean);
        s.stdev = std::sqrt(ss / double(v.size() - 1));
    }
    return s;
}

std::string format(const char* fmt, double a, double b = 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, a, b);
    return buf;
}

// llama-bench's spellings: "260.10 K", "1.10 B"; "0.99 MiB", "2.05 GiB".
std::string params_str(double n) {
    if (n >= 1e9) return format("%.2f B", n / 1e9);
    if (n >= 1e6) return format("%.2f M", n / 1e6);
    if (n >= 1e3) return format("%.2f K", n / 1e3);
    return format("%.0f", n);
}
std::string size_str(double bytes) {
    if (bytes >= double(1 << 30)) return format("%.2f GiB", bytes / double(1 << 30));
    return format("%.2f MiB", bytes / double(1 << 20));
}

// The storage type of the layers' matrices: one dtype name, or "mixed".
std::string projection_dtype(const Model& m) {
    std::string d;
    for (const TensorSpec& s : llama_tensor_table(m.config()))
        if (s.matrix && s.layer >= 0) {
            const char* t = dtype_name(weight_of(m.weights(), s).dtype);
            if (!d.empty() && d != t) return "mixed";
            d = t;
        }
    return d;
}

// A markdown table with each column as wide as its widest cell; numeric columns right-aligned.
void print_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
    std::vector<size_t> w(rows[0].size(), 0);
    auto width = [](const std::string& s) {  // code points, so "±" counts once
        size_t n = 0;
        for (unsigned char c : s) n += (c & 0xC0) != 0x80;
        return n;
    };
    for (const auto& r : rows)
        for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], width(r[i]));
    auto line = [&](const std::vector<std::string>& r) {
        std::string s = "|";
        for (size_t i = 0; i < r.size(); ++i) {
            const std::string pad(w[i] - width(r[i]), ' ');
            s += " " + (right[i] ? pad + r[i] : r[i] + pad) + " |";
        }
        std::printf("%s\n", s.c_str());
    };
    line(rows[0]);
    std::string sep = "|";
    for (size_t i = 0; i < w.size(); ++i)
        sep += " " + (right[i] ? std::string(w[i] - 1, '-') + ":" : std::string(w[i], '-')) + " |";
    std::printf("%s\n", sep.c_str());
    for (size_t i = 1; i < rows.size(); ++i) line(rows[i]);
}

// Constrained against free decoding, whole steps timed: the rate of each run, and the parts of a constrained step.
struct GrammarTimes {
    std::vector<double> with_tps, without_tps;
    double step_us = 0, walk_us = 0, walk_max_us = 0, cached_us = 0, sample_us = 0, sample_free_us = 0, accept_us = 0;
    int64_t walks = 0, cached = 0, completions = 0;
};

GrammarTimes time_grammar(const Tokenizer& tok, const std::vector<int32_t>& stop_ids,
                          const std::shared_ptr<const Grammar>& grammar, Context& ctx, int64_t P, int64_t N, int runs,
                          std::mt19937& rng, bool quiet) {
    const int32_t V = int32_t(ctx.model().config().vocab_size);
    const auto trie = std::make_shared<const TokenTrie>(tok, V);
    std::uniform_int_distribution<int32_t> id(0, V - 1);
    SamplerParams greedy;
    greedy.temp = 0;
    GrammarTimes g;
    double walk_s = 0, cached_s = 0, sample_s = 0, free_sample_s = 0, accept_s = 0, step_s = 0;
    int64_t steps = 0;
    for (int r = 0; r < runs; ++r) {
        std::vector<int32_t> prompt(static_cast<size_t>(P));  // [P]
        for (int32_t& t : prompt) t = id(rng);
        for (int pass = 0; pass < 2; ++pass) {
            const bool constrained = (pass + r) % 2 == 1;  // the order alternates between runs
            GrammarConstraint c(grammar, trie, stop_ids);
            Sampler sampler(greedy);
            std::vector<int32_t> history = prompt;
            ctx.reset();
            const float* logits = ctx.eval(prompt, /*all_logits=*/false);
            double total = 0;
            for (int64_t i = 0; i < N; ++i) {
                const double t0 = now_seconds();
                int32_t tok;
                if (constrained) {
                    const int64_t walked = c.masks_computed();
                    const TokenMask& m = c.allowed();
                    const double t1 = now_seconds();
                    (c.masks_computed() > walked ? walk_s : cached_s) += t1 - t0;
                    if (c.masks_computed() > walked) g.walk_max_us = std::max(g.walk_max_us, (t1 - t0) * 1e6);
                    tok = sampler.sample(logits, V, history, &m);
                    const double t2 = now_seconds();
                    sample_s += t2 - t1;
                    if (std::find(stop_ids.begin(), stop_ids.end(), tok) != stop_ids.end()) {
                        c.reset();
                        ++g.completions;
                    } else {
                        c.accept(tok);
                        if (c.must_end()) {
                            c.reset();
                            ++g.completions;
                        }
                    }
                    accept_s += now_seconds() - t2;
                } else {
                    const double t1 = now_seconds();
                    tok = sampler.sample(logits, V, history);
                    free_sample_s += now_seconds() - t1;
                }
                history.push_back(tok);
                if (ctx.n_past() >= ctx.n_ctx()) break;
                logits = ctx.eval(&tok, 1);
                total += now_seconds() - t0;
            }
            (constrained ? g.with_tps : g.without_tps).push_back(double(N) / total);
            if (constrained) {
                g.walks += c.masks_computed();
                g.cached += c.masks_cached();
                step_s += total;
                steps += N;
            }
        }
        if (!quiet)
            std::fprintf(stderr, "grammar run %d/%d: tg%lld %.2f t/s constrained, %.2f free\n", r + 1, runs,
                         (long long)N, g.with_tps.back(), g.without_tps.back());
    }
    g.step_us = steps ? step_s / double(steps) * 1e6 : 0;
    g.walk_us = g.walks ? walk_s / double(g.walks) * 1e6 : 0;
    g.cached_us = g.cached ? cached_s / double(g.cached) * 1e6 : 0;
    g.sample_us = steps ? sample_s / double(steps) * 1e6 : 0;
    g.sample_free_us = steps ? free_sample_s / double(steps) * 1e6 : 0;
    g.accept_us = steps ? accept_s / double(steps) * 1e6 : 0;
    return g;
}

}  // namespace

Run add_bench(CLI::App& app) {
    auto* cmd = app.add_subcommand("bench", "Prompt-processing and generation speed (llama-bench's pp/tg), GB/s");
    struct Opts {
        ModelOpts m;
        int64_t n_prompt = 128, n_gen = 32;
        std::vector<int64_t> depths;
        int runs = 5;
        bool json = false;
        std::string json_schema, grammar;
    };
    auto o = std::make_shared<Opts>();
    add_model_options(cmd, o->m);
    cmd->get_option("-c")->description("Context size in tokens (default: the deepest -d + the larger of -p and -n)");
    cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens per pp run (random ids)")
        ->transform(int_range(1, int64_t(1) << 24))
        ->capture_default_str();
    cmd->add_option("-n,--n-gen", o->n_gen, "Tokens generated one at a time per tg run")
        ->transform(int_range(1, int64_t(1) << 24))
        ->capture_default_str();
    cmd->add_option("-d,--n-depth", o->depths,
                    "Tokens already in the cache before each pp and tg run (-d 0,512 or repeated, as llama-bench's; "
                    "default 0)")
        ->delimiter(',')
        ->transform(int_range(0, int64_t(1) << 24))
        ->take_all();
    cmd->add_option("-r,--repetitions", o->runs, "Runs of each test (mean ± stdev over them)")
        ->transform(int_range(1, 1 << 20))
        ->capture_default_str();
    cmd->add_flag("--json", o->json, "Print one JSON object instead of the table");
    auto* schema_opt = cmd->add_option("--json-schema", o->json_schema,
                                       "Also time tg with this JSON Schema's grammar against tg without, in turn");
    cmd->add_option("--grammar", o->grammar, "Also time tg with this GBNF grammar against tg without, in turn")
        ->excludes(schema_opt);
    cmd->footer(
        "For each depth d (-d, default 0): d random tokens fill the cache once (untimed); each run then times\n"
        "pp = one eval of -p random token ids at positions d .. d+p-1, and tg = -n single-token evals (argmax fed\n"
        "back) from position d, after a warm-up; the cache is cut back to d between them. tg GB/s = (weight bytes\n"
        "+ KV cache bytes read at that depth) per token / time per token, against the mean of the passes of a\n"
        "streaming-read test of this machine (each pass reads three times: plain loads, a prefetch of every line,\n"
        "a prefetch of each 4 KiB page's first line; the fastest counts): over a token's bytes (at most the test's\n"
        "buffer) after each token when they exceed the last-level cache (so each token starts with the caches as\n"
        "the test left them), else one pass before the runs and one after each.\n"
        "With --json-schema or --grammar, each run then times -n whole decode steps twice, in turn: free\n"
        "(eval, greedy sampling) and constrained (eval, the grammar's mask, greedy sampling within it, the\n"
        "grammar taking the token; a complete grammar starts again), from a new constraint each run, at depth 0.");
    return [o] {
        const int64_t P = o->n_prompt, N = o->n_gen;
        const std::shared_ptr<const Grammar> grammar = load_grammar(o->json_schema, o->grammar);
        std::vector<int64_t> depths = o->depths.empty() ? std::vector<int64_t>{0} : o->depths;
        std::sort(depths.begin(), depths.end());
        depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
        // The grammar's runs decode -n tokens after a -p prompt from position 0.
        const int64_t need = std::max(depths.back() + std::max(P, N), grammar ? P + N : int64_t(0));
        Loaded l = load(o->m);
        const LlamaConfig& c = l.model->config();
        const bool quiet = o->m.quiet;
        if (need > c.max_position_embeddings)
            throw UsageError("-d " + std::to_string(depths.back()) + " + the larger of -p " + std::to_string(P) +
                             " and -n " + std::to_string(N) + " exceed the model's context of " +
                             std::to_string(c.max_position_embeddings) + " (max_position_embeddings)");
        if (o->m.ctx_size > 0 && o->m.ctx_size < need)
            throw UsageError("-c " + std::to_string(o->m.ctx_size) +
                             " is smaller than -d + the larger of -p and -n = " + std::to_string(need));
        const int64_t n_ctx = o->m.ctx_size > 0 ? o->m.ctx_size : need;
        Context ctx(*l.model, ContextParams{n_ctx, 512, false, 1, cache_type(o->m)});
        const char* cache = cache_type_name(ctx.cache_type());
        if (!quiet)
            std::fprintf(stderr, "loaded %s in %.2f s; %s, n_ctx %lld, cache %s\n", o->m.model.c_str(), l.load_seconds,
                         threads_note(l).c_str(), (long long)n_ctx, cache);

        std::mt19937 rng(1234);
        std::uniform_int_distribution<int32_t> id(0, int32_t(c.vocab_size - 1));
        auto argmax = [&](const float* logits) {
            return int32_t(std::max_element(logits, logits + c.vocab_size) - logits);
        };
        auto random_ids = [&](int64_t n) {
            std::vector<int32_t> ids(static_cast<size_t>(n));  // [n]
            for (int32_t& t : ids) t = id(rng);
            return ids;
        };
        // One run at depth d (the cache filled to d): pp seconds for the prompt, tg seconds summed over the
        // single-token evals only; with a test, a pass of it over `test_bytes` after each token (untimed), its rate
        // appended to *passes. The cache is cut back to d after each.
        auto run = [&](int64_t d, int64_t p, int64_t n, double* pp_secs, double* tg_secs,
                       ReadBandwidthTest* test = nullptr, size_t test_bytes = 0,
                       std::vector<double>* passes = nullptr) {
            const std::vector<int32_t> prompt = random_ids(p);
            double t0 = now_seconds();
            int32_t tok = argmax(ctx.eval(prompt, /*all_logits=*/false));
            *pp_secs = now_seconds() - t0;
            ctx.truncate(d);
            *tg_secs = 0;
            for (int64_t i = 0; i < n; ++i) {
                t0 = now_seconds();
                const float* logits = ctx.eval(&tok, 1);
                *tg_secs += now_seconds() - t0;
                tok = argmax(logits);
                if (test) passes->push_back(test->pass(test_bytes));
            }
            ctx.truncate(d);
        };
        // Bytes a generated token reads: every matrix once as packed or quantized, the norms, plus K and V of the
        // positions it attends to, d + 1 .. d + n, on average d + (n + 1) / 2.
        const double weight_bytes = double(l.model->bytes_per_token());
        const double kv_per_pos = double(kv_bytes_per_position(c, ctx.cache_type()));
        auto bytes_per_token = [&](int64_t d) { return weight_bytes + kv_per_pos * (double(d) + double(N + 1) / 2.0); };
        // Operations a pp run does per prompt token: a multiply-add per weight of the layers' matrices, the output
        // projection once for the last token, and attention's scores and weighted sum over positions d + 1 .. d + p,
        // on average d + (p + 1) / 2.
        double layer_params = 0;
        for (const TensorSpec& s : llama_tensor_table(c))
            if (s.matrix && s.layer >= 0) {
                double e = 1;
                for (int64_t n : s.shape) e *= double(n);
                layer_params += e;
            }
        auto pp_flops_per_token = [&](int64_t d) {
            const double attn = 4.0 * double(c.num_hidden_layers * c.num_attention_heads * c.head_dim) *
                                (double(d) + double(P + 1) / 2.0);
            return 2.0 * layer_params + attn + 2.0 * double(c.vocab_size * c.hidden_size) / double(P);
        };
        const FmaPeak fma = measure_fma_peak();  // the compute roofline, before the runs
        if (!quiet)
            std::fprintf(stderr, "FMA peak: %.1f GFLOP/s on %d threads (%.1f on one)\n", fma.gflops, fma.threads,
                         fma.thread_gflops);

        // On shared machines the read bandwidth moves from one second to the next, so generation is set against passes
        // of the test taken in turn with it. A model larger than the last-level cache (read from memory at every token)
        // has a pass over as many bytes as a token reads after each token, and one build's share then varies less than
        // against passes between runs. A model within the cache has one pass before the runs and one after each, and
        // each run follows a warm-up, so it finds the caches as the model left them, not as the test did. The
        // bandwidth is the mean of the passes (per run: of the token passes, or of the two passes on either side).
        const size_t llc = last_level_cache_bytes(), bw_bytes = default_bandwidth_test_bytes();
        struct Result {
            int64_t depth;
            Stats pp, tg;
            double tg_gbs, bw;
            std::vector<double> passes;
            size_t pass_bytes;
            bool per_token;
        };
        std::vector<Result> results;
        {
            ReadBandwidthTest bw_test(bw_bytes);
            for (int64_t d : depths) {
                if (ctx.n_past() < d) {  // the fill, untimed, on from the last depth's
                    if (!quiet) std::fprintf(stderr, "filling the cache to depth %lld\n", (long long)d);
                    ctx.eval(random_ids(d - ctx.n_past()));
                }
                const double bpt = bytes_per_token(d);
                const bool per_token = llc > 0 && bpt > double(llc);
                const size_t pass_bytes = per_token ? std::min(size_t(bpt), bw_bytes) : 0;  // 0: whole passes
                if (!quiet && d == depths.front()) {
                    if (per_token)
                        std::fprintf(stderr,
                                     "read bandwidth test over %zu MiB: a pass of 3 x %.1f MiB (a token's "
                                     "bytes, at most the buffer) after each generated token\n",
                                     bw_bytes >> 20, double(pass_bytes) / double(1 << 20));
                    else
                        std::fprintf(stderr,
                                     "read bandwidth test over %zu MiB: one pass before the runs, one after "
                                     "each\n",
                                     bw_bytes >> 20);
                }
                double pp_s, tg_s;
                std::vector<double> pp_tps, tg_tps, bw_passes;
                if (!per_token) bw_passes.push_back(bw_test.pass());
                for (int r = 0; r < o->runs; ++r) {
                    run(d, std::min<int64_t>(P, 16), std::min<int64_t>(N, 4), &pp_s, &tg_s);  // warm-up
                    const size_t first = bw_passes.size();
                    if (per_token)
                        run(d, P, N, &pp_s, &tg_s, &bw_test, pass_bytes, &bw_passes);
                    else
                        run(d, P, N, &pp_s, &tg_s);
                    if (!per_token) bw_passes.push_back(bw_test.pass());
                    pp_tps.push_back(double(P) / pp_s);
                    tg_tps.push_back(double(N) / tg_s);
                    if (!quiet) {
                        const size_t from = per_token ? first : first - 1;  // this run's passes
                        const std::vector<double> around(bw_passes.begin() + std::ptrdiff_t(from), bw_passes.end());
                        std::fprintf(stderr,
                                     "depth %lld run %d/%d: pp%lld %.2f t/s, tg%lld %.2f t/s (%.1f GB/s of "
                                     "%.1f read)\n",
                                     (long long)d, r + 1, o->runs, (long long)P, pp_tps.back(), (long long)N,
                                     tg_tps.back(), bpt * tg_tps.back() / 1e9, stats(around).mean);
                    }
                }
                const Stats tg = stats(tg_tps);
                results.push_back({d, stats(pp_tps), tg, bpt * tg.mean / 1e9, stats(bw_passes).mean, bw_passes,
                                   pass_bytes, per_token});
            }
        }  // the test's buffer freed before the resident set is read
        const GrammarTimes gt =
            grammar ? time_grammar(*l.tokenizer, l.stop_ids, grammar, ctx, P, N, o->runs, rng, quiet) : GrammarTimes{};
        const size_t rss = resident_set_bytes();

        double params = 0;
        for (const TensorSpec& s : llama_tensor_table(c)) {
            double e = 1;
            for (int64_t d : s.shape) e *= double(d);
            params += e;
        }
        std::string dtype = projection_dtype(*l.model);
        if (!l.model->file_type().empty()) {  // a GGUF's file type, as llama-bench names it
            dtype = l.model->file_type();
        } else if (l.model->quant() != QuantScheme::none) {  // llama-bench's spelling: Q4_K_M
            dtype = scheme_name(l.model->quant());
            for (char& ch : dtype) ch = char(std::toupper(static_cast<unsigned char>(ch)));
        }
        const std::string cpu = cpu_model_name(), flags = cpu_simd_flags();
        if (o->json) {
            auto pp_json = [&](const Result& r) {
                return nlohmann::json{{"n", P},
                                      {"tok_s", r.pp.mean},
                                      {"stdev", r.pp.stdev},
                                      {"gflops", pp_flops_per_token(r.depth) * r.pp.mean / 1e9}};
            };
            auto tg_json = [&](const Result& r) {
                return nlohmann::json{{"n", N}, {"tok_s", r.tg.mean}, {"stdev", r.tg.stdev}, {"gb_s", r.tg_gbs}};
            };
            nlohmann::json per_depth = nlohmann::json::array();
            for (const Result& r : results)
                per_depth.push_back({{"depth", r.depth},
                                     {"bytes_per_token", bytes_per_token(r.depth)},
                                     {"pp_flops_per_token", pp_flops_per_token(r.depth)},
                                     {"bandwidth_gb_s", r.bw},
                                     {"bandwidth_passes_gb_s", r.passes},
                                     {"pp", pp_json(r)},
                                     {"tg", tg_json(r)}});
            const Result& r0 = results.front();  // the shallowest depth's, as without -d
            nlohmann::json j = {{"model", o->m.model},
                                {"dtype", dtype},
                                {"params", int64_t(params)},
                                {"threads", l.threads},
                                {"runs", o->runs},
                                {"cpu", cpu},
                                {"kernels", kernels_isa()},
                                {"tuning", tuning_name(tuning())},
                                {"weight_bytes", l.model->weight_bytes()},
                                {"bytes_per_token", l.model->bytes_per_token()},
                                {"quant", scheme_name(l.model->quant())},
                                {"cache_type", cache},
                                {"n_ctx", n_ctx},
                                {"kv_bytes_per_position", size_t(kv_per_pos)},
                                {"rss_bytes", rss},
                                {"bandwidth_gb_s", r0.bw},
                                {"bandwidth_passes_gb_s", r0.passes},
                                {"bandwidth_pass_bytes", r0.pass_bytes},
                                {"fma_peak_gflops", fma.gflops},
                                {"fma_peak_thread_gflops", fma.thread_gflops},
                                {"fma_peak_threads", fma.threads},
                                {"pp", pp_json(r0)},
                                {"tg", tg_json(r0)},
                                {"depths", per_depth}};
            if (grammar) {
                const Stats with = stats(gt.with_tps), without = stats(gt.without_tps);
                j["grammar"] = {{"file", o->json_schema.empty() ? o->grammar : o->json_schema},
                                {"tg_tok_s", with.mean},
                                {"tg_stdev", with.stdev},
                                {"tg_free_tok_s", without.mean},
                                {"tg_free_stdev", without.stdev},
                                {"ratio", with.mean / without.mean},
                                {"step_us", gt.step_us},
                                {"mask_walk_us", gt.walk_us},
                                {"mask_walk_max_us", gt.walk_max_us},
                                {"mask_cached_us", gt.cached_us},
                                {"masks_walked", gt.walks},
                                {"masks_cached", gt.cached},
                                {"sample_us", gt.sample_us},
                                {"sample_free_us", gt.sample_free_us},
                                {"accept_us", gt.accept_us},
                                {"completions", gt.completions}};
            }
            std::printf("%s\n", j.dump().c_str());
            return 0;
        }
        const std::string name = model_name(o->m.model), th = std::to_string(l.threads);
        std::vector<std::vector<std::string>> rows = {{"model", "dtype", "params", "size", "threads", "test", "t/s"}};
        for (const Result& r : results) {
            const std::string at = r.depth > 0 ? " @ d" + std::to_string(r.depth) : "";
            rows.push_back({name, dtype, params_str(params), size_str(weight_bytes), th, "pp" + std::to_string(P) + at,
                            format("%.2f ± %.2f", r.pp.mean, r.pp.stdev)});
            rows.push_back({name, dtype, params_str(params), size_str(weight_bytes), th, "tg" + std::to_string(N) + at,
                            format("%.2f ± %.2f", r.tg.mean, r.tg.stdev)});
        }
        print_table(rows, {false, false, true, true, true, true, true});
        std::printf("\n");
        for (const Result& r : results) {
            const bool in_cache = llc > 0 && !r.per_token;
            const std::string at = r.depth > 0 ? " @ d" + std::to_string(r.depth) : "";
            std::printf("tg%s: %.1f GB/s effective of %.1f GB/s measured read bandwidth (%.0f%% of roofline)%s\n",
                        at.c_str(), r.tg_gbs, r.bw, r.bw > 0 ? 100.0 * r.tg_gbs / r.bw : 0.0,
                        in_cache ? "; the model fits in the last-level cache" : "");
        }
        for (const Result& r : results) {
            const std::string at = r.depth > 0 ? " @ d" + std::to_string(r.depth) : "";
            const double gflops = pp_flops_per_token(r.depth) * r.pp.mean / 1e9;
            std::printf("pp%s: %.1f GFLOP/s of %.1f GFLOP/s measured FMA peak on %d threads (%.0f%% of peak)\n",
                        at.c_str(), gflops, fma.gflops, fma.threads,
                        fma.gflops > 0 ? 100.0 * gflops / fma.gflops : 0.0);
        }
        std::printf("rss: %.1f MiB (weights %.1f MiB, KV cache %.1f MiB, %s)\n", double(rss) / double(1 << 20),
                    weight_bytes / double(1 << 20), double(ctx.kv_bytes()) / double(1 << 20), cache);
        std::printf("cpu: %s%s%s; kernels: %s\n", cpu.empty() ? "unknown" : cpu.c_str(), flags.empty() ? "" : ", ",
                    flags.c_str(), kernels_line().c_str());
        if (grammar) {
            const Stats with = stats(gt.with_tps), without = stats(gt.without_tps);
            std::printf(
                "\ngrammar (%s): tg%lld %.2f ± %.2f t/s constrained, %.2f ± %.2f free in the same runs (%.1f%%)\n",
                (o->json_schema.empty() ? o->grammar : o->json_schema).c_str(), (long long)N, with.mean, with.stdev,
                without.mean, without.stdev, 100.0 * with.mean / without.mean);
            std::printf(
                "per constrained step of %.0f us: mask %.0f us when walked (%lld steps, max %.0f), %.1f us when "
                "kept (%lld steps); sampling %.0f us (free %.0f); accept %.1f us; %lld completions\n",
                gt.step_us, gt.walk_us, (long long)gt.walks, gt.walk_max_us, gt.cached_us, (long long)gt.cached,
                gt.sample_us, gt.sample_free_us, gt.accept_us, (long long)gt.completions);
        }
        return 0;
    };
}

}  // namespace plainllama::cli
