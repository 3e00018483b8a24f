// config.json parsing: the real stories260K config, HF defaults, and every rejection naming the file and key.
#include "plainllama/io/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plainllama/sys/error.h"
#include "test_util.h"

namespace plainllama {
namespace {

using json = nlohmann::json;
using test::model_dir;
using test::TempDir;

using test::HasSubstr;
using test::StartsWith;

const char* const kSource = "/models/x/config.json";

// The stories260K config.json as read from the shared folder (a realistic base to edit).
json base_config() { return test::read_json(model_dir() / "config.json"); }

// parse_config's error message for j; a test failure when it accepts j or throws anything else.
std::string config_error(const json& j) {
    try {
        parse_config(j, kSource);
    } catch (const Error& e) {
        return e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "not a plainllama::Error: " << e.what() << " for " << j.dump();
        return "";
    }
    ADD_FAILURE() << "accepted " << j.dump();
    return "";
}

// The message names the file and the key, on one line.
void expect_names(const std::string& msg, const std::string& key) {
    EXPECT_TRUE(StartsWith(msg, kSource));
    EXPECT_TRUE(HasSubstr(msg, key));
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(Config, Stories260KValues) {
    for (const char* name : {"stories260K", "stories260K-bf16", "stories260K-f16"}) {
        SCOPED_TRACE(name);
        const LlamaConfig c = load_config(model_dir(name) / "config.json");
        test::expect_stories260K_config(c);
    }
}

TEST(Config, OptionalKeysTakeHfDefaults) {
    json j = base_config();
    for (const char* k : {"num_key_value_heads", "max_position_embeddings", "rope_theta", "tie_word_embeddings",
                          "bos_token_id", "eos_token_id", "hidden_act", "model_type", "torch_dtype"})
        j.erase(k);
    const LlamaConfig c = parse_config(j, kSource);
    EXPECT_EQ(c.num_key_value_heads, 8);  // = num_attention_heads
    EXPECT_EQ(c.head_dim, 8);             // = hidden_size / num_attention_heads
    EXPECT_EQ(c.max_position_embeddings, 2048);
    EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_EQ(c.eos_token_id, std::vector<int64_t>{2});
}

TEST(Config, ExplicitHeadDimNeedNotDivideHidden) {
    json j = base_config();
    j["num_attention_heads"] = 6;
    j["num_key_value_heads"] = 3;
    j["head_dim"] = 16;
    const LlamaConfig c = parse_config(j, kSource);
    EXPECT_EQ(c.head_dim, 16);
    EXPECT_EQ(c.num_attention_heads, 6);
}

TEST(Config, MissingRequiredKey) {
    for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                            "vocab_size", "rms_norm_eps"}) {
        SCOPED_TRACE(key);
        json j = base_config();
        j.erase(key);
        const std::string msg = config_error(j);
        expect_names(msg, std::string("'") + key + "'");
        EXPECT_TRUE(HasSubstr(msg, "missing"));
        j[key] = nullptr;  // null counts as absent
        EXPECT_TRUE(HasSubstr(config_error(j), "missing"));
    }
}

TEST(Config, WrongJsonTypes) {
    const std::vector<std::pair<const char*, json>> cases = {
        {"hidden_size", "64"},
        {"hidden_size", 64.5},
        {"hidden_size", true},
        {"intermediate_size", json::array({172})},
        {"num_hidden_layers", json::object()},
        {"num_attention_heads", "8"},
        {"num_key_value_heads", 4.0},
        {"vocab_size", "512"},
        {"max_position_embeddings", false},
        {"rms_norm_eps", "1e-5"},
        {"rope_theta", "10000"},
        {"tie_word_embeddings", "true"},
        {"tie_word_embeddings", 1},
        {"head_dim", "8"},
        {"attention_bias", "false"},
        {"bos_token_id", "1"},
        {"bos_token_id", 1.5},
    };
    for (const auto& [key, value] : cases) {
        SCOPED_TRACE(std::string(key) + " = " + value.dump());
        json j = base_config();
        j[key] = value;
        const std::string msg = config_error(j);
        expect_names(msg, std::string("'") + key + "'");
        EXPECT_TRUE(HasSubstr(msg, value.dump()));
    }
}

TEST(Config, ValuesOutOfRange) {
    const std::vector<std::pair<const char*, json>> cases = {
        {"hidden_size", 0},
        {"hidden_size", -64},
        {"num_hidden_layers", 0},
        {"num_attention_heads", -8},
        {"vocab_size", json(uint64_t(1) << 63)},
        {"intermediate_size", int64_t(1) << 40},
        {"rms_norm_eps", 0},
        {"rms_norm_eps", -1e-5},
        {"rms_norm_eps", 1e300},  // eps is in (0, 1): it swamps the statistic from 1 on
        {"rms_norm_eps", 1.0},
        {"rms_norm_eps", 1e-300},  // 0 in f32, as RMSNorm adds it
        {"rope_theta", 0.0},
        {"bos_token_id", 512},  // == vocab_size
        {"bos_token_id", -1},
        {"eos_token_id", 512},
        {"eos_token_id", -2},
    };
    for (const auto& [key, value] : cases) {
        SCOPED_TRACE(std::string(key) + " = " + value.dump());
        json j = base_config();
        j[key] = value;
        expect_names(config_error(j), std::string("'") + key + "'");
    }
}

TEST(Config, TopLevelNotAnObject) {
    EXPECT_TRUE(StartsWith(config_error(json::array({1, 2})), kSource));
    EXPECT_TRUE(HasSubstr(config_error(json("llama")), "object"));
}

TEST(Config, EosTokenId) {
    json j = base_config();
    j["eos_token_id"] = {2, 7, 511};
    LlamaConfig c = parse_config(j, kSource);
    EXPECT_EQ(c.eos_token_id, (std::vector<int64_t>{2, 7, 511}));
    EXPECT_TRUE(c.is_eos(7));
    EXPECT_TRUE(c.is_eos(511));
    EXPECT_FALSE(c.is_eos(3));

    j["eos_token_id"] = nullptr;
    c = parse_config(j, kSource);
    EXPECT_TRUE(c.eos_token_id.empty());
    EXPECT_FALSE(c.is_eos(2));

    for (const json& bad : {json("2"), json::array({2, "x"}), json::array({2, 3.5}), json::array({2, 600}),
                            json::object({{"id", 2}}), json(true)}) {
        SCOPED_TRACE(bad.dump());
        j["eos_token_id"] = bad;
        const std::string msg = config_error(j);
        expect_names(msg, "'eos_token_id'");
        EXPECT_TRUE(HasSubstr(msg, bad.dump()));
    }
}

TEST(Config, NullBos) {
    json j = base_config();
    j["bos_token_id"] = nullptr;
    EXPECT_EQ(parse_config(j, kSource).bos_token_id, -1);
    j["bos_token_id"] = 0;
    EXPECT_EQ(parse_config(j, kSource).bos_token_id, 0);
}

TEST(Config, RopeScalingLinear) {
    json j = base_config();
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
    LlamaConfig c = parse_config(j, kSource);
    EXPECT_EQ(c.rope_scaling.rope_type, RopeType::linear);
    EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);
    // Older files spell the key "type".
    j["rope_scaling"] = {{"type", "linear"}, {"factor", 2}};
    c = parse_config(j, kSource);
    EXPECT_EQ(c.rope_scaling.rope_type, RopeType::linear);
    EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 2.0);
    j["rope_scaling"] = {{"rope_type", "linear"}};
    expect_names(config_error(j), "'factor'");
}

