// GGUF models against references we did not write: llama.cpp's own files of the shared models give the folder's
// logits and greedy sequences, and llama.cpp's perplexities (ppl.txt); the GGUF `quantize` writes holds the bytes
// llama.cpp's converter wrote and loads back to the folder's logits. Hyperparameters that disagree with the
// tensors, other architectures and unsupported types are errors naming the file and the key or tensor.
#include "plainllama/model/gguf_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "gguf_builder.h"
#include "loader_util.h"
#include "plainllama/kernels/quant.h"
#include "plainllama/model/save_gguf.h"
#include "plainllama/tokenizer/gguf_tokenizer.h"
#include "plainllama/tokenizer/sentencepiece_tokenizer.h"
#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::GgufBuilder;
using test::HasSubstr;

std::vector<float> logits_of(const Model& m, const std::vector<int32_t>& ids) {
    Context ctx(m);
    const float* l = ctx.eval(ids, /*all_logits=*/true);
    return std::vector<float>(l, l + ids.size() * size_t(m.config().vocab_size));
}

const std::vector<int32_t> kIds = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 13, 66, 100};

// stories260K-F32.gguf with `edit` applied, written to tmp/name.
template <class F>
fs::path edited(const test::TempDir& tmp, F&& edit, const std::string& name = "e.gguf") {
    GgufBuilder b = GgufBuilder::from(GgufFile(test::shared_gguf("stories260K-F32.gguf")));
    edit(b);
    test::write_file(tmp / name, b.bytes());
    return tmp / name;
}
// test::model_error, checked to be one line.
std::string one_line_error(const fs::path& p) {
    const std::string e = test::model_error(p);
    EXPECT_EQ(e.find('\n'), std::string::npos);
    return e;
}

class GgufModel_ : public test::EveryKernel {};

TEST_P(GgufModel_, StoriesGgufGivesTheFoldersLogitsAndGreedySequences) {
    const Model folder(test::model_dir()), file(test::shared_gguf("stories260K-F32.gguf"));
    const LlamaConfig &a = folder.config(), &c = file.config();
    EXPECT_EQ(c.hidden_size, a.hidden_size);
    EXPECT_EQ(c.intermediate_size, a.intermediate_size);
    EXPECT_EQ(c.num_hidden_layers, a.num_hidden_layers);
    EXPECT_EQ(c.num_attention_heads, a.num_attention_heads);
    EXPECT_EQ(c.num_key_value_heads, a.num_key_value_heads);
    EXPECT_EQ(c.max_position_embeddings, a.max_position_embeddings);
    EXPECT_EQ(c.vocab_size, a.vocab_size);
    EXPECT_EQ(c.tie_word_embeddings, a.tie_word_embeddings);
    EXPECT_EQ(c.rope_theta, a.rope_theta);
    EXPECT_EQ(c.bos_token_id, a.bos_token_id);
    EXPECT_EQ(c.eos_token_id, a.eos_token_id);
    EXPECT_EQ(c.rms_norm_eps, double(1e-5f));  // the f32 the file stores, widened exactly (the kernels' float)
    EXPECT_EQ(logits_of(folder, kIds), logits_of(file, kIds));  // bit for bit: the same weights, the same kernels
    const auto ref = test::read_json(test::shared_dir() / "reference/stories260K/greedy.json");
    Context ctx(file);
    for (const auto& c : ref["cases"]) {
        const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>(),
                   want = c["sequence"].get<std::vector<int32_t>>();
        ctx.reset();
        std::vector<int32_t> seq = prompt;
        const float* l = ctx.eval(prompt);
        while (seq.size() < want.size()) {
            seq.push_back(int32_t(std::max_element(l, l + 512) - l));
            if (seq.size() < want.size()) l = ctx.eval(&seq.back(), 1);
        }
        EXPECT_EQ(seq, want) << c["prompt"];
    }
}

