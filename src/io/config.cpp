#include "plainllama/io/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "plainllama/io/file.h"
#include "plainllama/sys/error.h"

namespace plainllama {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& key, const std::string& what) {
    throw Error(source + ": '" + key + "' " + what);
}

const json* find(const json& j, const char* key) {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
}

int64_t get_int(const json& j, const char* key, const std::string& source, bool required, int64_t fallback, int64_t lo,
                int64_t hi) {
    const json* v = find(j, key);
    if (!v) {
        if (required) fail(source, key, "is missing (expected an integer)");
        return fallback;
    }
    if (!v->is_number_integer()) fail(source, key, "must be an integer, found " + json_brief(*v));
    int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v->get<int64_t>();
    if (x < lo || x > hi)
        fail(source, key,
             "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], found " + std::to_string(x));
    return x;
}

// A positive finite number; at least `min` when min > 0.
double get_double(const json& j, const char* key, const std::string& source, bool required, double fallback,
                  double min = 0) {
    const json* v = find(j, key);
    if (!v) {
        if (required) fail(source, key, "is missing (expected a number)");
        return fallback;
    }
    if (!v->is_number()) fail(source, key, "must be a number, found " + json_brief(*v));
    double x = v->get<double>();
    if (!std::isfinite(x) || x <= 0) fail(source, key, "must be a positive number, found " + json_brief(*v));
    if (x < min) fail(source, key, "must be at least " + json_brief(min) + ", found " + json_brief(*v));
    return x;
}

bool get_bool(const json& j, const char* key, const std::string& source, bool fallback) {
    const json* v = find(j, key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(source, key, "must be true or false, found " + json_brief(*v));
    return v->get<bool>();
}

// eos_token_id: a token id in [0, vocab_size) or a list of them.
std::vector<int64_t> parse_eos(const json& eos, int64_t vocab_size, const std::string& source) {
    std::vector<int64_t> ids;
    auto check = [&](const json& v) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab_size)
            fail(source, "eos_token_id",
                 "must be a token id in [0, vocab_size) or a list of them, found " + json_brief(eos));
        ids.push_back(v.get<int64_t>());
    };
    if (eos.is_array()) {
        for (const json& v : eos) check(v);
    } else {
        check(eos);
    }
    return ids;
}

constexpr int64_t kMaxDim = int64_t(1) << 20;  // hidden, FFN, head sizes
constexpr int64_t kMaxVocab = int64_t(1) << 24;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxPositions = int64_t(1) << 24;

RopeScaling parse_rope_scaling(const json& rs, const std::string& source) {
    RopeScaling r;
    if (!rs.is_object()) fail(source, "rope_scaling", "must be an object or null, found " + json_brief(rs));
    const json* type = find(rs, "rope_type");
    if (!type) type = find(rs, "type");
    if (!type || !type->is_string()) fail(source, "rope_scaling.rope_type", "is missing (expected a string)");
    std::string t = type->get<std::string>();
    if (t == "default") return r;
    if (t != "linear" && t != "llama3")
        fail(source, "rope_scaling.rope_type",
             "is " + json_brief(*type) + "; supported: linear, llama3 (or null/default)");
    r.rope_type = t == "linear" ? RopeType::linear : RopeType::llama3;
    // factor >= 1 (as HF's validation asks) and rope_theta >= 1 keep every RoPE frequency in [0, 1]: a base
    // or factor near 0 would turn them into Inf and the rotation into NaN.
    r.factor = get_double(rs, "factor", source + " rope_scaling", true, 1.0, 1.0);
    if (r.rope_type == RopeType::llama3) {
        r.low_freq_factor = get_double(rs, "low_freq_factor", source + " rope_scaling", true, 1.0);
        r.high_freq_factor = get_double(rs, "high_freq_factor", source + " rope_scaling", true, 4.0);
        r.original_max_position_embeddings =
            get_int(rs, "original_max_position_embeddings", source + " rope_scaling", true, 0, 1, kMaxPositions);
        if (r.high_freq_factor <= r.low_freq_factor)
            fail(source, "rope_scaling.high_freq_factor", "must be greater than low_freq_factor");
    }
    return r;
}

}  // namespace

const char* rope_type_name(RopeType t) {
    switch (t) {
        case RopeType::none:
            return "none";
        case RopeType::linear:
            return "linear";
        case RopeType::llama3:
            return "llama3";
    }
    return "?";
}

std::string json_brief(const json& v) {
    constexpr size_t kMaxNodes = 32, kMaxChars = 80;
    // Count the nodes without recursion, giving up past kMaxNodes.
    std::vector<const json*> todo = {&v};
    size_t nodes = 0;
    while (!todo.empty() && nodes <= kMaxNodes) {
        const json* x = todo.back();
        todo.pop_back();
        ++nodes;
        if (x->is_structured()) {
            if (x->size() > kMaxNodes)
                nodes = kMaxNodes + 1;
            else
                for (const json& e : *x) todo.push_back(&e);
        }
    }
    std::string s;
    if (nodes <= kMaxNodes)
        s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    else if (v.is_array())
        s = "an array of " + std::to_string(v.size()) + " elements";
    else
        s = "an object of " + std::to_string(v.size()) + " keys";
    if (s.size() > kMaxChars) {
        size_t cut = kMaxChars - 3;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
        s = s.substr(0, cut) + "...";
    }
    return s;
}

bool LlamaConfig::is_eos(int64_t id) const {
    return std::find(eos_token_id.begin(), eos_token_id.end(), id) != eos_token_id.end();
}

