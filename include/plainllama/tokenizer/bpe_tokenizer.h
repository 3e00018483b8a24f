// Hugging Face byte-level BPE (tokenizer.json: Llama 3 and most recent models), behind the Tokenizer interface.
//
// What is implemented, as HF `tokenizers` does it (anything else in the file is an Error naming the field):
//   normalizer      null
//   pre_tokenizer   ByteLevel, or a Sequence of Split steps (a regex or a string, behavior "Isolated", not inverted)
//                   ending in ByteLevel; each regex run as written, with Oniguruma (HF's own engine); ByteLevel's
//                   use_regex adds GPT-2's pattern; add_prefix_space must be false
//   model           BPE over GPT-2's byte-to-unicode alphabet, merges by rank, ignore_merges (a pre-token that is
//                   itself in the vocabulary is one token); no byte_fallback, dropout or subword affixes
//   post_processor  null, ByteLevel, TemplateProcessing (special tokens before the sequence: BOS), or a Sequence
//   decoder         ByteLevel
//   added_tokens    whole tokens: special ones never come out of encoding text (only chat templates insert them);
//                   non-special ones are matched in the text first, as HF does
// BOS: the post-processor's tokens before the sequence; tokenizer_config.json's add_bos_token, when present,
// overrides it (false: none; true: its bos_token), as transformers does. Decoding returns the text the tokens stand
// for: tokenizer_config.json's clean_up_tokenization_spaces (HF's decode then drops spaces before punctuation) is
// not applied.
#pragma once
#include <filesystem>
#include <memory>

#include "plainllama/io/gguf_vocab.h"
#include "plainllama/tokenizer/tokenizer.h"

namespace plainllama {

class BpeTokenizer : public Tokenizer {
   public:
    // tokenizer_config: tokenizer_config.json (bos_token, eos_token, add_bos_token), or empty when there is none.
    BpeTokenizer(const std::filesystem::path& tokenizer_json, const std::filesystem::path& tokenizer_config);
    // From a GGUF's vocabulary (model "gpt2", pre-tokenizer "llama-bpe": gguf_vocab.h); `source` names it.
    BpeTokenizer(const GgufVocab& vocab, const std::string& source);
    ~BpeTokenizer() override;
    std::vector<int32_t> encode(const std::string& text, bool add_bos) const override;
    std::string decode(const std::vector<int32_t>& ids) const override;
    std::string piece(int32_t id) const override;
    std::string token_bytes(int32_t id) const override;
    int32_t piece_to_id(const std::string& piece) const override;
    int32_t vocab_size() const override;
    int32_t bos_id() const override;
    int32_t eos_id() const override;
    bool add_bos() const override;
    std::string kind() const override { return "bpe"; }
    std::vector<SpecialToken> special_tokens() const override;  // the added tokens marked special
    // The vocabulary as a GGUF stores it; Error when GGUF cannot (a pre-tokenizer other than Llama 3's).
    GgufVocab gguf_vocab() const;

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace plainllama
