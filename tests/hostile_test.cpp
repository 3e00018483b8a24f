// Hostile inputs end to end through the binary: corrupt or absurd model folders, prompts and flags. Each one
// ends with exit status 1 (bad input) or 2 (bad command line), exactly one line on stderr starting with
// "plainllama: error:", and nothing on stdout; never a crash. Also: --check-tensors, a NaN model without it.
// (A KV cache larger than the machine: hostile_memory_test.cpp.)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "hostile_util.h"
#include "plainllama/io/config.h"
#include "plainllama/io/dtype.h"
#include "plainllama/io/safetensors.h"
#include "plainllama/model/model.h"
#include "plainllama/sys/error.h"
#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::expect_load_error;
using test::model_dir;
using test::one_error;
using test::RawTensor;
using test::run_binary;
using test::RunResult;
using test::set_config;
using test::shown;
using test::TempDir;

RunResult generate(const fs::path& model, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"generate", "-m", model.string(), "-p", "Once upon a time",
                                     "-n",       "4",  "--temp",       "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_binary(args);
}

// A writable copy of a shared model folder in tmp/name.
fs::path copy_of(const TempDir& tmp, const std::string& name, const std::string& from = "stories260K") {
    const fs::path dir = tmp / name;
    test::copy_model(model_dir(from), dir);
    return dir;
}

// The file's 8-byte length, header JSON and data.
struct SafetensorsParts {
    json header;
    std::string data;
};
SafetensorsParts split(const fs::path& p) {
    const std::string f = test::read_file(p);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | uint8_t(f[size_t(i)]);
    return {json::parse(f.substr(8, n)), f.substr(8 + n)};
}
std::string join(const std::string& header, const std::string& data, uint64_t claimed_len) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[size_t(i)] = char((claimed_len >> (8 * i)) & 0xff);
    return out + header + data;
}
// Rewrites dir/model.safetensors with its header passed through edit (the data bytes unchanged).
template <class F>
void edit_header(const fs::path& dir, F&& edit) {
    SafetensorsParts s = split(dir / "model.safetensors");
    edit(s.header);
    const std::string h = s.header.dump();
    test::write_file(dir / "model.safetensors", join(h, s.data, h.size()));
}

// Sets element `index` of tensor `name` (F32, F16 or BF16) to the float v, in dir/model.safetensors.
void poke(const fs::path& dir, const std::string& name, size_t index, float v) {
    std::vector<RawTensor> all = test::read_safetensors(dir / "model.safetensors");
    bool found = false;
    for (RawTensor& t : all) {
        if (t.name != name) continue;
        found = true;
        ASSERT_LT(index * (t.dtype == "F32" ? 4 : 2), t.bytes.size()) << name;
        if (t.dtype == "F32") {
            std::memcpy(&t.bytes[index * 4], &v, 4);
        } else {
            const uint16_t h = t.dtype == "F16" ? f32_to_f16(v) : f32_to_bf16(v);
            std::memcpy(&t.bytes[index * 2], &h, 2);
        }
    }
    ASSERT_TRUE(found) << name;
    test::write_safetensors(dir / "model.safetensors", all);
}

// ---- the safetensors file ------------------------------------------------------------------------------

TEST(Hostile, HeaderClaims2To63Bytes) {
    TempDir tmp;
    const fs::path m = copy_of(tmp, "m");
    SafetensorsParts s = split(m / "model.safetensors");
    test::write_file(m / "model.safetensors", join(s.header.dump(), s.data, uint64_t(1) << 63));
    expect_load_error(m, {"model.safetensors", "header length 9223372036854775808"});
}

TEST(Hostile, TensorOf2To40By2To40) {
    TempDir tmp;
    const fs::path m = copy_of(tmp, "m");
    edit_header(m, [](json& h) { h["model.norm.weight"]["shape"] = {int64_t(1) << 40, int64_t(1) << 40}; });
    expect_load_error(m, {"model.safetensors", "'model.norm.weight'", "1099511627776"});
}

