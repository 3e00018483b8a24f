// The LLaMA model (config + weights: matrices repacked for matmul, the rest from the mapping) and a Context
// that runs it: KV cache, activation buffers allocated once, and the forward pass over a batch of tokens or one
// token.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plainllama/io/config.h"
#include "plainllama/io/safetensors.h"
#include "plainllama/kernels/kv_cache.h"
#include "plainllama/model/quant_scheme.h"
#include "plainllama/model/weights.h"
#include "plainllama/sys/error.h"
#include "plainllama/sys/zeroed_pages.h"

namespace plainllama {

// A model folder's config, its checkpoint and the weights bound from it (every tensor present, by name, with the
// shape the config implies), nothing packed; or a GGUF model's (open_gguf_model). read_data false reads config.json
// and the safetensors headers only, touching no page of the weights (`inspect`).
struct ModelFiles {
    LlamaConfig config;
    std::unique_ptr<Checkpoint> checkpoint;
    ModelWeights weights;
};
ModelFiles open_model_files(const std::filesystem::path& dir, bool read_data = true);
// Bytes of the tensors a forward pass reads (a tied lm_head counted once).
size_t weight_bytes(const LlamaConfig& c, const Checkpoint& ckpt);

class Model {
   public:
    // Called while loading with the weight bytes repacked so far and the total.
    using Progress = std::function<void(size_t done, size_t total)>;
    // dir: an HF folder with config.json and model.safetensors (or an index and shards), or a GGUF model (a file,
    // a split set, a folder holding one: gguf_model.h). quant: the weights' formats (quant_scheme.h), quantized
    // from their float type while they are repacked (a GGUF whose matrices are quantized takes none).
    explicit Model(const std::filesystem::path& dir, const Progress& progress = {},
                   QuantScheme quant = QuantScheme::none);
    const LlamaConfig& config() const { return config_; }
    const ModelWeights& weights() const { return weights_; }
    const Checkpoint& checkpoint() const { return *checkpoint_; }
    const std::filesystem::path& dir() const { return dir_; }
    size_t weight_bytes() const { return plainllama::weight_bytes(config_, *checkpoint_); }
    // Bytes a decoded token reads: every matrix as packed or quantized (lm_head included) and the norms; not the
    // embedding of an untied model, of which one row is read.
    size_t bytes_per_token() const { return bytes_per_token_; }
    QuantScheme quant() const { return quant_; }
    // A GGUF's general.file_type as llama.cpp names it ("Q4_K_M"); empty for a folder.
    const std::string& file_type() const { return file_type_; }

   private:
    // Repacks every matrix matmul reads into its Weight::packed and drops its pages of the mapping, so that
    // memory stays about the file's size.
    void pack_weights(const Progress& progress);

    std::filesystem::path dir_;
    LlamaConfig config_;
    std::unique_ptr<Checkpoint> checkpoint_;
    ModelWeights weights_;
    std::unique_ptr<PackedWeights> packed_;    // the panels of weights_' matrices
    std::unique_ptr<uint8_t[]> embed_blocks_;  // [vocab_size][row bytes] the embedding quantized at load, if it is
    QuantScheme quant_ = QuantScheme::none;
    std::string file_type_;
    size_t bytes_per_token_ = 0;
};

// The KV cache size when none is asked for: the model's max_position_embeddings, at most this. (Llama 3.1's 131072
// positions would take an 8 GiB cache for a 1B model before the first token.)
constexpr int64_t kDefaultContext = 4096;

struct ContextParams {
    int64_t n_ctx = 0;      // KV cache positions (of each sequence); 0 = min(max_position_embeddings, kDefaultContext)
    int64_t n_batch = 512;  // most tokens per forward pass (longer inputs are split)
    bool exact = false;     // BF16 weights: keep prefill activations in f32 (see matmul in kernels.h)
    int n_seq = 1;          // sequences, each with its own KV cache of n_ctx positions (the server's slots)
    // The KV cache's storage (kv_cache.h); unset: f32 when exact, else f16.
    std::optional<CacheType> cache_type = std::nullopt;
};

// Bytes of KV cache one position takes (every layer's K and V), and a whole cache of n_ctx positions per sequence as
// a Context allocates it (the refusal, inspect and the Context itself take this one figure).
size_t kv_bytes_per_position(const LlamaConfig& c, CacheType t);
size_t kv_cache_bytes(const LlamaConfig& c, CacheType t, int64_t n_ctx, int n_seq = 1);
// The line refusing a KV cache of `need` bytes where `avail` are available: the bytes of both, the largest -c (a
// multiple of 256) that fits with this type, and a smaller type that fits at this -c.
std::string kv_cache_refusal(const LlamaConfig& c, CacheType t, int64_t n_ctx, int n_seq, uint64_t need,
                             uint64_t avail);
// Bytes of memory a new allocation can take now: MemAvailable + SwapFree (/proc/meminfo); 0 when unknown.
uint64_t available_memory_bytes();

// One token of a batched step: sequence `seq` gets `token` at its next position.
struct SeqToken {
    int seq;
    int32_t token;
};

// A hidden state or a logit that is not finite (a NaN or Inf weight or block scale, or activations past f32's
// range): the message names the layer (or the logits) and the position; `seqs` every sequence of the pass with such a
// row. The pass did not complete: no sequence moved on (see Context::eval).
struct NonFiniteError : Error {
    using Error::Error;
    std::vector<int> seqs;
};

class Context {
   public:
    Context(const Model& model, ContextParams params = {});