TEST(Config, RopeScalingLlama3) {
    json j = base_config();
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 8.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 8192}};
    const LlamaConfig c = parse_config(j, kSource);
    EXPECT_EQ(c.rope_scaling.rope_type, RopeType::llama3);
    EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
    EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
    EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
    EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);

    json missing = j;
    missing["rope_scaling"].erase("original_max_position_embeddings");
    expect_names(config_error(missing), "'original_max_position_embeddings'");
    json inverted = j;
    inverted["rope_scaling"]["high_freq_factor"] = 0.5;
    expect_names(config_error(inverted), "high_freq_factor");
}

TEST(Config, RopeScalingNullOrDefaultIsNone) {
    json j = base_config();
    j["rope_scaling"] = nullptr;
    EXPECT_EQ(parse_config(j, kSource).rope_scaling.rope_type, RopeType::none);
    j["rope_scaling"] = {{"rope_type", "default"}};
    EXPECT_EQ(parse_config(j, kSource).rope_scaling.rope_type, RopeType::none);
}

TEST(Config, RopeScalingUnsupportedRejected) {
    for (const char* type : {"yarn", "dynamic", "longrope"}) {
        SCOPED_TRACE(type);
        json j = base_config();
        j["rope_scaling"] = {{"rope_type", type}, {"factor", 4.0}};
        const std::string msg = config_error(j);
        expect_names(msg, "rope_scaling");
        EXPECT_TRUE(HasSubstr(msg, type));
    }
    json j = base_config();
    j["rope_scaling"] = "linear";
    expect_names(config_error(j), "rope_scaling");
    j["rope_scaling"] = {{"factor", 4.0}};  // no type
    expect_names(config_error(j), "rope_type");
}