TEST(Hostile, NegativeOrNonIntegerDims) {
    const std::vector<std::string> shapes = {"[-64]",
                                             "[64.0]",
                                             "[64.5]",
                                             "[\"64\"]",
                                             "[null]",
                                             "[true]",
                                             "[[64]]",
                                             "[-9223372036854775808]",
                                             "[18446744073709551615, 0]",
                                             "[1e300]",
                                             "{}",
                                             "64",
                                             "[64, -1, -1]"};
    for (const std::string& shape : shapes) {
        SCOPED_TRACE(shape);
        TempDir tmp;
        const fs::path m = copy_of(tmp, "m");
        edit_header(m, [&](json& h) { h["model.norm.weight"]["shape"] = json::parse(shape); });
        EXPECT_TRUE(one_error(generate(m), {"model.safetensors", "'model.norm.weight'", "shape"}, 1));
    }
}

TEST(Hostile, EmptySafetensorsFile) {
    TempDir tmp;
    const fs::path m = copy_of(tmp, "m");
    test::write_file(m / "model.safetensors", "");
    expect_load_error(m, {"model.safetensors", "0 bytes"});
}

TEST(Hostile, DirectoryInPlaceOfTheSafetensorsFile) {
    TempDir tmp;
    const fs::path m = copy_of(tmp, "m");
    fs::remove(m / "model.safetensors");
    fs::create_directory(m / "model.safetensors");
    expect_load_error(m, {"model.safetensors", "not a regular file"});
}

TEST(Hostile, SymlinkLoops) {
    TempDir tmp;
    // model.safetensors -> a -> b -> model.safetensors
    const fs::path m = copy_of(tmp, "m");
    fs::remove(m / "model.safetensors");
    fs::create_symlink("a", m / "model.safetensors");
    fs::create_symlink("b", m / "a");
    fs::create_symlink("model.safetensors", m / "b");
    expect_load_error(m, {(m / "model.safetensors").string() + ": cannot open", "symbolic links"});
    // A dangling link is named as such, not as a missing checkpoint.
    const fs::path dangling = copy_of(tmp, "dangling");
    fs::remove(dangling / "model.safetensors");
    fs::create_symlink("nowhere.safetensors", dangling / "model.safetensors");
    EXPECT_TRUE(one_error(generate(dangling), {(dangling / "model.safetensors").string() + ": cannot open"}, 1));
    // The shard index a loop, or a directory.
    const fs::path index = copy_of(tmp, "index");
    fs::create_symlink("model.safetensors.index.json", index / "model.safetensors.index.json");
    EXPECT_TRUE(one_error(generate(index), {"model.safetensors.index.json: cannot open", "symbolic links"}, 1));
    fs::remove(index / "model.safetensors.index.json");
    fs::create_directory(index / "model.safetensors.index.json");
    EXPECT_TRUE(one_error(generate(index), {"model.safetensors.index.json: not a regular file"}, 1));
    // config.json and tokenizer.model pointing at themselves.
    for (const char* file : {"config.json", "tokenizer.model"}) {
        SCOPED_TRACE(file);
        const fs::path d = copy_of(tmp, std::string("self-") + file);
        fs::remove(d / file);
        fs::create_symlink(file, d / file);
        EXPECT_TRUE(one_error(generate(d), {file}, 1));
    }
    // The model folder itself a loop.
    fs::create_symlink("loop", tmp / "loop");
    EXPECT_TRUE(one_error(generate(tmp / "loop"), {(tmp / "loop").string()}, 1));
}

TEST(Hostile, DeeplyNestedJson) {  // nlohmann's dump() recurses: a message must not serialise what it reports
    const size_t depth = 400000;
    const std::string nested = std::string(depth, '[') + std::string(depth, ']');
    TempDir tmp;
    const fs::path a = copy_of(tmp, "config");
    json c = test::read_json(a / "config.json");
    c.erase("hidden_act");
    std::string text = c.dump();
    text.insert(1, "\"hidden_act\":" + nested + ",");
    test::write_file(a / "config.json", text);
    EXPECT_TRUE(one_error(generate(a), {"config.json", "hidden_act"}, 1));

    const fs::path b = copy_of(tmp, "header");
    SafetensorsParts s = split(b / "model.safetensors");
    s.header["model.norm.weight"]["shape"] = nullptr;
    std::string h = s.header.dump();
    const size_t at = h.find("null");
    h.replace(at, 4, nested);
    test::write_file(b / "model.safetensors", join(h, s.data, h.size()));
    EXPECT_TRUE(one_error(generate(b), {"model.safetensors", "'model.norm.weight'"}, 1));
}

