// plainllama generate: stream a continuation of a prompt to stdout.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "plainllama/run/generate.h"
#include "plainllama/sys/error.h"

namespace plainllama::cli {

Run add_generate(CLI::App& app) {
    auto* cmd = app.add_subcommand("generate", "Generate text from a prompt, streamed to stdout");
    struct Opts {
        ModelOpts m;
        SamplingOpts s;
        std::string prompt, file, json_schema, grammar;
        int64_t n_predict = 256;
        bool no_bos = false, json = false;
    };
    auto o = std::make_shared<Opts>();
    add_model_options(cmd, o->m);
    auto* p_opt = cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
    auto* f_opt = cmd->add_option("-f,--file", o->file, "Read the prompt from a file ('-' = stdin)");
    cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate; -1 = until EOS or a full context")
        ->transform(int_range(-1, int64_t(1) << 30))
        ->capture_default_str();
    cmd->add_flag("--no-bos", o->no_bos, "Do not prepend the BOS token");
    cmd->add_flag("--json", o->json,
                  "Print one JSON object at the end (text, token ids, counts, timings) instead of streaming");
    auto* schema_opt = cmd->add_option("--json-schema", o->json_schema,
                                       "Constrain the continuation to JSON that validates against the JSON Schema in "
                                       "FILE (docs/structured-output.md)");
    cmd->add_option("--grammar", o->grammar, "Constrain the continuation to the GBNF grammar in FILE")
        ->excludes(schema_opt);
    add_sampling_options(cmd, o->s);
    return [o, p_opt, f_opt] {
        const std::string prompt = read_prompt(o->prompt, o->file, p_opt->count() > 0, f_opt->count() > 0);
        // The grammar before the model: a bad file fails at once.
        const std::shared_ptr<const Grammar> grammar = load_grammar(o->json_schema, o->grammar);
        Loaded l = load(o->m);
        const bool quiet = o->m.quiet;
        Context ctx(*l.model, ContextParams{o->m.ctx_size, 512, false, 1, cache_type(o->m)});
        std::vector<int32_t> tokens = l.tokenizer->encode(prompt, !o->no_bos && l.tokenizer->add_bos());
        if (tokens.empty())
            throw UsageError(
                "the prompt is empty and no BOS is prepended (--no-bos, or a tokenizer that adds none): nothing to "
                "start from");
        if (int64_t(tokens.size()) > ctx.n_ctx())
            throw Error("the prompt has " + std::to_string(tokens.size()) + " tokens but the context holds " +
                        std::to_string(ctx.n_ctx()) +
                        (ctx.n_ctx() < l.model->config().max_position_embeddings
                             ? " (raise -c/--ctx-size or shorten the prompt)"
                             : " (all the model's max_position_embeddings: shorten the prompt)"));
        const size_t n_prompt_tokens = tokens.size();
        const SamplerParams sp = resolve_sampling(o->s, quiet);

        Sampler sampler(sp);
        StreamDecoder decoder(*l.tokenizer);
        std::unique_ptr<GrammarConstraint> constraint;
        if (grammar)
            constraint = std::make_unique<GrammarConstraint>(
                grammar, std::make_shared<const TokenTrie>(*l.tokenizer, int32_t(l.model->config().vocab_size)),
                l.stop_ids);
        std::string text;  // the continuation
        install_sigint_handler(
            /*restart_io=*/true);  // before the first write: Ctrl-C while output is blocked also stops cleanly
        std::string echoed;
        for (int32_t id : tokens) echoed += decoder.push(id);
        if (!o->json) {
            std::fwrite(echoed.data(), 1, echoed.size(), stdout);
            std::fflush(stdout);
        }
        double checked = now_seconds();
        const GenerateStats st = generate(
            ctx, sampler, decoder, tokens, o->n_predict, l.stop_ids,
            [&](int32_t, const std::string& piece) {
                if (now_seconds() - checked > 0.5) {  // other work may start or stop on the cores meanwhile
                    refresh_threads(l, o->m.threads, 2);
                    checked = now_seconds();
                }
                text += piece;
                if (!o->json) {
                    std::fwrite(piece.data(), 1, piece.size(), stdout);
                    std::fflush(stdout);
                }
                return true;
            },
            &g_interrupted, constraint.get());
        const std::string tail = decoder.flush();
        text += tail;
        if (!o->json) {
            std::fwrite(tail.data(), 1, tail.size(), stdout);
            std::fputc('\n', stdout);  // stdout: prompt + continuation + newline, as llama2.c's run prints
            std::fflush(stdout);
        } else {
            nlohmann::json j = {
                {"prompt", prompt},
                {"text", text},
                {"prompt_tokens", std::vector<int32_t>(tokens.begin(), tokens.begin() + long(n_prompt_tokens))},
                {"tokens", std::vector<int32_t>(tokens.begin() + long(n_prompt_tokens), tokens.end())},
                {"n_prompt", st.n_prompt},
                {"n_generated", st.n_generated},
                {"stop", st.interrupted       ? "interrupted"
                         : st.stopped_eos     ? "eos"
                         : st.stopped_grammar ? "grammar"
                         : st.stopped_ctx     ? "context"
                                              : "n_predict"},
                {"seed", sp.seed},
                {"timings",
                 {{"load_ms", l.load_seconds * 1e3},
                  {"prompt_ms", st.prompt_seconds * 1e3},
                  {"generate_ms", st.generate_seconds * 1e3},
                  {"prompt_tok_s", st.prompt_seconds > 0 ? double(st.n_prompt) / st.prompt_seconds : 0.0},
                  {"generate_tok_s", st.generate_seconds > 0 ? double(st.n_generated) / st.generate_seconds : 0.0}}}};
            std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        }
        if (!quiet) {
            if (st.stopped_ctx)
                std::fprintf(stderr, "\n[stopped: the context of %lld tokens is full]\n", (long long)ctx.n_ctx());
            if (st.interrupted) std::fprintf(stderr, "\n[interrupted]\n");
            if (constraint && !st.interrupted && !st.stopped_eos && !st.stopped_grammar)
                std::fprintf(stderr, "\n[stopped before the grammar was complete: the text is cut short]\n");
            std::fprintf(stderr, "\n%16s = %10.2f ms\n", "load time", l.load_seconds * 1e3);
            std::fprintf(stderr, "%s\n", perf_line("prompt eval time", st.prompt_seconds, st.n_prompt).c_str());
            std::fprintf(stderr, "%s\n", perf_line("eval time", st.generate_seconds, st.n_generated).c_str());
            print_busy_note(l);
        }
        return st.interrupted ? 130 : 0;
    };
}

}  // namespace plainllama::cli
