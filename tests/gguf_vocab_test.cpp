// The vocabularies GGUF files store: llama.cpp's vocabulary-only test files give the ids of independent references
// (the Llama 3 cases, Meta's Llama 2 tokenizer.model), the chat template is detected from the file, and other
// tokenizer models or pre-tokenizers are errors naming the key.
#include "plainllama/io/gguf_vocab.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "gguf_builder.h"
#include "loader_util.h"
#include "plainllama/run/chat_template.h"
#include "plainllama/tokenizer/bpe_tokenizer.h"
#include "plainllama/tokenizer/gguf_tokenizer.h"
#include "plainllama/tokenizer/sentencepiece_tokenizer.h"
#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::GgufBuilder;
using test::HasSubstr;
using Ids = std::vector<int32_t>;

// The texts of the Llama 3 cases, and a few more for SentencePiece (its dummy prefix, byte fallback, newlines).
std::vector<std::string> texts() {
    std::vector<std::string> t = {"I believe the meaning of life is", "Hello world",           "\n\nnewlines\n", "",
                                  "\xe2\x96\x81 already escaped",     "<s> and </s> are text", "tab\there"};
    for (const auto& c : test::read_json(test::shared_dir() / "reference/llama3_tokenizer/cases.json"))
        t.push_back(c[0].get<std::string>());
    return t;
}

TEST(GgufVocab, Llama3VocabEncodesTheReferenceCases) {
    const GgufFile f(test::shared_gguf("llama3-vocab.gguf"));
    const std::unique_ptr<Tokenizer> tok = gguf_tokenizer(f);
    EXPECT_EQ(tok->kind(), "bpe");
    EXPECT_EQ(tok->vocab_size(), 128256);
    EXPECT_EQ(tok->bos_id(), 128000);
    EXPECT_EQ(tok->eos_id(), 128009);
    EXPECT_TRUE(tok->add_bos());
    const auto cases = test::read_json(test::shared_dir() / "reference/llama3_tokenizer/cases.json");
    ASSERT_GE(cases.size(), 44u);
    for (const auto& c : cases) {
        const std::string text = c[0].get<std::string>();
        EXPECT_EQ(tok->encode(text, false), c[1].get<Ids>()) << c[0];
        EXPECT_EQ(tok->decode(tok->encode(text, false)), text) << c[0];
    }
    EXPECT_EQ(tok->encode("Hello world", true), (Ids{128000, 9906, 1917}));
    const Ids eot = tok->encode("<|eot_id|>", false);  // special-token text is text
    EXPECT_GT(eot.size(), 1u);
    EXPECT_EQ(std::count(eot.begin(), eot.end(), 128009), 0);
    EXPECT_EQ(detect_template(test::shared_gguf("llama3-vocab.gguf")).kind, TemplateKind::llama3);
}

TEST(GgufVocab, LlamaSpmVocabIsMetasTokenizerModel) {
    const std::unique_ptr<Tokenizer> tok = gguf_tokenizer(GgufFile(test::shared_gguf("ggml-vocab-llama-spm.gguf")));
    const SentencePieceTokenizer ref(test::shared_dir() / "tokenizers/llama2/tokenizer.model");
    EXPECT_EQ(tok->kind(), "sentencepiece");
    EXPECT_EQ(tok->vocab_size(), 32000);
    EXPECT_EQ(tok->encode("I believe the meaning of life is", true), (Ids{1, 306, 4658, 278, 6593, 310, 2834, 338}));
    for (const std::string& t : texts()) {
        EXPECT_EQ(tok->encode(t, true), ref.encode(t, true)) << t;
        EXPECT_EQ(tok->decode(tok->encode(t, false)), ref.decode(ref.encode(t, false))) << t;
    }
    for (int32_t id : {0, 1, 2, 3, 258, 259, 4658, 31999}) EXPECT_EQ(tok->piece(id), ref.piece(id)) << id;
    EXPECT_EQ(tok->special_tokens().size(), ref.special_tokens().size());
    EXPECT_EQ(detect_template(test::shared_gguf("ggml-vocab-llama-spm.gguf")).kind, TemplateKind::raw);
}

TEST(GgufVocab, StoriesVocabKeepsRunsOfSpacesAsLlamaCppDoes) {
    // The folder's tokenizer.model asks SentencePiece to remove extra whitespace; llama.cpp's GGUF reading of the same
    // vocabulary does not. Text without runs of spaces tokenizes alike.
    const std::unique_ptr<Tokenizer> tok = gguf_tokenizer(GgufFile(test::shared_gguf("stories260K-F32.gguf")));
    const SentencePieceTokenizer folder(test::model_dir() / "tokenizer.model");
    for (const char* t : {"Once upon a time, there was a little girl named Lily.", "He said: \"no!\"\nShe ran.", ""})
        EXPECT_EQ(tok->encode(t, true), folder.encode(t, true)) << t;
    EXPECT_NE(tok->encode("a  b", false), folder.encode("a  b", false));
    EXPECT_EQ(tok->decode(tok->encode("a  b", false)), "a  b");
}

