// Compute kernels. They know nothing of the model: plain arrays, shapes and storage types.
// Row-major, except weight matrices, packed into panels (below); weights may be F32, F16 or BF16 and are converted
// inside the kernels.
#pragma once
#include <cstdint>
#include <memory>

#include "plainllama/io/dtype.h"
#include "plainllama/kernels/quant.h"
#include "plainllama/sys/zeroed_pages.h"

namespace plainllama {

// Below this many multiply-adds a kernel stays on the calling thread (sys/team.h: parallel_for, use_threads): waking
// the team costs microseconds on an idle machine and far more on a busy one, more than such work takes on one core.
constexpr int64_t kParallelWork = 1 << 17;

// y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w[:]     x, y: [rows, n] of type xt; w: [n] of wt.
// The mean square is accumulated in double (f32 and 16-bit inputs alike), the scale rounded once to f32.
void rmsnorm(void* y, const void* x, DType xt, const void* w, DType wt, int64_t rows, int64_t n, float eps);

// Every build holds the kernels for several instruction sets (src/kernels/isa/) and runs the best the CPU supports,
// or the one the environment variable PLAINLLAMA_KERNELS names:
//   "avx512_bf16"  AVX-512 F/BW/CD/DQ/VL, with AVX512_BF16's vdpbf16ps for BF16 prefill (and AVX512_VNNI)
//   "avx512"       the same without vdpbf16ps
//   "avx2"         AVX2 + FMA + F16C
//   "scalar"       portable C++, any x86-64
// The variant in use; the first call chooses it (UsageError for a PLAINLLAMA_KERNELS this CPU cannot run, or an
// unknown PLAINLLAMA_TUNING). Call it before kernels run inside a parallel region or thread of your own: an error
// thrown there would end the process (PackedWeights::add calls it before its own).
const char* kernels_isa();
// The AVX-512 decode kernels are tuned per CPU family (how they read the weights ahead, how a token's integer sums
// are split into chains, how x is fed to vpdpbusd; src/kernels/isa/policy.h names each family's choices): intel
// (Intel's cores, and any CPU not named below), zen4 (AMD family 25) and zen5 (AMD family 26 or later); the other
// variants have no tuning. tuning() is the one in use: PLAINLLAMA_TUNING's (one of the names), else cpuid's, chosen
// at the first call (kernels_isa chooses it too, so a bad PLAINLLAMA_TUNING is its UsageError). Every choice is exact,
// never a float step, so every tuning gives the same bits.
enum class Tuning { intel, zen4, zen5 };
Tuning tuning();
bool kernels_tuned();               // whether the variant in use (kernels_isa) follows the tuning: the AVX-512 ones
const char* tuning_name(Tuning t);  // "intel", "zen4", "zen5"

// A weight matrix W [N, K] repacked once (at load) for matmul, same storage type: panels of kPanel rows,
// each k-major, so that one step in k reads kPanel contiguous values:
//   F32, F16: panel p = [K][kPanel]; W[kPanel p + j, k] at [k][j]
//   BF16:     panel p = [ceil(K/2)][kPanel][2]; W[kPanel p + j, k] at [k/2][j][k%2] (pairs for vdpbf16ps)
// pack_matrix zeroes the rows past N in the last panel, though no output depends on them (attention's key cache
// is viewed as a PackedMatrix whatever lies past the keys in use); an odd K's BF16 pad must be zero.
// A quantized matrix (quant != none) is not packed in panels: its N rows of blocks stay row-major, as GGUF stores
// them, but in groups of 16 rows, interleaved (quant.h) when N is a multiple of 16. Decode, and products of
// interleaved matrices (at any length) or of fewer than 128 tokens, run integer dot products on 8-bit activations,
// each token as alone; longer products with matrices not interleaved dequantize 32 rows at a time into an f32 panel
// and keep the activations f32.
constexpr int64_t kPanel = 32;
struct PackedMatrix {
    const void* data = nullptr;  // matrix_bytes(...) bytes (PackedWeights' are 64-byte aligned)
    DType dtype = DType::F32;    // float storage; unused when quantized
    int64_t N = 0, K = 0;
    QuantType quant = QuantType::none;
};
size_t packed_bytes(DType t, int64_t N, int64_t K);
// Bytes of an [N, K] matrix packed in its float type t, or quantized to q (K a multiple of q's block).
size_t matrix_bytes(DType t, QuantType q, int64_t N, int64_t K);
// dst = W packed     W: [N, K] row-major of type t; dst: packed_bytes(t, N, K). OpenMP inside.
void pack_matrix(void* dst, const void* W, DType t, int64_t N, int64_t K);
// dst = W quantized to q as rows of blocks (GGUF's layout)     W: [N, K] row-major of float type t; dst: N *
// quant_row_bytes(q, K). The rows over the threads (OpenMP).
void quantize_rows(uint8_t* dst, const void* W, DType t, int64_t N, int64_t K, QuantType q);

// Packed copies of row-major matrices in one allocation that it owns, each 64-byte aligned. A capacity of
// 2 MiB or more sits on 2 MiB pages when the kernel allows (transparent huge pages): with 4 KiB pages, streaming
// the weights costs a TLB miss per page (decode measurably slower) and loading a page fault each.
class PackedWeights {
   public:
    explicit PackedWeights(size_t capacity);  // bytes: the sum of the packed_bytes of what will be added
    // W [N, K] of type t packed into the next free bytes (std::length_error past the capacity), or quantized to q
    // (rows over the threads; K a multiple of q's block).
    PackedMatrix add(const void* W, DType t, int64_t N, int64_t K, QuantType q = QuantType::none);
    // Rows [N, row bytes] of blocks already quantized to q (GGUF layout), copied into the memory layout.
    PackedMatrix add_quantized(const uint8_t* rows, QuantType q, int64_t N, int64_t K);

