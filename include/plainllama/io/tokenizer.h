// SentencePiece tokenizer (tokenizer.model), behind a small wrapper.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace plainllama {

class Tokenizer {
public:
    explicit Tokenizer(const std::filesystem::path& model_file);
    ~Tokenizer();
    // Token ids of `text`, with BOS once at the start when add_bos.
    std::vector<int32_t> encode(const std::string& text, bool add_bos) const;
    std::string decode(const std::vector<int32_t>& ids) const;
    std::string piece(int32_t id) const;
    int32_t piece_to_id(const std::string& piece) const;  // -1 when unknown
    int32_t vocab_size() const;
    int32_t bos_id() const;
    int32_t eos_id() const;

private:
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

// Streaming detokenizer: feed ids one at a time, get the new text. It decodes a short window of
// recent ids (so a word's leading space survives) and holds back an incomplete UTF-8 character
// spread over byte-fallback tokens until it is complete.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
    // Text that `id` completes (may be empty; always empty for an id past the tokenizer's pieces).
    std::string push(int32_t id);
    // Whatever is still held back (an unfinished character is emitted as decoded).
    std::string flush();

private:
    const Tokenizer& tok_;
    std::vector<int32_t> ids_;
    size_t prefix_ = 0, read_ = 0;  // ids_[prefix_, read_) already emitted, used as left context
};

}  // namespace plainllama
