#include "plainllama/model/model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "plainllama/kernels/attention.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/model/gguf_model.h"
#include "plainllama/model/rope.h"
#include "plainllama/sys/error.h"
#include "plainllama/sys/team.h"
#include "plainllama/sys/threads.h"

namespace plainllama {

ModelFiles open_model_files(const std::filesystem::path& dir, bool read_data) {
    if (std::filesystem::path file; is_gguf_model(dir, &file)) return open_gguf_model(file, read_data);
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
        throw Error(dir.string() + ": not a model directory (expected config.json, *.safetensors, tokenizer.model)");
    ModelFiles f;
    f.config = load_config(dir / "config.json");
    f.checkpoint = std::make_unique<Checkpoint>(dir, read_data);
    f.weights = bind_weights(*f.checkpoint, f.config, dir.string());
    return f;
}

size_t weight_bytes(const LlamaConfig& c, const Checkpoint& ckpt) {
    size_t n = 0;
    for (const TensorSpec& s : llama_tensor_table(c)) n += ckpt.find(s.name)->nbytes;
    return n;
}

Model::Model(const std::filesystem::path& dir, const Progress& progress, QuantScheme quant) : dir_(dir), quant_(quant) {
    ModelFiles f = open_model_files(dir);
    config_ = f.config;
    checkpoint_ = std::move(f.checkpoint);
    weights_ = std::move(f.weights);
    if (auto s = checkpoint_->metadata().find(kQuantSchemeKey); s != checkpoint_->metadata().end()) {
        // a saved quantized folder: its matrices are used as stored
        const QuantScheme saved = parse_scheme(s->second, dir.string() + ": __metadata__ " + kQuantSchemeKey);
        if (quant != QuantScheme::none && quant != saved)
            throw UsageError("--quant " + std::string(scheme_name(quant)) + ": " + dir.string() +
                             " is already quantized (" + scheme_name(saved) + "); give --quant " + scheme_name(saved) +
                             " or none, or quantize the original folder");
        quant_ = saved;
    }
    if (const GgufModel* g = checkpoint_->gguf()) {
        // A GGUF's quantized matrices are used as stored; its file type names the mix (for bench and inspect).
        const int64_t ft = g->meta().integer("general.file_type", 0, 1 << 20, false, -1);
        file_type_ = ft >= 0 ? gguf_file_type_name(ft) : "";
        bool quantized = false;
        for (const TensorSpec& s : llama_tensor_table(config_))
            quantized = quantized || (s.matrix && weight_of(weights_, s).quant != QuantType::none);
        if (quantized && quant != QuantScheme::none)
            throw UsageError("--quant " + std::string(scheme_name(quant)) + ": " + dir.string() +
                             " is already quantized (" + (file_type_.empty() ? "quantized blocks" : file_type_) +
                             "); give --quant none, or quantize an F32, F16 or BF16 GGUF or folder");
        QuantScheme saved = QuantScheme::none;
        if (quantized && ft >= 0 && scheme_of_file_type(ft, &saved)) quant_ = saved;
    }
    pack_weights(progress);
}

void Model::pack_weights(const Progress& progress) {
    // Every matrix with the format it takes; those stored quantized (a saved quantized folder) are copied into the
    // memory layout as they are.
    struct Job {
        Weight* w;
        QuantType q;
        bool stored;
        std::string name;  // the tensor's
    };
    std::vector<Job> matrices;
    bytes_per_token_ = 0;
    bool stored = false;  // matrices stored quantized (a saved folder, a quantized GGUF): used as they are
    for (const TensorSpec& s : llama_tensor_table(config_)) {
        Weight& w = weight_of(weights_, s);
        stored = stored || (s.matrix && w.quant != QuantType::none);
        if (s.matrix)
            matrices.push_back({&w, w.quant != QuantType::none ? w.quant : quant_for(quant_, s, config_),
                                w.quant != QuantType::none, s.name});
        else if (s.layer >= 0 || s.model_field == &ModelWeights::norm)
            bytes_per_token_ += size_t(w.rows * w.cols) * dtype_size(w.dtype);  // norms
    }
    // Quantizing at load, the scheme quantizes the embedding too (as llama.cpp's mixes do): its rows of blocks for the
    // gather, and a tied lm_head packs those blocks.
    const QuantScheme at_load = stored ? QuantScheme::none : quant_;
    Weight& E = weights_.embed_tokens;
    if (E.quant == QuantType::none && quant_for_embedding(at_load, config_) != QuantType::none) {
        const QuantType q = quant_for_embedding(at_load, config_);
        const size_t n = size_t(E.rows * E.cols) * dtype_size(E.dtype);
        const bool tied = weights_.lm_head.data == E.data;
        embed_blocks_.reset(new uint8_t[size_t(E.rows) * quant_row_bytes(q, E.cols)]);
        quantize_rows(embed_blocks_.get(), E.data, E.dtype, E.rows, E.cols, q);
        checkpoint_->release(E.data, n);
        E.data = embed_blocks_.get(), E.dtype = DType::U8, E.quant = q;
        if (tied) weights_.lm_head = E;
    }
    if (config_.tie_word_embeddings && weights_.lm_head.quant != QuantType::none)  // stored apart, or the embedding's
        matrices.push_back(
            {&weights_.lm_head, weights_.lm_head.quant, true,
             weights_.lm_head.data == weights_.embed_tokens.data ? "model.embed_tokens.weight" : "lm_head.weight"});
    else if (config_.tie_word_embeddings)  // packs the embedding's tensor
        matrices.push_back(
            {&weights_.lm_head, quant_for_tied_lm_head(at_load, config_), false, "model.embed_tokens.weight"});

    // bytes of the source tensor
    auto bytes = [](const Job& j) {
        return j.stored ? size_t(j.w->rows) * quant_row_bytes(j.q, j.w->cols)
                        : size_t(j.w->rows * j.w->cols) * dtype_size(j.w->dtype);
    };
    size_t done = 0, total = 0, capacity = 0;
    for (const Job& j : matrices) {
        total += bytes(j);
        const size_t n = matrix_bytes(j.w->dtype, j.q, j.w->rows, j.w->cols);
        capacity += (n + 63) / 64 * 64;
        bytes_per_token_ += n;
    }
    try {
        packed_ = std::make_unique<PackedWeights>(capacity);
    } catch (const std::bad_alloc&) {
        throw Error("out of memory allocating the repacked weight matrices (" + std::to_string(capacity >> 20) +
                    " MiB)");
    }
    // The source ranges repacked so far: the page a tensor shares with the next one is dropped once both are (below).
    std::vector<std::pair<const uint8_t*, size_t>> repacked;
    for (const Job& j : matrices) {
        Weight& w = *j.w;
        if (j.stored && j.q == QuantType::q8_0) {  // the kernels take quants in [-127, 127], as the format's quantizer
            const auto* p = static_cast<const uint8_t*>(w.data);  // writes them (a -128 would be misread by some)
            for (size_t b = 0; b < bytes(j); b += 34)
                for (size_t i = 2; i < 34; ++i)
                    if (p[b + i] == 0x80)
                        throw Error(checkpoint_->find(j.name)->file + ": tensor '" + j.name + "': q8_0 block " +
                                    std::to_string(b / 34) +
                                    " holds the quant -128 (expected -127 .. 127, as q8_0's quantizer writes)");
        }
        const void* src = w.data;
        std::vector<uint8_t> rows;  // a GGUF's attn_q / attn_k rows in HF's order
        if (w.rope_heads > 0) {
            const size_t row = bytes(j) / size_t(w.rows);
            const int64_t head_dim = w.rows / w.rope_heads;
            rows.resize(bytes(j));
            for (int64_t r = 0; r < w.rows; ++r)
                std::memcpy(&rows[size_t(r) * row],
                            static_cast<const uint8_t*>(w.data) + size_t(gguf_rope_row(r, head_dim)) * row, row);
            src = rows.data();
        }
        w.packed = j.stored ? packed_->add_quantized(static_cast<const uint8_t*>(src), j.q, w.rows, w.cols)
                            : packed_->add(src, w.dtype, w.rows, w.cols, j.q);
        checkpoint_->release(w.data, bytes(j));
        repacked.emplace_back(static_cast<const uint8_t*>(w.data), bytes(j));
        done += bytes(j);
        if (progress) progress(done, total);
    }
    // Once more, now that nothing reads the file: neighbours apart by no more than a file's alignment padding as one
    // range, whose whole pages go too (the page two tensors share), and the pages the kernel mapped back around later
    // reads (fault-around) with the rest.
    std::sort(repacked.begin(), repacked.end());
    for (size_t i = 0; i < repacked.size();) {
        const uint8_t* begin = repacked[i].first;
        const uint8_t* end = begin + repacked[i].second;
        for (++i; i < repacked.size() && repacked[i].first <= end + 64; ++i)
            end = std::max(end, repacked[i].first + repacked[i].second);
        checkpoint_->release(begin, size_t(end - begin));
    }
}

namespace {

template <class T>
void alloc(std::vector<T>* v, size_t n, const char* what) {
    try {
        v->assign(n, T(0));
    } catch (const std::bad_alloc&) {
        throw Error(std::string("out of memory allocating the ") + what + " (" + std::to_string(n * sizeof(T) >> 20) +
                    " MiB)");
    } catch (const std::length_error&) {
        throw Error(std::string("out of memory allocating the ") + what);
    }
}

// Whether x [n] holds a NaN or Inf (every exponent bit set): a pass that vectorises.
bool any_non_finite(const float* x, int64_t n) {
    const uint32_t mask = 0x7f800000u;
    uint32_t any = 0;
    for (int64_t i = 0; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, x + i, 4);
        any |= uint32_t((u & mask) == mask);
    }
    return any != 0;
}

// Index of the first value of x [n] that is NaN or Inf, or -1; chunks over the threads when n is large (a prompt's
// activations), then the search in the first bad chunk.
int64_t first_non_finite(const float* x, int64_t n) {
    constexpr int64_t kChunk = 1 << 14;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::atomic<int64_t> first{chunks};
    parallel_for(chunks, n >= kParallelWork, [&](int64_t c) {
        if (!any_non_finite(x + c * kChunk, std::min(kChunk, n - c * kChunk))) return;
        int64_t seen = first.load();
        while (c < seen && !first.compare_exchange_weak(seen, c)) {
        }
    });
    if (first.load() == chunks) return -1;
    for (int64_t i = first.load() * kChunk;; ++i)
        if (!std::isfinite(x[i])) return i;
}

const char* kNonFiniteHint =
    "a NaN or Inf weight or block scale (--check-tensors finds it at load), or activations past f32's range";

// A layer's K or V cache bytes, each rounded up to a 64-byte line (the next one starts on a line).
size_t line_bytes(size_t n) { return (n + 63) / 64 * 64; }

// "4096.0 GiB"
std::string gib(uint64_t bytes) {
    return std::to_string(bytes >> 30) + "." + std::to_string((bytes >> 20 & 1023) * 10 / 1024) + " GiB";
}

}  // namespace

