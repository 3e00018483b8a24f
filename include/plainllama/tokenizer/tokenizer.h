// Tokenizers: the interface the rest of the engine uses, the choice of implementation from a model folder
// (tokenizer.model: SentencePiece; else tokenizer.json: Hugging Face byte-level BPE), and streaming decoding.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace plainllama {

// An added or control token: its id and text.
struct SpecialToken {
    int32_t id;
    std::string text;
};

class Tokenizer {
   public:
    virtual ~Tokenizer() = default;
    // Token ids of `text`, with BOS once at the start when add_bos. Text never becomes a control token: "<s>" or
    // "<|eot_id|>" in it is encoded as the characters it is; only chat templates insert special ids.
    virtual std::vector<int32_t> encode(const std::string& text, bool add_bos) const = 0;
    // The text of `ids` (an incomplete or invalid UTF-8 sequence comes out as U+FFFD). Error for an id outside the
    // vocabulary.
    virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
    virtual std::string piece(int32_t id) const = 0;  // the vocabulary entry, as stored
    // The bytes the token adds to a text that has text before it (SentencePiece's "▁" as a space, a byte piece as
    // its byte; possibly part of a UTF-8 character). Empty for control and special tokens and ids outside the
    // vocabulary: they stand for no text.
    virtual std::string token_bytes(int32_t id) const = 0;
    virtual int32_t piece_to_id(const std::string& piece) const = 0;  // -1 when unknown
    virtual int32_t vocab_size() const = 0;
    virtual int32_t bos_id() const = 0;  // -1 when none
    virtual int32_t eos_id() const = 0;  // -1 when none
    // Whether the folder's tokenizer prepends BOS to a text (callers still honour --no-bos).
    virtual bool add_bos() const = 0;
    virtual std::string kind() const = 0;  // "sentencepiece" or "bpe"
    virtual std::vector<SpecialToken> special_tokens() const = 0;
};

// The tokenizer of a model folder: tokenizer.model (SentencePiece) when present, else tokenizer.json (with
// tokenizer_config.json beside it when present); Error naming the folder when it has neither. For a GGUF model
// (io/gguf.h's is_gguf_model), its vocabulary (gguf_vocab.h).
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& dir);
// Whether the folder has a tokenizer file (present, even if it cannot be read), or the GGUF a vocabulary.
bool has_tokenizer(const std::filesystem::path& dir);

// Streaming detokenizer: feed ids one at a time, get the new text. It decodes a short window of
// recent ids (so a word's leading space survives) and holds back an incomplete UTF-8 character
// spread over byte tokens until it is complete.
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
