// plainllama perplexity: llama.cpp's chunked perplexity (or a sliding window) of a text file.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "plainllama/run/perplexity.h"
#include "plainllama/sys/error.h"
#include "plainllama/sys/threads.h"

namespace plainllama::cli {

namespace {

// "[=====>     ]  42/767 chunks  ETA 12s" on one rewritten line.
void progress_bar(int64_t done, int64_t total, double elapsed) {
    const int width = 30;
    const int fill = int(double(width) * double(done) / double(total));
    const double eta = done > 0 ? elapsed / double(done) * double(total - done) : 0.0;
    std::fprintf(stderr, "\r[%s%s] %lld/%lld  ETA %.0fs ", std::string(size_t(fill), '=').c_str(),
                 std::string(size_t(width - fill), ' ').c_str(), (long long)done, (long long)total, eta);
}

}  // namespace

Run add_perplexity(CLI::App& app) {
    auto* cmd = app.add_subcommand("perplexity", "Perplexity of a text file (llama.cpp's method by default)");
    struct Opts {
        ModelOpts m;
        std::string file;
        int64_t ctx = 512, chunks = -1, stride = 0, batch = 512;
        bool json = false, kld = false;
    };
    auto o = std::make_shared<Opts>();
    add_model_options(cmd, o->m, /*with_ctx=*/false);
    cmd->add_option("-f,--file", o->file, "Text file to evaluate")->required();
    cmd->add_option("-c,--ctx", o->ctx, "Tokens per chunk (or window); at most max_position_embeddings")
        ->transform(int_range(4, int64_t(1) << 24))
        ->capture_default_str();
    cmd->add_option("--chunks", o->chunks, "Evaluate only the first K chunks (or windows, with --stride); -1 = all")
        ->transform(int_range(-1, int64_t(1) << 40))
        ->capture_default_str();
    cmd->add_option("--stride", o->stride,
                    "Sliding-window mode (HF's guide): a window of --ctx tokens every S tokens, each token scored once")
        ->transform(int_range(1, int64_t(1) << 24));
    cmd->add_option("-b,--batch", o->batch, "Most tokens per forward pass")
        ->transform(int_range(1, int64_t(1) << 24))
        ->capture_default_str();
    cmd->add_flag("--json", o->json, "Print the final figures and per-chunk values as JSON on stdout");
    cmd->add_flag("--kl-divergence,--kld", o->kld,
                  "With --quant: also run the unquantized model and report its PPL, the mean KL divergence from it "
                  "and how often both pick the same most likely token");
    return [o] {
        if (o->chunks == 0) throw UsageError("--chunks 0: give the number of chunks to evaluate, or -1 for all");
        const std::string text = read_prompt("", o->file, false, true);
        if (o->kld && (o->m.quant == "none" || o->stride > 0))
            throw UsageError(
                "--kl-divergence compares a quantized model with the unquantized one: give --quant (not with "
                "--stride)");
        Loaded l = load(o->m);
        std::unique_ptr<Model> reference;  // --kl-divergence: the same folder unquantized
        if (o->kld) {
            reference = std::make_unique<Model>(o->m.model);
            if (reference->quant() != QuantScheme::none)
                throw UsageError("--kl-divergence: " + o->m.model + " is a saved quantized folder (" +
                                 scheme_name(reference->quant()) +
                                 "); give the original folder with --quant to compare against its unquantized weights");
        }
        const LlamaConfig& c = l.model->config();
        if (o->ctx > c.max_position_embeddings)
            throw UsageError("--ctx " + std::to_string(o->ctx) + " is larger than the model's context (" +
                             std::to_string(c.max_position_embeddings) + ", max_position_embeddings)");
        const bool quiet = o->m.quiet, tty = ::isatty(2) && !quiet;
        double t0 = now_seconds();
        const bool add_bos = l.tokenizer->add_bos();
        const std::vector<int32_t> tokens = l.tokenizer->encode(text, add_bos);
        if (!quiet)
            std::fprintf(stderr, "tokenized %s: %zu tokens in %.2f s\n", o->file.c_str(), tokens.size(),
                         now_seconds() - t0);
        // llama.cpp's method runs one chunk per thread (each context single-threaded inside); the sliding
        // window, whose windows are few and long, one context with all threads.
        const int threads = thread_count();
        std::vector<std::unique_ptr<Context>> contexts;
        std::vector<Context*> ctx_ptrs, ref_ptrs;
        const ContextParams params{o->ctx, std::min(o->batch, o->ctx), false, 1, cache_type(o->m)};
        for (int i = 0; i < (o->stride > 0 ? 1 : threads); ++i) {
            contexts.push_back(std::make_unique<Context>(*l.model, params));
            ctx_ptrs.push_back(contexts.back().get());
            if (reference) {
                contexts.push_back(std::make_unique<Context>(*reference, params));
                ref_ptrs.push_back(contexts.back().get());
            }
        }
        Context& ctx = *contexts[0];
        t0 = now_seconds();
        install_sigint_handler(/*restart_io=*/true);
        double t_done = t0;  // when the last chunk/window finished: the rate leaves out one cut by Ctrl-C
        auto progress = [&](int64_t i, int64_t total, const PerplexityResult& r) {
            t_done = now_seconds();
            if (!quiet) {
                if (tty) std::fprintf(stderr, "\r\033[K");
                std::fprintf(stderr, "[%lld]%.4f,", (long long)i, r.running_ppl.back());
                if (tty) {
                    std::fprintf(stderr, "\n");
                    progress_bar(i, total, now_seconds() - t0);
                }
                std::fflush(stderr);
            }
        };
        // Each chunk starts with BOS when the tokenizer adds one (llama.cpp's rule), else with its own first token.
        const int32_t bos = !add_bos                     ? -1
                            : l.tokenizer->bos_id() >= 0 ? l.tokenizer->bos_id()
                                                         : int32_t(c.bos_token_id);
        const Context::Abort abort = [] { return g_interrupted.load(); };
        const PerplexityResult r =
            o->stride > 0 ? perplexity_stride(ctx, tokens, o->ctx, o->stride, progress, abort, o->chunks)
                          : perplexity_chunks(ctx_ptrs, tokens, o->ctx, bos, o->chunks, progress, abort, ref_ptrs);
        if (r.n_windows == 0) {  // Ctrl-C inside the first chunk/window
            if (tty && !quiet) std::fprintf(stderr, "\r\033[K");
            std::fprintf(stderr, "\n[interrupted] before the first %s was finished: no perplexity\n",
                         o->stride > 0 ? "window" : "chunk");
            return 130;
        }
        const double secs = t_done - t0;
        const int64_t evaluated = r.n_windows * o->ctx;
        if (!quiet) {
            if (tty) std::fprintf(stderr, "\r\033[K");
            std::fprintf(stderr, "\n%lld %s of %lld tokens, %lld tokens scored, %.2f s, %.1f tokens/s\n",
                         (long long)r.n_windows, o->stride > 0 ? "windows" : "chunks", (long long)o->ctx,
                         (long long)r.n_scored, secs, double(evaluated) / secs);
            print_busy_note(l);
        }
        if (o->json) {
            nlohmann::json j = {{"model", o->m.model},
                                {"file", o->file},
                                {"method", o->stride > 0 ? "stride" : "chunks"},
                                {"ctx", o->ctx},
                                {"stride", o->stride},
                                {"n_tokens", tokens.size()},
                                {"n_chunks", r.n_windows},
                                {"n_scored", r.n_scored},
                                {"ppl", r.ppl},
                                {"ppl_stderr", r.ppl_stderr},
                                {"mean_nll", r.mean_nll},
                                {"seconds", secs},
                                {"tokens_per_second", double(evaluated) / secs},
                                {"chunk_ppl", r.window_ppl},
                                {"running_ppl", r.running_ppl},
                                {"quant", o->m.quant},
                                // "interrupted": Ctrl-C; the figures cover the chunks finished before it
                                {"stop", r.interrupted ? "interrupted" : "complete"}};
            if (reference)
                j["kld"] = {{"ref_ppl", r.ref_ppl},
                            {"mean_kld", r.mean_kld},
                            {"kld_stderr", r.kld_stderr},
                            {"same_top", r.same_top}};
            std::printf("%s\n", j.dump().c_str());
        } else {
            std::printf("PPL = %.4f +/- %.4f\n", r.ppl, r.ppl_stderr);
            if (reference)
                std::printf("unquantized PPL = %.4f; mean KLD = %.6f +/- %.6f; same top token %.2f%%\n", r.ref_ppl,
                            r.mean_kld, r.kld_stderr, 100.0 * r.same_top);
        }
        return r.interrupted ? 130 : 0;  // a Ctrl-C after the last chunk changes nothing
    };
}

}  // namespace plainllama::cli
