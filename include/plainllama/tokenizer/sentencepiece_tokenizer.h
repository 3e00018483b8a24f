// SentencePiece tokenizer (tokenizer.model: Llama 1/2, TinyLlama, stories), behind the Tokenizer interface.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "plainllama/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace plainllama {

class SentencePieceTokenizer : public Tokenizer {
   public:
    explicit SentencePieceTokenizer(const std::filesystem::path& model_file);
    // From a serialized ModelProto (a GGUF's vocabulary: gguf_vocab.h), with its BOS and EOS ids (-1: none) and
    // whether BOS is prepended; `source` names it in errors.
    SentencePieceTokenizer(const std::string& model_proto, const std::string& source, int32_t bos, int32_t eos,
                           bool add_bos);
    ~SentencePieceTokenizer() override;
    std::vector<int32_t> encode(const std::string& text, bool add_bos) const override;
    std::string decode(const std::vector<int32_t>& ids) const override;
    std::string piece(int32_t id) const override;
    std::string token_bytes(int32_t id) const override;
    int32_t piece_to_id(const std::string& piece) const override;
    int32_t vocab_size() const override;
    int32_t bos_id() const override { return bos_; }
    int32_t eos_id() const override { return eos_; }
    bool add_bos() const override { return add_bos_; }
    std::string kind() const override { return "sentencepiece"; }
    std::vector<SpecialToken> special_tokens() const override;  // the control pieces (<unk>, <s>, </s>)
    std::string model_proto() const;  // the serialized ModelProto (what a tokenizer.model holds)

   private:
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
    int32_t bos_ = -1, eos_ = -1;
    bool add_bos_ = true;
};

}  // namespace plainllama