std::string kv_cache_refusal(const LlamaConfig& c, CacheType t, int64_t n_ctx, int n_seq, uint64_t need,
                             uint64_t avail) {
    std::string s = "-c " + std::to_string(n_ctx) + " with --cache-type " + cache_type_name(t) +
                    ": the KV cache needs " + gib(need) + " (" + std::to_string(kv_bytes_per_position(c, t)) +
                    " bytes per position" + (n_seq > 1 ? " x " + std::to_string(n_seq) + " sequences" : "") + ") but " +
                    gib(avail) + " of memory is available";
    std::string fits;
    int64_t lo = 0;  // the largest multiple of 256 positions that fits
    for (int64_t step = int64_t(1) << 40; step >= 256; step /= 2)
        if (lo + step <= n_ctx && kv_cache_bytes(c, t, lo + step, n_seq) <= avail) lo += step;
    if (lo > 0) fits = "-c " + std::to_string(lo);
    for (CacheType o : {CacheType::f16, CacheType::q8_0})
        if (kv_bytes_per_position(c, o) < kv_bytes_per_position(c, t) &&
            cache_type_unsupported(o, c.head_dim).empty() && kv_cache_bytes(c, o, n_ctx, n_seq) <= avail) {
            fits += std::string(fits.empty() ? "" : " or ") + "--cache-type " + cache_type_name(o);
            break;
        }
    return s + (fits.empty() ? "; no context fits" : "; " + fits + " would fit");
}

