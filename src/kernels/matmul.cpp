// matmul on packed weights and the row-major products of attention: the tiling, the threading and the dispatch on
// the weight type, written once over the active ISA table (isa.h), which supplies the register tiles.
//
// Every product sums each output as one chain of multiply-adds over k = 0 .. K-1, in order: register tiles hold
// up to kMRMax tokens x kNR outputs, lanes run along the outputs, and K is cut into kKC blocks whose partial sums go
// through `out` unchanged (an f32 store and load). So an output depends only on its own row of x and column of W,
// whatever T, the tile it lands in or the thread count.
#include <algorithm>
#include <atomic>
#include <memory>
#include <type_traits>
#include <vector>

#include "isa/isa.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/sys/team.h"

namespace plainllama {
namespace {

using isa::BF16;
using isa::F16;
using isa::Kernels;
using isa::kMRMax;
using isa::kNR;
using isa::MicroTile;
static_assert(kNR == kPanel, "the ISA tables' panel width is kPanel");

// Fewest tokens for which a product with quantized weights runs as a GEMM on dequantized panels (below: each token as
// decode, a cache-sized run of panels for all the tokens before the next, so the weights are read from memory once):
// token by token wins for short prompts, the GEMM for long ones. The several-token kernels on tiles (each tile
// unpacked once for several tokens) win at every length, so products of tiled matrices alone use them always, in
// every variant (matmul_many); this threshold is for matrices whose rows are not tiled (N not a multiple of 16).
constexpr int64_t kQuantGemmRows = 128;
// Bytes of quantized weights run through for every token before the next (in L2 meanwhile).
constexpr int64_t kRowsChunkBytes = 256 << 10;
// Decode: bytes at the start of each thread's share of the weights sent into L2 before it quantizes x, so that its
// stream has begun by the time its kernels start (see matvec_many).
constexpr int64_t kShareStartBytes = 16 << 10;
// Decode: each thread claims this part of what is left of its share at a time (Shares: a quarter).
constexpr int64_t kDecodeClaimPart = 4;
// Decode: bytes at the start of each worker's share of the next product (MatmulNext) sent into its L2 after its part
// of this one, while the caller runs the steps in between (the norms, RoPE, attention's start, SwiGLU: the memory
// would idle). Much more than this pushes out the L2's other contents and delays the worker's start on attention.
constexpr int64_t kNextShareBytes = 192 << 10;

// kKC: a panel block [kKC][kNR] f32 (256 KiB) lives in L2, and fewer blocks mean fewer passes over the output tile
// (2048 is faster than 256 .. 1024).
constexpr int64_t kMR = 6, kKC = 2048;
static_assert(kKC % 2 == 0, "BF16 pairs must not straddle K blocks");

using isa::n_panels;

// f(t, mr) for register tiles of rows t .. t+mr-1 covering t0 .. t1-1: kMR rows at a time, the last kMR + r
// (0 < r < kMR) as one tile of 7-8 rows or two of 4-6, never a thin 1-3 row tile (per row, thin tiles cost more: the
// weights they load serve fewer rows; 8 rows cost about what 6 do).
template <class F>
void for_each_row_tile(int64_t t0, int64_t t1, F&& f) {
    for (int64_t t = t0; t < t1;) {
        const int64_t left = t1 - t, mr = left >= 2 * kMR ? kMR : left > kMRMax ? left - left / 2 : left;
        f(t, int(mr));
        t += mr;
    }
}

// out[t0 .. t1-1, n0 .. n0+nr-1] of out [T, N] for one K block [k0, k0 + kc): Wp [kc][ldw] holds W's block k-major.
template <class E>
void tile_rows(const MicroTile<E>* tiles, float* out, int64_t N, const float* x, int64_t ldx, const E* Wp, int64_t ldw,
               int64_t t0, int64_t t1, int64_t n0, int64_t nr, int64_t k0, int64_t kc) {
    for_each_row_tile(t0, t1, [&](int64_t t, int mr) {
        tiles[mr](out + t * N + n0, N, x + t * ldx + k0, ldx, Wp, ldw, kc, nr, k0 > 0);
    });
}

// tile(t0, t1, n0, nr) for every (token chunk, block of kNR outputs) of out [T, N], over the threads.
// Tokens are split too when there are few output blocks, so every thread has work. Below kParallelWork, with one
// thread, or inside a team step or an OpenMP region (attention's products, perplexity's contexts), the tiles run in
// turn on this thread (use_threads): an OpenMP team of one thread, with its dynamic schedule, was most of decode's
// attention once.
template <class Tile>
void for_each_tile(int64_t T_, int64_t N, int64_t K, const Tile& tile) {
    const int64_t n_blocks = (N + kNR - 1) / kNR;
    if (!use_threads(T_ * N * K >= kParallelWork)) {
        for (int64_t nb = 0; nb < n_blocks; ++nb) tile(0, T_, nb * kNR, std::min(kNR, N - nb * kNR));
        return;
    }
    const int64_t threads = thread_count();
    int64_t t_chunks = std::max<int64_t>(1, std::min<int64_t>((T_ + 47) / 48, (4 * threads + n_blocks - 1) / n_blocks));
    int64_t t_step = (T_ + t_chunks - 1) / t_chunks;
    t_step = (t_step + kMR - 1) / kMR * kMR;
    t_chunks = (T_ + t_step - 1) / t_step;
    team_for_each(int(threads), n_blocks * t_chunks, [&](int64_t i, int) {  // i: (output block, token chunk)
        const int64_t nb = i / t_chunks, tc = i % t_chunks;
        tile(tc * t_step, std::min(T_, (tc + 1) * t_step), nb * kNR, std::min(kNR, N - nb * kNR));
    });
}

// x [T, K] as 8-bit blocks, for the quantized matrices of matvec_many, in the calling thread's buffers (read by the
// whole team when T > 1): once per call (and thread, in decode), token and block size needed.
struct QuantizedX {
    const BlockQ8x32* q32 = nullptr;    // [T][K / 32]
    const BlockQ8x256* q256 = nullptr;  // [T][K / 256]
};
QuantizedX quantize_x(const Kernels& ks, const MatmulJob* jobs, int n_jobs, const float* x, int64_t T_, int64_t K) {
    static thread_local std::vector<BlockQ8x32> q32;
    static thread_local std::vector<BlockQ8x256> q256;
    QuantizedX q;
    for (int i = 0; i < n_jobs; ++i) {
        const QuantType t = jobs[i].W->quant;
        if (t != QuantType::none && !quant_k_block(t) && !q.q32) {
            q32.resize(size_t(T_ * (K / 32)));
            for (int64_t r = 0; r < T_; ++r) ks.quantize_q8x32(q32.data() + r * (K / 32), x + r * K, K);
            q.q32 = q32.data();
        } else if (quant_k_block(t) && !q.q256) {
            q256.resize(size_t(T_ * (K / 256)));
            for (int64_t r = 0; r < T_; ++r) ks.quantize_q8x256(q256.data() + r * (K / 256), x + r * K, K);
            q.q256 = q256.data();
        }
    }
    return q;
}
// Token r's blocks.
QuantizedX token(const QuantizedX& q, int64_t r, int64_t K) {
    return {q.q32 ? q.q32 + r * (K / 32) : nullptr, q.q256 ? q.q256 + r * (K / 256) : nullptr};
}

// out[r] = W[r, :] x for rows r0 .. r1-1 of a quantized W whose rows are not tiled, x quantized.
void matvec_quant(const Kernels& ks, float* out, const PackedMatrix& W, const QuantizedX& xq, int64_t r0, int64_t r1) {
    const auto* data = static_cast<const uint8_t*>(W.data);
    switch (W.quant) {
        case QuantType::q8_0:
            return ks.matvec_q8_0(out, data, W.K, xq.q32, r0, r1);
        case QuantType::q4_k:
            return ks.matvec_q4_k(out, data, W.K, xq.q256, r0, r1);
        case QuantType::q6_k:
            return ks.matvec_q6_k(out, data, W.K, xq.q256, r0, r1);
        case QuantType::q4_0:
            return ks.matvec_q4_0(out, data, W.K, xq.q32, r0, r1);
        case QuantType::q5_0:
            return ks.matvec_q5_0(out, data, W.K, xq.q32, r0, r1);
        case QuantType::q5_k:
            return ks.matvec_q5_k(out, data, W.K, xq.q256, r0, r1);
        case QuantType::none:
            return;
    }
}

void matvec_panels(const Kernels& ks, const MatmulJob& j, const float* x, const QuantizedX& xq, int64_t p0,
                   int64_t p1) {
    const PackedMatrix& W = *j.W;
    if (W.quant != QuantType::none) return matvec_quant(ks, j.out, W, xq, p0 * kNR, std::min(W.N, p1 * kNR));
    switch (W.dtype) {
        case DType::F32:
            return ks.matvec_f32(j.out, x, static_cast<const float*>(W.data), W.N, W.K, p0, p1);
        case DType::F16:
            return ks.matvec_f16(j.out, x, static_cast<const F16*>(W.data), W.N, W.K, p0, p1);
        case DType::BF16:
            return ks.matvec_bf16(j.out, x, static_cast<const BF16*>(W.data), W.N, W.K, p0, p1);
        case DType::U8:
            return;  // never packed: U8 is always quantized (above)
    }
}

// out[t] = W x[t] for tokens t < T on panels p0 .. p1-1 of W (j.out [T, N], x [T, K]), each token as alone.
void matvec_tokens(const Kernels& ks, const MatmulJob& j, const float* x, const QuantizedX& xq, int64_t T_, int64_t p0,
                   int64_t p1) {
    const PackedMatrix& W = *j.W;
    if (tiled(W.quant, W.N)) {  // the several-token kernels: each tile unpacked once for all the tokens
        const auto* data = static_cast<const uint8_t*>(W.data);
        const int64_t g0 = p0 * kNR / 16, g1 = std::min(W.N, p1 * kNR) / 16;  // rows 16 g0 .. 16 g1 - 1
        switch (W.quant) {
            case QuantType::q8_0:
                return ks.matvec_q8_0_x16(j.out, W.N, data, W.K, xq.q32, W.K / 32, int(T_), g0, g1);
            case QuantType::q4_k:
                return ks.matvec_q4_k_x16(j.out, W.N, data, W.K, xq.q256, W.K / 256, int(T_), g0, g1);
            case QuantType::q6_k:
                return ks.matvec_q6_k_x16(j.out, W.N, data, W.K, xq.q256, W.K / 256, int(T_), g0, g1);
            case QuantType::q4_0:
                return ks.matvec_q4_0_x16(j.out, W.N, data, W.K, xq.q32, W.K / 32, int(T_), g0, g1);
            case QuantType::q5_0:
                return ks.matvec_q5_0_x16(j.out, W.N, data, W.K, xq.q32, W.K / 32, int(T_), g0, g1);
            case QuantType::q5_k:
                return ks.matvec_q5_k_x16(j.out, W.N, data, W.K, xq.q256, W.K / 256, int(T_), g0, g1);
            case QuantType::none:
                return;
        }
    }
    for (int64_t t = 0; t < T_; ++t)
        matvec_panels(ks, MatmulJob{j.out + t * W.N, &W}, x + t * W.K, token(xq, t, W.K), p0, p1);
}

// [0, n) shared by the threads of a team step: each starts on its own contiguous share (an even split) and takes it
// from the front, `claim` at a time, or with `part` > 0 a part-th of what is left of it (at least `claim`); a thread
// whose share is done moves the back half of what is left of another's into its own share, and goes on as before (so a
// moved range is claimed the same way, and can move again). So each thread streams one run of the weights, restarting
// (prefetch and all) only where it would otherwise wait. A share is one word, begin << 32 | end, changed by
// compare-and-swap (by its owner, and by a thread moving its back half) or, while empty, stored by its owner: its begin
// only rises and its end only falls until then, and the panels it then gets were never in it before, so no swap can
// succeed on a stale word. With the even split alone, decode waited at each step's end for the thread that the memory
// served less at that moment; pieces handed out from one counter fixed the wait but restarted the stream (a piece's
// first tiles come without prefetch) at every piece. Decode claims a quarter of what is left at a time rather than a
// panel: far fewer claims (each a locked compare-and-swap and a call into the kernel), and longer runs of the stream.
class Shares {
   public:
    Shares(int64_t n, int nt, int64_t claim, int64_t part)
        : nt_(nt), claim_(claim), part_(part), ranges_(new Range[size_t(nt)]) {
        for (int t = 0; t < nt; ++t)
            ranges_[t].r.store(pack(start(n, nt, t), start(n, nt, t + 1)), std::memory_order_relaxed);
    }
    // Where thread t's share begins.
    static int64_t start(int64_t n, int nt, int t) { return n * t / nt; }
    // The next range [*lo, *hi) for thread t < nt; false when none is left.
    bool next(int t, int64_t* lo, int64_t* hi) {
        for (;;) {
            if (take(t, true, lo, hi)) return true;
            bool moved = false;
            for (int i = 1; i < nt_ && !moved; ++i) moved = take((t + i) % nt_, false, lo, hi);
            if (!moved) return false;
            ranges_[t].r.store(pack(*lo, *hi), std::memory_order_relaxed);
        }
    }

