#include "common.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>

#include "plainllama/io/file.h"
#include "plainllama/io/gguf.h"
#include "plainllama/io/utf8.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/run/generate.h"
#include "plainllama/run/json_schema.h"
#include "plainllama/sys/error.h"
#include "plainllama/sys/threads.h"

namespace plainllama::cli {

std::atomic<bool> g_interrupted{false};

namespace {
void on_sigint(int) {
    if (g_interrupted.exchange(true)) std::_Exit(130);
}
}  // namespace

void install_sigint_handler(bool restart_io) {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sa.sa_flags = restart_io ? SA_RESTART : 0;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
}

std::string perf_line(const char* what, double seconds, int64_t tokens) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%16s = %10.2f ms / %5lld tokens (%8.2f ms per token, %9.2f tokens per second)",
                  what, seconds * 1e3, (long long)tokens, tokens ? seconds * 1e3 / double(tokens) : 0.0,
                  seconds > 0 ? double(tokens) / seconds : 0.0);
    return buf;
}

CLI::Validator int_range(int64_t lo, int64_t hi) {
    const std::string range = std::to_string(lo) + " to " + std::to_string(hi);
    return CLI::Validator(
        [lo, hi, range](std::string& s) -> std::string {
            int64_t v = 0;
            const char *b = s.data() + (!s.empty() && s[0] == '+'), *e = s.data() + s.size();
            const auto [p, ec] = std::from_chars(b, e, v);
            if (ec == std::errc::result_out_of_range) return s + " is out of range (" + range + ")";
            if (ec != std::errc() || p != e) return s + " is not an integer";
            if (v < lo || v > hi) return s + " is out of range (" + range + ")";
            s = std::to_string(v);  // as read here, in decimal (CLI11 would read a leading 0 as octal)
            return "";
        },
        "INT in [" + range + "]");
}

CLI::Validator float_range(double lo, double hi) {
    char range[64];
    std::snprintf(range, sizeof range, "%g to %g", lo, hi);
    return CLI::Validator(
        [lo, hi, r = std::string(range)](std::string& s) -> std::string {
            char* end = nullptr;
            errno = 0;
            const double v = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
            if (s.empty() || end != s.c_str() + s.size()) return s + " is not a number";
            if (!std::isfinite(v)) return s + " is not a finite number";
            if (v < lo || v > hi) return s + " is out of range (" + r + ")";
            return "";
        },
        std::string("FLOAT in [") + range + "]");
}

void add_model_options(CLI::App* cmd, ModelOpts& o, bool with_ctx) {
    cmd->add_option("-m,--model", o.model, kModelHelp)->capture_default_str();
    cmd->add_option("-t,--threads", o.threads,
                    "Threads (default: physical cores, less those other processes keep busy)")
        ->transform(int_range(1, 1024));
    if (with_ctx)
        cmd->add_option("-c,--ctx-size", o.ctx_size,
                        "Context size in tokens (default: max_position_embeddings, at most 4096)")
            ->transform(int_range(1, int64_t(1) << 24));
    cmd->add_flag("--quiet", o.quiet, "Print nothing on stderr but errors");
    cmd->add_option(
           "--quant", o.quant,
           "Quantize the weights at load: none (exact), q8_0, q6_k, q4_k_m, q5_k_m or q4_0 (llama.cpp's mixes)")
        ->check(CLI::IsMember({"none", "q8_0", "q6_k", "q4_k_m", "q5_k_m", "q4_0"}))
        ->capture_default_str();
    cmd->add_option("--cache-type", o.cache_type,
                    "KV cache storage: f32, f16, bf16 or q8_0 (llama.cpp's -ctk/-ctv; default f16, serve f32)")
        ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
    cmd->add_flag("--check-tensors", o.check_tensors,
                  "Scan every tensor for NaN and Inf at load (quantized blocks: their scales); fail naming the tensor "
                  "and the first bad index");
}

std::optional<CacheType> cache_type(const ModelOpts& o) {
    CacheType t;
    if (o.cache_type.empty()) return std::nullopt;
    if (!parse_cache_type(o.cache_type, &t))
        throw UsageError("--cache-type " + o.cache_type + ": expected f32, f16, bf16 or q8_0");
    return t;
}