size_t kv_bytes_per_position(const LlamaConfig& c, CacheType t) {
    return size_t(c.num_hidden_layers) * 2 * size_t(c.num_key_value_heads) * kv_row_bytes(t, c.head_dim);
}

size_t kv_cache_bytes(const LlamaConfig& c, CacheType t, int64_t n_ctx, int n_seq) {
    return size_t(c.num_hidden_layers) * size_t(n_seq) *
           (line_bytes(key_cache_bytes(t, c.num_key_value_heads, c.head_dim, n_ctx)) +
            line_bytes(value_cache_bytes(t, c.num_key_value_heads, c.head_dim, n_ctx)));
}

uint64_t available_memory_bytes() {
    FILE* f = std::fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    uint64_t total = 0;
    bool found = false;
    while (std::fgets(line, sizeof line, f)) {
        unsigned long long kb = 0;
        if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1 || std::sscanf(line, "SwapFree: %llu kB", &kb) == 1) {
            total += uint64_t(kb) << 10;
            found = true;
        }
    }
    std::fclose(f);
    return found ? total : 0;
}

KvView Context::kv_view(int64_t layer, int seq) const {
    const LlamaConfig& c = model_.config();
    const size_t i = size_t(layer * n_seq() + seq);
    uint8_t* k = kv_.get() + i * (k_layer_bytes_ + v_layer_bytes_);
    return KvView{cache_type_, k, k + k_layer_bytes_, c.num_key_value_heads, c.head_dim, n_ctx_};
}

