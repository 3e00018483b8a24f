// config.json of a Hugging Face LLaMA checkpoint, with HF's field names.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace plainllama {

// rope_scaling: none, "linear" (positions divided by factor) or "llama3" (frequency bands).
enum class RopeType { none, linear, llama3 };
const char* rope_type_name(RopeType t);  // "none", "linear", "llama3"

struct RopeScaling {
    RopeType rope_type = RopeType::none;
    double factor = 1.0;
    double low_freq_factor = 1.0;                  // llama3 only
    double high_freq_factor = 4.0;                 // llama3 only
    int64_t original_max_position_embeddings = 0;  // llama3 only
    // A GGUF's rope_freqs.weight (llama.cpp's form of Llama 3.1's scaling): inv_freq[i] /= freq_factors[i], before
    // any linear factor. Empty when none.
    std::vector<double> freq_factors;
};

struct LlamaConfig {
    int64_t hidden_size = 0;
    int64_t intermediate_size = 0;
    int64_t num_hidden_layers = 0;
    int64_t num_attention_heads = 0;
    int64_t num_key_value_heads = 0;  // default: num_attention_heads
    int64_t head_dim = 0;             // default: hidden_size / num_attention_heads
    double rms_norm_eps = 0.0;
    double rope_theta = 10000.0;
    RopeScaling rope_scaling;
    int64_t max_position_embeddings = 2048;
    int64_t vocab_size = 0;
    bool tie_word_embeddings = false;
    int64_t bos_token_id = 1;           // 1 when absent (HF's default), -1 when null
    std::vector<int64_t> eos_token_id;  // int or list in the file; {2} when absent, {} when null
    std::string hidden_act = "silu";
    std::string torch_dtype;  // informational

    bool is_eos(int64_t id) const;
};

// Parses and validates; `source` names the file in error messages.
LlamaConfig parse_config(const nlohmann::json& j, const std::string& source);
LlamaConfig load_config(const std::filesystem::path& config_json);
// generation_config.json's eos_token_id in model folder `dir` (an int or a list, each in [0, vocab_size)); {} when
// the file or the field is absent or null.
std::vector<int64_t> load_generation_eos(const std::filesystem::path& dir, int64_t vocab_size);

// v as one line of JSON of at most 80 characters, for an error message. Only small values are serialised
// (a hostile file may nest arrays a million deep, and dump() recurses), larger ones are described.
std::string json_brief(const nlohmann::json& v);

}  // namespace plainllama