LlamaConfig parse_config(const json& j, const std::string& source) {
    if (!j.is_object()) throw Error(source + ": expected a JSON object at the top level");
    LlamaConfig c;
    if (const json* mt = find(j, "model_type"); mt && mt->is_string() && mt->get<std::string>() != "llama")
        fail(source, "model_type", "is " + json_brief(*mt) + "; only \"llama\" is supported");
    c.hidden_size = get_int(j, "hidden_size", source, true, 0, 1, kMaxDim);
    c.intermediate_size = get_int(j, "intermediate_size", source, true, 0, 1, kMaxDim);
    c.num_hidden_layers = get_int(j, "num_hidden_layers", source, true, 0, 1, kMaxLayers);
    c.num_attention_heads = get_int(j, "num_attention_heads", source, true, 0, 1, kMaxDim);
    c.num_key_value_heads = get_int(j, "num_key_value_heads", source, false, c.num_attention_heads, 1, kMaxDim);
    c.vocab_size = get_int(j, "vocab_size", source, true, 0, 1, kMaxVocab);
    c.max_position_embeddings = get_int(j, "max_position_embeddings", source, false, 2048, 1, kMaxPositions);
    c.rms_norm_eps = get_double(j, "rms_norm_eps", source, true, 0.0);
    // RMSNorm divides by sqrt(mean(x^2) + eps) in f32: an eps of 1 or more swamps the statistic, and one that f32
    // rounds to 0 divides an all-zero row by 0.
    if (!(c.rms_norm_eps < 1.0) || !(float(c.rms_norm_eps) > 0.0f))
        fail(source, "rms_norm_eps", "must be in (0, 1) (and not 0 in f32), found " + json_brief(j["rms_norm_eps"]));

    if (find(j, "head_dim")) {
        c.head_dim = get_int(j, "head_dim", source, false, 0, 1, kMaxDim);
    } else {
        if (c.hidden_size % c.num_attention_heads != 0)
            fail(source, "num_attention_heads",
                 "(" + std::to_string(c.num_attention_heads) + ") must divide hidden_size (" +
                     std::to_string(c.hidden_size) + ")");
        c.head_dim = c.hidden_size / c.num_attention_heads;
    }
    if (c.head_dim % 2 != 0) fail(source, "head_dim", "must be even for RoPE, found " + std::to_string(c.head_dim));
    if (c.num_attention_heads % c.num_key_value_heads != 0)
        fail(source, "num_key_value_heads",
             "(" + std::to_string(c.num_key_value_heads) + ") must divide num_attention_heads (" +
                 std::to_string(c.num_attention_heads) + ")");
    if (c.num_attention_heads * c.head_dim > kMaxDim)
        fail(source, "num_attention_heads", "times head_dim is too large");

    // rope_theta / rope_scaling, also nested in rope_parameters (newer transformers).
    const json* rope_params = find(j, "rope_parameters");
    if (rope_params && !rope_params->is_object())
        fail(source, "rope_parameters", "must be an object, found " + json_brief(*rope_params));
    if (find(j, "rope_theta"))
        c.rope_theta = get_double(j, "rope_theta", source, false, 10000.0, 1.0);
    else if (rope_params && find(*rope_params, "rope_theta"))
        c.rope_theta = get_double(*rope_params, "rope_theta", source + " rope_parameters", false, 10000.0, 1.0);
    if (const json* rs = find(j, "rope_scaling"))
        c.rope_scaling = parse_rope_scaling(*rs, source);
    else if (rope_params && (find(*rope_params, "rope_type") || find(*rope_params, "type")))
        c.rope_scaling = parse_rope_scaling(*rope_params, source);

    c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", source, false);
    // Absent: HF's defaults (BOS 1, EOS 2) when the vocabulary has them; null: none.
    if (!j.contains("bos_token_id"))
        c.bos_token_id = c.vocab_size > 1 ? 1 : -1;
    else if (find(j, "bos_token_id"))
        c.bos_token_id = get_int(j, "bos_token_id", source, true, 0, 0, c.vocab_size - 1);
    else
        c.bos_token_id = -1;
    if (!j.contains("eos_token_id") && c.vocab_size > 2) c.eos_token_id = {2};
    if (const json* eos = find(j, "eos_token_id")) c.eos_token_id = parse_eos(*eos, c.vocab_size, source);
    if (const json* act = find(j, "hidden_act")) {
        if (!act->is_string() || act->get<std::string>() != "silu")
            fail(source, "hidden_act", "is " + json_brief(*act) + "; only \"silu\" is supported");
    }
    if (get_bool(j, "attention_bias", source, false))
        fail(source, "attention_bias", "is true; biases in attention projections are not supported");
    if (get_bool(j, "mlp_bias", source, false))
        fail(source, "mlp_bias", "is true; biases in MLP projections are not supported");
    if (const json* td = find(j, "torch_dtype"); td && td->is_string()) c.torch_dtype = td->get<std::string>();
    return c;
}

LlamaConfig load_config(const std::filesystem::path& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw Error(path.string() + ": not found or not a regular file (expected config.json)");
    json j = json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw Error(path.string() + ": invalid JSON");
    return parse_config(j, path.string());
}

std::vector<int64_t> load_generation_eos(const std::filesystem::path& dir, int64_t vocab_size) {
    const std::filesystem::path path = dir / "generation_config.json";
    std::error_code ec;
    if (std::filesystem::symlink_status(path, ec).type() == std::filesystem::file_type::not_found) return {};
    const json j = json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) throw Error(path.string() + ": invalid JSON (expected an object)");
    const json* eos = find(j, "eos_token_id");
    return eos ? parse_eos(*eos, vocab_size, path.string()) : std::vector<int64_t>{};
}

}  // namespace plainllama