TEST(Hostile, ControlCharactersInConfigStringsStayOnOneLine) {
    TempDir tmp;
    const fs::path m = copy_of(tmp, "m");
    set_config(m, "model_type", "mistral\nplainllama: error: forged second line");
    EXPECT_TRUE(one_error(generate(m), {"config.json", "model_type"}, 1));
    const fs::path r = copy_of(tmp, "r");
    set_config(r, "rope_scaling", {{"rope_type", "yarn\r\n"}, {"factor", 2.0}});
    EXPECT_TRUE(one_error(generate(r), {"config.json", "rope_type"}, 1));
    const fs::path l = copy_of(tmp, "l");
    set_config(l, "hidden_size", std::string(100000, 'x'));
    const RunResult big = generate(l);
    EXPECT_TRUE(one_error(big, {"config.json", "hidden_size"}, 1));
    EXPECT_LT(big.err.size(), 1000u) << "the message quotes a 100 kB value";
}

// ---- config.json against the tensors -------------------------------------------------------------------

TEST(Hostile, HeadsNotDividingHiddenSize) {
    TempDir tmp;
    const fs::path m = copy_of(tmp, "m");
    set_config(m, "num_attention_heads", 7);
    set_config(m, "num_key_value_heads", 7);
    expect_load_error(m, {"config.json", "num_attention_heads", "hidden_size"});
}

TEST(Hostile, KvHeadsNotDividingHeads) {
    TempDir tmp;
    const fs::path m = copy_of(tmp, "m");
    set_config(m, "num_key_value_heads", 3);
    expect_load_error(m, {"config.json", "num_key_value_heads", "num_attention_heads"});
}

TEST(Hostile, VocabSizeNotTheEmbeddingRows) {
    for (int vocab : {500, 600}) {
        SCOPED_TRACE(vocab);
        TempDir tmp;
        const fs::path m = copy_of(tmp, "m");
        set_config(m, "vocab_size", vocab);
        expect_load_error(m, {"model.embed_tokens.weight", shape_str({vocab, 64}), "[512, 64]"});
    }
}

TEST(Hostile, ZeroLayersIsAClearError) {
    TempDir tmp;
    const fs::path m = copy_of(tmp, "m");
    set_config(m, "num_hidden_layers", 0);
    expect_load_error(m, {"config.json", "num_hidden_layers", "found 0"});
}

TEST(Hostile, EmptyOrMissingConfig) {
    TempDir tmp;
    const fs::path e = copy_of(tmp, "empty");
    test::write_file(e / "config.json", "");
    expect_load_error(e, {"config.json"});
    const fs::path m = copy_of(tmp, "missing");
    fs::remove(m / "config.json");
    expect_load_error(m, {"config.json"});
}

// ---- tokenizer.model -------------------------------------------------------------------------------------

TEST(Hostile, GarbageTokenizer) {
    const std::string real = test::read_file(model_dir() / "tokenizer.model");
    std::mt19937 rng(3);
    std::string noise(4096, '\0');
    for (char& ch : noise) ch = char(rng());
    const std::vector<std::pair<const char*, std::string>> cases = {
        {"empty", ""},
        {"text", "this is not a sentencepiece model\n"},
        {"random bytes", noise},
        {"first half", real.substr(0, real.size() / 2)},
        {"first 10 bytes", real.substr(0, 10)},
        {"a bit flipped in every 7th byte",
         [&] {
             std::string s = real;
             for (size_t i = 0; i < s.size(); i += 7) s[i] = char(s[i] ^ 0x10);
             return s;
         }()},
    };
    for (const auto& [what, bytes] : cases) {
        SCOPED_TRACE(what);
        TempDir tmp;
        const fs::path m = copy_of(tmp, "m");
        test::write_file(m / "tokenizer.model", bytes);
        const RunResult r = generate(m);
        // A mangled file may still parse as a (different) SentencePiece model; then it must run cleanly.
        if (r.status == 0) {
            EXPECT_EQ(r.err.find("error"), std::string::npos) << r.err;
        } else {
            EXPECT_TRUE(one_error(r, {"tokenizer.model"}, 1));
        }
    }
}