Context::Context(const Model& model, ContextParams p) : model_(model) {
    const LlamaConfig& c = model.config();
    n_ctx_ = p.n_ctx == 0 ? std::min(c.max_position_embeddings, kDefaultContext) : p.n_ctx;
    if (n_ctx_ < 1 || n_ctx_ > c.max_position_embeddings)
        throw UsageError("context size " + std::to_string(n_ctx_) + " must be in [1, " +
                         std::to_string(c.max_position_embeddings) + "] (max_position_embeddings)");
    if (p.n_batch < 1) throw UsageError("batch size must be at least 1");
    if (p.n_seq < 1) throw UsageError("the number of sequences must be at least 1");
    n_batch_ = std::max<int64_t>(std::min(p.n_batch, n_ctx_), p.n_seq);
    n_past_.assign(size_t(p.n_seq), 0);
    exact_ = p.exact;
    const size_t kv = size_t(c.num_key_value_heads * c.head_dim), qd = size_t(c.num_attention_heads * c.head_dim);
    cache_type_ = p.cache_type.value_or(p.exact ? CacheType::f32 : CacheType::f16);
    if (const std::string why = cache_type_unsupported(cache_type_, c.head_dim); !why.empty())
        throw UsageError(std::string("--cache-type ") + cache_type_name(cache_type_) + ": " + why);
    k_layer_bytes_ = line_bytes(key_cache_bytes(cache_type_, c.num_key_value_heads, c.head_dim, n_ctx_));
    v_layer_bytes_ = line_bytes(value_cache_bytes(cache_type_, c.num_key_value_heads, c.head_dim, n_ctx_));
    kv_bytes_ = kv_cache_bytes(c, cache_type_, n_ctx_, p.n_seq);
    // Checked before allocating: with overcommit a too-large cache "succeeds" and the process is killed when its
    // pages are touched.
    const uint64_t avail = available_memory_bytes();
    if (avail > 0 && kv_bytes_ > avail)
        throw Error(kv_cache_refusal(c, cache_type_, n_ctx_, p.n_seq, kv_bytes_, avail));
    kv_ = map_zeroed_pages(kv_bytes_);
    if (!kv_) throw Error("out of memory allocating the KV cache (" + gib(kv_bytes_) + ")");
    rope_tables(rope_inv_freq(c), n_ctx_, &rope_cos_, &rope_sin_);
    const size_t B = size_t(n_batch_), H = size_t(c.hidden_size), F = size_t(c.intermediate_size);
    alloc(&x_, B * H, "activations");
    alloc(&xn_, B * H, "activations");
    alloc(&q_, B * qd, "activations");
    alloc(&k_, B * kv, "activations");
    alloc(&v_, B * kv, "activations");
    alloc(&att_, B * qd, "activations");
    alloc(&gate_, B * F, "activations");
    alloc(&up_, B * F, "activations");
    alloc(&proj_, B * H, "activations");
    alloc(&logits_, size_t(c.vocab_size), "logits");
}

