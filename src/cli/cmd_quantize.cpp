// plainllama quantize: a model folder quantized once and saved (llama.cpp's llama-quantize), so that loading it
// maps the blocks instead of quantizing every time.
#include <cstdio>

#include "commands.h"
#include "common.h"
#include "plainllama/model/save_quantized.h"
#include "plainllama/sys/clock.h"
#include "plainllama/sys/error.h"

namespace plainllama::cli {

Run add_quantize(CLI::App& app) {
    auto* cmd = app.add_subcommand("quantize", "Quantize a model folder and save it (loads without quantizing again)");
    struct Opts {
        ModelOpts m;
        std::string out;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("-m,--model", o->m.model, "Model folder: config.json, *.safetensors, tokenizer files")
        ->capture_default_str();
    cmd->add_option("-o,--output", o->out, "Folder to write: new (created) or empty")->required();
    cmd->add_option("--quant", o->m.quant, "Format: q8_0, q6_k or q4_k_m (llama.cpp's mix)")
        ->check(CLI::IsMember({"q8_0", "q6_k", "q4_k_m"}))
        ->required();
    cmd->add_option("-t,--threads", o->m.threads, "Threads (default: physical cores)")->transform(int_range(1, 1024));
    cmd->add_flag("--quiet", o->m.quiet, "Print nothing on stderr but errors");
    return [o] {
        OutputFolder out(o->out);  // new or empty, before the work (and removed again if it was made and all fails)
        const double t0 = now_seconds();
        Loaded l = load(o->m);
        const double t1 = now_seconds();
        save_quantized(*l.model, out);
        if (!o->m.quiet)
            std::fprintf(stderr, "%s: %s, %.1f MiB of weights (quantized in %.2f s, written in %.2f s)\n",
                         o->out.c_str(), scheme_name(l.model->quant()), double(l.model->bytes_per_token()) / (1 << 20),
                         t1 - t0, now_seconds() - t1);
        return 0;
    };
}

}  // namespace plainllama::cli