   private:
    struct alignas(64) Range {  // begin << 32 | end, a cache line each (the owners update theirs all along)
        std::atomic<uint64_t> r;
    };
    static uint64_t pack(int64_t b, int64_t e) { return uint64_t(b) << 32 | uint64_t(e); }  // n < 2^32 (panels)
    // claim from the front of share v (its owner), or half of what is left from its back (another thread)
    bool take(int v, bool front, int64_t* lo, int64_t* hi) {
        uint64_t r = ranges_[v].r.load(std::memory_order_relaxed);
        for (;;) {
            const int64_t b = int64_t(r >> 32), e = int64_t(r & 0xffffffffu);
            if (b >= e) return false;
            const int64_t s =
                front ? std::min(std::max(claim_, part_ > 0 ? (e - b) / part_ : 0), e - b) : (e - b + 1) / 2;
            const uint64_t left = front ? pack(b + s, e) : pack(b, e - s);
            if (ranges_[v].r.compare_exchange_weak(r, left, std::memory_order_relaxed)) {
                *lo = front ? b : e - s, *hi = front ? b + s : e;
                return true;
            }
        }
    }
    const int nt_;
    const int64_t claim_, part_;
    std::unique_ptr<Range[]> ranges_;
};

// The first `bytes` of panel p of the jobs' panels end to end (on into its matrix, not past it): f(start, bytes).
// A quantized matrix holds the same bytes per row throughout, tiled or not (a q4_k tile is more than 16 rows of plain
// blocks, so matrix_bytes of kPanel rows would be the tiled size); float ones are whole packed panels.
template <class F>
void panel_start(const MatmulJob* jobs, int n_jobs, int64_t p, int64_t bytes, const F& f) {
    for (int i = 0; i < n_jobs; ++i) {
        const PackedMatrix& W = *jobs[i].W;
        if (p >= n_panels(W.N)) {
            p -= n_panels(W.N);
            continue;
        }
        const int64_t total = int64_t(matrix_bytes(W.dtype, W.quant, W.N, W.K));
        const int64_t at = W.quant != QuantType::none ? p * kPanel * total / W.N
                                                      : p * int64_t(matrix_bytes(W.dtype, W.quant, kPanel, W.K));
        return f(static_cast<const char*>(W.data) + at, size_t(std::min(at + bytes, total) - at));
    }
}

// Panels in all the jobs, and the threads that share them out in decode.
int64_t total_panels(const MatmulJob* jobs, int n_jobs) {
    int64_t panels = 0;
    for (int i = 0; i < n_jobs; ++i) panels += n_panels(jobs[i].W->N);
    return panels;
}
int decode_threads(int64_t panels, int64_t K, int64_t T_) {
    return use_threads(panels * kPanel * K * T_ >= kParallelWork) ? thread_count() : 1;
}

// Decode, and several tokens with quantized weights: out_i[t] = W_i x[t] for every job and token, in one team
// step: the panels of all jobs, end to end, are shared out (Shares), so each thread streams a run of the weights
// once; with several tokens, runs of about kRowsChunkBytes of them, each for every token before the next. Each output
// is computed as for the token alone (the same kernel, or the several-token kernel, which repeats its steps per
// token), so the same bits whichever thread computes it.
void matvec_many(const Kernels& ks, const MatmulJob* jobs, int n_jobs, const float* x, int64_t T_, int64_t K,
                 MatmulNext next) {
    const int64_t panels = total_panels(jobs, n_jobs);
    int64_t panel_bytes = 1;
    for (int i = 0; i < n_jobs; ++i) {
        const PackedMatrix& W = *jobs[i].W;
        panel_bytes = std::max<int64_t>(panel_bytes, int64_t(matrix_bytes(W.dtype, W.quant, kPanel, K)));
    }
    const int nt = decode_threads(panels, K, T_);
    // the next product's shares, for its workers to prefetch (T_ == 1)
    const int64_t next_panels = T_ == 1 && next.n_jobs > 0 ? total_panels(next.jobs, next.n_jobs) : 0;
    const int next_nt = next_panels > 0 ? decode_threads(next_panels, next.jobs[0].W->K, 1) : 1;
    Shares shares(panels, nt, T_ == 1 ? 1 : std::max<int64_t>(1, kRowsChunkBytes / panel_bytes),
                  T_ == 1 ? kDecodeClaimPart : 0);
    // Decode: every thread quantizes x itself (the same bytes) rather than one before the step while the others
    // wait: the same time before the first weights are read, with no barrier. Several tokens: once, before (a copy per
    // thread would cost each thread the whole batch, in time and memory). In decode each thread first sends the start
    // of its share into L2 (kShareStartBytes), where its stream would otherwise wait for x to be quantized.
    const QuantizedX shared_xq = T_ > 1 ? quantize_x(ks, jobs, n_jobs, x, T_, K) : QuantizedX{};
    auto run = [&](int t) {  // thread t of nt
        if (T_ == 1)
            panel_start(jobs, n_jobs, Shares::start(panels, nt, t), kShareStartBytes, [](const char* p, size_t n) {
                for (size_t o = 0; o < n; o += 64) __builtin_prefetch(p + o, 0, 2);
            });
        const QuantizedX xq = T_ > 1 ? shared_xq : quantize_x(ks, jobs, n_jobs, x, T_, K);
        int64_t g0, g1;
        while (shares.next(t, &g0, &g1)) {
            int64_t base = 0;
            for (int i = 0; i < n_jobs; ++i) {
                const int64_t np = n_panels(jobs[i].W->N), lo = std::max(g0, base), hi = std::min(g1, base + np);
                if (lo < hi) matvec_tokens(ks, jobs[i], x, xq, T_, lo - base, hi - base);
                base += np;
            }
        }
        if (t > 0 && t < next_nt)  // worker t runs part t of the next step too (when the team runs it: a hint)
            panel_start(next.jobs, next.n_jobs, Shares::start(next_panels, next_nt, t), kNextShareBytes,
                        prefetch_after_step);
    };
    team_run(nt, run);
}

// The table's direct tiles for 16-bit panels of T, and the tallest tile they take (0: always widen).
const MicroTile<F16>* direct_tiles(const Kernels& ks, const F16*) { return ks.tile_f16; }
const MicroTile<BF16>* direct_tiles(const Kernels& ks, const BF16*) { return ks.tile_bf16; }
int64_t direct_rows(const Kernels& ks, const F16*) { return ks.f16_direct_rows; }
int64_t direct_rows(const Kernels& ks, const BF16*) { return ks.bf16_direct_rows; }

// A panel block [k0, k0 + kc) of packed panel P as f32 [kc][kNR] in buf (16-bit values widen exactly).
void widen_block(const Kernels& ks, float* buf, const F16* P, int64_t k0, int64_t kc) {
    ks.widen_f16(buf, P + k0 * kNR, kc * kNR);
}
void widen_block(const Kernels& ks, float* buf, const BF16* P, int64_t k0, int64_t kc) {  // k0 even
    ks.widen_bf16_pairs(buf, P + k0 * kNR, kc);
}

// Prefill, one tile: out[t0 .. t1-1, n0 .. n0+nr-1] of out [T, N] = x W^T from panel n0 / kPanel, a K block at a
// time as f32: F32 from the panel itself; F16 and BF16 read straight (a tile of at most direct_rows rows: few rows
// cannot repay widening a block) or widened into a per-thread buffer first.
template <class T>
void gemm_tile(const Kernels& ks, float* out, const float* x, const T* W, int64_t N, int64_t K, int64_t t0, int64_t t1,
               int64_t n0, int64_t nr) {
    const T* P = W + n0 * isa::stored_k(isa::Pairs<T>::value, K);
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
        const int64_t kc = std::min(kKC, K - k0);
        if constexpr (std::is_same_v<T, float>) {
            tile_rows(ks.tile_f32, out, N, x, K, P + k0 * kNR, kNR, t0, t1, n0, nr, k0, kc);
        } else if (t1 - t0 <= direct_rows(ks, P)) {
            tile_rows(direct_tiles(ks, P), out, N, x, K, P + k0 * kNR, kNR, t0, t1, n0, nr, k0, kc);
        } else {
            float* buf = isa::thread_buffer(size_t(kKC * kNR));  // [kc][kNR]
            widen_block(ks, buf, P, k0, kc);
            tile_rows(ks.tile_f32, out, N, x, K, static_cast<const float*>(buf), kNR, t0, t1, n0, nr, k0, kc);
        }
    }
}

// Prefill with a quantized W, one tile as gemm_tile: each K block of the tile's rows dequantized (exactly) and
// transposed into an f32 panel block, then the f32 tiles. Unlike decode, x stays f32: more exact than decode's 8-bit
// activations, and as fast as F32 weights once the block is widened (the tile's tokens share it).
void gemm_tile_quant(const Kernels& ks, float* out, const float* x, const PackedMatrix& W, int64_t t0, int64_t t1,
                     int64_t n0, int64_t nr) {
    static_assert(kKC % 256 == 0, "K blocks hold whole quantized blocks");
    const int64_t K = W.K;
    const size_t row_bytes = quant_row_bytes(W.quant, K);
    const auto* rows = static_cast<const uint8_t*>(W.data) + size_t(n0) * row_bytes;
    static thread_local std::vector<float> wide;  // [nr][kc] the rows' weights in the block
    if (wide.size() < size_t(kNR * kKC)) wide.resize(size_t(kNR * kKC));
    const bool rows16 = tiled(W.quant, W.N);
    static thread_local std::vector<uint8_t> gguf;  // a row's blocks in the K block, from the tiles
    if (rows16 && gguf.size() < quant_row_bytes(W.quant, kKC)) gguf.resize(quant_row_bytes(W.quant, kKC));
    float* buf = isa::thread_buffer(size_t(kKC * kNR));  // [kc][kNR]
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
        const int64_t kc = std::min(kKC, K - k0);
        const size_t offset = quant_row_bytes(W.quant, k0);
        for (int64_t r = 0; r < nr; ++r) {
            const uint8_t* src = rows + size_t(r) * row_bytes + offset;
            if (rows16) {  // tiles of 16 rows (n0 is a multiple of 32)
                const int64_t g = (n0 + r) / 16, blk = quant_block(W.quant), nb = K / blk;
                deinterleave(W.quant, gguf.data(),
                             static_cast<const uint8_t*>(W.data) + size_t(g * nb) * tile_bytes(W.quant), (n0 + r) % 16,
                             k0 / blk, kc / blk, g * nb);
                src = gguf.data();
            }
            ks.dequantize(W.quant, src, &wide[size_t(r * kc)], kc);
        }
        ks.pack_block32(reinterpret_cast<uint32_t*>(buf), reinterpret_cast<const uint32_t*>(wide.data()), kc, 0, nr, 0,
                        kc);
        tile_rows(ks.tile_f32, out, W.N, x, K, static_cast<const float*>(buf), kNR, t0, t1, n0, nr, k0, kc);
    }
}