TEST(Hostile, MissingOrDirectoryTokenizer) {
    TempDir tmp;
    const fs::path m = copy_of(tmp, "missing");
    fs::remove(m / "tokenizer.model");
    EXPECT_TRUE(one_error(generate(m), {"tokenizer.model"}, 1));
    const fs::path d = copy_of(tmp, "dir");
    fs::remove(d / "tokenizer.model");
    fs::create_directory(d / "tokenizer.model");
    EXPECT_TRUE(one_error(generate(d), {"tokenizer.model"}, 1));
}

// Checkpoints often pad the embedding past the tokenizer (vocab_size 32064 for 32000 pieces, ...). A sampled
// padding id has no text: generation goes on instead of failing halfway through the output.
TEST(Hostile, EmbeddingPaddedPastTheTokenizer) {
    TempDir tmp;
    const fs::path m = copy_of(tmp, "m");
    std::vector<RawTensor> all = test::read_safetensors(m / "model.safetensors");
    std::mt19937 rng(5);
    std::normal_distribution<float> big(0.0f, 5.0f);  // large rows: tied to lm_head, greedy picks them
    for (RawTensor& t : all) {
        if (t.name != "model.embed_tokens.weight") continue;
        for (int i = 0; i < 512 * 64; ++i) {
            const float v = big(rng);
            t.bytes.append(reinterpret_cast<const char*>(&v), 4);
        }
        t.shape = {1024, 64};
    }
    test::write_safetensors(m / "model.safetensors", all);
    set_config(m, "vocab_size", 1024);
    for (const std::vector<std::string>& sampling : {std::vector<std::string>{"--temp", "0"}, {"--seed", "3"}}) {
        SCOPED_TRACE(shown(sampling));
        std::vector<std::string> args = {"generate", "-m", m.string(), "-p", "Once upon", "-n", "20", "--quiet"};
        args.insert(args.end(), sampling.begin(), sampling.end());
        const RunResult r = run_binary(args);
        EXPECT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.err, "");
        EXPECT_EQ(r.out.rfind("Once upon", 0), 0u) << r.out;
        args.push_back("--json");
        const RunResult j = run_binary(args);
        ASSERT_EQ(j.status, 0) << j.err;
        const json out = json::parse(j.out);
        int padding = 0;
        for (int id : out["tokens"]) padding += id >= 512;
        EXPECT_GT(padding, 0) << "no padding id sampled: the case is not exercised";
    }
}

// ---- prompts and flags ---------------------------------------------------------------------------------

TEST(Hostile, InvalidUtf8Prompts) {
    const std::vector<std::string> bad = {
        "\xff",              // never valid
        "abc \xc3",          // cut two-byte character
        "\xc0\xaf",          // overlong '/'
        "\xed\xa0\x80",      // UTF-16 surrogate
        "\xf4\x90\x80\x80",  // past U+10FFFF
        "ok \xe6\x97 bad",   // cut three-byte character in the middle
    };
    TempDir tmp;
    const std::string m = model_dir().string();
    for (const std::string& p : bad) {
        SCOPED_TRACE(testing::PrintToString(p));
        EXPECT_TRUE(one_error(run_binary({"generate", "-m", m, "-p", p}), {"UTF-8"}, 2));  // command line: usage
        test::write_file(tmp / "p.txt", p);
        EXPECT_TRUE(
            one_error(run_binary({"generate", "-m", m, "-f", (tmp / "p.txt").string()}), {"p.txt", "UTF-8"}, 1));
        EXPECT_TRUE(one_error(run_binary({"generate", "-m", m, "-f", "-"}, p), {"stdin", "UTF-8"}, 1));
        test::write_file(tmp / "text.txt", std::string(2000, 'a') + p);
        EXPECT_TRUE(one_error(run_binary({"perplexity", "-m", m, "-f", (tmp / "text.txt").string(), "-c", "64"}),
                              {"text.txt", "UTF-8"}, 1));
    }
}

