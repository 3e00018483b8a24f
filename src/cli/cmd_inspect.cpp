// plainllama inspect: the resolved config, the tokenizer and the table of tensors, from config.json, the tokenizer
// files and the safetensors headers only (nothing packed, no page of the weights read); of a GGUF, from its header
// (the metadata too; a vocabulary-only GGUF shows its config and vocabulary).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "plainllama/io/gguf.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/model/gguf_model.h"
#include "plainllama/model/model.h"
#include "plainllama/sys/threads.h"
#include "plainllama/tokenizer/tokenizer.h"

namespace plainllama::cli {

namespace {

nlohmann::json config_json(const LlamaConfig& c) {
    nlohmann::json rs =
        c.rope_scaling.rope_type == RopeType::none
            ? nlohmann::json(nullptr)
            : nlohmann::json{{"rope_type", rope_type_name(c.rope_scaling.rope_type)},
                             {"factor", c.rope_scaling.factor},
                             {"low_freq_factor", c.rope_scaling.low_freq_factor},
                             {"high_freq_factor", c.rope_scaling.high_freq_factor},
                             {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
    nlohmann::json j = {{"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"num_key_value_heads", c.num_key_value_heads},
                        {"head_dim", c.head_dim},
                        {"gqa_group", c.num_attention_heads / c.num_key_value_heads},
                        {"rms_norm_eps", c.rms_norm_eps},
                        {"rope_theta", c.rope_theta},
                        {"rope_scaling", rs},
                        {"max_position_embeddings", c.max_position_embeddings},
                        {"vocab_size", c.vocab_size},
                        {"tie_word_embeddings", c.tie_word_embeddings},
                        {"bos_token_id", c.bos_token_id},
                        {"eos_token_id", c.eos_token_id},
                        {"hidden_act", c.hidden_act}};
    if (!c.rope_scaling.freq_factors.empty()) j["rope_freq_factors"] = c.rope_scaling.freq_factors;  // a GGUF's
    return j;
}

// The tokenizer in use: kind, file, vocabulary size, BOS/EOS and the special tokens.
nlohmann::json tokenizer_json(const Tokenizer& t, bool gguf) {
    nlohmann::json specials = nlohmann::json::array();
    for (const SpecialToken& s : t.special_tokens()) specials.push_back({{"id", s.id}, {"text", s.text}});
    auto token = [&](int32_t id) {
        return id < 0 ? nlohmann::json(nullptr) : nlohmann::json{{"id", id}, {"text", t.piece(id)}};
    };
    return {{"kind", t.kind()},
            {"file", gguf                ? "tokenizer.ggml.*"
                     : t.kind() == "bpe" ? "tokenizer.json"
                                         : "tokenizer.model"},
            {"vocab_size", t.vocab_size()},
            {"bos", token(t.bos_id())},
            {"eos", token(t.eos_id())},
            {"add_bos", t.add_bos()},
            {"special_tokens", specials}};
}

// "bpe (tokenizer.json), 128256 tokens; BOS <|begin_of_text|> 128000 (prepended), EOS ...; 256 special tokens: ..."
std::string tokenizer_line(const nlohmann::json& tok) {
    if (tok.is_null()) return "none (no tokenizer.model or tokenizer.json)";
    auto token = [](const nlohmann::json& t) {
        return t.is_null() ? std::string("none") : t["text"].get<std::string>() + " " + t["id"].dump();
    };
    const nlohmann::json& sp = tok["special_tokens"];
    std::string s = tok["kind"].get<std::string>() + " (" + tok["file"].get<std::string>() + "), " +
                    tok["vocab_size"].dump() + " tokens; BOS " + token(tok["bos"]) +
                    (tok["add_bos"].get<bool>() ? " (prepended)" : " (not prepended)") + ", EOS " + token(tok["eos"]) +
                    "; " + std::to_string(sp.size()) + " special tokens";
    for (size_t i = 0; i < sp.size() && i < 6; ++i) s += (i ? ", " : ": ") + token(sp[i]);
    if (sp.size() > 6) s += ", ...";
    return s;
}

// A GGUF's header: version, file type, parts, and each metadata key with its value in brief (arrays by their length,
// strings cut).
nlohmann::json gguf_json(const GgufModel& g) {
    const GgufFile& m = g.meta();
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& [key, v] : m.metadata()) meta[key] = v.brief();
    size_t header = 0;
    for (const auto& p : g.parts()) header += p->header_bytes();
    const int64_t ft = m.integer("general.file_type", 0, 1 << 20, false, -1);
    return {{"version", m.version()},    {"file_type", ft < 0 ? "unknown file type" : gguf_file_type_name(ft)},
            {"parts", g.parts().size()}, {"alignment", m.alignment()},
            {"header_bytes", header},    {"metadata", meta}};
}

}  // namespace

Run add_inspect(CLI::App& app) {
    auto* cmd = app.add_subcommand("inspect", "Print a checkpoint's resolved config and its tensors");
    struct Opts {
        std::string model = "models/default", quant = "none";
        bool json = false;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("-m,--model", o->model, "Model folder (config.json, *.safetensors) or GGUF file")
        ->capture_default_str();
    cmd->add_flag("--json", o->json, "Print JSON instead of text");
    cmd->add_option("--quant", o->quant, "Show the format each matrix would take with --quant (and the bytes loaded)")
        ->check(CLI::IsMember({"none", "q8_0", "q6_k", "q4_k_m", "q5_k_m", "q4_0"}))
        ->capture_default_str();
    return [o] {
        std::filesystem::path gguf_file;
        const bool gguf = is_gguf_model(o->model, &gguf_file);
        std::unique_ptr<GgufModel> vocab_only;  // a GGUF without tensors: its metadata and vocabulary
        ModelFiles f;
        if (gguf && (vocab_only = std::make_unique<GgufModel>(gguf_file))->tensors().empty()) {
            f.config = gguf_config(*vocab_only);
        } else {
            vocab_only.reset();
            f = open_model_files(o->model, /*read_data=*/false);
        }
        const GgufModel* g = vocab_only ? vocab_only.get() : f.checkpoint->gguf();
        const LlamaConfig& c = f.config;
        // A saved quantized folder's scheme, unless --quant asks for another (which loading would refuse).
        QuantScheme scheme = parse_scheme(o->quant, "--quant");
        if (!f.checkpoint || scheme != QuantScheme::none) {
        } else if (auto s = f.checkpoint->metadata().find(kQuantSchemeKey); s != f.checkpoint->metadata().end()) {
            scheme = parse_scheme(s->second, o->model + ": __metadata__ " + kQuantSchemeKey);
        } else if (g && !f.checkpoint->metadata().empty()) {  // a quantized GGUF: its file type, when it is our mix
            scheme_of_file_type(g->meta().integer("general.file_type", 0, 1 << 20, false, -1), &scheme);
        }
        // the format a matrix is used in, and its bytes then
        auto loaded = [&](const Weight& w, QuantType q, const TensorView& t) -> std::pair<std::string, size_t> {
            if (w.quant != QuantType::none)  // stored quantized: as laid out in memory
                return {quant_name(w.quant), matrix_bytes(DType::U8, w.quant, w.rows, w.cols)};
            if (q == QuantType::none) return {dtype_name(t.dtype), t.nbytes};
            return {quant_name(q), matrix_bytes(t.dtype, q, w.rows, w.cols)};
        };
        // A folder of weights alone has no tokenizer: null (a broken one is an error).
        const nlohmann::json tok =
            has_tokenizer(o->model) ? tokenizer_json(*load_tokenizer(o->model), gguf) : nlohmann::json();
        nlohmann::json tensors = nlohmann::json::array();
        int64_t params = 0;
        size_t bytes = 0, loaded_bytes = 0;
        // A GGUF's tensors by their own names and types, their shapes in GGUF's order (the row length first).
        auto dtype_of = [&](const TensorView& t) -> std::string {
            return g ? g->tensor(t.name)->type->name : dtype_name(t.dtype);
        };
        auto add = [&](const std::string& name, const TensorView& t, const std::vector<int64_t>& shape,
                       const std::pair<std::string, size_t>& as) {
            tensors.push_back({{"name", g ? t.name : name},
                               {"dtype", dtype_of(t)},
                               {"shape", g ? g->tensor(t.name)->ne : t.shape},
                               {"bytes", t.nbytes},
                               {"format", as.first},
                               {"loaded_bytes", as.second}});
            int64_t n = 1;
            for (int64_t d : shape) n *= d;
            params += n;
            bytes += t.nbytes;
            loaded_bytes += as.second;
        };
        // Matrices stored quantized are used as they are; otherwise the scheme quantizes the embedding too, kept as
        // rows of blocks (not tiles).
        bool stored = false;
        for (const TensorSpec& s : f.checkpoint ? llama_tensor_table(c) : std::vector<TensorSpec>{})
            stored = stored || (s.matrix && weight_of(f.weights, s).quant != QuantType::none);
        const QuantScheme at_load = stored ? QuantScheme::none : scheme;
        for (const TensorSpec& s : f.checkpoint ? llama_tensor_table(c) : std::vector<TensorSpec>{}) {
            const TensorView& t = *f.checkpoint->find(s.name);
            const Weight& w = weight_of(f.weights, s);
            if (s.model_field == &ModelWeights::embed_tokens) {
                const QuantType q = w.quant != QuantType::none ? w.quant : quant_for_embedding(at_load, c);
                add(s.name, t, s.shape,
                    q == QuantType::none
                        ? loaded(w, q, t)
                        : std::pair<std::string, size_t>{quant_name(q), size_t(w.rows) * quant_row_bytes(q, w.cols)});
                continue;
            }
            add(s.name, t, s.shape, s.matrix ? loaded(w, quant_for(scheme, s, c), t) : loaded(w, QuantType::none, t));
        }
        if (f.checkpoint &&
            c.tie_word_embeddings) {  // the output projection: the embedding's tensor, or stored apart quantized
            const Weight& w = f.weights.lm_head;
            const bool apart = w.data != f.weights.embed_tokens.data;
            const TensorView& t = *f.checkpoint->find(apart ? "lm_head.weight" : "model.embed_tokens.weight");
            const auto as = loaded(w, quant_for_tied_lm_head(at_load, c), t);
            if (apart) {
                add("lm_head.weight", t, {c.vocab_size, c.hidden_size}, as);
                params -= c.vocab_size * c.hidden_size;    // the same parameters as the embedding's
            } else if (as.first != dtype_name(t.dtype)) {  // packed apart from the embedding at load
                tensors.push_back({{"name", g ? "output (tied)" : "lm_head (tied)"},
                                   {"dtype", dtype_of(t)},
                                   {"shape", g ? g->tensor(t.name)->ne : t.shape},
                                   {"bytes", 0},
                                   {"format", as.first},
                                   {"loaded_bytes", as.second}});
                loaded_bytes += as.second;
            }
        }
        // The KV cache per position in each type (every layer's K and V), and at the default and the largest context.
        nlohmann::json kv = nlohmann::json::array();
        const int64_t default_ctx = std::min(c.max_position_embeddings, kDefaultContext);
        for (CacheType t : {CacheType::f32, CacheType::f16, CacheType::bf16, CacheType::q8_0}) {
            if (!cache_type_unsupported(t, c.head_dim).empty()) continue;
            kv.push_back({{"cache_type", cache_type_name(t)},
                          {"bytes_per_token", kv_bytes_per_position(c, t)},
                          {"default_ctx", default_ctx},
                          {"bytes_at_default_ctx", kv_cache_bytes(c, t, default_ctx)},
                          {"bytes_at_max_position_embeddings", kv_cache_bytes(c, t, c.max_position_embeddings)}});
        }
        const nlohmann::json gguf_info = g ? gguf_json(*g) : nlohmann::json();
        if (o->json) {
            nlohmann::json j = {{"model", o->model},
                                {"gguf", gguf_info},
                                {"kv_cache", kv},
                                {"config", config_json(c)},
                                {"tokenizer", tok},
                                {"kernels", kernels_isa()},
                                {"tuning", tuning_name(tuning())},
                                {"physical_cores", physical_cores()},  // the default thread count's rule
                                {"tensors", tensors},
                                {"n_tensors", tensors.size()},
                                {"n_params", params},
                                {"n_bytes", bytes},
                                {"quant", scheme_name(scheme)},
                                {"n_loaded_bytes", loaded_bytes}};
            std::printf("%s\n", j.dump(2).c_str());
            return 0;
        }
        std::printf("model: %s\n", o->model.c_str());
        if (g) {
            std::printf("gguf: version %s, %s, %s parts, alignment %s, %s bytes of header\n",
                        gguf_info["version"].dump().c_str(), gguf_info["file_type"].get<std::string>().c_str(),
                        gguf_info["parts"].dump().c_str(), gguf_info["alignment"].dump().c_str(),
                        gguf_info["header_bytes"].dump().c_str());
            for (auto& [k, v] : gguf_info["metadata"].items())
                std::printf("  %-40s %s\n", k.c_str(), v.get<std::string>().c_str());
            std::printf("config:\n");
        }
        const nlohmann::json cfg = config_json(c);
        for (auto& [k, v] : cfg.items()) std::printf("  %-26s %s\n", k.c_str(), v.dump().c_str());
        std::printf("tokenizer: %s\n", tokenizer_line(tok).c_str());
        std::printf("kernels: %s\n", kernels_line().c_str());
        std::printf("quant: %s\n", scheme_name(scheme));
        std::printf("\n%-52s %-5s %-16s %12s  %-6s %12s\n", "tensor", "dtype", "shape", "bytes", "format", "loaded");
        for (const auto& t : tensors)
            std::printf("%-52s %-5s %-16s %12zu  %-6s %12zu\n", t["name"].get<std::string>().c_str(),
                        t["dtype"].get<std::string>().c_str(), shape_str(t["shape"]).c_str(), t["bytes"].get<size_t>(),
                        t["format"].get<std::string>().c_str(), t["loaded_bytes"].get<size_t>());
        std::printf("\n%zu tensors, %lld parameters, %zu bytes (%.2f MiB); loaded as %s: %zu bytes (%.2f MiB)\n",
                    tensors.size(), (long long)params, bytes, double(bytes) / (1 << 20), scheme_name(scheme),
                    loaded_bytes, double(loaded_bytes) / (1 << 20));
        std::printf("\nKV cache (--cache-type): bytes per token; at -c %lld; at max_position_embeddings %lld\n",
                    (long long)default_ctx, (long long)c.max_position_embeddings);
        for (const auto& k : kv)
            std::printf("  %-5s %10zu  %10.2f MiB  %10.2f MiB\n", k["cache_type"].get<std::string>().c_str(),
                        k["bytes_per_token"].get<size_t>(), k["bytes_at_default_ctx"].get<double>() / (1 << 20),
                        k["bytes_at_max_position_embeddings"].get<double>() / (1 << 20));
        return 0;
    };
}

}  // namespace plainllama::cli
