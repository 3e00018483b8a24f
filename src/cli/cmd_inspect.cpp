// plainllama inspect: the resolved config, the tokenizer and the table of tensors, from config.json, the tokenizer
// files and the safetensors headers only (nothing packed, no page of the weights read).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "plainllama/tokenizer/tokenizer.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/model/model.h"
#include "plainllama/sys/threads.h"

namespace plainllama::cli {

namespace {

nlohmann::json config_json(const LlamaConfig& c) {
    nlohmann::json rs = c.rope_scaling.rope_type == RopeType::none
                            ? nlohmann::json(nullptr)
                            : nlohmann::json{{"rope_type", rope_type_name(c.rope_scaling.rope_type)},
                                             {"factor", c.rope_scaling.factor},
                                             {"low_freq_factor", c.rope_scaling.low_freq_factor},
                                             {"high_freq_factor", c.rope_scaling.high_freq_factor},
                                             {"original_max_position_embeddings",
                                              c.rope_scaling.original_max_position_embeddings}};
    return {{"hidden_size", c.hidden_size},
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
}

// The tokenizer in use: kind, file, vocabulary size, BOS/EOS and the special tokens.
nlohmann::json tokenizer_json(const Tokenizer& t) {
    nlohmann::json specials = nlohmann::json::array();
    for (const SpecialToken& s : t.special_tokens()) specials.push_back({{"id", s.id}, {"text", s.text}});
    auto token = [&](int32_t id) {
        return id < 0 ? nlohmann::json(nullptr) : nlohmann::json{{"id", id}, {"text", t.piece(id)}};
    };
    return {{"kind", t.kind()},
            {"file", t.kind() == "bpe" ? "tokenizer.json" : "tokenizer.model"},
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

}  // namespace

Run add_inspect(CLI::App& app) {
    auto* cmd = app.add_subcommand("inspect", "Print a checkpoint's resolved config and its tensors");
    struct Opts {
        std::string model = "models/default", quant = "none";
        bool json = false;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("-m,--model", o->model, "Model folder (config.json, *.safetensors)")->capture_default_str();
    cmd->add_flag("--json", o->json, "Print JSON instead of text");
    cmd->add_option("--quant", o->quant, "Show the format each matrix would take with --quant (and the bytes loaded)")
        ->check(CLI::IsMember({"none", "q8_0", "q6_k", "q4_k_m"}))
        ->capture_default_str();
    return [o] {
        const ModelFiles f = open_model_files(o->model, /*read_data=*/false);
        const LlamaConfig& c = f.config;
        // A saved quantized folder's scheme, unless --quant asks for another (which loading would refuse).
        QuantScheme scheme = parse_scheme(o->quant, "--quant");
        if (auto s = f.checkpoint->metadata().find(kQuantSchemeKey); s != f.checkpoint->metadata().end() &&
                                                                      scheme == QuantScheme::none)
            scheme = parse_scheme(s->second, o->model + ": __metadata__ " + kQuantSchemeKey);
        // the format a matrix is used in, and its bytes then
        auto loaded = [&](const Weight& w, QuantType q, const TensorView& t) -> std::pair<std::string, size_t> {
            if (w.quant != QuantType::none)  // stored quantized: as laid out in memory
                return {quant_name(w.quant), matrix_bytes(DType::U8, w.quant, w.rows, w.cols)};
            if (q == QuantType::none) return {dtype_name(t.dtype), t.nbytes};
            return {quant_name(q), matrix_bytes(t.dtype, q, w.rows, w.cols)};
        };
        // A folder of weights alone has no tokenizer: null (a broken one is an error).
        const nlohmann::json tok = has_tokenizer(o->model) ? tokenizer_json(*load_tokenizer(o->model)) : nlohmann::json();
        nlohmann::json tensors = nlohmann::json::array();
        int64_t params = 0;
        size_t bytes = 0, loaded_bytes = 0;
        auto add = [&](const std::string& name, const TensorView& t, const std::vector<int64_t>& shape,
                       const std::pair<std::string, size_t>& as) {
            tensors.push_back({{"name", name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"bytes", t.nbytes},
                               {"format", as.first}, {"loaded_bytes", as.second}});
            int64_t n = 1;
            for (int64_t d : shape) n *= d;
            params += n;
            bytes += t.nbytes;
            loaded_bytes += as.second;
        };
        for (const TensorSpec& s : llama_tensor_table(c)) {
            const TensorView& t = *f.checkpoint->find(s.name);
            const Weight& w = weight_of(f.weights, s);
            add(s.name, t, s.shape, s.matrix ? loaded(w, quant_for(scheme, s, c), t) : loaded(w, QuantType::none, t));
        }
        if (c.tie_word_embeddings) {  // the output projection: the embedding's tensor, or stored apart quantized
            const Weight& w = f.weights.lm_head;
            const TensorView& t = *f.checkpoint->find(w.quant != QuantType::none ? "lm_head.weight" : "model.embed_tokens.weight");
            const auto as = loaded(w, quant_for_tied_lm_head(scheme, c), t);
            if (w.quant != QuantType::none) {
                add("lm_head.weight", t, {c.vocab_size, c.hidden_size}, as);
                params -= c.vocab_size * c.hidden_size;  // the same parameters as the embedding's
            } else if (as.first != dtype_name(t.dtype)) {  // a quantized copy of the embedding is made at load
                tensors.push_back({{"name", "lm_head (tied)"}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape},
                                   {"bytes", 0}, {"format", as.first}, {"loaded_bytes", as.second}});
                loaded_bytes += as.second;
            }
        }
        // The KV cache per position in each type (every layer's K and V), and at the default and the largest context.
        nlohmann::json kv = nlohmann::json::array();
        const int64_t default_ctx = std::min(c.max_position_embeddings, kDefaultContext);
        for (CacheType t : {CacheType::f32, CacheType::f16, CacheType::q8_0}) {
            if (!cache_type_unsupported(t, c.head_dim).empty()) continue;
            kv.push_back({{"cache_type", cache_type_name(t)},
                          {"bytes_per_token", kv_bytes_per_position(c, t)},
                          {"default_ctx", default_ctx},
                          {"bytes_at_default_ctx", kv_cache_bytes(c, t, default_ctx)},
                          {"bytes_at_max_position_embeddings", kv_cache_bytes(c, t, c.max_position_embeddings)}});
        }
        if (o->json) {
            nlohmann::json j = {{"model", o->model},
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