TEST(Hostile, PromptLongerThanTheContext) {
    std::string prompt;
    for (int i = 0; i < 200; ++i) prompt += "Once upon a time. ";
    const std::string m = model_dir().string();
    EXPECT_TRUE(one_error(run_binary({"generate", "-m", m, "-p", prompt, "-c", "32"}), {"-c/--ctx-size"}, 1));
    EXPECT_TRUE(one_error(run_binary({"generate", "-m", m, "-p", prompt + prompt}), {"512"}, 1));  // the model's max
}

TEST(Hostile, OutOfRangeFlags) {
    const std::string m = model_dir().string();
    const std::string text = (test::shared_dir() / "data/tinystories_val.txt").string();
    const std::vector<std::vector<std::string>> cases = {
        {"generate", "-m", m, "-p", "x", "-c", "0"},
        {"generate", "-m", m, "-p", "x", "-c", "-1"},
        {"generate", "-m", m, "-p", "x", "-c", "513"},  // past max_position_embeddings
        {"generate", "-m", m, "-p", "x", "-c", "99999999999999999999"},
        {"generate", "-m", m, "-p", "x", "-c", "1e3"},
        {"generate", "-m", m, "-p", "x", "-t", "0"},
        {"generate", "-m", m, "-p", "x", "-t", "10000"},
        {"generate", "-m", m, "-p", "x", "-t", "-2"},
        {"generate", "-m", m, "-p", "x", "-t", "two"},
        {"generate", "-m", m, "-p", "x", "-n", "99999999999999999999"},
        {"perplexity", "-m", m, "-f", text, "-c", "0"},
        {"perplexity", "-m", m, "-f", text, "-t", "0"},
        {"perplexity", "-m", m, "-f", text, "-t", "10000"},
        {"bench", "-m", m, "-c", "0"},
        {"bench", "-m", m, "-t", "0"},
        {"bench", "-m", m, "-t", "10000"},
    };
    for (const auto& args : cases) {
        SCOPED_TRACE(shown(args));
        EXPECT_TRUE(one_error(run_binary(args), {}, 2));
    }
}

// ---- NaN and Inf in the weights --------------------------------------------------------------------------

TEST(Hostile, CheckTensorsNamesTheTensorAndTheFirstBadIndex) {
    struct Case {
        const char* folder;
        const char* tensor;
        size_t index;
        float value;
        std::string expected;  // index and coordinates as printed
        const char* kind;
    };
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::vector<Case> cases = {
        {"stories260K", "model.layers.2.mlp.up_proj.weight", 5 * 64 + 3, nan, "index 323 (row 5, column 3)", "NaN"},
        {"stories260K-bf16", "model.norm.weight", 17, inf, "index 17", "+Inf"},
        {"stories260K-f16", "model.embed_tokens.weight", 511 * 64 + 62, -inf, "index 32766 (row 511, column 62)",
         "-Inf"},
        {"stories260K-f16", "model.layers.0.self_attn.q_proj.weight", 0, nan, "index 0 (row 0, column 0)", "NaN"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(std::string(c.folder) + " " + c.tensor);
        TempDir tmp;
        const fs::path m = copy_of(tmp, "m", c.folder);
        poke(m, c.tensor, c.index, c.value);
        poke(m, c.tensor, c.index + 1, nan);  // a later bad element is not the one reported
        EXPECT_TRUE(one_error(
            generate(m, {"--check-tensors"}),
            {"model.safetensors", std::string("'") + c.tensor + "'", c.kind, c.expected, "--check-tensors"}, 1));
        EXPECT_TRUE(one_error(run_binary({"bench", "-m", m.string(), "--check-tensors", "-p", "8", "-n", "4"}),
                              {std::string("'") + c.tensor + "'", c.expected}, 1));
    }
}

TEST(Hostile, CheckTensorsAcceptsTheSharedModels) {
    for (const char* folder : {"stories260K", "stories260K-bf16", "stories260K-f16"}) {
        SCOPED_TRACE(folder);
        const RunResult r = generate(model_dir(folder), {"--check-tensors", "--quiet"});
        EXPECT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.err, "");
        EXPECT_EQ(r.out, generate(model_dir(folder), {"--quiet"}).out);
    }
}