   private:
    ZeroedPages data_;
    size_t capacity_ = 0, used_ = 0;
};

// out[t, r] = sum_k x[t, k] * W[r, k]     x: [T, K] f32, W packed [N, K], out: [T, N] f32. The team inside.
// T == 1 streams the panels (decode), T > 1 runs a register-blocked GEMM on them (prefill); quantized W: see above.
// Every output is one chain of fused multiply-adds over k = 0 .. K-1 in order, whatever T and the threads:
// row t of out depends only on row t of x, bit for bit, so decoding one token at a time reproduces a batched
// prefill exactly. The one exception: BF16 weights with T > 1 unless `exact` round x to BF16 so that
// AVX512_BF16's vdpbf16ps (exact products, f32 sums, twice the f32 FMA rate) can run, as llama.cpp does for
// BF16 weights; the extra error is at most 2^-8 * sum_k |x[t, k] W[r, k]|.
struct MatmulJob;
// The product that follows this one, when the caller knows it (decode: the next matrices of the layer, or the next
// layer's): with T == 1 the team's workers, their parts of this product done, send the start of their shares of that
// one into L2 while the caller runs the steps in between (team.h's prefetch_after_step). A hint: results never change.
struct MatmulNext {
    const MatmulJob* jobs = nullptr;
    int n_jobs = 0;
};
void matmul(float* out, const float* x, const PackedMatrix& W, int64_t T, bool exact = false, MatmulNext next = {});

// Several products of the same input x [T, K] (every W_i has that K): jobs[i].out [T, N_i] = x W_i^T, the
// panels of all W_i split over the threads in one team step (one barrier instead of one per matrix). Each
// output is matmul's of that job alone, but for interleaved quantized matrices run for 128 tokens or more with
// matrices that are not: they go through the dequantizing GEMM with them (matmul alone keeps them on the integer
// products).
struct MatmulJob {
    float* out;
    const PackedMatrix* W;
};
void matmul_many(const MatmulJob* jobs, int n_jobs, const float* x, int64_t T, bool exact = false,
                 MatmulNext next = {});

// A row-major f32 operand (attention's values), summed in the same order as matmul (one fma chain over k):
// out [T, N] = x [T, K] B with B [K, N], x's rows ldx (>= K) apart.
void matmul_nn(float* out, const float* x, int64_t ldx, const float* B, int64_t T, int64_t N, int64_t K);
// y [N] += x [K] B [K, N]: each y[n]'s chain continued over k = 0 .. K-1, so a matmul_nn row over the first K1
// keys followed by gemv_acc over the next K2 equals one matmul_nn row over all K1 + K2, bit for bit.
void gemv_acc(float* y, const float* x, const float* B, int64_t K, int64_t N);

// out[i] = float(src[i])     src: [n] of type t.
void convert_to_f32(float* out, const void* src, DType t, int64_t n);

// Rotate-half RoPE on one token: x [n_heads, head_dim]; element i pairs with i + head_dim/2:
// (a, b) -> (a*cos - b*sin, b*cos + a*sin), cos/sin: [head_dim/2] for this position.
void rope_rotate_half(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin);

// x = softmax(scale * x) in place, subtracting the max first.     x: [n]
void softmax(float* x, int64_t n, float scale = 1.0f);

// g[i] = silu(g[i]) * u[i]     g, u: [n]
void silu_mul(float* g, const float* u, int64_t n);

// y[i] += x[i]     x, y: [n]
void add_inplace(float* y, const float* x, int64_t n);

// The ways the decode kernels read a stream of weights on different CPUs (src/kernels/isa/policy.h): plain loads, a
// software prefetch of every line, or one of each 4 KiB page's first line.
enum class ReadWay { plain, prefetch_lines, prefetch_pages };
// sum(p[0 .. n)) with the active kernels' vector loads, read `way`, on this thread: a bandwidth test's read (bench/).
// p 64-byte aligned, n a multiple of 64; the order of the additions is the kernels' own.
float sum_stream(const float* p, int64_t n, ReadWay way);
// reps steps of independent multiply-add chains in registers with the active kernels' widest vectors, on this thread:
// an FMA peak test's work (bench/). Returns the chains' sum; *ops: the operations done (a multiply-add counts two).
float fma_burst(int64_t reps, double* ops);

}  // namespace plainllama