// x [T, K] rounded to BF16 pairs [T, ceil(K/2)], in a per-thread buffer.
const uint32_t* bf16_pairs(const Kernels& ks, const float* x, int64_t T_, int64_t K) {
    const int64_t Kp = (K + 1) / 2;
    static thread_local std::vector<uint32_t> xb;
    if (xb.size() < size_t(T_ * Kp)) xb.resize(size_t(T_ * Kp));
    for (int64_t t = 0; t < T_; ++t) ks.round_bf16_pairs(xb.data() + t * Kp, x + t * K, K);
    return xb.data();
}

// BF16 weights in prefill unless exact: x rounded to BF16 (as llama.cpp does for BF16 weights) and vdpbf16ps,
// which multiplies pairs exactly and accumulates in f32, at twice the FMA rate. One tile as gemm_tile, with
// xb = bf16_pairs(x); the panels already hold the pairs, [K/2][kNR] words.
void gemm_tile_bf16_dot(const Kernels& ks, float* out, const uint32_t* xb, const BF16* W, int64_t N, int64_t K,
                        int64_t t0, int64_t t1, int64_t n0, int64_t nr) {
    constexpr int64_t kKCP = kKC / 2;  // k pairs per block
    const int64_t Kp = (K + 1) / 2;
    const uint32_t* P = reinterpret_cast<const uint32_t*>(W) + n0 * Kp;  // [Kp][kNR] pairs
    for (int64_t p0 = 0; p0 < Kp; p0 += kKCP) {
        const int64_t pc = std::min(kKCP, Kp - p0);
        for_each_row_tile(t0, t1, [&](int64_t t, int mr) {
            ks.tile_bf16_dot[mr](out + t * N + n0, N, xb + t * Kp + p0, Kp, P + p0 * kNR, pc, nr, p0 > 0);
        });
    }
}