// Without --check-tensors a NaN model loads; generating stops at the first non-finite hidden state with an error
// naming the likely cause and --check-tensors (never endless <unk> and exit 0, never a crash); so do perplexity and
// bench.
TEST(Hostile, NanModelRunsWithoutTheCheck) {
    TempDir tmp;
    const fs::path m = copy_of(tmp, "m");
    const float nan = std::numeric_limits<float>::quiet_NaN();
    poke(m, "model.layers.0.self_attn.q_proj.weight", 0, nan);
    poke(m, "model.layers.3.mlp.down_proj.weight", 100, std::numeric_limits<float>::infinity());
    for (const std::vector<std::string>& sampling : {std::vector<std::string>{"--temp", "0"},
                                                     {"--temp", "0.8", "--seed", "1"},
                                                     {"--temp", "1", "--top-k", "5", "--top-p", "0.9", "--min-p", "0.1",
                                                      "--repeat-penalty", "1.3", "--seed", "2"}}) {
        SCOPED_TRACE(shown(sampling));
        std::vector<std::string> args = {"generate", "-m", m.string(), "-p", "Once upon a time", "-n", "16", "--quiet"};
        args.insert(args.end(), sampling.begin(), sampling.end());
        const RunResult r = run_binary(args);
        EXPECT_TRUE(one_error(RunResult{r.status, "", r.err},
                              {"layer 0's attention output is not finite at position 0", "--check-tensors"}, 1));
        EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;  // the prompt, echoed before the first token
    }
    // perplexity and bench: the same one-line error (never a NaN perplexity or a speed).
    const std::string text = (test::shared_dir() / "data/tinystories_val.txt").string();
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"perplexity", "-m", m.string(), "-f", text, "-c", "64", "--chunks", "2", "--quiet"},
          {"bench", "-m", m.string(), "-p", "8", "-n", "4", "-r", "1", "--quiet"}}) {
        SCOPED_TRACE(shown(args));
        EXPECT_TRUE(one_error(run_binary(args), {"is not finite at position 0", "--check-tensors"}, 1));
    }
}

// ---- token ids -------------------------------------------------------------------------------------------

// There is no flag that takes token ids, so this one goes through the library: an id past the vocabulary in a
// later batch is rejected before any batch runs.
TEST(Hostile, TokenIdPastTheVocabulary) {
    Model model(model_dir("stories260K-bf16"));
    ContextParams p;
    p.n_batch = 2;
    Context ctx(model, p);
    const int32_t V = int32_t(model.config().vocab_size);
    for (int32_t bad : {V, V + 7, std::numeric_limits<int32_t>::max(), -1, std::numeric_limits<int32_t>::min()}) {
        SCOPED_TRACE(bad);
        const std::vector<int32_t> ids = {1, 403, 407, 300, bad};
        try {
            ctx.eval(ids);
            ADD_FAILURE() << "no error";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
        }
        EXPECT_EQ(ctx.n_past(), 0);
    }
}

// RoPE base and scaling factor near 0 made the frequencies Inf and every rotation NaN (found by fuzz_config).
TEST(Hostile, RopeBaseOrFactorBelowOne) {
    const std::vector<std::pair<std::string, json>> cases = {
        {"rope_theta", 5e-324},
        {"rope_theta", 0.5},
        {"rope_scaling", {{"type", "linear"}, {"factor", 1e-310}}},
        {"rope_scaling",
         {{"rope_type", "llama3"},
          {"factor", 0.5},
          {"low_freq_factor", 1.0},
          {"high_freq_factor", 4.0},
          {"original_max_position_embeddings", 128}}},
    };
    for (const auto& [key, value] : cases) {
        SCOPED_TRACE(key + " " + value.dump());
        TempDir tmp;
        const fs::path m = copy_of(tmp, "m");
        set_config(m, key, value);
        EXPECT_TRUE(
            one_error(generate(m), {"config.json", key == "rope_theta" ? "rope_theta" : "factor", "at least 1"}, 1));
    }
}

}  // namespace
}  // namespace plainllama
