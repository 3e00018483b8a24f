// plainllama quantize: a model quantized once and saved (llama.cpp's llama-quantize), so that loading it maps the
// blocks instead of quantizing every time: as a folder (config, tokenizer and a model.safetensors of blocks), or with
// -o NAME.gguf as a GGUF file that llama.cpp loads too (and --quant none: a model converted to GGUF as it is).
#include <cstdio>
#include <filesystem>
#include <optional>

#include "commands.h"
#include "common.h"
#include "plainllama/io/gguf.h"
#include "plainllama/model/save_gguf.h"
#include "plainllama/model/save_quantized.h"
#include "plainllama/run/chat_template.h"
#include "plainllama/sys/clock.h"
#include "plainllama/sys/error.h"
#include "plainllama/tokenizer/gguf_tokenizer.h"

namespace plainllama::cli {

Run add_quantize(CLI::App& app) {
    auto* cmd = app.add_subcommand("quantize", "Quantize a model and save it as a folder or a GGUF file");
    struct Opts {
        ModelOpts m;
        std::string out;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("-m,--model", o->m.model, kModelHelp)->capture_default_str();
    cmd->add_option("-o,--output", o->out, "A folder to write, new (created) or empty; or a new file NAME.gguf")
        ->required();
    cmd->add_option("--quant", o->m.quant,
                    "Format: q8_0, q6_k, q4_k_m, q5_k_m or q4_0 (llama.cpp's mixes); none (the weights as they are: "
                    "GGUF output only)")
        ->check(CLI::IsMember({"none", "q8_0", "q6_k", "q4_k_m", "q5_k_m", "q4_0"}))
        ->required();
    cmd->add_option("-t,--threads", o->m.threads, "Threads (default: physical cores)")->transform(int_range(1, 1024));
    cmd->add_flag("--quiet", o->m.quiet, "Print nothing on stderr but errors");
    return [o] {
        const std::filesystem::path out(o->out);
        const bool gguf_out = out.extension() == ".gguf";
        if (!gguf_out && o->m.quant == "none")
            throw UsageError(
                "--quant none: a folder is written quantized; give q8_0, q6_k, q4_k_m, q5_k_m or q4_0, or -o "
                "NAME.gguf");
        if (!gguf_out && is_gguf_model(o->m.model))
            throw UsageError("-o " + o->out + ": a GGUF model is saved as a GGUF file; give -o NAME.gguf");
        std::error_code ec;
        if (gguf_out && std::filesystem::symlink_status(out, ec).type() != std::filesystem::file_type::not_found)
            throw Error(o->out + ": exists; give a new file name with -o");
        std::optional<OutputFolder>
            folder;  // new or empty, before the work (removed again if it was made and all fails)
        if (!gguf_out) folder.emplace(o->out);
        const double t0 = now_seconds();
        Loaded l = load(o->m);
        const double t1 = now_seconds();
        if (gguf_out) {
            GgufVocab vocab = gguf_vocab_of(*l.tokenizer, o->m.model);
            vocab.chat_template = chat_template_text(o->m.model);
            save_gguf(*l.model, vocab, model_name(o->m.model), out);
        } else {
            save_quantized(*l.model, *folder);
        }
        if (!o->m.quiet)
            std::fprintf(stderr, "%s: %s, %.1f MiB of weights (loaded in %.2f s, written in %.2f s)\n", o->out.c_str(),
                         scheme_name(l.model->quant()), double(l.model->bytes_per_token()) / (1 << 20), t1 - t0,
                         now_seconds() - t1);
        return 0;
    };
}

}  // namespace plainllama::cli