void Context::truncate(int64_t n, int seq) {
    if (seq < 0 || seq >= n_seq()) throw Error("no sequence " + std::to_string(seq));
    if (n < 0 || n > n_past_[size_t(seq)])
        throw Error("cannot truncate the context to " + std::to_string(n) + " tokens");
    n_past_[size_t(seq)] = n;
}

void Context::check_tokens(const int32_t* tokens, int64_t n) const {
    const int64_t V = model_.config().vocab_size;
    for (int64_t i = 0; i < n; ++i)
        if (tokens[i] < 0 || tokens[i] >= V)
            throw Error("token id " + std::to_string(tokens[i]) + " is outside the vocabulary [0, " +
                        std::to_string(V) + ")");
}

void Context::reserve_scratch(int64_t T) {
    const LlamaConfig& c = model_.config();
    const size_t scratch = size_t(attention_scratch(std::min(T, n_batch_), c.num_attention_heads, c.num_key_value_heads,
                                                    n_ctx_, c.head_dim, thread_count()));
    if (scratch_.size() < scratch) alloc(&scratch_, scratch, "attention scratch");
}

const float* Context::eval(const int32_t* tokens, int64_t n, bool all_logits, const Abort& abort, int seq) {
    const LlamaConfig& c = model_.config();
    if (n < 1) throw Error("nothing to evaluate (0 tokens)");
    if (seq < 0 || seq >= n_seq()) throw Error("no sequence " + std::to_string(seq));
    const int64_t past = n_past_[size_t(seq)];
    if (past + n > n_ctx_)
        throw Error(std::to_string(past + n) + " tokens do not fit the context of " + std::to_string(n_ctx_) +
                    " tokens");
    check_tokens(tokens, n);
    const size_t V = size_t(c.vocab_size);
    if (all_logits && logits_.size() < size_t(n) * V) alloc(&logits_, size_t(n) * V, "logits");
    reserve_scratch(n);
    for (int64_t i = 0; i < n; i += n_batch_) {
        const int64_t T = std::min(n_batch_, n - i);
        const bool last = i + T == n;
        float* logits = all_logits ? logits_.data() + size_t(i) * V : last ? logits_.data() : nullptr;
        if (!forward_batch(tokens + i, T, {{seq, 0, T}}, all_logits, logits, abort)) return nullptr;
    }
    return logits_.data();
}

const float* Context::eval_step(const std::vector<SeqToken>& batch) {
    const int64_t T = int64_t(batch.size());
    if (T < 1 || T > n_batch_)
        throw Error("a batched step takes 1 to " + std::to_string(n_batch_) + " tokens, not " + std::to_string(T));
    std::vector<int32_t> tokens(static_cast<size_t>(T));
    std::vector<Span> spans;
    std::vector<bool> seen(size_t(n_seq()), false);
    for (int64_t i = 0; i < T; ++i) {
        const int s = batch[size_t(i)].seq;
        if (s < 0 || s >= n_seq() || seen[size_t(s)])
            throw Error("a batched step takes each sequence once; sequence " + std::to_string(s) + " is not valid");
        if (n_past_[size_t(s)] >= n_ctx_) throw Error("sequence " + std::to_string(s) + ": the context is full");
        seen[size_t(s)] = true;
        tokens[size_t(i)] = batch[size_t(i)].token;
        spans.push_back({s, i, 1});
    }
    check_tokens(tokens.data(), T);
    const size_t V = size_t(model_.config().vocab_size);
    if (logits_.size() < size_t(T) * V) alloc(&logits_, size_t(T) * V, "logits");
    reserve_scratch(1);
    forward_batch(tokens.data(), T, spans, true, logits_.data(), {});
    return logits_.data();
}

