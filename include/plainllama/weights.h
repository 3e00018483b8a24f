// The tensors of a LLaMA checkpoint: one table of every HF tensor name with the shape the config
// implies (used by the loader, `inspect` and the tests), and the weights bound from it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plainllama/config.h"
#include "plainllama/dtype.h"
#include "plainllama/kernels.h"
#include "plainllama/safetensors.h"

namespace plainllama {

struct TensorSpec {
    std::string name;            // HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
    std::vector<int64_t> shape;  // row-major, as stored
};

// Every tensor the model reads, in file order (lm_head.weight only when not tied).
std::vector<TensorSpec> llama_tensor_table(const LlamaConfig& c);

// A 1-D or 2-D weight: row-major [rows, cols] in the mapping, and for the matrices matmul reads the same
// values repacked into panels (see PackedMatrix; filled in by the Model).
struct Weight {
    const void* data = nullptr;
    DType dtype = DType::F32;
    int64_t rows = 0, cols = 0;
    PackedMatrix packed;
};

struct LayerWeights {
    Weight input_layernorm;           // [hidden_size]
    Weight q_proj;                    // [num_attention_heads * head_dim, hidden_size]
    Weight k_proj;                    // [num_key_value_heads * head_dim, hidden_size]
    Weight v_proj;                    // [num_key_value_heads * head_dim, hidden_size]
    Weight o_proj;                    // [hidden_size, num_attention_heads * head_dim]
    Weight post_attention_layernorm;  // [hidden_size]
    Weight gate_proj;                 // [intermediate_size, hidden_size]
    Weight up_proj;                   // [intermediate_size, hidden_size]
    Weight down_proj;                 // [hidden_size, intermediate_size]
};

struct ModelWeights {
    Weight embed_tokens;  // [vocab_size, hidden_size]
    std::vector<LayerWeights> layers;
    Weight norm;          // [hidden_size]
    Weight lm_head;       // [vocab_size, hidden_size]; embed_tokens when tied
};

// Binds every table entry, checking presence and shape; unknown tensors are an error.
ModelWeights bind_weights(const Checkpoint& ckpt, const LlamaConfig& c, const std::string& source);

}  // namespace plainllama