TEST_P(GgufModel_, QuantizedEmbeddingIsGatheredAsItsDequantizedRows) {
    // llama-quantize quantizes token_embd too: the model reads a token's row of blocks as dequantize_row gives it, so
    // the file with that tensor replaced by its rows dequantized to F32 gives the same logits, bit for bit.
    for (const char* name : {"tinystories3M-Q8_0.gguf", "tinystories3M-Q4_K_M.gguf", "tinystories3M-Q4_0.gguf",
                             "tinystories3M-Q5_K_M.gguf"}) {
        SCOPED_TRACE(name);
        const Model file(test::shared_gguf(name));
        ASSERT_NE(file.weights().embed_tokens.quant, QuantType::none);
        GgufBuilder b = GgufBuilder::from(GgufFile(test::shared_gguf(name)));
        GgufBuilder::Tensor& e = *b.tensor("token_embd.weight");
        const QuantType q = file.weights().embed_tokens.quant;
        const int64_t H = int64_t(e.ne[0]), V = int64_t(e.ne[1]);
        std::string f32(size_t(H * V) * 4, '\0');
        for (int64_t r = 0; r < V; ++r)
            dequantize_row(q, e.data.data() + size_t(r) * quant_row_bytes(q, H),
                           reinterpret_cast<float*>(&f32[size_t(r * H) * 4]), H);
        e.data = f32;
        e.type = kGgmlF32;
        test::TempDir tmp;
        test::write_file(tmp / "f32-embd.gguf", b.bytes());
        EXPECT_EQ(logits_of(file, kIds), logits_of(Model(tmp / "f32-embd.gguf"), kIds));
    }
}

PL_FOR_EVERY_KERNEL(GgufModel_);

// llama-quantize's blocks are our quantizers' (quant.h): every Q8_0 block of llama.cpp's Q8_0 file, and every Q4_0
// block of its Q4_0 file, equals quantize_row of the folder's row (attn_q / attn_k rows taken in llama.cpp's order),
// the embedding's too.
TEST(GgufBlocks, LlamaQuantizesQ8_0AndQ4_0AsWeDo) {
    const Checkpoint folder(test::model_dir("tinystories3M"));
    const LlamaConfig c = load_config(test::model_dir("tinystories3M") / "config.json");
    for (const auto& [name, q] : {std::pair{"Q8_0", QuantType::q8_0}, std::pair{"Q4_0", QuantType::q4_0}}) {
        const GgufFile file(test::shared_gguf(std::string("tinystories3M-") + name + ".gguf"));
        size_t blocks = 0;
        for (const TensorSpec& s : llama_tensor_table(c)) {
            if (s.shape.size() != 2) continue;
            const GgufTensor* t = file.tensor(s.gguf_name);
            ASSERT_TRUE(t) << s.gguf_name;
            if (t->type->id != ggml_type_of(q)) continue;
            const TensorView& src = *folder.find(s.name);
            const int64_t rows = s.shape[0], cols = s.shape[1];
            const int64_t heads = s.layer_field == &LayerWeights::q_proj   ? c.num_attention_heads
                                  : s.layer_field == &LayerWeights::k_proj ? c.num_key_value_heads
                                                                           : 0;
            const size_t row = quant_row_bytes(q, cols);
            std::vector<uint8_t> got(row);
            for (int64_t g = 0; g < rows; ++g) {
                const int64_t r = heads ? hf_rope_row(g, rows / heads) : g;
                quantize_row(q, static_cast<const float*>(src.data) + r * cols, got.data(), cols);
                ASSERT_EQ(std::memcmp(got.data(), t->data + size_t(g) * row, row), 0)
                    << name << " " << s.gguf_name << " row " << g;
                blocks += row / quant_block_bytes(q);
            }
        }
        EXPECT_GT(blocks, 50000u) << name;
    }
}

// llama.cpp's perplexities of its own files (../shared/reference/gguf/ppl.txt), within 0.05%.
TEST(GgufAccuracy, PerplexityEqualsLlamaCppsOnItsOwnFiles) {
#ifdef PLAINLLAMA_ASAN
    GTEST_SKIP() << "sanitizer build: numbers, checked by the normal build (the instrumented binary takes over a "
                    "minute for them)";
#endif
    std::ifstream in(test::shared_dir() / "reference/gguf/ppl.txt");
    std::map<std::string, double> ref;  // "file ppl [note]" lines
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::string file;
        double ppl = 0;
        if (line[0] != '#' && words >> file >> ppl) ref[file] = ppl;
    }
    for (const char* name : {"F32", "F16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"}) {
        const std::string file = std::string("tinystories3M-") + name + ".gguf";
        ASSERT_TRUE(ref.count(file)) << file;
        const test::RunResult r = test::run_binary({"perplexity", "-m", test::shared_gguf(file).string(), "-f",
                                                    (test::shared_dir() / "data/tinystories_val.txt").string(), "-c",
                                                    "256", "--chunks", "40", "--json", "-t", "1", "--quiet"});
        ASSERT_EQ(r.status, 0) << r.err;
        const double ppl = nlohmann::json::parse(r.out)["ppl"].get<double>();
        EXPECT_NEAR(ppl / ref[file], 1.0, 5e-4) << file << ": " << ppl << " against llama.cpp's " << ref[file];
    }
}

