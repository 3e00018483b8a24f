// The checkpoint loader: the three shared stories260K folders, binding by name, sharded and unaligned copies made
// here, tensors that do not match the config (corrupt files: safetensors_test.cpp), and the repacking progress.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>

#include "loader_util.h"
#include "plainllama/io/config.h"
#include "plainllama/io/safetensors.h"
#include "plainllama/model/model.h"
#include "plainllama/model/weights.h"
#include "plainllama/sys/error.h"
#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::string_literals;
using test::model_dir;
using test::RawTensor;
using test::read_safetensors;
using test::set_config;
using test::TempDir;
using test::write_safetensors;

using test::bytes_of;
using test::checkpoint_error;
using test::HasSubstr;
using test::model_error;
using test::raw_file;
using test::StartsWith;

// ---------------------------------------------------------------------------------------------------------
// The shared folders.

struct SharedModel {
    const char* folder;
    DType dtype;
};

void PrintTo(const SharedModel& m, std::ostream* os) { *os << m.folder; }

class SharedModelTest : public ::testing::TestWithParam<SharedModel> {};

TEST_P(SharedModelTest, LoadsWithTableShapesAndFileBytes) {
    const SharedModel p = GetParam();
    const fs::path dir = model_dir(p.folder);
    const Model model(dir);
    const LlamaConfig& c = model.config();
    test::expect_stories260K_config(c);

    const Checkpoint& ckpt = model.checkpoint();
    EXPECT_EQ(ckpt.tensors().size(), 47u);
    EXPECT_EQ(ckpt.find("lm_head.weight"), nullptr);

    // The same file read by the tests' own reader: names, dtypes and bytes must agree.
    const std::vector<RawTensor> file = read_safetensors(dir / "model.safetensors");
    ASSERT_EQ(file.size(), 47u);
    size_t file_bytes = 0;
    for (const RawTensor& r : file) {
        SCOPED_TRACE(r.name);
        const TensorView* t = ckpt.find(r.name);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(r.dtype, dtype_name(p.dtype));  // every tensor of these files, model.norm.weight too
        EXPECT_EQ(t->dtype, p.dtype);
        EXPECT_EQ(t->shape, r.shape);
        EXPECT_EQ(t->nbytes, r.bytes.size());
        EXPECT_EQ(bytes_of(*t), r.bytes);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % dtype_size(t->dtype), 0u);
        EXPECT_EQ(t->file, (dir / "model.safetensors").string());
        file_bytes += r.bytes.size();
    }
    EXPECT_EQ(ckpt.total_bytes(), file_bytes);
    // 259,200 parameters (the "260K").
    EXPECT_EQ(file_bytes, 260032 * dtype_size(p.dtype));

    const std::vector<TensorSpec> table = llama_tensor_table(c);
    ASSERT_EQ(table.size(), 47u);
    for (const TensorSpec& s : table) {
        SCOPED_TRACE(s.name);
        const TensorView* t = ckpt.find(s.name);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->shape, s.shape);
    }
    EXPECT_EQ(ckpt.find("model.layers.4.mlp.down_proj.weight")->shape, (std::vector<int64_t>{64, 172}));
    EXPECT_EQ(ckpt.find("model.layers.0.self_attn.k_proj.weight")->shape, (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(ckpt.find("model.embed_tokens.weight")->shape, (std::vector<int64_t>{512, 64}));

    // The bound weights point at the checkpoint's tensors; the tied LM head is the embedding.
    const ModelWeights& w = model.weights();
    ASSERT_EQ(w.layers.size(), 5u);
    EXPECT_EQ(w.embed_tokens.data, ckpt.find("model.embed_tokens.weight")->data);
    EXPECT_EQ(w.lm_head.data, w.embed_tokens.data);
    EXPECT_EQ(w.norm.data, ckpt.find("model.norm.weight")->data);
    EXPECT_EQ(w.norm.cols, 64);
    EXPECT_EQ(w.layers[3].v_proj.data, ckpt.find("model.layers.3.self_attn.v_proj.weight")->data);
    EXPECT_EQ(w.layers[3].v_proj.rows, 32);
    EXPECT_EQ(w.layers[3].v_proj.cols, 64);
    EXPECT_EQ(w.layers[4].down_proj.rows, 64);
    EXPECT_EQ(w.layers[4].down_proj.cols, 172);
    EXPECT_EQ(w.layers[2].gate_proj.dtype, p.dtype);
}

INSTANTIATE_TEST_SUITE_P(Shared, SharedModelTest,
                         ::testing::Values(SharedModel{"stories260K", DType::F32},
                                           SharedModel{"stories260K-bf16", DType::BF16},
                                           SharedModel{"stories260K-f16", DType::F16}),
                         [](const auto& info) {
                             std::string s = info.param.folder;
                             for (char& ch : s)
                                 if (ch == '-') ch = '_';
                             return s;
                         });

// ---------------------------------------------------------------------------------------------------------
// Sharded checkpoints.

std::string shard_name(int i, int n) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1, n);
    return buf;
}