TEST(Config, RopeParametersNested) {
    json j = base_config();
    j.erase("rope_theta");
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
    LlamaConfig c = parse_config(j, kSource);
    EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
    EXPECT_EQ(c.rope_scaling.rope_type, RopeType::none);

    j["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                            {"factor", 32.0},          {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
    c = parse_config(j, kSource);
    EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
    EXPECT_EQ(c.rope_scaling.rope_type, RopeType::llama3);
    EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);

    j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 500000.0}, {"factor", 4.0}};
    EXPECT_TRUE(HasSubstr(config_error(j), "yarn"));
    j["rope_parameters"] = {{"rope_theta", "big"}};
    expect_names(config_error(j), "'rope_theta'");
    j["rope_parameters"] = 3;
    expect_names(config_error(j), "'rope_parameters'");
}

TEST(Config, HeadsMustDivideHidden) {
    json j = base_config();
    j["num_attention_heads"] = 6;  // 64 % 6 != 0, no head_dim given
    j["num_key_value_heads"] = 3;
    const std::string msg = config_error(j);
    expect_names(msg, "'num_attention_heads'");
    EXPECT_TRUE(HasSubstr(msg, "hidden_size"));
}

TEST(Config, KvHeadsMustDivideHeads) {
    json j = base_config();
    j["num_key_value_heads"] = 3;
    const std::string msg = config_error(j);
    expect_names(msg, "'num_key_value_heads'");
    EXPECT_TRUE(HasSubstr(msg, "(3)"));
}

TEST(Config, OddHeadDimRejected) {
    json j = base_config();
    j["head_dim"] = 7;
    expect_names(config_error(j), "'head_dim'");
}

TEST(Config, UnsupportedFeaturesRejected) {
    const std::vector<std::pair<const char*, json>> cases = {
        {"attention_bias", true}, {"mlp_bias", true},        {"hidden_act", "gelu"},
        {"hidden_act", 3},        {"model_type", "mistral"},
    };
    for (const auto& [key, value] : cases) {
        SCOPED_TRACE(std::string(key) + " = " + value.dump());
        json j = base_config();
        j[key] = value;
        expect_names(config_error(j), std::string("'") + key + "'");
    }
    json j = base_config();
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    EXPECT_NO_THROW(parse_config(j, kSource));
}

// load_config's own failures: the message names the path.
std::string load_error(const test::fs::path& p) {
    try {
        load_config(p);
    } catch (const Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "loaded " << p;
    return "";
}

TEST(Config, LoadConfigFileErrors) {
    TempDir tmp;
    EXPECT_TRUE(StartsWith(load_error(tmp / "config.json"), (tmp / "config.json").string()));
    EXPECT_TRUE(StartsWith(load_error(tmp.path()), tmp.path().string()));  // a directory
    test::write_file(tmp / "empty.json", "");
    EXPECT_TRUE(HasSubstr(load_error(tmp / "empty.json"), "empty.json: invalid JSON"));
    test::write_file(tmp / "bad.json", "{\"hidden_size\": 64,");
    EXPECT_TRUE(HasSubstr(load_error(tmp / "bad.json"), "bad.json: invalid JSON"));
    test::write_file(tmp / "nokey.json", "{\"hidden_size\": 64}");
    const std::string msg = load_error(tmp / "nokey.json");
    EXPECT_TRUE(StartsWith(msg, (tmp / "nokey.json").string()));
    EXPECT_TRUE(HasSubstr(msg, "'intermediate_size' is missing"));
}

}  // namespace
}  // namespace plainllama
