// The mask of allowed tokens: the prefix-tree walk equals trying every token of the vocabulary one by one, on the
// Llama 2 SentencePiece (32k, byte fallback) and the Llama 3 byte-level BPE (128k) vocabularies, at every byte of
// texts that go through strings, numbers, nesting, escapes and multi-byte characters (states in the middle of a
// code point included).
#include <gtest/gtest.h>

#include <memory>

#include "plainllama/run/grammar_constraint.h"
#include "plainllama/run/json_schema.h"
#include "plainllama/tokenizer/bpe_tokenizer.h"
#include "plainllama/tokenizer/sentencepiece_tokenizer.h"
#include "test_util.h"

namespace plainllama::token_mask_test {  // named: the test files compile in unity batches

const Tokenizer& llama2() {
    static const auto t =
        std::make_unique<SentencePieceTokenizer>(test::shared_dir() / "tokenizers/llama2/tokenizer.model");
    return *t;
}
const Tokenizer& llama3() {
    static const auto t =
        std::make_unique<BpeTokenizer>(test::shared_dir() / "tokenizers/llama3/tokenizer.json",
                                       test::shared_dir() / "tokenizers/llama3/tokenizer_config.json");
    return *t;
}

struct Seen {
    int narrow = 0;   // states allowing a few tokens (the walk skips most of the tree)
    int wide = 0;     // states allowing most of the vocabulary (the walk goes nearly everywhere)
    int partial = 0;  // states inside a code point
};

// Feeds `text` byte by byte and compares the walk's mask with the brute-force one before every byte and at the end.
Seen check_masks(const Tokenizer& tok, const std::string& gbnf, const std::string& text) {
    const int32_t n_vocab = tok.vocab_size();
    const std::vector<int32_t> stops = {tok.eos_id()};
    auto trie = std::make_shared<const TokenTrie>(tok, n_vocab);
    GrammarConstraint c(std::make_shared<const Grammar>(parse_gbnf(gbnf)), trie, stops);
    TokenMask walk, brute;
    Seen seen;
    for (size_t i = 0; i <= text.size(); ++i) {
        c.compute_mask(walk);
        c.compute_mask_brute_force(brute);
        EXPECT_EQ(walk.n, n_vocab);
        if (walk.bits != brute.bits) {
            int32_t first = 0;
            while (walk.test(first) == brute.test(first)) ++first;
            ADD_FAILURE() << "after " << i << " bytes of " << text << ": token " << first << " (\""
                          << trie->bytes(first) << "\") walk " << walk.test(first) << ", brute force "
                          << brute.test(first) << "; walk allows " << walk.count() << ", brute force " << brute.count();
            return seen;
        }
        EXPECT_EQ(walk.test(tok.eos_id()), c.can_end()) << "EOS is allowed exactly where the grammar can end";
        const int32_t n = walk.count();
        const bool mid_character = i > 0 && i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80;
        seen.narrow += n > 0 && n < 2000;
        seen.wide += n > n_vocab / 2;
        seen.partial += mid_character && n > 0;
        if (i < text.size() || !c.can_end()) {
            EXPECT_GT(n, 0) << "after " << i << " bytes";
        }
        if (i < text.size()) c.accept_text(text.substr(i, 1));
    }
    EXPECT_TRUE(c.can_end()) << "the whole text is a sentence";
    return seen;
}

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "tags": {"type": "array", "items": {"enum": ["a", "b\"c", "日本"]}, "maxItems": 4},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "score": {"type": "number"},
    "ok": {"type": ["boolean", "null"]},
    "when": {"type": "string", "format": "date"}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})";
const char* kSchemaText = R"({"name": "Zo\u00eb \"é\" € \n 😀", "tags": ["b\"c", "日本"],
  "age": 149, "score": -12.5e3, "ok": null, "when": "2024-02-29"})";

const char* kUnicodeGrammar =
    "root ::= ([\\u3041-\\u309F] | [a-z] | \"\\U0001F600\" | [\\u00e0-\\u00ff] | \" \")+ \".\"\n";
const char* kUnicodeText = "ひら abc é😀 ÿ.";

TEST(TokenMask, TrieWalkEqualsBruteForceLlama2) {
    Seen s = check_masks(llama2(), json_schema_to_gbnf(kSchema), kSchemaText);
    EXPECT_GT(s.narrow, 10);
    EXPECT_GT(s.wide, 5);
    EXPECT_GT(s.partial, 3);
    s = check_masks(llama2(), json_object_gbnf(), R"({"a": [1, {"b": [true, false, null]}, "x\ty"], "": -0.5E-7})");
    EXPECT_GT(s.wide, 3);
    s = check_masks(llama2(), kUnicodeGrammar, kUnicodeText);
    EXPECT_GT(s.partial, 3);
}

TEST(TokenMask, TrieWalkEqualsBruteForceLlama3) {
    Seen s = check_masks(llama3(), json_schema_to_gbnf(kSchema), kSchemaText);
    EXPECT_GT(s.narrow, 10);
    EXPECT_GT(s.wide, 5);
    EXPECT_GT(s.partial, 3);
    s = check_masks(llama3(), json_object_gbnf(), R"({"a": [1, {"b": [true, false, null]}, "x\ty"], "": -0.5E-7})");
    EXPECT_GT(s.wide, 3);
    s = check_masks(llama3(), kUnicodeGrammar, kUnicodeText);
    EXPECT_GT(s.partial, 3);
}

