// A GGUF model (general.architecture "llama") as the engine's model files: the config from the llama.* metadata, and
// its tensors under their HF names (the tensor table's gguf_name), their types mapped onto the engine's (F32, F16,
// BF16 as they are; Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K as stored quantized blocks, which are GGUF's bit for bit).
// llama.cpp's converter stores attn_q and attn_k with each head's rows in the order interleaved-pair RoPE wants
// (gguf_rope_row); the weights are marked so (Weight::rope_heads) and packed in HF's order, so the same weights give
// the same logits from either file.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "plainllama/io/gguf.h"
#include "plainllama/io/gguf_config.h"
#include "plainllama/model/model.h"

namespace plainllama {

// A GGUF tensor type the engine reads, and what it reads it as. Adding a type is an entry here (gguf_model.cpp)
// plus its QuantType and kernels.
struct GgufWeightType {
    uint32_t ggml;  // ggml's type id
    DType dtype;    // F32, F16, BF16, or U8 for blocks
    QuantType quant;
};
const GgufWeightType* gguf_weight_type(uint32_t ggml);  // null when not supported
std::string gguf_supported_types();                     // "F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K"
uint32_t ggml_type_of(QuantType q);                     // the ggml id of a block format

// The row of a GGUF attn_q / attn_k matrix that holds HF row r (heads of head_dim rows): within a head, HF's rows
// [x_0 .. x_{d/2-1}, y_0 .. y_{d/2-1}] (rotate-half pairs (x_i, y_i)) are stored as [x_0, y_0, x_1, y_1, ...].
inline int64_t gguf_rope_row(int64_t r, int64_t head_dim) {
    const int64_t h = r / head_dim, i = r % head_dim, half = head_dim / 2;
    return h * head_dim + (i % half) * 2 + i / half;
}
// The inverse: the HF row stored at GGUF row g.
inline int64_t hf_rope_row(int64_t g, int64_t head_dim) {
    const int64_t h = g / head_dim, i = g % head_dim;
    return h * head_dim + (i % 2) * (head_dim / 2) + i / 2;
}

// A GGUF model's config, checkpoint (tensors under HF names) and weights, nothing packed; read_data false touches
// no page of the weights (rope_freqs.weight aside).
ModelFiles open_gguf_model(const std::filesystem::path& file, bool read_data = true);

// llama.cpp's name of general.file_type ("Q4_K_M", "F16", ...), or "type N" for an unknown one.
std::string gguf_file_type_name(int64_t file_type);
// Our scheme for a llama.cpp file type, when it has one (F32/F16/BF16 -> none, Q8_0, Q6_K, Q4_K_M, Q5_K_M, Q4_0);
// false otherwise.
bool scheme_of_file_type(int64_t file_type, QuantScheme* scheme);
// llama.cpp's general.file_type for a model loaded with `scheme` from matrices of float type t.
int64_t file_type_of(QuantScheme scheme, DType t);

}  // namespace plainllama