TEST(GgufModelErrors, OtherTypesAreRefusedNamingTensorTypeAndTheSupportedList) {
    test::TempDir tmp;
    GgufBuilder b = GgufBuilder::from(GgufFile(test::shared_gguf("tinystories3M-Q4_K_M.gguf")));
    GgufBuilder::Tensor& t = *b.tensor("token_embd.weight");
    t.type = kGgmlQ2_K;  // 256 weights in 84 bytes
    t.data.assign(size_t(t.ne[0] / 256 * t.ne[1] * 84), '\0');
    test::write_file(tmp / "q2_k.gguf", b.bytes());
    EXPECT_TRUE(HasSubstr(one_line_error(tmp / "q2_k.gguf"),
                          "q2_k.gguf: tensor 'token_embd.weight' is Q2_K, which is not supported "
                          "(supported: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K)"));
    EXPECT_TRUE(HasSubstr(
        error_of([] { Model m(test::shared_gguf("tinystories3M-Q4_K_M.gguf"), {}, QuantScheme::q8_0); }),
        "--quant q8_0: " + test::shared_gguf("tinystories3M-Q4_K_M.gguf").string() + " is already quantized (Q4_K_M)"));
    const Model f16(test::shared_gguf("tinystories3M-F16.gguf"), {},
                    QuantScheme::q8_0);  // a float GGUF quantizes as a folder
    EXPECT_EQ(f16.weights().layers[0].q_proj.packed.quant, QuantType::q8_0);
}

TEST(GgufModelErrors, MetadataAndTensorsMustAgree) {
    test::TempDir tmp;
    auto err = [&](auto edit) { return one_line_error(edited(tmp, edit)); };
    EXPECT_TRUE(
        HasSubstr(err([](GgufBuilder& b) { b.find("general.architecture")->value = GgufBuilder::str("qwen2"); }),
                  "e.gguf: 'general.architecture' is \"qwen2\"; only \"llama\" is supported"));
    EXPECT_TRUE(HasSubstr(err([](GgufBuilder& b) { b.remove("llama.block_count"); }),
                          "e.gguf: 'llama.block_count' is missing (expected an integer in [1, 4096])"));
    EXPECT_TRUE(HasSubstr(err([](GgufBuilder& b) { b.remove("llama.attention.layer_norm_rms_epsilon"); }),
                          "'llama.attention.layer_norm_rms_epsilon' is missing"));
    EXPECT_TRUE(
        HasSubstr(err([](GgufBuilder& b) { b.find("llama.feed_forward_length")->value = GgufBuilder::raw(100u); }),
                  "tensor 'blk.0.ffn_gate.weight' has shape [64, 172]; the llama.* metadata implies [64, 100]"));
    EXPECT_TRUE(HasSubstr(err([](GgufBuilder& b) { b.find("llama.block_count")->value = GgufBuilder::raw(6u); }),
                          "tensor 'blk.5.attn_norm.weight' is missing (expected [64])"));
    EXPECT_TRUE(HasSubstr(err([](GgufBuilder& b) { b.find("llama.block_count")->value = GgufBuilder::raw(4u); }),
                          "unexpected tensor 'blk.4.attn_norm.weight'"));
    EXPECT_TRUE(
        HasSubstr(err([](GgufBuilder& b) { b.find("llama.attention.head_count_kv")->value = GgufBuilder::raw(3u); }),
                  "'llama.attention.head_count_kv' (3) must divide 'llama.attention.head_count' (8)"));
    EXPECT_TRUE(
        HasSubstr(err([](GgufBuilder& b) { b.find("llama.rope.dimension_count")->value = GgufBuilder::raw(4u); }),
                  "partial RoPE is not supported"));
    EXPECT_TRUE(HasSubstr(
        err([](GgufBuilder& b) { b.find("llama.attention.layer_norm_rms_epsilon")->value = GgufBuilder::raw(2.0f); }),
        "'llama.attention.layer_norm_rms_epsilon' must be in (0, 1), found f32 2"));
    EXPECT_TRUE(HasSubstr(err([](GgufBuilder& b) { b.u32("llama.expert_count", 8); }),
                          "'llama.expert_count' is 8: mixture-of-experts models (Mixtral) are not supported"));
    EXPECT_TRUE(HasSubstr(err([](GgufBuilder& b) { b.string("llama.rope.scaling.type", "yarn"); }),
                          "'llama.rope.scaling.type' is \"yarn\"; supported: none, linear"));
    EXPECT_TRUE(HasSubstr(err([](GgufBuilder& b) { b.tensor("blk.1.ffn_up.weight")->type = kGgmlQ4_K; }),
                          "rows of 64 elements are not a multiple of Q4_K's block of 256"));
    EXPECT_TRUE(HasSubstr(err([](GgufBuilder& b) { b.tensor("blk.1.ffn_up.weight")->name = "blk.1.ffn_upp.weight"; }),
                          "tensor 'blk.1.ffn_up.weight' is missing (expected [64, 172])"));
    EXPECT_TRUE(
        HasSubstr(err([](GgufBuilder& b) { b.find("tokenizer.ggml.bos_token_id")->value = GgufBuilder::raw(512u); }),
                  "'tokenizer.ggml.bos_token_id' must be in [0, 511], found u32 512"));
}

