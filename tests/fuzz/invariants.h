// What a parse of hostile bytes must guarantee, shared by the fuzz targets (which abort on a violation) and
// the gtest FuzzRegressions (which replays tests/fuzz/regressions/). Each returns "" or the violated rule.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "plainllama/io/config.h"
#include "plainllama/io/gguf.h"
#include "plainllama/io/gguf_config.h"
#include "plainllama/io/gguf_vocab.h"
#include "plainllama/io/safetensors.h"
#include "plainllama/model/rope.h"
#include "plainllama/model/weights.h"
#include "plainllama/sys/error.h"

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

// A GGUF parsed from [base, base + size): each tensor's data inside it (or in an aligned copy of a float tensor),
// its bytes those of its shape and type, its row length a multiple of the type's block, its offset aligned.
inline std::string gguf_violation(const GgufFile& f, const uint8_t* base, size_t size) {
    for (const GgufTensor& t : f.tensors()) {
        const uint8_t* p = t.data;
        const bool inside = t.nbytes == 0 || (p >= base && t.nbytes <= size && p <= base + size - t.nbytes);
        const bool copied = t.type->block == 1 && reinterpret_cast<uintptr_t>(p) % t.type->block_bytes == 0;
        if (!inside && !copied) return "tensor '" + t.name + "' data outside the buffer";
        uint64_t numel = 1;
        for (int64_t d : t.ne) {
            if (d < 0) return "tensor '" + t.name + "' has a negative dimension";
            numel *= uint64_t(d);
        }
        if (t.ne.empty() || t.ne[0] % t.type->block != 0) return "tensor '" + t.name + "' rows not whole blocks";
        if (numel / uint64_t(t.type->block) * t.type->block_bytes != t.nbytes) return "tensor '" + t.name + "' nbytes";
        if (t.offset % f.alignment() != 0 && inside) return "tensor '" + t.name + "' offset not aligned";
        if (t.rows() < 0) return "tensor '" + t.name + "' rows()";
    }
    return "";
}

// A vocabulary read_gguf_vocab accepted: one type (1 to 6) per token, scores for a llama one, ids in range.
inline std::string vocab_violation(const GgufVocab& v) {
    const int64_t n = int64_t(v.tokens.size());
    if (n < 1 || int64_t(v.types.size()) != n) return "token types";
    for (int32_t t : v.types)
        if (t < 1 || t > 6) return "token type " + std::to_string(t);
    if (v.model == "llama" && int64_t(v.scores.size()) != n) return "scores";
    for (int64_t id : {v.bos, v.eos, v.unk, v.eot})
        if (id < -1 || id >= n) return "special id " + std::to_string(id);
    return "";
}

// fuzz_gguf's check of one input: the reader over [data, data + size), then the config and the vocabulary from
// what it accepted; "" or the violated rule (an Error's message must be one line).
inline std::string gguf_input_violation(const uint8_t* data, size_t size);

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

inline std::string gguf_input_violation(const uint8_t* data, size_t size) {
    std::string violation;
    try {
        auto file = std::make_unique<GgufFile>(data, size, "fuzz.gguf");
        violation = gguf_violation(*file, data, size);
        volatile size_t sink = 0;
        for (const auto& [key, v] : file->metadata()) sink = sink + v.brief().size();
        for (const GgufTensor& t : file->tensors())  // touch both ends: ASan reports a read outside the input
            if (t.nbytes > 0) sink = sink + t.data[0] + t.data[t.nbytes - 1];
        (void)sink;
        if (!violation.empty()) return violation;
        const GgufModel model(std::move(file));
        try {
            violation = config_violation(gguf_config(model));
        } catch (const Error& e) {
            violation = error_violation(e.what());
        }
        if (!violation.empty()) return violation;
        try {
            return vocab_violation(read_gguf_vocab(model.meta()));
        } catch (const Error& e) {
            return error_violation(e.what());
        }
    } catch (const Error& e) {
        return error_violation(e.what());
    }
}

}  // namespace plainllama::fuzz