// One pass over T <= n_batch tokens at positions n_past_ ...; logits for every token when all_logits,
// else only for the last (when logits is not null). Each block reads like the math:
//   h = x + attn(input_layernorm(x));  x = h + mlp(post_attention_layernorm(h)).
bool Context::forward_batch(const int32_t* tokens, int64_t T, const std::vector<Span>& spans, bool all_logits,
                            float* logits, const Abort& abort) {
    const LlamaConfig& c = model_.config();
    const ModelWeights& w = model_.weights();
    const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_attention_heads, nkv = c.num_key_value_heads;
    const int64_t qd = nh * hd, kvd = nkv * hd, F = c.intermediate_size, half = hd / 2;
    const float eps = float(c.rms_norm_eps);
    // Each row's sequence and position.
    std::vector<int> row_seq(static_cast<size_t>(T));
    std::vector<int64_t> row_pos(static_cast<size_t>(T));
    for (const Span& sp : spans)
        for (int64_t i = 0; i < sp.n; ++i) {
            row_seq[size_t(sp.row0 + i)] = sp.seq;
            row_pos[size_t(sp.row0 + i)] = n_past_[size_t(sp.seq)] + i;
        }

    const Weight& E = w.embed_tokens;  // rows of floats, or of quantized blocks (a GGUF's)
    const size_t row = E.quant != QuantType::none ? quant_row_bytes(E.quant, H) : size_t(H) * dtype_size(E.dtype);
    for (int64_t t = 0; t < T; ++t) {
        const uint8_t* e = static_cast<const uint8_t*>(E.data) + size_t(tokens[t]) * row;
        if (E.quant != QuantType::none)
            dequantize_row(E.quant, e, &x_[size_t(t * H)], H);
        else
            convert_to_f32(&x_[size_t(t * H)], e, E.dtype, H);
    }

    // Layer l's products, in the order they run (o_proj and down_proj write proj_): each call names the next, so that
    // decode's workers prefetch its start meanwhile (MatmulNext).
    struct LayerJobs {
        MatmulJob qkv[3], o[1], gate_up[2], down[1];
    };
    auto layer_jobs = [&](int64_t l) {
        const LayerWeights& L = w.layers[size_t(l)];
        return LayerJobs{{{q_.data(), &L.q_proj.packed}, {k_.data(), &L.k_proj.packed}, {v_.data(), &L.v_proj.packed}},
                         {{proj_.data(), &L.o_proj.packed}},
                         {{gate_.data(), &L.gate_proj.packed}, {up_.data(), &L.up_proj.packed}},
                         {{proj_.data(), &L.down_proj.packed}}};
    };
    const MatmulJob head[1] = {{logits, &w.lm_head.packed}};
    LayerJobs following = layer_jobs(0);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        if (abort && abort()) return false;  // this batch's K/V rows written so far are past n_past_: unused
        const LayerWeights& L = w.layers[size_t(l)];
        const LayerJobs J = following;
        MatmulNext after_down{logits ? head : nullptr, logits ? 1 : 0};  // the last layer's: lm_head, if it runs
        if (l + 1 < c.num_hidden_layers) {
            following = layer_jobs(l + 1);
            after_down = {following.qkv, 3};
        }
        // Attention.
        rmsnorm(xn_.data(), x_.data(), DType::F32, L.input_layernorm.data, L.input_layernorm.dtype, T, H, eps);
        matmul_many(J.qkv, 3, xn_.data(), T, exact_, {J.o, 1});
        parallel_for(T, T * (qd + kvd) >= kParallelWork, [&](int64_t t) {
            const int64_t pos = row_pos[size_t(t)];
            const float* cs = &rope_cos_[size_t(pos * half)];
            const float* sn = &rope_sin_[size_t(pos * half)];
            rope_rotate_half(&q_[size_t(t * qd)], nh, hd, cs, sn);
            rope_rotate_half(&k_[size_t(t * kvd)], nkv, hd, cs, sn);
            store_kv(kv_view(l, row_seq[size_t(t)]), pos, &k_[size_t(t * kvd)], &v_[size_t(t * kvd)]);
        });
        for (const Span& sp : spans)
            attention(&att_[size_t(sp.row0 * qd)], &q_[size_t(sp.row0 * qd)], kv_view(l, sp.seq), sp.n,
                      n_past_[size_t(sp.seq)], nh, scratch_.data());
        // Each product's input is checked before it is read: a quantized product turns a NaN or Inf in its input
        // into finite garbage (the activations' 8-bit blocks), and the logits with it.
        check_finite(att_.data(), T, qd, 0, row_seq, row_pos, l, "attention output");
        matmul_many(J.o, 1, att_.data(), T, exact_, {J.gate_up, 2});
        add_inplace(x_.data(), proj_.data(), T * H);
        check_finite(x_.data(), T, H, 0, row_seq, row_pos, l, "hidden state");

        // SwiGLU MLP: down_proj(silu(gate_proj(x)) * up_proj(x)).
        rmsnorm(xn_.data(), x_.data(), DType::F32, L.post_attention_layernorm.data, L.post_attention_layernorm.dtype, T,
                H, eps);
        matmul_many(J.gate_up, 2, xn_.data(), T, exact_, {J.down, 1});
        silu_mul(gate_.data(), up_.data(), T * F);
        check_finite(gate_.data(), T, F, 0, row_seq, row_pos, l, "MLP activation");
        matmul_many(J.down, 1, gate_.data(), T, exact_, after_down);
        add_inplace(x_.data(), proj_.data(), T * H);
        check_finite(x_.data(), T, H, 0, row_seq, row_pos, l, "hidden state");
    }

    if (logits) {
        const int64_t first = all_logits ? 0 : T - 1, rows = T - first;
        rmsnorm(xn_.data(), &x_[size_t(first * H)], DType::F32, w.norm.data, w.norm.dtype, rows, H, eps);
        matmul(logits, xn_.data(), w.lm_head.packed, rows, exact_);
        check_finite(logits, rows, c.vocab_size, first, row_seq, row_pos, -1, "logits");
    }
    // Only a pass that completed moves the sequences on: after an error their caches hold what they held before.
    for (const Span& sp : spans) n_past_[size_t(sp.seq)] += sp.n;
    return true;
}

