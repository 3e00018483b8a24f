// A loaded model saved as a GGUF file that llama.cpp loads (plainllama quantize -o NAME.gguf): general.architecture
// llama, the llama.* hyperparameters, the vocabulary and chat template, general.file_type, and every tensor under
// llama.cpp's name: the matrices as the model holds them (quantized blocks in GGUF's layout, or their float type),
// attn_q and attn_k rows in llama.cpp's interleaved-RoPE order (gguf_model.h), 1-D tensors (the norms) as F32, the
// embedding in its stored type, no output.weight for a tied float lm_head, and Llama 3.1's frequency factors as
// rope_freqs.weight.
#pragma once
#include <filesystem>
#include <string>

#include "plainllama/io/gguf_vocab.h"
#include "plainllama/model/model.h"

namespace plainllama {

// Writes `out` (beside its final name, then renamed: io/gguf_writer.h). `vocab` is the tokenizer's
// (tokenizer/gguf_tokenizer.h's gguf_vocab_of) with its chat template; `name` goes to general.name. Error when
// `out` is the model's own file.
void save_gguf(const Model& model, const GgufVocab& vocab, const std::string& name, const std::filesystem::path& out);

}  // namespace plainllama