TEST(GgufVocab, UnsupportedVocabulariesAreErrorsNamingTheKey) {
    test::TempDir tmp;
    auto err = [&](const char* file, auto edit) {
        GgufBuilder b = GgufBuilder::from(GgufFile(test::shared_gguf(file)));
        edit(b);
        test::write_file(tmp / "v.gguf", b.bytes());
        const std::string e = error_of([&] { gguf_tokenizer(GgufFile(tmp / "v.gguf")); });
        EXPECT_EQ(e.find('\n'), std::string::npos);
        return e;
    };
    auto set_string = [](GgufBuilder& b, const std::string& k, const std::string& v) {
        b.remove(k);
        b.string(k, v);
    };
    EXPECT_TRUE(HasSubstr(
        err("ggml-vocab-llama-spm.gguf", [&](GgufBuilder& b) { set_string(b, "tokenizer.ggml.model", "bert"); }),
        "v.gguf: 'tokenizer.ggml.model' is \"bert\"; supported: llama (SentencePiece) and gpt2"));
    EXPECT_TRUE(
        HasSubstr(err("llama3-vocab.gguf", [&](GgufBuilder& b) { set_string(b, "tokenizer.ggml.pre", "qwen2"); }),
                  "'tokenizer.ggml.pre' is \"qwen2\"; supported for gpt2: llama-bpe"));
    EXPECT_TRUE(HasSubstr(err("llama3-vocab.gguf", [&](GgufBuilder& b) { b.remove("tokenizer.ggml.pre"); }),
                          "'tokenizer.ggml.pre' is missing"));
    EXPECT_TRUE(HasSubstr(err("llama3-vocab.gguf", [&](GgufBuilder& b) { b.remove("tokenizer.ggml.merges"); }),
                          "'tokenizer.ggml.merges' is missing (expected an array of string)"));
    EXPECT_TRUE(HasSubstr(err("ggml-vocab-llama-spm.gguf",
                              [&](GgufBuilder& b) {
                                  b.remove("tokenizer.ggml.token_type");
                                  b.array<int32_t>("tokenizer.ggml.token_type", GgufType::i32,
                                                   std::vector<int32_t>(32000, 9));
                              }),
                          "'tokenizer.ggml.token_type' element 0 is 9 (expected 0 to 6)"));
    EXPECT_TRUE(
        HasSubstr(err("ggml-vocab-llama-spm.gguf",
                      [&](GgufBuilder& b) {
                          b.remove("tokenizer.ggml.scores");
                          b.array<float>("tokenizer.ggml.scores", GgufType::f32, {1.0f});
                      }),
                  "'tokenizer.ggml.scores' must be an array of numbers with 32000 elements, found an array of 1 f32"));
    EXPECT_TRUE(HasSubstr(err("ggml-vocab-llama-spm.gguf",
                              [&](GgufBuilder& b) {
                                  b.remove("tokenizer.ggml.eos_token_id");
                                  b.u32("tokenizer.ggml.eos_token_id", 32000);
                              }),
                          "'tokenizer.ggml.eos_token_id' must be in [0, 31999], found u32 32000"));
    EXPECT_TRUE(
        HasSubstr(err("llama3-vocab.gguf",
                      [&](GgufBuilder& b) {
                          b.remove("tokenizer.ggml.merges");
                          b.strings("tokenizer.ggml.merges", {"Ġ Ġ", "nota merge"});
                      }),
                  "tokenizer.ggml.merges[1]: a token of \"nota merge\" or their merge is not in the vocabulary"));
}

TEST(GgufVocab, WrittenVocabularyReadsBackTheSame) {
    // A tokenizer.model as GGUF metadata and back (what quantize -o NAME.gguf writes): the same ids.
    const SentencePieceTokenizer ref(test::shared_dir() / "tokenizers/llama2/tokenizer.model");
    const GgufVocab v = gguf_vocab_of(ref, "llama2");
    EXPECT_EQ(v.model, "llama");
    EXPECT_EQ(v.tokens.size(), 32000u);
    EXPECT_EQ(v.unk, 0);
    EXPECT_EQ(v.types[3], kTokByte);
    EXPECT_TRUE(v.add_space_prefix);
    const SentencePieceTokenizer back(sentencepiece_model_proto(v), "proto", int32_t(v.bos), int32_t(v.eos), true);
    for (const std::string& t : texts()) EXPECT_EQ(back.encode(t, true), ref.encode(t, true)) << t;

    // tokenizer.json's byte-level BPE (Llama 3's pre-tokenizer) likewise.
    const fs::path l3 = test::shared_dir() / "tokenizers/llama3.1";
    const BpeTokenizer json(l3 / "tokenizer.json", l3 / "tokenizer_config.json");
    const GgufVocab b = gguf_vocab_of(json, "llama3.1");
    EXPECT_EQ(b.model, "gpt2");
    EXPECT_EQ(b.pre, "llama-bpe");
    EXPECT_EQ(b.merges.size(), 280147u);
    EXPECT_EQ(b.types[128009], kTokControl);
    const BpeTokenizer bpe(b, "vocab");
    for (const std::string& t : texts()) EXPECT_EQ(bpe.encode(t, true), json.encode(t, true)) << t;
    EXPECT_EQ(bpe.bos_id(), json.bos_id());
    EXPECT_EQ(bpe.eos_id(), json.eos_id());
}

}  // namespace
}  // namespace plainllama