void Context::check_finite(const float* x, int64_t rows, int64_t n, int64_t row0, const std::vector<int>& row_seq,
                           const std::vector<int64_t>& row_pos, int64_t layer, const char* what) const {
    const int64_t i = first_non_finite(x, rows * n);
    if (i < 0) return;
    const int64_t row = row0 + i / n;
    const float v = x[i];
    const std::string where = layer < 0 ? " (token " + std::to_string(i % n) + ")" : "";
    NonFiniteError e((layer < 0 ? std::string("the ") : "layer " + std::to_string(layer) + "'s ") + what +
                     " is not finite at position " + std::to_string(row_pos[size_t(row)]) +
                     (n_seq() > 1 ? " of sequence " + std::to_string(row_seq[size_t(row)]) : "") + where + ": " +
                     (std::isnan(v) ? "NaN"
                      : v > 0       ? "+Inf"
                                    : "-Inf") +
                     "; " + kNonFiniteHint);
    // every sequence with a bad row: in a batched step the others are sound and can be evaluated again
    for (int64_t r = i / n; r < rows; ++r) {
        const int s = row_seq[size_t(row0 + r)];
        if (std::find(e.seqs.begin(), e.seqs.end(), s) == e.seqs.end() && first_non_finite(x + r * n, n) >= 0)
            e.seqs.push_back(s);
    }
    throw e;
}

}  // namespace plainllama
