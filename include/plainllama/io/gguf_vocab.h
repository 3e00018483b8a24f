// The vocabulary a GGUF file stores (tokenizer.ggml.*), read and checked as llama.cpp reads it (tokenizer/
// gguf_tokenizer.h builds the tokenizers; model/save_gguf.h writes one):
//   model "llama"  SentencePiece: tokens, scores, token types (byte fallback when there are byte tokens)
//   model "gpt2"   byte-level BPE: tokens, token types, merges ("a b", by rank), with tokenizer.ggml.pre "llama-bpe"
//                  (Llama 3's split regex; also spelled "llama3", "llama-v3")
// Token types (llama.cpp's): 1 normal, 2 unknown, 3 control (never produced from text), 4 user-defined (matched in
// the text first), 5 unused, 6 byte (<0xXX>); 0 is read as normal. Anything else is an Error naming the key.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plainllama/io/gguf.h"

namespace plainllama {

enum GgufTokenType : int32_t { kTokNormal = 1, kTokUnknown, kTokControl, kTokUserDefined, kTokUnused, kTokByte };

struct GgufVocab {
    std::string model;                // "llama" or "gpt2"
    std::string pre;                  // "default" (llama), "llama-bpe" (gpt2)
    std::vector<std::string> tokens;  // [n]
    std::vector<float> scores;        // [n] (llama; empty for gpt2)
    std::vector<int32_t> types;       // [n] GgufTokenType
    std::vector<std::string> merges;  // gpt2: "a b" by rank
    int64_t bos = -1, eos = -1, unk = -1, eot = -1;
    bool add_bos = true;
    bool add_space_prefix = true;  // llama: SentencePiece's dummy prefix (tokenizer.ggml.add_space_prefix)
    std::string chat_template;     // tokenizer.chat_template, or empty
};

// Whether a GGUF file holds a vocabulary (tokenizer.ggml.model).
bool has_gguf_vocab(const GgufFile& f);
// The vocabulary of a GGUF file, checked: a supported model and pre-tokenizer, types, scores finite, ids in range.
GgufVocab read_gguf_vocab(const GgufFile& f);

}  // namespace plainllama
