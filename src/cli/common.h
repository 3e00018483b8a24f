// Flags and helpers shared by the subcommands (llama.cpp's spellings).
#pragma once
#include <CLI/CLI.hpp>
#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "plainllama/model/model.h"
#include "plainllama/run/chat_template.h"
#include "plainllama/run/grammar.h"
#include "plainllama/run/sampler.h"
#include "plainllama/sys/clock.h"
#include "plainllama/tokenizer/tokenizer.h"

namespace plainllama::cli {

// The help of -m/--model.
inline constexpr const char* kModelHelp =
    "Model: a folder (config.json, *.safetensors, tokenizer.model or tokenizer.json) or a GGUF file";

struct ModelOpts {
    std::string model = "models/default";
    int threads = 0;       // 0 = physical cores
    int64_t ctx_size = 0;  // 0 = max_position_embeddings
    bool quiet = false;
    bool check_tensors = false;  // scan every tensor for NaN/Inf at load
    std::string quant = "none";  // --quant: the matrices' formats (quant_scheme.h)
    std::string cache_type;      // --cache-type: f32, f16, bf16, q8_0; empty = the context's default
};
// The KV cache type --cache-type names; unset without the flag (ContextParams' default).
std::optional<CacheType> cache_type(const ModelOpts& o);
void add_model_options(CLI::App* cmd, ModelOpts& o, bool with_ctx = true);

// Flag checks that say what is wrong: an integer flag's text must be a decimal integer ("abc is not an integer")
// within [lo, hi] (past int64 too: "is out of range"), given as a transform (it rewrites the text in plain decimal,
// which CLI11 would otherwise read as octal after a leading 0); a float flag's a finite number within [lo, hi] (NaN
// and Inf, which compare false with any bound, are refused).
CLI::Validator int_range(int64_t lo, int64_t hi);
CLI::Validator float_range(double lo, double hi);

struct SamplingOpts {
    SamplerParams p;
    int64_t seed = -1;  // -1 = random
};
void add_sampling_options(CLI::App* cmd, SamplingOpts& o);
// The sampler parameters with the seed resolved (random when -1, printed on stderr unless quiet).
SamplerParams resolve_sampling(const SamplingOpts& o, bool quiet);

// A model, its tokenizer and the time it took to load them; threads set.
struct Loaded {
    std::unique_ptr<Model> model;
    std::unique_ptr<Tokenizer> tokenizer;
    std::vector<int32_t> stop_ids;  // every EOS id (config.json, generation_config.json, the tokenizer)
    double load_seconds = 0;
    int threads = 1;
    int busy_cores = 0;  // without -t: cores other processes kept busy at start, left out of `threads`
};
// "threads N", plus why when busy cores were left out.
std::string threads_note(const Loaded& l);
// "note: <threads_note>" on stderr when busy cores were left out.
void print_busy_note(const Loaded& l);
// Without -t (requested <= 0): the physical cores less those other processes keep busy now (busy_cores over
// `samples` readings); sets the team size. True when l.threads changed.
bool refresh_threads(Loaded& l, int requested, int samples);
Loaded load(const ModelOpts& o);
// Error when the tokenizer has more tokens than config.json's vocab_size (the embedding's rows).
void check_vocab(const Tokenizer& tok, const LlamaConfig& c, const std::string& dir);

// The folder's name, with or without a trailing slash (models/TinyLlama/ -> "TinyLlama"): bench's table, the
// progress line, the server's model id.
std::string model_name(const std::string& dir);

// The kernel variant in use for bench's and inspect's text, with the decode kernels' tuning where there is one (the
// AVX-512 variants): "avx512_bf16 (tuning zen4)", "avx2".
std::string kernels_line();

// The chat template of `chat` and `serve`: --template NAME, or "auto" (the model folder's, detect_template).
TemplateChoice choose_template(const std::string& model_dir, const std::string& flag);
// What ends a reply: the template's end-of-turn ids, then the model's EOS ids, each once.
std::vector<int32_t> reply_stop_ids(const ChatTemplate& tmpl, const Loaded& l);

// Text of a prompt: -p TEXT or -f FILE ("-" = stdin). Checks it is valid UTF-8.
std::string read_prompt(const std::string& prompt, const std::string& file, bool prompt_given, bool file_given);

// The grammar of --json-schema FILE or --grammar FILE (the one given; null when neither is): Error naming the file
// and what is wrong in it.
std::shared_ptr<const Grammar> load_grammar(const std::string& json_schema_file, const std::string& grammar_file);

// Set by SIGINT (Ctrl-C) while installed; a second Ctrl-C exits at once. With restart_io, a read or write
// that the signal interrupts is restarted (nothing printed is lost); without, it fails with EINTR (so a
// Ctrl-C can end a wait for input).
extern std::atomic<bool> g_interrupted;
void install_sigint_handler(bool restart_io);

// "prompt eval time =  12.34 ms /    6 tokens (  2.06 ms per token,  486.23 tokens per second)"
std::string perf_line(const char* what, double seconds, int64_t tokens);

}  // namespace plainllama::cli