TEST(GgufModelRope, FreqFactorsDivideTheFrequencies) {
    // rope_freqs.weight of 2s is linear scaling by 2; of 1s, none.
    test::TempDir tmp;
    auto with_factors = [&](float f) {
        return edited(
            tmp,
            [f](GgufBuilder& b) {
                std::string d;
                for (int i = 0; i < 4; ++i) d += GgufBuilder::raw(f);
                b.add_tensor("rope_freqs.weight", {4}, kGgmlF32, d);
            },
            "f" + std::to_string(int(f)) + ".gguf");
    };
    const fs::path linear = edited(
        tmp,
        [](GgufBuilder& b) {
            b.string("llama.rope.scaling.type", "linear");
            b.f32("llama.rope.scaling.factor", 2.0f);
        },
        "linear.gguf");
    const Model one(with_factors(1)), two(with_factors(2)), lin(linear),
        plain(test::shared_gguf("stories260K-F32.gguf"));
    EXPECT_EQ(two.config().rope_scaling.freq_factors, std::vector<double>(4, 2.0));
    EXPECT_EQ(logits_of(one, kIds), logits_of(plain, kIds));
    EXPECT_EQ(logits_of(two, kIds), logits_of(lin, kIds));
    EXPECT_NE(logits_of(two, kIds), logits_of(plain, kIds));
    EXPECT_TRUE(HasSubstr(
        one_line_error(edited(
            tmp, [](GgufBuilder& b) { b.add_tensor("rope_freqs.weight", {8}, kGgmlF32, std::string(32, '\0')); })),
        "tensor 'rope_freqs.weight' must be F32 [4], found F32 [8]"));
}

TEST(GgufModelLoad, AFolderHoldingOneGgufLoadsIt) {
    test::TempDir tmp;
    fs::create_symlink(test::shared_gguf("stories260K-F32.gguf"), tmp / "model.gguf");
    const Model m(tmp.path());
    EXPECT_EQ(logits_of(m, kIds), logits_of(Model(test::shared_gguf("stories260K-F32.gguf")), kIds));
}

// Resident bytes of this process's mappings of `file` (/proc/self/smaps), 0 when it maps none.
size_t mapped_resident_bytes(const fs::path& file) {
    std::ifstream smaps("/proc/self/smaps");
    const std::string name = fs::canonical(file).string();
    size_t kib = 0;
    bool in = false;
    for (std::string line; std::getline(smaps, line);) {
        if (line.find('-') != std::string::npos && line.find(' ') < line.size() && std::isxdigit(line[0]) &&
            line.find(':') > line.find(' '))
            in = line.size() >= name.size() && line.compare(line.size() - name.size(), name.size(), name) == 0;
        else if (in && line.rfind("Rss:", 0) == 0)
            kib += std::stoul(line.substr(4));
    }
    return kib * 1024;
}

// Repacking a tensor drops its pages of the mapped file, and the page two repacked tensors share once both are: once
// loaded, the model holds its matrices once, in its own layout; of the file only the header and what is used in place
// (the token embedding's rows, the norms) may stay resident.
TEST(GgufModelLoad, MappedPagesAreDroppedAfterRepacking) {
    for (const char* name : {"tinystories3M-Q4_K_M.gguf", "tinystories3M-F32.gguf"}) {
        const fs::path path = test::shared_gguf(name);
        const Model m(path);
        const size_t resident = mapped_resident_bytes(path), file = fs::file_size(path);
        EXPECT_LE(resident, file / 10) << name << ": " << resident << " of " << file << " bytes still resident";
        Context ctx(m);  // and it still runs
        EXPECT_TRUE(std::isfinite(ctx.eval(kIds, false)[0]));
    }
}