    // Called before each batch and each layer (from the evaluating thread; with several contexts, from several):
    // true abandons the evaluation. A long prompt stops within a layer's time, not a whole batch's.
    using Abort = std::function<bool()>;

    // Runs `tokens` at positions n_past(seq) .. n_past(seq)+n-1 of sequence `seq` and appends them to its cache.
    // Returns logits [n, vocab_size] when all_logits, else [1, vocab_size] for the last token; or null when
    // `abort` said so before the end: the cache then holds the batches of n_batch tokens completed before it
    // (n_past() tells how many), the rest is not in it. Every layer's hidden state and the logits are checked:
    // NonFiniteError when one is NaN or Inf (the cache as after an abort).
    const float* eval(const int32_t* tokens, int64_t n, bool all_logits = false, const Abort& abort = {}, int seq = 0);
    const float* eval(const std::vector<int32_t>& tokens, bool all_logits = false, const Abort& abort = {}) {
        return eval(tokens.data(), int64_t(tokens.size()), all_logits, abort);
    }
    // One forward pass over one token of each of several sequences (each seq at most once; at most n_batch): every
    // weight is read once for all of them. Returns logits [batch.size(), vocab_size], row i for batch[i]. A row's
    // logits are those eval() gives its sequence alone, bit for bit (matmul and attention are batch-invariant;
    // BF16 weights need `exact`). NonFiniteError names the sequences whose rows were not finite; no sequence moved
    // on, so the others can be run again.
    const float* eval_step(const std::vector<SeqToken>& batch);

    int64_t n_past(int seq = 0) const { return n_past_[size_t(seq)]; }
    int64_t n_ctx() const { return n_ctx_; }
    int n_seq() const { return int(n_past_.size()); }
    // Forget positions >= n (n <= n_past) of sequence seq: its next eval continues from n.
    void truncate(int64_t n, int seq = 0);
    void reset() {
        for (int s = 0; s < n_seq(); ++s) truncate(0, s);
    }
    size_t kv_bytes() const { return kv_bytes_; }
    CacheType cache_type() const { return cache_type_; }
    const Model& model() const { return model_; }

   private:
    // Rows [row0, row0 + n) of a batch: the next n positions of sequence seq.
    struct Span {
        int seq;
        int64_t row0, n;
    };
    // false when abort() said so (n_past_ unchanged).
    bool forward_batch(const int32_t* tokens, int64_t T, const std::vector<Span>& spans, bool all_logits, float* logits,
                       const Abort& abort);
    void check_tokens(const int32_t* tokens, int64_t n) const;
    // NonFiniteError when x [rows, n] (rows row0 .. of the pass) holds a NaN or Inf; `what` names x, in `layer`
    // (-1: the logits).
    void check_finite(const float* x, int64_t rows, int64_t n, int64_t row0, const std::vector<int>& row_seq,
                      const std::vector<int64_t>& row_pos, int64_t layer, const char* what) const;
    void reserve_scratch(int64_t T);

    const Model& model_;
    int64_t n_ctx_ = 0, n_batch_ = 0;
    std::vector<int64_t> n_past_;  // [n_seq]
    bool exact_ = false;
    // KV cache, per layer and sequence (kv_cache.h): keys as panels, values [num_key_value_heads, n_ctx] rows, in
    // one mapping of kv_bytes_ (zeroed_pages.h: zero, committed as positions are stored, in huge pages where given).
    ZeroedPages kv_;
    size_t kv_bytes_ = 0, k_layer_bytes_ = 0, v_layer_bytes_ = 0;  // the whole cache; one layer and sequence's K, V
    CacheType cache_type_ = CacheType::f16;
    KvView kv_view(int64_t layer, int seq) const;
    std::vector<float> rope_cos_, rope_sin_;  // [n_ctx, head_dim/2]
    // Activations for up to n_batch tokens.
    std::vector<float> x_;        // [n_batch, hidden_size] residual stream
    std::vector<float> xn_;       // [n_batch, hidden_size] normed
    std::vector<float> q_;        // [n_batch, num_attention_heads * head_dim]
    std::vector<float> k_, v_;    // [n_batch, num_key_value_heads * head_dim]
    std::vector<float> att_;      // [n_batch, num_attention_heads * head_dim]
    std::vector<float> gate_;     // [n_batch, intermediate_size]
    std::vector<float> up_;       // [n_batch, intermediate_size]
    std::vector<float> proj_;     // [n_batch, hidden_size] o_proj / down_proj output
    std::vector<float> scratch_;  // attention_scratch(...)
    std::vector<float> logits_;   // [tokens with logits, vocab_size]
};

}  // namespace plainllama