TEST(TokenMask, TokenBytes) {
    EXPECT_EQ(llama2().token_bytes(llama2().piece_to_id("\xE2\x96\x81the")), " the");  // ▁the
    EXPECT_EQ(llama2().token_bytes(llama2().piece_to_id("<0x0A>")), "\n");
    EXPECT_EQ(llama2().token_bytes(llama2().piece_to_id("<0xE6>")), "\xE6");
    EXPECT_EQ(llama2().token_bytes(llama2().eos_id()), "");
    EXPECT_EQ(llama2().token_bytes(0), "");                                        // <unk>
    EXPECT_EQ(llama3().token_bytes(llama3().piece_to_id("\xC4\xA0the")), " the");  // Ġthe
    EXPECT_EQ(llama3().token_bytes(llama3().piece_to_id("<|begin_of_text|>")), "");
    EXPECT_EQ(llama3().token_bytes(-1), "");
    EXPECT_EQ(llama3().token_bytes(llama3().vocab_size()), "");
}

// A padded embedding (more rows than the tokenizer has tokens): the extra ids are never allowed; the tree has every
// token with bytes exactly once.
TEST(TokenMask, PaddedVocabularyAndTreeShape) {
    const Tokenizer& tok = llama2();
    auto trie = std::make_shared<const TokenTrie>(tok, tok.vocab_size() + 7);
    GrammarConstraint c(std::make_shared<const Grammar>(parse_gbnf("root ::= .*")), trie, {tok.eos_id()});
    const TokenMask& m = c.allowed();
    EXPECT_EQ(m.n, tok.vocab_size() + 7);
    for (int32_t id = tok.vocab_size(); id < m.n; ++id) EXPECT_FALSE(m.test(id));
    int with_bytes = 0;
    for (int32_t id = 0; id < tok.vocab_size(); ++id) with_bytes += !tok.token_bytes(id).empty();
    EXPECT_EQ(int(trie->tokens().size()), with_bytes);
    EXPECT_TRUE(m.test(tok.eos_id()));  // .* can end anywhere
    EXPECT_FALSE(m.test(0));            // <unk> has no bytes
    // Subtrees: each node's subtree ends within the array and after the node, children deeper than their parent.
    const auto& nodes = trie->nodes();
    for (size_t i = 1; i < nodes.size(); ++i) {
        ASSERT_GT(nodes[i].skip, i);
        ASSERT_LE(nodes[i].skip, nodes.size());
        if (i + 1 < nodes[i].skip) {
            ASSERT_EQ(nodes[i + 1].depth, nodes[i].depth + 1);
        }
    }
}

TEST(TokenMask, AcceptRefusesWhatTheMaskLeftOut) {
    const Tokenizer& tok = llama3();
    auto trie = std::make_shared<const TokenTrie>(tok, tok.vocab_size());
    GrammarConstraint c(std::make_shared<const Grammar>(parse_gbnf("root ::= \"yes\" | \"no\"")), trie, {tok.eos_id()});
    const TokenMask& m = c.allowed();
    const int32_t yes = tok.piece_to_id("yes"), maybe = tok.piece_to_id("maybe");
    ASSERT_GE(yes, 0);
    ASSERT_GE(maybe, 0);
    EXPECT_TRUE(m.test(yes));
    EXPECT_TRUE(m.test(tok.piece_to_id("y")));
    EXPECT_FALSE(m.test(maybe));
    EXPECT_FALSE(m.test(tok.eos_id()));
    EXPECT_THROW(c.accept(maybe), Error);
    EXPECT_THROW(c.accept(tok.eos_id()), Error);  // the grammar is not complete
    c.accept(yes);
    EXPECT_TRUE(c.must_end());
    const TokenMask& end = c.allowed();
    EXPECT_EQ(end.count(), 1);  // only EOS
    EXPECT_TRUE(end.test(tok.eos_id()));
    c.accept(tok.eos_id());
    EXPECT_THROW(c.allowed(), Error);
    c.reset();
    EXPECT_FALSE(c.must_end());
    EXPECT_TRUE(c.allowed().test(yes));
}

// A vocabulary of a few whole tokens, without byte tokens.
class TinyVocab : public Tokenizer {
   public:
    std::vector<std::string> pieces = {"</s>", "a", "b", "ab"};
    std::vector<int32_t> encode(const std::string&, bool) const override { return {}; }
    std::string decode(const std::vector<int32_t>&) const override { return ""; }
    std::string piece(int32_t id) const override { return pieces[size_t(id)]; }
    std::string token_bytes(int32_t id) const override { return id > 0 && id < 4 ? pieces[size_t(id)] : ""; }
    int32_t piece_to_id(const std::string&) const override { return -1; }
    int32_t vocab_size() const override { return 4; }
    int32_t bos_id() const override { return -1; }
    int32_t eos_id() const override { return 0; }
    bool add_bos() const override { return false; }
    std::string kind() const override { return "test"; }
    std::vector<SpecialToken> special_tokens() const override { return {}; }
};

// A character no token can make: the mask that allows nothing is an error that says so, not a hang.
TEST(TokenMask, NothingAllowedIsAnError) {
    const TinyVocab tok;
    auto trie = std::make_shared<const TokenTrie>(tok, 4);
    GrammarConstraint c(std::make_shared<const Grammar>(parse_gbnf("root ::= \"a\" [b-c] \"c\"")), trie, {0});
    EXPECT_EQ(c.allowed().count(), 2);  // "a" and "ab"
    c.accept(3);
    try {
        c.allowed();
        ADD_FAILURE() << "expected an error: no token is \"c\"";
    } catch (const Error& e) {
        EXPECT_TRUE(test::HasSubstr(e.what(), "no token of the vocabulary can continue the text"));
    }
}

}  // namespace plainllama::token_mask_test