TEST(GgufModelLoad, QkPermutationIsItsOwnInverse) {
    for (int64_t hd : {2, 8, 64, 128})
        for (int64_t r = 0; r < 3 * hd; ++r) {
            EXPECT_EQ(hf_rope_row(gguf_rope_row(r, hd), hd), r);
            EXPECT_EQ(gguf_rope_row(r, hd) / hd, r / hd);  // within its head
        }
    EXPECT_EQ(gguf_rope_row(1, 8), 2);  // x_1 after the pair (x_0, y_0)
    EXPECT_EQ(gguf_rope_row(4, 8), 1);  // y_0 beside x_0
}

// ---- writing ------------------------------------------------------------------------------------------------

GgufVocab vocab_of(const fs::path& dir) {
    const SentencePieceTokenizer tok(dir / "tokenizer.model");
    return gguf_vocab_of(tok, dir.string());
}

TEST(GgufWrite, StoriesAsLlamaCppsConverterWroteIt) {
    // stories260K-F32.gguf is llama.cpp's convert_hf_to_gguf.py on the folder: the same tensors, byte for byte (q and
    // k rows permuted as it permutes them), and the same hyperparameters and vocabulary.
    test::TempDir tmp;
    const Model m(test::model_dir());
    save_gguf(m, vocab_of(test::model_dir()), "stories260K", tmp / "out.gguf");
    const GgufFile ours(tmp / "out.gguf"), theirs(test::shared_gguf("stories260K-F32.gguf"));
    ASSERT_EQ(ours.tensors().size(), theirs.tensors().size());
    for (const GgufTensor& t : theirs.tensors()) {
        const GgufTensor* o = ours.tensor(t.name);
        ASSERT_TRUE(o) << t.name;
        EXPECT_EQ(o->ne, t.ne) << t.name;
        EXPECT_EQ(o->type, t.type) << t.name;
        EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(o->data), o->nbytes),
                  std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes))
            << t.name;
    }
    for (const auto& [key, v] : theirs.metadata()) {
        const GgufValue* o = ours.find(key);
        ASSERT_TRUE(o) << key;
        EXPECT_EQ(o->brief(), v.brief()) << key;
        if (v.elem == GgufType::string) {
            EXPECT_EQ(o->strings, v.strings) << key;
        } else if (v.count) {
            const size_t n = size_t(v.count) * (v.elem == GgufType::boolean ? 1 : 4);
            EXPECT_EQ(std::memcmp(o->data, v.data, n), 0) << key;
        }
    }
}

class GgufRoundTrip : public ::testing::TestWithParam<QuantScheme> {};

TEST_P(GgufRoundTrip, WrittenFileLoadsToTheFoldersLogits) {
    test::TempDir tmp;
    const fs::path dir = test::model_dir("tinystories3M");
    const Model folder(dir, {}, GetParam());
    save_gguf(folder, vocab_of(dir), "tinystories3M", tmp / "t.gguf");
    const Model file(tmp / "t.gguf");
    EXPECT_EQ(file.quant(), GetParam());
    EXPECT_EQ(logits_of(file, kIds), logits_of(folder, kIds));
    const GgufFile g(tmp / "t.gguf");
    EXPECT_EQ(g.integer("general.file_type", 0, 99), file_type_of(GetParam(), DType::F32));
    EXPECT_EQ(g.find("general.quantization_version") != nullptr, GetParam() != QuantScheme::none);
    EXPECT_FALSE(g.tensor("output.weight") == nullptr);  // untied
    // Writing over the model's own file is refused.
    EXPECT_TRUE(
        HasSubstr(error_of([&] { save_gguf(file, vocab_of(dir), "x", tmp / "t.gguf"); }), "is the model's own file"));
}

INSTANTIATE_TEST_SUITE_P(Schemes, GgufRoundTrip,
                         ::testing::Values(QuantScheme::none, QuantScheme::q8_0, QuantScheme::q6_k, QuantScheme::q4_k_m,
                                           QuantScheme::q5_k_m, QuantScheme::q4_0),
                         [](const auto& i) { return std::string(scheme_name(i.param)); });

