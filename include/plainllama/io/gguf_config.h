// The config of a GGUF model (general.architecture "llama") from its metadata, with config.json's field names:
//   llama.embedding_length -> hidden_size            llama.feed_forward_length -> intermediate_size
//   llama.block_count -> num_hidden_layers          llama.attention.head_count(_kv) -> num_(key_value_)heads
//   llama.attention.key_length -> head_dim          llama.context_length -> max_position_embeddings
//   llama.attention.layer_norm_rms_epsilon -> rms_norm_eps (the f32 as stored: the same float the kernels use)
//   llama.rope.freq_base -> rope_theta              llama.rope.scaling.type linear + .factor -> rope_scaling
//   rope_freqs.weight -> rope_scaling.freq_factors  llama.vocab_size (else the tokens, else token_embd's rows)
//   output.weight absent -> tie_word_embeddings     tokenizer.ggml.bos/eos/eot/eom_token_id -> BOS, EOS ids
// and, as llama.cpp, the control tokens that end a turn or a text (<|eot_id|>, <|eom_id|>, <|end_of_text|>,
// <|im_end|>, <|end|>, <end_of_turn>) among the EOS ids. llama.rope.dimension_count must be the head size (no partial
// RoPE); other rope scalings and experts (llama.expert_count > 0: Mixtral) are refused. Each error is one line
// naming the file and the key.
#pragma once
#include "plainllama/io/config.h"
#include "plainllama/io/gguf.h"

namespace plainllama {

LlamaConfig gguf_config(const GgufModel& g);

}  // namespace plainllama