// Splits stories260K's tensors over n shards in dir (config.json, the shards, model.safetensors.index.json);
// returns the index.
json make_sharded(const fs::path& dir, int n) {
    fs::create_directories(dir);
    fs::copy_file(model_dir() / "config.json", dir / "config.json");
    const std::vector<RawTensor> all = read_safetensors(model_dir() / "model.safetensors");
    json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
    size_t total = 0;
    for (int i = 0; i < n; ++i) {
        const size_t b = all.size() * size_t(i) / size_t(n), e = all.size() * size_t(i + 1) / size_t(n);
        const std::vector<RawTensor> part(all.begin() + long(b), all.begin() + long(e));
        write_safetensors(dir / shard_name(i, n), part);
        for (const RawTensor& t : part) {
            index["weight_map"][t.name] = shard_name(i, n);
            total += t.bytes.size();
        }
    }
    index["metadata"]["total_size"] = total;
    test::write_file(dir / "model.safetensors.index.json", index.dump(2));
    return index;
}

void write_index(const fs::path& dir, const json& index) {
    test::write_file(dir / "model.safetensors.index.json", index.dump(2));
}

// Binding is by name, never by position: with the file's tensors in reverse order, every field still holds the
// tensor of its own name (written out here, not taken from the table). In stories260K q/o, k/v and gate/up have
// equal shapes, so a weight bound to its neighbour would pass every shape check; the logits stay bit for bit.
TEST(Binding, EveryFieldHoldsTheTensorOfItsName) {
    TempDir tmp;
    test::copy_model(model_dir(), tmp.path());
    auto tensors = read_safetensors(model_dir() / "model.safetensors");
    std::reverse(tensors.begin(), tensors.end());
    write_safetensors(tmp / "model.safetensors", tensors);
    const Model model(tmp.path()), original(model_dir());
    const Checkpoint& ck = model.checkpoint();
    const ModelWeights& w = model.weights();
    auto data = [&](const std::string& name) { return ck.find(name)->data; };
    EXPECT_EQ(w.embed_tokens.data, data("model.embed_tokens.weight"));
    EXPECT_EQ(w.norm.data, data("model.norm.weight"));
    EXPECT_EQ(w.lm_head.data, data("model.embed_tokens.weight"));  // tied
    ASSERT_EQ(w.layers.size(), 5u);
    for (size_t l = 0; l < w.layers.size(); ++l) {
        const LayerWeights& L = w.layers[l];
        const std::string p = "model.layers." + std::to_string(l) + ".";
        EXPECT_EQ(L.input_layernorm.data, data(p + "input_layernorm.weight")) << l;
        EXPECT_EQ(L.q_proj.data, data(p + "self_attn.q_proj.weight")) << l;
        EXPECT_EQ(L.k_proj.data, data(p + "self_attn.k_proj.weight")) << l;
        EXPECT_EQ(L.v_proj.data, data(p + "self_attn.v_proj.weight")) << l;
        EXPECT_EQ(L.o_proj.data, data(p + "self_attn.o_proj.weight")) << l;
        EXPECT_EQ(L.post_attention_layernorm.data, data(p + "post_attention_layernorm.weight")) << l;
        EXPECT_EQ(L.gate_proj.data, data(p + "mlp.gate_proj.weight")) << l;
        EXPECT_EQ(L.up_proj.data, data(p + "mlp.up_proj.weight")) << l;
        EXPECT_EQ(L.down_proj.data, data(p + "mlp.down_proj.weight")) << l;
    }
    const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 36, 267, 432};
    Context a(model), b(original);
    const float* la = a.eval(ids, true);
    const float* lb = b.eval(ids, true);
    const size_t n = ids.size() * size_t(model.config().vocab_size);
    EXPECT_EQ(std::vector<float>(la, la + n), std::vector<float>(lb, lb + n));
}

