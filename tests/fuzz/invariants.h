// What a parse of hostile bytes must guarantee, shared by the fuzz targets (which abort on a violation) and
// the gtest FuzzRegressions (which replays tests/fuzz/regressions/). Each returns "" or the violated rule.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "plainllama/io/config.h"
#include "plainllama/io/safetensors.h"
#include "plainllama/model/rope.h"
#include "plainllama/model/weights.h"

namespace plainllama::fuzz {

// An error message: one non-empty line.
inline std::string error_violation(const std::string& msg) {
    if (msg.empty()) return "empty error message";
    if (msg.find('\n') != std::string::npos || msg.find('\r') != std::string::npos)
        return "error message not on one line: " + msg;
    return "";
}

// Tensors parsed from [base, base + size): each inside it (or in an aligned copy), aligned to its element
// size, with nbytes = numel x dtype size.
inline std::string safetensors_violation(const SafetensorsContents& c, const uint8_t* base, size_t size) {
    for (const TensorView& t : c.tensors) {
        const auto* p = static_cast<const uint8_t*>(t.data);
        bool inside = t.nbytes == 0 || (p >= base && t.nbytes <= size && p <= base + size - t.nbytes);
        for (const auto& copy : c.copies) inside = inside || p == copy.get();
        if (!inside) return "tensor '" + t.name + "' data outside the buffer";
        uint64_t numel = 1;
        for (int64_t d : t.shape) {
            if (d < 0) return "tensor '" + t.name + "' has a negative dimension";
            numel *= uint64_t(d);
        }
        if (numel * dtype_size(t.dtype) != t.nbytes) return "tensor '" + t.name + "' nbytes != numel x dtype size";
        if (uint64_t(t.numel()) != numel) return "tensor '" + t.name + "' numel()";
        if (t.nbytes > 0 && reinterpret_cast<uintptr_t>(p) % dtype_size(t.dtype) != 0)
            return "tensor '" + t.name + "' misaligned";
    }
    return "";
}

// A config that parse_config accepted: every field the model uses in range, the tensor table's shapes
// positive, and the RoPE frequencies in [0, 1] (so that cos/sin of position x frequency are numbers).
inline std::string config_violation(const LlamaConfig& c) {
    if (c.hidden_size < 1 || c.intermediate_size < 1 || c.num_hidden_layers < 1) return "sizes >= 1";
    if (c.num_attention_heads < 1 || c.num_key_value_heads < 1) return "heads >= 1";
    if (c.num_attention_heads % c.num_key_value_heads != 0) return "kv heads divide heads";
    if (c.head_dim < 2 || c.head_dim % 2 != 0) return "head_dim even";
    if (c.vocab_size < 1 || c.max_position_embeddings < 1) return "vocab, positions >= 1";
    if (!std::isfinite(c.rms_norm_eps) || !(c.rms_norm_eps > 0) || !(c.rms_norm_eps < 1)) return "rms_norm_eps";
    if (!std::isfinite(c.rope_theta) || !(c.rope_theta >= 1)) return "rope_theta";
    if (c.bos_token_id < -1 || c.bos_token_id >= c.vocab_size) return "bos_token_id";
    for (int64_t id : c.eos_token_id)
        if (id < 0 || id >= c.vocab_size) return "eos_token_id";
    if (c.num_hidden_layers <= 64) {  // the table of a larger model is the same, only longer
        for (const TensorSpec& s : llama_tensor_table(c)) {
            uint64_t n = 1;
            for (int64_t d : s.shape) {
                if (d < 1 || d > (int64_t(1) << 40)) return "table dimension of " + s.name;
                n *= uint64_t(d);
            }
            if (n >= (uint64_t(1) << 62)) return "table tensor size of " + s.name;
        }
    }
    for (double f : rope_inv_freq(c))
        if (!(f >= 0 && f <= 1)) return "rope inv_freq " + std::to_string(f) + " not in [0, 1]";
    return "";
}

}  // namespace plainllama::fuzz