TEST(GgufWrite, SixteenBitFoldersKeepTheirTypeAndTheirLogits) {
    for (const char* name : {"stories260K-f16", "stories260K-bf16"}) {
        SCOPED_TRACE(name);
        test::TempDir tmp;
        const fs::path dir = test::model_dir(name);
        const Model folder(dir);
        save_gguf(folder, vocab_of(dir), name, tmp / "s.gguf");
        const GgufFile g(tmp / "s.gguf");
        const std::string type = std::string(name).substr(12) == "f16" ? "F16" : "BF16";
        EXPECT_EQ(std::string(g.tensor("blk.0.attn_q.weight")->type->name), type);
        EXPECT_EQ(std::string(g.tensor("token_embd.weight")->type->name), type);
        EXPECT_EQ(std::string(g.tensor("blk.0.attn_norm.weight")->type->name), "F32");  // norms as F32, exactly
        EXPECT_EQ(g.integer("general.file_type", 0, 99), type == "F16" ? 1 : 32);
        EXPECT_EQ(logits_of(Model(tmp / "s.gguf"), kIds), logits_of(folder, kIds));
    }
}

// A tied model quantized is written as llama.cpp's llama-quantize writes it: the embedding quantized to the output
// projection's format, and no output.weight (llama.cpp's Q4_K_M of stories260K-F32.gguf: token_embd Q8_0, the
// matrices of 64 columns Q5_0, attn_v of layers 2 and 4 Q8_0 (its Q6_K's fallback), ffn_down of 172 columns a float
// type (F16 there, F32 here: the source's)); the file loads to the model's logits.
TEST(GgufWrite, TiedModelQuantizedAsLlamaCppWritesIt) {
    for (QuantScheme scheme : {QuantScheme::q8_0, QuantScheme::q4_k_m}) {
        SCOPED_TRACE(scheme_name(scheme));
        test::TempDir tmp;
        const Model m(test::model_dir(), {}, scheme);  // stories260K: tied
        save_gguf(m, vocab_of(test::model_dir()), "s", tmp / "s.gguf");
        const GgufFile g(tmp / "s.gguf");
        EXPECT_FALSE(g.tensor("output.weight"));
        EXPECT_EQ(std::string(g.tensor("token_embd.weight")->type->name), "Q8_0");
        if (scheme == QuantScheme::q4_k_m) {
            for (int l = 0; l < 5; ++l) {
                const std::string b = "blk." + std::to_string(l) + ".";
                EXPECT_EQ(std::string(g.tensor(b + "attn_q.weight")->type->name), "Q5_0") << l;
                EXPECT_EQ(std::string(g.tensor(b + "ffn_up.weight")->type->name), "Q5_0") << l;
                EXPECT_EQ(std::string(g.tensor(b + "attn_v.weight")->type->name), l == 2 || l == 4 ? "Q8_0" : "Q5_0");
                EXPECT_EQ(std::string(g.tensor(b + "ffn_down.weight")->type->name), "F32") << l;
            }
        }
        EXPECT_EQ(logits_of(Model(tmp / "s.gguf"), kIds), logits_of(m, kIds));
    }
}

// Each scheme's mix is llama.cpp's: every tensor of tinystories3M (untied, every dimension a multiple of 256) quantized
// at load takes the type llama-quantize gave it in llama.cpp's file of that file type, the embedding too.
TEST(GgufMixes, EachSchemeTakesLlamaCppsTypes) {
    const std::pair<QuantScheme, const char*> files[] = {{QuantScheme::q8_0, "Q8_0"},
                                                         {QuantScheme::q6_k, "Q6_K"},
                                                         {QuantScheme::q4_k_m, "Q4_K_M"},
                                                         {QuantScheme::q5_k_m, "Q5_K_M"},
                                                         {QuantScheme::q4_0, "Q4_0"}};
    for (const auto& [scheme, name] : files) {
        SCOPED_TRACE(name);
        const Model m(test::model_dir("tinystories3M"), {}, scheme);
        const GgufFile g(test::shared_gguf(std::string("tinystories3M-") + name + ".gguf"));
        EXPECT_EQ(g.integer("general.file_type", 0, 99), file_type_of(scheme, DType::F32));
        for (const TensorSpec& s : llama_tensor_table(m.config())) {
            if (s.shape.size() != 2) continue;
            const Weight& w = weight_of(m.weights(), s);
            const QuantType q = s.matrix ? w.packed.quant : w.quant;
            EXPECT_EQ(ggml_type_of(q), g.tensor(s.gguf_name)->type->id) << s.gguf_name << " is " << quant_name(q);
        }
    }
}

}  // namespace
}  // namespace plainllama