TEST(Sharded, LoadsByteIdentical) {
    for (int n : {2, 3}) {
        SCOPED_TRACE(n);
        TempDir tmp;
        const json index = make_sharded(tmp.path(), n);
        const Checkpoint single(model_dir());
        const Checkpoint sharded(tmp.path());
        ASSERT_EQ(sharded.tensors().size(), 47u);
        for (const auto& [name, t] : single.tensors()) {
            SCOPED_TRACE(name);
            const TensorView* s = sharded.find(name);
            ASSERT_NE(s, nullptr);
            EXPECT_EQ(s->dtype, t.dtype);
            EXPECT_EQ(s->shape, t.shape);
            EXPECT_EQ(bytes_of(*s), bytes_of(t));
            EXPECT_EQ(s->file, (tmp / index["weight_map"][name].get<std::string>()).string());
        }
        EXPECT_EQ(sharded.total_bytes(), single.total_bytes());
        // The whole model binds from the shards too.
        const Model model(tmp.path());
        EXPECT_EQ(model.weights().layers.size(), 5u);
    }
}

TEST(Sharded, IndexPointsToMissingShard) {
    TempDir tmp;
    make_sharded(tmp.path(), 3);
    fs::remove(tmp / shard_name(1, 3));
    const std::string msg = checkpoint_error(tmp.path());
    EXPECT_TRUE(HasSubstr(msg, "model.safetensors.index.json"));
    EXPECT_TRUE(HasSubstr(msg, shard_name(1, 3)));
    EXPECT_TRUE(HasSubstr(msg, "does not exist"));
}

TEST(Sharded, WeightMapNamesTensorAbsentFromShard) {
    TempDir tmp;
    json index = make_sharded(tmp.path(), 2);
    index["weight_map"]["model.layers.7.mlp.up_proj.weight"] = shard_name(0, 2);
    write_index(tmp.path(), index);
    const std::string msg = checkpoint_error(tmp.path());
    EXPECT_TRUE(HasSubstr(msg, "model.safetensors.index.json"));
    EXPECT_TRUE(HasSubstr(msg, "'model.layers.7.mlp.up_proj.weight'"));
    EXPECT_TRUE(HasSubstr(msg, shard_name(0, 2)));
}

TEST(Sharded, WeightMapPointsToWrongShard) {
    TempDir tmp;
    json index = make_sharded(tmp.path(), 2);
    const std::string name = "model.embed_tokens.weight";  // in shard 1
    ASSERT_EQ(index["weight_map"][name], shard_name(0, 2));
    index["weight_map"][name] = shard_name(1, 2);
    write_index(tmp.path(), index);
    const std::string msg = checkpoint_error(tmp.path());
    EXPECT_TRUE(HasSubstr(msg, "'" + name + "'"));
    EXPECT_TRUE(HasSubstr(msg, shard_name(0, 2)));
    EXPECT_TRUE(HasSubstr(msg, shard_name(1, 2)));
}

TEST(Sharded, TensorInTwoShards) {
    TempDir tmp;
    make_sharded(tmp.path(), 3);
    // A copy of a shard-1 tensor appended to shard 3.
    std::vector<RawTensor> first = read_safetensors(tmp / shard_name(0, 3));
    std::vector<RawTensor> last = read_safetensors(tmp / shard_name(2, 3));
    last.push_back(first.at(1));
    write_safetensors(tmp / shard_name(2, 3), last);
    const std::string msg = checkpoint_error(tmp.path());
    EXPECT_TRUE(HasSubstr(msg, "'" + first.at(1).name + "'"));
    EXPECT_TRUE(HasSubstr(msg, shard_name(2, 3)));
    EXPECT_TRUE(HasSubstr(msg, shard_name(0, 3)));
}