void add_sampling_options(CLI::App* cmd, SamplingOpts& o) {
    SamplerParams& p = o.p;
    cmd->add_option("--temp", p.temp, "Temperature; 0 = greedy")->check(float_range(0.0, 100.0))->capture_default_str();
    cmd->add_option("--top-k", p.top_k, "Top-k; 0 = off")->transform(int_range(0, 1 << 30))->capture_default_str();
    cmd->add_option("--top-p", p.top_p, "Top-p (nucleus); 1 = off")
        ->check(float_range(0.0, 1.0))
        ->capture_default_str();
    cmd->add_option("--min-p", p.min_p, "Min-p; 0 = off")->check(float_range(0.0, 1.0))->capture_default_str();
    cmd->add_option("--repeat-penalty", p.repeat_penalty, "Repetition penalty; 1 = off")
        ->check(float_range(0.001, 100.0))
        ->capture_default_str();
    cmd->add_option("--repeat-last-n", p.repeat_last_n, "Tokens the penalty looks back at; 0 = off, -1 = all")
        ->transform(int_range(-1, 1 << 30))
        ->capture_default_str();
    cmd->add_option("--seed", o.seed, "Random seed; -1 = random (printed on stderr)")
        ->transform(int_range(-1, std::numeric_limits<int64_t>::max()))
        ->capture_default_str();
    cmd->footer(
        "Sampling chain, in order: repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw.\n"
        "--temp 0 is greedy decoding (argmax after the repetition penalty).");
}

SamplerParams resolve_sampling(const SamplingOpts& o, bool quiet) {
    SamplerParams p = o.p;
    p.seed = o.seed >= 0
                 ? uint64_t(o.seed)
                 : (uint64_t(std::random_device{}()) << 20 ^ std::random_device{}()) & ((uint64_t(1) << 52) - 1);
    if (!quiet && p.temp > 0) std::fprintf(stderr, "seed = %llu\n", (unsigned long long)p.seed);
    return p;
}

namespace {

// Index of the first of n items whose 16- or 32-bit value (at item i: data + i * stride + offset) has every
// exponent bit (mask) set, i.e. is NaN or Inf, or -1. Blocks of items are scanned in parallel with a branch-free test
// that vectorises; only the first bad block is searched again.
template <class U>
int64_t first_non_finite(const void* data, int64_t n, U mask, size_t stride = sizeof(U), size_t offset = 0) {
    const uint8_t* p = static_cast<const uint8_t*>(data) + offset;
    auto bad = [&](int64_t i) {
        U v;
        std::memcpy(&v, p + size_t(i) * stride, sizeof(U));
        return (v & mask) == mask;
    };
    const int64_t block = 1 << 14, blocks = (n + block - 1) / block;
    int64_t first_block = blocks;
#pragma omp parallel for schedule(static) reduction(min : first_block)
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t end = std::min(n, (b + 1) * block);
        int any = 0;
        for (int64_t i = b * block; i < end; ++i) any |= bad(i);
        if (any) first_block = std::min(first_block, b);
    }
    for (int64_t i = first_block * block; i < std::min(n, (first_block + 1) * block); ++i)
        if (bad(i)) return i;
    return -1;
}

