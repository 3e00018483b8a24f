// The tensors of a LLaMA checkpoint: one table of every HF tensor name, the shape the config implies, whether
// matmul reads it and the field it binds to (used by the loader, `inspect`, `bench` and the tests).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plainllama/io/config.h"
#include "plainllama/io/dtype.h"
#include "plainllama/io/safetensors.h"
#include "plainllama/kernels/kernels.h"

namespace plainllama {

// A 1-D or 2-D weight: row-major [rows, cols] in the mapping, and for the matrices matmul reads the same
// values repacked into panels (see PackedMatrix; filled in by the Model).
struct Weight {
    const void* data = nullptr;
    DType dtype = DType::F32;  // U8 when stored quantized
    int64_t rows = 0, cols = 0;
    QuantType quant = QuantType::none;  // stored quantized (a saved folder, a GGUF): rows of blocks, [rows, row bytes]
    // Rows in llama.cpp's order for interleaved-pair RoPE (a GGUF's attn_q, attn_k), per head of rows / rope_heads
    // rows (gguf_rope_row): put back in HF's order when packed. 0: HF's order.
    int64_t rope_heads = 0;
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
    Weight norm;     // [hidden_size]
    Weight lm_head;  // [vocab_size, hidden_size]; embed_tokens when tied
};

struct TensorSpec {
    std::string name;                             // HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
    std::string gguf_name;                        // llama.cpp's, e.g. "blk.0.attn_q.weight"
    std::vector<int64_t> shape;                   // row-major, as stored
    int64_t layer = -1;                           // model.layers.<layer>, or -1 (embed_tokens, norm, lm_head)
    bool matrix = false;                          // read by matmul: repacked into panels at load
    Weight LayerWeights::*layer_field = nullptr;  // the weight it binds to: layers[layer].*layer_field,
    Weight ModelWeights::*model_field = nullptr;  // or .*model_field
};

// The one description of a checkpoint's tensors (HF folders and GGUF files alike), from which binding, packing,
// `inspect` and `bench` are derived:
// every tensor the model reads, in file order, with the shape the config implies (lm_head.weight only when not
// tied: a tied lm_head is the embedding's tensor).
std::vector<TensorSpec> llama_tensor_table(const LlamaConfig& c);
// The weight a table entry binds to.
Weight& weight_of(ModelWeights& m, const TensorSpec& s);
const Weight& weight_of(const ModelWeights& m, const TensorSpec& s);

// A saved quantized folder (plainllama quantize) marks each quantized tensor in its safetensors __metadata__:
// kQuantKey + tensor name -> the format ("q8_0", "q4_k", "q6_k"), the tensor U8 [rows, row bytes]; and the scheme.
inline const std::string kQuantKey = "plainllama.quant:";
inline const std::string kQuantSchemeKey = "plainllama.quant_scheme";

// Binds every table entry by name, checking presence, dtype and shape (quantized tensors as their metadata says: the
// matrices and the embedding, which is gathered a row at a time); unknown tensors are an error. A tied model's
// lm_head.weight is bound when stored quantized.
ModelWeights bind_weights(const Checkpoint& ckpt, const LlamaConfig& c, const std::string& source);

}  // namespace plainllama
