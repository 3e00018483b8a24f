// SentencePiece tokenizer (tokenizer.model: Llama 1/2, TinyLlama, stories), behind the Tokenizer interface.
#pragma once
#include <filesystem>
#include <memory>

#include "plainllama/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace plainllama {

class SentencePieceTokenizer : public Tokenizer {
   public:
    explicit SentencePieceTokenizer(const std::filesystem::path& model_file);
    ~SentencePieceTokenizer() override;
    std::vector<int32_t> encode(const std::string& text, bool add_bos) const override;
    std::string decode(const std::vector<int32_t>& ids) const override;
    std::string piece(int32_t id) const override;
    std::string token_bytes(int32_t id) const override;
    int32_t piece_to_id(const std::string& piece) const override;
    int32_t vocab_size() const override;
    int32_t bos_id() const override;
    int32_t eos_id() const override;
    bool add_bos() const override { return true; }
    std::string kind() const override { return "sentencepiece"; }
    std::vector<SpecialToken> special_tokens() const override;  // the control pieces (<unk>, <s>, </s>)

   private:
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace plainllama