TEST(Sharded, ShardTensorNotInWeightMap) {
    TempDir tmp;
    json index = make_sharded(tmp.path(), 2);
    const std::string shard = index["weight_map"]["model.norm.weight"];
    index["weight_map"].erase("model.norm.weight");
    write_index(tmp.path(), index);
    const std::string msg = checkpoint_error(tmp.path());
    EXPECT_TRUE(StartsWith(msg, (tmp / shard).string()));
    EXPECT_TRUE(HasSubstr(msg, "'model.norm.weight'"));
    EXPECT_TRUE(HasSubstr(msg, "weight_map"));
}

TEST(Sharded, ShardNameOutsideFolder) {
    for (const std::string& bad :
         std::vector<std::string>{"../model.safetensors", "sub/x.safetensors", "/etc/passwd", "..", "", "a\0b"s}) {
        SCOPED_TRACE(bad);
        TempDir tmp;
        json index = make_sharded(tmp.path(), 2);
        index["weight_map"]["model.norm.weight"] = bad;
        write_index(tmp.path(), index);
        const std::string msg = checkpoint_error(tmp.path());
        EXPECT_TRUE(StartsWith(msg, (tmp / "model.safetensors.index.json").string()));
        EXPECT_TRUE(HasSubstr(msg, "'model.norm.weight'"));
        EXPECT_TRUE(HasSubstr(msg, "plain file name"));
    }
}

TEST(Sharded, BadIndexFile) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"{\"weight_map\": {", "invalid JSON"},
        {"", "invalid JSON"},
        {"[1, 2]", "object"},
        {"{\"metadata\": {}}", "'weight_map'"},
        {"{\"weight_map\": {}}", "'weight_map'"},
        {"{\"weight_map\": [\"model.safetensors\"]}", "'weight_map'"},
        {"{\"weight_map\": {\"model.norm.weight\": 42}}", "weight_map['model.norm.weight']"},
    };
    for (const auto& [text, expected] : cases) {
        SCOPED_TRACE(text);
        TempDir tmp;
        make_sharded(tmp.path(), 2);
        test::write_file(tmp / "model.safetensors.index.json", text);
        const std::string msg = checkpoint_error(tmp.path());
        EXPECT_TRUE(StartsWith(msg, (tmp / "model.safetensors.index.json").string()));
        EXPECT_TRUE(HasSubstr(msg, expected));
    }
}

// ---------------------------------------------------------------------------------------------------------
// Unaligned tensor offsets: served from an aligned copy, same bytes.

TEST(Unaligned, PaddedFilesLoadIdentical) {
    for (const char* folder : {"stories260K", "stories260K-bf16"}) {
        const std::vector<RawTensor> all = read_safetensors(model_dir(folder) / "model.safetensors");
        for (size_t pad : {1, 2, 3}) {
            SCOPED_TRACE(std::string(folder) + " pad " + std::to_string(pad));
            TempDir tmp;
            test::copy_model(model_dir(folder), tmp.path());
            write_safetensors(tmp / "model.safetensors", all, pad);
            const Model model(tmp.path());
            const Checkpoint& ckpt = model.checkpoint();
            ASSERT_EQ(ckpt.tensors().size(), all.size());
            for (const RawTensor& r : all) {
                SCOPED_TRACE(r.name);
                const TensorView* t = ckpt.find(r.name);
                ASSERT_NE(t, nullptr);
                EXPECT_EQ(t->shape, r.shape);
                EXPECT_EQ(bytes_of(*t), r.bytes);
                EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % dtype_size(t->dtype), 0u);
            }
        }
    }
}