// Prefill for several products of the same x [T, K]: one tile space over the panels of all jobs, so one
// team step (one barrier, and no thread idle at the end of each matrix).
void gemm_many(const Kernels& ks, const MatmulJob* jobs, int n_jobs, const float* x, int64_t T_, bool exact) {
    const int64_t K = jobs[0].W->K;
    const bool dot = !exact && ks.tile_bf16_dot[1];
    std::vector<int64_t> first(size_t(n_jobs) + 1, 0);  // first[i]: job i's first panel in the joint space
    bool any_bf16 = false;
    for (int i = 0; i < n_jobs; ++i) {
        first[size_t(i) + 1] = first[size_t(i)] + n_panels(jobs[i].W->N);
        any_bf16 = any_bf16 || jobs[i].W->dtype == DType::BF16;
    }
    const uint32_t* xb = dot && any_bf16 ? bf16_pairs(ks, x, T_, K) : nullptr;
    for_each_tile(T_, first.back() * kNR, K, [&](int64_t t0, int64_t t1, int64_t g0, int64_t) {
        const int64_t gp = g0 / kNR;
        int i = 0;
        while (gp >= first[size_t(i) + 1]) ++i;
        const PackedMatrix& W = *jobs[i].W;
        const int64_t n0 = (gp - first[size_t(i)]) * kNR, nr = std::min(kNR, W.N - n0);
        float* out = jobs[i].out;
        if (W.quant != QuantType::none) return gemm_tile_quant(ks, out, x, W, t0, t1, n0, nr);
        switch (W.dtype) {
            case DType::F32:
                return gemm_tile(ks, out, x, static_cast<const float*>(W.data), W.N, K, t0, t1, n0, nr);
            case DType::F16:
                return gemm_tile(ks, out, x, static_cast<const F16*>(W.data), W.N, K, t0, t1, n0, nr);
            case DType::BF16:
                if (xb)
                    return gemm_tile_bf16_dot(ks, out, xb, static_cast<const BF16*>(W.data), W.N, K, t0, t1, n0, nr);
                return gemm_tile(ks, out, x, static_cast<const BF16*>(W.data), W.N, K, t0, t1, n0, nr);
            case DType::U8:
                return;  // never packed: U8 is always quantized (above)
        }
    });
}

}  // namespace

