// plainllama tokenize: the token ids of a text (llama.cpp's llama-tokenize). Reads config.json and the tokenizer
// files only (of a GGUF, its header): a folder without weights or a vocabulary-only GGUF works, and counting the
// tokens of a large file is quick.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "plainllama/io/config.h"
#include "plainllama/io/gguf.h"
#include "plainllama/sys/error.h"
#include "plainllama/tokenizer/tokenizer.h"

namespace plainllama::cli {

Run add_tokenize(CLI::App& app) {
    auto* cmd = app.add_subcommand("tokenize", "Token ids of a text; reads no weights");
    struct Opts {
        std::string model = "models/default", prompt, file;
        bool no_bos = false, json = false, pieces = false;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("-m,--model", o->model,
                    "Model folder (config.json and tokenizer.model or tokenizer.json) or GGUF file (its vocabulary)")
        ->capture_default_str();
    auto* p_opt = cmd->add_option("-p,--prompt", o->prompt, "Text to tokenize");
    auto* f_opt = cmd->add_option("-f,--file", o->file, "Read the text from a file ('-' = stdin)");
    cmd->add_flag("--no-bos", o->no_bos, "Do not prepend BOS (when the tokenizer adds one)");
    auto* json_opt = cmd->add_flag("--json", o->json, "Print {\"ids\": [...], \"n\": N}");
    cmd->add_flag("--pieces", o->pieces, "Print each id and its vocabulary piece on a line")->excludes(json_opt);
    cmd->footer("Without --json or --pieces: the ids on one line, separated by spaces.");
    return [o, p_opt, f_opt] {
        if (p_opt->count() == 0 && f_opt->count() == 0) throw UsageError("give the text with -p/--prompt or -f/--file");
        const std::string text = read_prompt(o->prompt, o->file, p_opt->count() > 0, f_opt->count() > 0);
        const std::unique_ptr<Tokenizer> tok = load_tokenizer(o->model);
        if (!is_gguf_model(o->model))  // (a GGUF's vocabulary is the model's: its size is checked when it loads)
            check_vocab(*tok, load_config(std::filesystem::path(o->model) / "config.json"), o->model);
        const std::vector<int32_t> ids = tok->encode(text, !o->no_bos && tok->add_bos());
        if (o->json) {
            std::printf("%s\n", nlohmann::json{{"ids", ids}, {"n", ids.size()}}.dump().c_str());
        } else if (o->pieces) {
            for (int32_t id : ids) std::printf("%d\t%s\n", id, tok->piece(id).c_str());
        } else {
            std::string line;
            for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
            std::printf("%s\n", line.c_str());
        }
        return 0;
    };
}

}  // namespace plainllama::cli
