// plainllama inspect: the resolved config and the table of tensors, from config.json and the safetensors headers
// only (nothing packed, no page of the weights read): instant and a few MB whatever the model's size.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/model/model.h"

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

}  // namespace

Run add_inspect(CLI::App& app) {
    auto* cmd = app.add_subcommand("inspect", "Print a checkpoint's resolved config and its tensors");
    struct Opts {
        std::string model = "models/default";
        bool json = false;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("-m,--model", o->model, "Model folder (config.json, *.safetensors)")->capture_default_str();
    cmd->add_flag("--json", o->json, "Print JSON instead of text");
    return [o] {
        const ModelFiles f = open_model_files(o->model, /*read_data=*/false);
        const LlamaConfig& c = f.config;
        nlohmann::json tensors = nlohmann::json::array();
        int64_t params = 0;
        size_t bytes = 0;
        for (const TensorSpec& s : llama_tensor_table(c)) {
            const TensorView* t = f.checkpoint->find(s.name);
            tensors.push_back(
                {{"name", t->name}, {"dtype", dtype_name(t->dtype)}, {"shape", t->shape}, {"bytes", t->nbytes}});
            params += t->numel();
            bytes += t->nbytes;
        }
        if (o->json) {
            nlohmann::json j = {{"model", o->model},   {"config", config_json(c)}, {"kernels", kernels_isa()},
                                {"tensors", tensors},  {"n_tensors", tensors.size()}, {"n_params", params},
                                {"n_bytes", bytes}};
            std::printf("%s\n", j.dump(2).c_str());
            return 0;
        }
        std::printf("model: %s\n", o->model.c_str());
        const nlohmann::json cfg = config_json(c);
        for (auto& [k, v] : cfg.items()) std::printf("  %-26s %s\n", k.c_str(), v.dump().c_str());
        std::printf("kernels: %s\n", kernels_isa());
        std::printf("\n%-52s %-5s %-16s %12s\n", "tensor", "dtype", "shape", "bytes");
        for (const auto& t : tensors)
            std::printf("%-52s %-5s %-16s %12zu\n", t["name"].get<std::string>().c_str(),
                        t["dtype"].get<std::string>().c_str(), shape_str(t["shape"]).c_str(), t["bytes"].get<size_t>());
        std::printf("\n%zu tensors, %lld parameters, %zu bytes (%.2f MiB)\n", tensors.size(), (long long)params, bytes,
                    double(bytes) / (1 << 20));
        return 0;
    };
}

}  // namespace plainllama::cli