const char* non_finite_name(float v) { return std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf"; }

// A tensor stored as quantized blocks (U8 [rows, row bytes], the format in the checkpoint's __metadata__): every
// block's fp16 scales (quant_scales).
void check_block_scales(const Checkpoint& ckpt, const std::string& name, const TensorView& t) {
    const auto fmt = ckpt.metadata().find(kQuantKey + name);
    QuantType q = QuantType::none;
    if (fmt == ckpt.metadata().end() || !parse_quant_type(fmt->second, &q) || q == QuantType::none ||
        t.shape.size() != 2)
        return;  // bind_weights has refused such a tensor already
    const size_t bb = quant_block_bytes(q);
    const int64_t n = int64_t(t.nbytes / bb), per_row = t.shape[1] / int64_t(bb);
    for (const QuantScale& s : quant_scales(q)) {
        const int64_t b = first_non_finite<uint16_t>(t.data, n, 0x7c00u, bb, s.offset);
        if (b < 0) continue;
        uint16_t h;
        std::memcpy(&h, static_cast<const uint8_t*>(t.data) + size_t(b) * bb + s.offset, 2);
        throw Error(t.file + ": tensor '" + printable(name) + "' " + t.shape_str() + " (" + quant_name(q) +
                    " blocks) has " + non_finite_name(f16_to_f32(h)) + " in the scale " + s.name + " of block " +
                    std::to_string(b) + " (row " + std::to_string(b / per_row) + ", block " +
                    std::to_string(b % per_row) + " of the row) (--check-tensors)");
    }
}

int64_t first_non_finite(const TensorView& t) {
    switch (t.dtype) {
        case DType::F32:
            return first_non_finite<uint32_t>(t.data, t.numel(), 0x7f800000u);
        case DType::F16:
            return first_non_finite<uint16_t>(t.data, t.numel(), 0x7c00u);
        case DType::BF16:
            return first_non_finite<uint16_t>(t.data, t.numel(), 0x7f80u);
        case DType::U8:
            break;  // quantized blocks: check_block_scales
    }
    return -1;
}

// Every tensor of the checkpoint, for --check-tensors: every float value, and every fp16 scale of the quantized
// blocks (their integer quants and sub-block scales are finite by construction).
void check_tensors(const Checkpoint& ckpt) {
    for (const auto& [name, t] : ckpt.tensors()) {
        if (t.dtype == DType::U8) {
            check_block_scales(ckpt, name, t);
            ckpt.release(t.data, t.nbytes);
            continue;
        }
        const int64_t i = first_non_finite(t);
        ckpt.release(t.data, t.nbytes);  // read once more here; the model holds its own (repacked) copy
        if (i < 0) continue;
        float v;
        if (t.dtype == DType::F32) {
            std::memcpy(&v, static_cast<const uint8_t*>(t.data) + 4 * i, 4);
        } else {
            uint16_t h;
            std::memcpy(&h, static_cast<const uint8_t*>(t.data) + 2 * i, 2);
            v = t.dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        std::string at = std::to_string(i);
        if (t.shape.size() == 2)
            at += " (row " + std::to_string(i / t.shape[1]) + ", column " + std::to_string(i % t.shape[1]) + ")";
        throw Error(t.file + ": tensor '" + printable(t.name) + "' " + t.shape_str() + " has " + non_finite_name(v) +
                    " at index " + at + " (--check-tensors)");
    }
}

}  // namespace

std::string threads_note(const Loaded& l) {
    std::string s = "threads " + std::to_string(l.threads);
    if (l.busy_cores > 0)
        s += " (" + std::to_string(l.busy_cores) + " of " + std::to_string(l.threads + l.busy_cores) +
             " cores busy with other work; -t N to override)";
    return s;
}

void print_busy_note(const Loaded& l) {
    if (l.busy_cores > 0) std::fprintf(stderr, "note: %s\n", threads_note(l).c_str());
}

// A team thread that shares a core with another busy process makes every step of the kernels wait for its time
// slice: decode with 2 threads and a compiler on one of 2 cores runs several times slower than with 1 thread.
bool refresh_threads(Loaded& l, int requested, int samples) {
    const int before = l.threads;
    if (requested > 0) {
        l.threads = requested;
        l.busy_cores = 0;
    } else {
        const int cores = physical_cores();
        l.busy_cores = std::min(busy_cores(samples), cores - 1);
        l.threads = cores - l.busy_cores;
    }
    set_threads(l.threads);
    return l.threads != before;
}

Loaded load(const ModelOpts& o) {
    Loaded l;
    refresh_threads(l, o.threads, 5);
    const double t0 = now_seconds();
    // Repacking the weights takes seconds for large models: a percentage on a terminal, erased when done
    // (not for models under 64 MiB, which load in milliseconds).
    const bool tty = ::isatty(2) && !o.quiet;
    // The folder's name, not its path: the line must fit the terminal for \r to rewrite it.
    const std::string name = model_name(o.model);
    int shown = -1;
    try {
        l.model = std::make_unique<Model>(
            o.model,
            [&](size_t done, size_t total) {
                const int pct = total ? int(done * 100 / total) : 100;
                if (!tty || total < (size_t(64) << 20) || pct == shown) return;
                shown = pct;
                std::fprintf(stderr, pct < 100 ? "\rloading %s: %d%%" : "\r\033[K", name.c_str(), pct);
            },
            parse_scheme(o.quant, "--quant"));
    } catch (...) {
        if (shown >= 0 && shown < 100) std::fprintf(stderr, "\r\033[K");  // the error gets a line of its own
        throw;
    }
    if (o.check_tensors) check_tensors(l.model->checkpoint());
    l.tokenizer = load_tokenizer(o.model);
    check_vocab(*l.tokenizer, l.model->config(), o.model);
    l.stop_ids = eos_ids(l.model->config(), *l.tokenizer, load_generation_eos(o.model, l.model->config().vocab_size));
    l.load_seconds = now_seconds() - t0;
    return l;
}

std::string model_name(const std::string& dir) {
    std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    if (p.extension() == ".gguf") p = p.stem();
    return p.filename().empty() ? dir : p.filename().string();
}

std::string kernels_line() {
    const std::string isa = kernels_isa();
    return kernels_tuned() ? isa + " (tuning " + tuning_name(tuning()) + ")" : isa;
}

TemplateChoice choose_template(const std::string& model_dir, const std::string& flag) {
    TemplateChoice choice = detect_template(model_dir);
    if (flag != "auto") {
        choice.kind = parse_template_name(flag, "--template");
        choice.reason = "--template";
        choice.warning.clear();
    }
    return choice;
}

std::vector<int32_t> reply_stop_ids(const ChatTemplate& tmpl, const Loaded& l) {
    std::vector<int32_t> stop = tmpl.end_of_turn_ids();
    for (int32_t id : l.stop_ids)
        if (std::find(stop.begin(), stop.end(), id) == stop.end()) stop.push_back(id);
    return stop;
}

void check_vocab(const Tokenizer& tok, const LlamaConfig& c, const std::string& dir) {
    if (tok.vocab_size() <= c.vocab_size) return;
    if (std::filesystem::path gguf; is_gguf_model(dir, &gguf))
        throw Error(gguf.string() + ": 'tokenizer.ggml.tokens' has " + std::to_string(tok.vocab_size()) +
                    " tokens but the model's vocabulary (llama.vocab_size, token_embd.weight) has " +
                    std::to_string(c.vocab_size));
    throw Error(dir + "/" + (tok.kind() == "bpe" ? "tokenizer.json" : "tokenizer.model") + ": has " +
                std::to_string(tok.vocab_size()) + " tokens but config.json vocab_size is " +
                std::to_string(c.vocab_size));
}

std::string read_prompt(const std::string& prompt, const std::string& file, bool prompt_given, bool file_given) {
    if (prompt_given && file_given) throw UsageError("give either -p/--prompt or -f/--file, not both");
    std::string text = prompt;
    std::string source = "the prompt";
    if (file_given) {
        text = read_input(file);
        source = file == "-" ? "the prompt on stdin" : file;
    }
    const size_t bad = invalid_utf8_at(text);
    if (bad != std::string::npos && !file_given)  // the command line's own text: a usage error
        throw UsageError(source + " is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
    if (bad != std::string::npos) throw Error(source + " is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
    return text;
}

std::shared_ptr<const Grammar> load_grammar(const std::string& json_schema_file, const std::string& grammar_file) {
    const std::string& file = json_schema_file.empty() ? grammar_file : json_schema_file;
    if (file.empty()) return nullptr;
    const std::string text = read_input(file);
    try {
        return json_schema_file.empty() ? std::make_shared<const Grammar>(parse_gbnf(text)) : json_schema_grammar(text);
    } catch (const Error& e) {
        throw Error(file + ": " + e.what());
    }
}

}  // namespace plainllama::cli
