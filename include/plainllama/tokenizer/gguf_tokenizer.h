// Tokenizers from a GGUF's vocabulary (io/gguf_vocab.h), as llama.cpp tokenizes:
//   "llama"  a SentencePiece model made from the tokens, scores and types (BPE by scores, byte fallback), run by
//            libsentencepiece as a tokenizer.model is; a space prefix unless tokenizer.ggml.add_space_prefix is
//            false, and no removal of extra whitespace (a tokenizer.model may ask for it: then runs of spaces
//            tokenize differently from the folder)
//   "gpt2"   the byte-level BPE of tokenizer.json (bpe_tokenizer.h) with Llama 3's split regex, merges by rank and
//            a word that is a token kept whole (ignore_merges)
// and the other way, a tokenizer's vocabulary as a GGUF stores it (for writing one).
#pragma once
#include <memory>
#include <string>

#include "plainllama/io/gguf.h"
#include "plainllama/io/gguf_vocab.h"
#include "plainllama/tokenizer/tokenizer.h"

namespace plainllama {

std::unique_ptr<Tokenizer> gguf_tokenizer(const GgufFile& f);

// The serialized SentencePiece ModelProto of a "llama" vocabulary (what a tokenizer.model file holds).
std::string sentencepiece_model_proto(const GgufVocab& v);
// A tokenizer's vocabulary as a GGUF stores it; Error naming `source` when GGUF cannot hold it (a normalizer, a
// pre-tokenizer other than Llama 3's). The chat template is left empty.
GgufVocab gguf_vocab_of(const Tokenizer& tok, const std::string& source);

}  // namespace plainllama