// parse_safetensors on a buffer: aligned tensors point into it (no copy), unaligned ones are copied.
TEST(Unaligned, CopiesOnlyMisalignedTensors) {
    const std::vector<RawTensor> all = read_safetensors(model_dir() / "model.safetensors");
    for (size_t pad : {0, 1, 2}) {
        SCOPED_TRACE(pad);
        TempDir tmp;
        write_safetensors(tmp / "m.safetensors", all, pad);
        const std::string f = test::read_file(tmp / "m.safetensors");
        std::vector<uint64_t> buf((f.size() + 7) / 8);  // 8-byte aligned, like a mapping
        std::memcpy(buf.data(), f.data(), f.size());
        const auto* base = reinterpret_cast<const uint8_t*>(buf.data());
        uint64_t header_len = 0;
        for (int i = 7; i >= 0; --i) header_len = header_len << 8 | base[i];
        const json header = json::parse(f.substr(8, header_len));

        const SafetensorsContents c = parse_safetensors(base, f.size(), "m.safetensors");
        ASSERT_EQ(c.tensors.size(), all.size());
        size_t misaligned = 0;
        for (const TensorView& t : c.tensors) {
            SCOPED_TRACE(t.name);
            const uint64_t offset = 8 + header_len + header[t.name]["data_offsets"][0].get<uint64_t>();
            const bool aligned = offset % dtype_size(t.dtype) == 0;
            const auto* p = static_cast<const uint8_t*>(t.data);
            const bool in_buffer = p >= base && p < base + f.size();
            EXPECT_EQ(in_buffer, aligned);
            if (aligned) {
                EXPECT_EQ(p, base + offset);
            }
            EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % dtype_size(t.dtype), 0u);
            EXPECT_EQ(std::memcmp(p, base + offset, t.nbytes), 0);
            misaligned += !aligned;
        }
        EXPECT_EQ(c.copies.size(), misaligned);
        if (pad > 0) {
            EXPECT_GT(misaligned, 0u);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// A valid file whose tensors do not match the config.

// A copy of stories260K in dir whose tensors were passed through edit.
template <class F>
void edited_copy(const fs::path& dir, F&& edit) {
    test::copy_model(model_dir(), dir);
    std::vector<RawTensor> all = read_safetensors(model_dir() / "model.safetensors");
    edit(all);
    write_safetensors(dir / "model.safetensors", all);
}

RawTensor* find_raw(std::vector<RawTensor>& v, const std::string& name) {
    for (RawTensor& t : v)
        if (t.name == name) return &t;
    ADD_FAILURE() << "no tensor " << name;
    return &v.front();
}

TEST(Bind, MissingTensor) {
    TempDir tmp;
    const std::string name = "model.layers.3.mlp.up_proj.weight";
    edited_copy(tmp.path(), [&](std::vector<RawTensor>& v) { v.erase(v.begin() + (find_raw(v, name) - v.data())); });
    const std::string msg = model_error(tmp.path());
    EXPECT_TRUE(StartsWith(msg, tmp.path().string()));
    EXPECT_TRUE(HasSubstr(msg, "'" + name + "' is missing"));
    EXPECT_TRUE(HasSubstr(msg, "[172, 64]"));
}

TEST(Bind, WrongShapeInFile) {
    TempDir tmp;
    const std::string name = "model.layers.2.self_attn.q_proj.weight";
    edited_copy(tmp.path(), [&](std::vector<RawTensor>& v) { find_raw(v, name)->shape = {32, 128}; });
    const std::string msg = model_error(tmp.path());
    EXPECT_TRUE(StartsWith(msg, (tmp / "model.safetensors").string()));
    EXPECT_TRUE(HasSubstr(msg, "'" + name + "'"));
    EXPECT_TRUE(HasSubstr(msg, "expected [64, 64], got [32, 128]"));
}

TEST(Bind, WrongShapeVsConfig) {
    TempDir tmp;
    test::copy_model(model_dir(), tmp.path());
    set_config(tmp.path(), "intermediate_size", 160);
    const std::string msg = model_error(tmp.path());
    EXPECT_TRUE(StartsWith(msg, (tmp / "model.safetensors").string()));
    EXPECT_TRUE(HasSubstr(msg, "'model.layers.0.mlp.gate_proj.weight'"));
    EXPECT_TRUE(HasSubstr(msg, "expected [160, 64], got [172, 64]"));

    set_config(tmp.path(), "intermediate_size", 172);
    set_config(tmp.path(), "num_hidden_layers", 6);
    EXPECT_TRUE(HasSubstr(model_error(tmp.path()), "'model.layers.5.input_layernorm.weight' is missing"));
    set_config(tmp.path(), "num_hidden_layers", 4);  // layer 4's tensors are left over
    EXPECT_TRUE(HasSubstr(model_error(tmp.path()), "unexpected tensor 'model.layers.4."));
}

TEST(Bind, UnexpectedExtraTensor) {
    for (const std::string& extra : std::vector<std::string>{"model.layers.0.self_attn.q_proj.bias",
                                                             "model.layers.5.input_layernorm.weight", "extra"}) {
        SCOPED_TRACE(extra);
        TempDir tmp;
        edited_copy(tmp.path(), [&](std::vector<RawTensor>& v) {
            v.push_back({extra, "F32", {64}, std::string(256, '\0')});
        });
        const std::string msg = model_error(tmp.path());
        EXPECT_TRUE(StartsWith(msg, (tmp / "model.safetensors").string()));
        EXPECT_TRUE(HasSubstr(msg, "unexpected tensor '" + extra + "'"));
    }
}

TEST(Bind, ControlBytesInUnexpectedName) {
    TempDir tmp;
    edited_copy(tmp.path(), [](std::vector<RawTensor>& v) { v.push_back({"bad\nname", "F32", {1}, "abcd"}); });
    const std::string msg = model_error(tmp.path());
    EXPECT_TRUE(HasSubstr(msg, "unexpected tensor 'bad\\x0aname'"));
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(Bind, RotaryInvFreqIgnored) {
    TempDir tmp;
    edited_copy(tmp.path(), [](std::vector<RawTensor>& v) {
        v.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {4}, std::string(16, '\0')});
    });
    const Model model(tmp.path());
    EXPECT_EQ(model.checkpoint().tensors().size(), 48u);
}

TEST(Bind, UntiedNeedsLmHead) {
    TempDir tmp;
    test::copy_model(model_dir(), tmp.path());
    set_config(tmp.path(), "tie_word_embeddings", false);
    const std::string msg = model_error(tmp.path());
    EXPECT_TRUE(HasSubstr(msg, "'lm_head.weight' is missing"));
    EXPECT_TRUE(HasSubstr(msg, "[512, 64]"));
}

TEST(Bind, UntiedBindsOwnLmHead) {
    TempDir tmp;
    edited_copy(tmp.path(), [](std::vector<RawTensor>& v) {
        RawTensor head = *find_raw(v, "model.embed_tokens.weight");
        head.name = "lm_head.weight";
        for (char& ch : head.bytes) ch = char(ch ^ 0x5a);
        v.push_back(head);
    });
    set_config(tmp.path(), "tie_word_embeddings", false);
    const Model model(tmp.path());
    const TensorView* head = model.checkpoint().find("lm_head.weight");
    ASSERT_NE(head, nullptr);
    EXPECT_EQ(model.weights().lm_head.data, head->data);
    EXPECT_NE(model.weights().lm_head.data, model.weights().embed_tokens.data);
    EXPECT_EQ(model.weights().lm_head.rows, 512);
    EXPECT_EQ(llama_tensor_table(model.config()).size(), 48u);
}

// Loading reports the repacked bytes: rising, ending at every matrix's bytes (7 per layer + lm_head).
TEST(ModelLoad, ReportsRepackingProgress) {
    std::vector<std::pair<size_t, size_t>> calls;
    Model model(model_dir(), [&](size_t done, size_t total) { calls.emplace_back(done, total); });
    const LlamaConfig& c = model.config();
    const size_t layer =
        size_t(c.hidden_size) * size_t(2 * c.num_attention_heads * c.head_dim + 2 * c.num_key_value_heads * c.head_dim +
                                       3 * c.intermediate_size);
    const size_t want = (size_t(c.num_hidden_layers) * layer + size_t(c.vocab_size * c.hidden_size)) * 4;  // F32
    ASSERT_EQ(calls.size(), size_t(c.num_hidden_layers) * 7 + 1);
    for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(calls[i].second, want);
        if (i > 0) {
            EXPECT_GT(calls[i].first, calls[i - 1].first);
        }
    }
    EXPECT_EQ(calls.back().first, want);
}

}  // namespace
}  // namespace plainllama