float* isa::thread_buffer(size_t n) {
    static thread_local std::vector<float> buf;
    if (buf.size() < n + 16) buf.resize(n + 16);
    return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t(63));
}

void matmul(float* out, const float* x, const PackedMatrix& W, int64_t T, bool exact, MatmulNext next) {
    const MatmulJob job{out, &W};
    matmul_many(&job, 1, x, T, exact, next);
}

void matmul_many(const MatmulJob* jobs, int n_jobs, const float* x, int64_t T, bool exact, MatmulNext next) {
    if (T < 1 || n_jobs < 1) return;
    const Kernels& ks = isa::active();
    if (T == 1) return matvec_many(ks, jobs, n_jobs, x, 1, jobs[0].W->K, next);
    // Quantized weights and a few tokens (a chat turn, the server's step): dequantizing every block for the GEMM
    // costs more than decode's integer products for each token.
    // Products of tiled matrices alone stay integer at any length (the several-token kernels): faster than the GEMM
    // with the AVX tables; the scalar one takes the tokens in turn, slower, for the same bits.
    bool quantized = false, all_tiled = true;
    for (int i = 0; i < n_jobs; ++i) {
        const PackedMatrix& W = *jobs[i].W;
        quantized = quantized || W.quant != QuantType::none;
        all_tiled = all_tiled && tiled(W.quant, W.N);
    }
    if (quantized && (T < kQuantGemmRows || all_tiled)) return matvec_many(ks, jobs, n_jobs, x, T, jobs[0].W->K, {});
    gemm_many(ks, jobs, n_jobs, x, T, exact);
}

void matmul_nn(float* out, const float* x, int64_t ldx, const float* B, int64_t T, int64_t N, int64_t K) {
    if (T < 1 || N < 1) return;
    const Kernels& ks = isa::active();
    for_each_tile(T, N, K, [&](int64_t t0, int64_t t1, int64_t n0, int64_t nr) {
        for (int64_t k0 = 0; k0 < K; k0 += kKC)
            tile_rows(ks.tile_f32, out, N, x, ldx, B + k0 * N + n0, N, t0, t1, n0, nr, k0, std::min(kKC, K - k0));
    });
}

void gemv_acc(float* y, const float* x, const float* B, int64_t K, int64_t N) {
    if (K < 1) return;
    const Kernels& ks = isa::active();
    for (int64_t n0 = 0; n0 < N; n0 += kNR) ks.tile_f32[1](y + n0, 0, x, 0, B + n0, N, K, std::min(kNR, N - n0), true);
}

}  // namespace plainllama
