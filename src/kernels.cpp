#include "plainllama/kernels.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// GCC 12 flags the intrinsics' own _mm512_undefined_* temporaries (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#define PL_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// Machines without AVX-512 (most laptops and desktops): the same kernels on 8 lanes.
#include <immintrin.h>
#define PL_AVX2 1
#endif

namespace plainllama {
namespace {

template <class T>
inline float to_f32(T v);
template <>
inline float to_f32<float>(float v) { return v; }

// Typed views of 16-bit storage.
struct F16 { uint16_t bits; };
struct BF16 { uint16_t bits; };
template <>
inline float to_f32<F16>(F16 v) { return f16_to_f32(v.bits); }
template <>
inline float to_f32<BF16>(BF16 v) { return bf16_to_f32(v.bits); }

#ifdef PL_AVX512
// 16 lanes of any storage type as f32; `m` masks a tail.
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const F16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512 load16(const BF16* p) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(const F16* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
inline __m512 load16(const BF16* p, __mmask16 m) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline __mmask16 tail_mask(int64_t n) { return __mmask16((1u << n) - 1u); }
#endif

#ifdef PL_AVX2
// 8 lanes of any storage type as f32.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const F16* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load8(const BF16* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
// Lanes i < n set (all for n >= 8, none for n <= 0), for maskload / maskstore.
inline __m256i lane_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::clamp<int64_t>(n, 0, 8))),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// A BF16 pair word (k even in the low half, k+1 in the high half) as two f32 vectors.
inline __m256 bf16_even(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }
inline __m256 bf16_odd(__m256i v) {
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
}
#endif

template <class T>
void convert_row(float* out, const T* src, int64_t n) {
    int64_t i = 0;
#ifdef PL_AVX512
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, load16(src + i));
    if (i < n) _mm512_mask_storeu_ps(out + i, tail_mask(n - i), load16(src + i, tail_mask(n - i)));
#else
#ifdef PL_AVX2
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, load8(src + i));
#endif
    for (; i < n; ++i) out[i] = to_f32(src[i]);
#endif
}

template <class T>
void store_row(T* out, const float* src, int64_t n);
template <>
void store_row<F16>(F16* out, const float* src, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i].bits = f32_to_f16(src[i]);
}
template <>
void store_row<BF16>(BF16* out, const float* src, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i].bits = f32_to_bf16(src[i]);
}

// e^x within ~2 ulp (0 below -87.33, inf above 88.37), written so that loops over it vectorise: x = n ln2 + r (Cody-Waite), |r| <= ln2/2,
// e^r by its Taylor polynomial to degree 7, times 2^n built in the exponent bits.
inline float exp_f32(float x_in) {
    const float x = std::min(88.37f, std::max(-87.33f, x_in));  // NaN -> -87.33: the int conversion stays defined
    const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest
    const float r = (x - n * 0.693145752f) - n * 1.42860677e-6f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = (int32_t(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, 4);
    const float y = p * scale;
    return x_in < -87.33f ? 0.0f : x_in > 88.37f ? HUGE_VALF : x_in == x_in ? y : x_in;  // 0, inf; NaN stays NaN
}

// ---- RMSNorm ---------------------------------------------------------------------------------

template <class X, class W>
void rmsnorm_rows(X* y, const X* x, const W* w, int64_t rows, int64_t n, float eps) {
    static thread_local std::vector<float> w_buf;  // [n] w widened once per call, not once per row
    if (w_buf.size() < size_t(n)) w_buf.resize(size_t(n));
    float* wf = w_buf.data();
    convert_row(wf, w, n);
#pragma omp parallel for schedule(static) if (rows * n >= kParallelWork && rows > 1)
    for (int64_t r = 0; r < rows; ++r) {
        // F32 rows are read in place; 16-bit ones widened into a per-thread row first.
        const float* xr;
        float* xw = nullptr;
        if constexpr (std::is_same_v<X, float>) {
            xr = x + r * n;
        } else {
            static thread_local std::vector<float> row;
            if (row.size() < size_t(n)) row.resize(size_t(n));
            convert_row(row.data(), x + r * n, n);
            xr = xw = row.data();
        }
        // The mean square in double: exact to about an f32 ulp whatever n and the lane count, and no overflow
        // (an f32 sum of squares overflows from |x| ~ 1.8e19).
        double ss = 0.0;
#pragma omp simd reduction(+ : ss)
        for (int64_t i = 0; i < n; ++i) ss += double(xr[i]) * double(xr[i]);
        const float scale = float(1.0 / std::sqrt(ss / double(n) + double(eps)));
        if constexpr (std::is_same_v<X, float>) {
            float* yr = y + r * n;
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale * wf[i];
        } else {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) xw[i] = xw[i] * scale * wf[i];
            store_row(y + r * n, xw, n);
        }
    }
}

template <class X>
void rmsnorm_x(X* y, const X* x, const void* w, DType wt, int64_t rows, int64_t n, float eps) {
    switch (wt) {
        case DType::F32: return rmsnorm_rows(y, x, static_cast<const float*>(w), rows, n, eps);
        case DType::F16: return rmsnorm_rows(y, x, static_cast<const F16*>(w), rows, n, eps);
        case DType::BF16: return rmsnorm_rows(y, x, static_cast<const BF16*>(w), rows, n, eps);
    }
}

// ---- matmul ------------------------------------------------------------------------------------
// Every product here sums each output as one chain of fused multiply-adds over k = 0 .. K-1, in order:
// register tiles hold kMR tokens x kNR outputs, lanes run along the outputs, and K is cut into kKC blocks
// whose partial sums go through `out` unchanged (an f32 store and load). So an output depends only on its
// own row of x and column of W, whatever T, the tile it lands in or the thread count.

constexpr int64_t kNR = kPanel, kMR = 6, kKC = 2048;
static_assert(kKC % 2 == 0, "BF16 pairs must not straddle K blocks");
// kKC: K blocks of 2048 measured faster than 256..1024 (F32 GEMM 222 vs 197 GFLOP/s at 256): a panel block
// [kKC][kNR] f32 (256 KiB) lives in L2, and fewer blocks mean fewer passes over the output tile.

// A per-thread buffer of at least n floats, 64-byte aligned, kept between calls.
float* thread_buffer(size_t n) {
    static thread_local std::vector<float> buf;
    if (buf.size() < n + 16) buf.resize(n + 16);
    return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t(63));
}

// Stored k extent of a packed panel: BF16 pairs round K up to even.
int64_t stored_k(DType t, int64_t K) { return t == DType::BF16 ? (K + 1) / 2 * 2 : K; }
int64_t n_panels(int64_t N) { return (N + kPanel - 1) / kPanel; }
template <class T>  // float, F16, BF16
constexpr DType dtype_of() {
    return std::is_same_v<T, BF16> ? DType::BF16 : std::is_same_v<T, F16> ? DType::F16 : DType::F32;
}
// Where W[kPanel p + j, k] sits inside panel p (see PackedMatrix): [k][j], or [k/2][j][k%2] for BF16 pairs.
inline int64_t panel_at(bool pairs, int64_t k, int64_t j) {
    return pairs ? k / 2 * 2 * kPanel + j * 2 + k % 2 : k * kPanel + j;
}

#ifdef PL_AVX512
// r[i] = row i of a 16x16 block  ->  r[i] = column i.
inline void transpose16x16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; ++i) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xDD);
        }
    for (int i = 0; i < 8; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    }
}

// A BF16 pair word (k even in the low half, k+1 in the high half) as two f32 vectors.
inline __m512 bf16_even(__m512i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); }
inline __m512 bf16_odd(__m512i v) {
    return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))));
}

// An MR x kNR tile of out in registers, columns masked to nr; starts from out when accumulating.
template <int MR>
struct OutTile {
    __m512 acc0[MR], acc1[MR];
    __mmask16 m0, m1;
    OutTile(const float* out, int64_t ldo, int64_t nr, bool accumulate)
        : m0(nr >= 16 ? __mmask16(0xffff) : tail_mask(nr)),
          m1(nr >= 32 ? __mmask16(0xffff) : nr > 16 ? tail_mask(nr - 16) : __mmask16(0)) {
        for (int i = 0; i < MR; ++i) {
            acc0[i] = accumulate ? _mm512_maskz_loadu_ps(m0, out + i * ldo) : _mm512_setzero_ps();
            acc1[i] = accumulate ? _mm512_maskz_loadu_ps(m1, out + i * ldo + 16) : _mm512_setzero_ps();
        }
    }
    void store(float* out, int64_t ldo) const {
        for (int i = 0; i < MR; ++i) {
            _mm512_mask_storeu_ps(out + i * ldo, m0, acc0[i]);
            _mm512_mask_storeu_ps(out + i * ldo + 16, m1, acc1[i]);
        }
    }
};
#endif

// out[i, j] (+)= sum_{k < kc} x[i * ldx + k] * W[k, j]   for i < MR, j < nr <= kNR, W[k, j] at Wp[k * ldw + j]:
// f32 (any ldw; a partial row-major block is read masked), or a packed panel (ldw == kNR, the only layout for
// 16-bit E) read straight and widened in registers: F16, or BF16 pairs (W[k, j] at Wp[k / 2 * 2 * kNR + 2 j +
// k % 2]); which ISA takes which is direct_rows' table. A panel is read whole, past nr: each column is its own
// lane and only the first nr are stored, so whatever lies there (zeros, or the key cache's unused slots) cannot
// reach a result.
template <int MR, class E = float>
void micro_tile(float* out, int64_t ldo, const float* x, int64_t ldx, const E* Wp, int64_t ldw, int64_t kc, int64_t nr,
                bool accumulate) {
    [[maybe_unused]] constexpr bool pairs = std::is_same_v<E, BF16>;
#ifdef PL_AVX512
    OutTile<MR> c(out, ldo, nr, accumulate);
    auto fma_k = [&](__m512 w0, __m512 w1, int64_t k) {  // acc += x[:, k] * W[k, :]
        for (int i = 0; i < MR; ++i) {
            const __m512 xb = _mm512_set1_ps(x[i * ldx + k]);
            c.acc0[i] = _mm512_fmadd_ps(xb, w0, c.acc0[i]);
            c.acc1[i] = _mm512_fmadd_ps(xb, w1, c.acc1[i]);
        }
    };
    if constexpr (pairs) {
        const uint32_t* w = reinterpret_cast<const uint32_t*>(Wp);
        int64_t k = 0;
        for (; k + 2 <= kc; k += 2, w += kNR) {
            const __m512i v0 = _mm512_loadu_si512(w), v1 = _mm512_loadu_si512(w + 16);
            fma_k(bf16_even(v0), bf16_even(v1), k);
            fma_k(bf16_odd(v0), bf16_odd(v1), k + 1);
        }
        if (k < kc) fma_k(bf16_even(_mm512_loadu_si512(w)), bf16_even(_mm512_loadu_si512(w + 16)), k);
    } else if (!std::is_same_v<E, float> || nr == kNR || ldw == kNR) {  // a full block, a panel or pack buffer
        for (int64_t k = 0; k < kc; ++k) fma_k(load16(Wp + k * ldw), load16(Wp + k * ldw + 16), k);
    } else if constexpr (std::is_same_v<E, float>) {
        // Masked loads cost half the speed on Zen 4: only for a partial block of a row-major B.
        for (int64_t k = 0; k < kc; ++k) fma_k(load16(Wp + k * ldw, c.m0), load16(Wp + k * ldw + 16, c.m1), k);
    }
    c.store(out, ldo);
#elif defined(PL_AVX2)
    static_assert(!pairs, "AVX2: BF16 panels are widened first (see direct_rows)");
    if constexpr (MR > 6) {  // 16 registers: up to 6 rows x 16 columns (12 accumulators) at a time
        micro_tile<4, E>(out, ldo, x, ldx, Wp, ldw, kc, nr, accumulate);
        micro_tile<MR - 4, E>(out + 4 * ldo, ldo, x + 4 * ldx, ldx, Wp, ldw, kc, nr, accumulate);
    } else {
        for (int64_t h = 0; h < nr; h += 16) {
            // maskload / maskstore only for a partial block: they are slow on some cores.
            const bool full = nr - h >= 16;
            const __m256i m0 = lane_mask(nr - h), m1 = lane_mask(nr - h - 8);
            __m256 a0[MR], a1[MR];
            for (int i = 0; i < MR; ++i) {
                float* o = out + i * ldo + h;
                a0[i] = !accumulate ? _mm256_setzero_ps() : full ? _mm256_loadu_ps(o) : _mm256_maskload_ps(o, m0);
                a1[i] = !accumulate ? _mm256_setzero_ps()
                        : full      ? _mm256_loadu_ps(o + 8)
                                    : _mm256_maskload_ps(o + 8, m1);
            }
            auto fma_k = [&](__m256 w0, __m256 w1, int64_t k) {
                for (int i = 0; i < MR; ++i) {
                    const __m256 xb = _mm256_broadcast_ss(x + i * ldx + k);
                    a0[i] = _mm256_fmadd_ps(xb, w0, a0[i]);
                    a1[i] = _mm256_fmadd_ps(xb, w1, a1[i]);
                }
            };
            if (!std::is_same_v<E, float> || full || ldw == kNR) {  // as above: a panel is read past nr
                for (int64_t k = 0; k < kc; ++k) fma_k(load8(Wp + k * ldw + h), load8(Wp + k * ldw + h + 8), k);
            } else if constexpr (std::is_same_v<E, float>) {
                for (int64_t k = 0; k < kc; ++k) {
                    const float* w = Wp + k * ldw + h;
                    fma_k(_mm256_maskload_ps(w, m0), _mm256_maskload_ps(w + 8, m1), k);
                }
            }
            for (int i = 0; i < MR; ++i) {
                float* o = out + i * ldo + h;
                if (full) {
                    _mm256_storeu_ps(o, a0[i]);
                    _mm256_storeu_ps(o + 8, a1[i]);
                } else {
                    _mm256_maskstore_ps(o, m0, a0[i]);
                    _mm256_maskstore_ps(o + 8, m1, a1[i]);
                }
            }
        }
    }
#else
    static_assert(std::is_same_v<E, float>, "scalar: 16-bit panels are widened first (see direct_rows)");
    float acc[MR][kNR];
    for (int i = 0; i < MR; ++i)
        for (int64_t j = 0; j < kNR; ++j) acc[i][j] = accumulate && j < nr ? out[i * ldo + j] : 0.0f;
    for (int64_t k = 0; k < kc; ++k)
        for (int i = 0; i < MR; ++i) {
            const float xv = x[i * ldx + k];
            for (int64_t j = 0; j < nr; ++j) acc[i][j] += xv * Wp[k * ldw + j];
        }
    for (int i = 0; i < MR; ++i)
        for (int64_t j = 0; j < nr; ++j) out[i * ldo + j] = acc[i][j];
#endif
}

// f(std::integral_constant<int, MR>{}) for a tile of mr = MR rows, 1 <= mr <= kMRMax.
constexpr int64_t kMRMax = 8;  // remainder tiles up to 8 rows (16 accumulators still fit the registers)
template <int MR = int(kMRMax), class F>
void with_mr(int mr, F&& f) {
    if constexpr (MR > 1) {
        if (mr < MR) return with_mr<MR - 1>(mr, f);
    }
    f(std::integral_constant<int, MR>{});
}

// f(t, std::integral_constant<int, MR>{}) for register tiles of rows t .. t+MR-1 covering t0 .. t1-1: kMR rows
// at a time, the last kMR + r (0 < r < kMR) as one tile of 7-8 rows or two of 4-6, never a thin 1-3 row tile
// (per row, a 4-row tile measured 1.5x the cost of a 6-row one; 8 rows cost about what 6 do).
template <class F>
void for_each_row_tile(int64_t t0, int64_t t1, F&& f) {
    for (int64_t t = t0; t < t1;) {
        const int64_t left = t1 - t, mr = left >= 2 * kMR ? kMR : left > kMRMax ? left - left / 2 : left;
        with_mr(int(mr), [&](auto MR) { f(t, MR); });
        t += mr;
    }
}

// out[t0 .. t1-1, n0 .. n0+nr-1] for one K block: Wp [kc][ldw] holds W's block transposed (k-major).
template <class E>
void tile_rows(float* out, int64_t N, const float* x, int64_t K, const E* Wp, int64_t ldw, int64_t t0, int64_t t1,
               int64_t n0, int64_t nr, int64_t k0, int64_t kc) {
    for_each_row_tile(t0, t1, [&](int64_t t, auto MR) {
        micro_tile<MR(), E>(out + t * N + n0, N, x + t * K + k0, K, Wp, ldw, kc, nr, k0 > 0);
    });
}

// tile(t0, t1, n0, nr) for every (token chunk, block of kNR outputs) of out [T, N], over the threads.
// Tokens are split too when there are few output blocks, so every thread has work.
template <class Tile>
void for_each_tile(int64_t T_, int64_t N, int64_t K, const Tile& tile) {
    const int64_t n_blocks = (N + kNR - 1) / kNR, threads = omp_get_max_threads();
    int64_t t_chunks = std::max<int64_t>(1, std::min<int64_t>((T_ + 47) / 48, (4 * threads + n_blocks - 1) / n_blocks));
    int64_t t_step = (T_ + t_chunks - 1) / t_chunks;
    t_step = (t_step + kMR - 1) / kMR * kMR;
    t_chunks = (T_ + t_step - 1) / t_step;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (T_ * N * K >= kParallelWork)
    for (int64_t nb = 0; nb < n_blocks; ++nb)
        for (int64_t tc = 0; tc < t_chunks; ++tc)
            tile(tc * t_step, std::min(T_, (tc + 1) * t_step), nb * kNR, std::min(kNR, N - nb * kNR));
}

// ---- packed weights --------------------------------------------------------------------------

#ifdef PL_AVX512
// 16 elements of 32 or 16 bits as the bits of 16 32-bit lanes, and back: moved, never converted.
inline __m512 load_bits(const uint32_t* p, __mmask16 m) { return _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(m, p)); }
inline __m512 load_bits(const uint16_t* p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)));
}
inline void store_bits(uint32_t* p, __m512 v) { _mm512_storeu_si512(p, _mm512_castps_si512(v)); }
inline void store_bits(uint16_t* p, __m512 v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(_mm512_castps_si512(v)));
}
#elif defined(PL_AVX2)
// 8 elements of 32 or 16 bits as the bits of 8 32-bit lanes, and back.
inline __m256 load_bits(const uint32_t* p) {
    return _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m256 load_bits(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline void store_bits(uint32_t* p, __m256 v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_castps_si256(v));
}
inline void store_bits(uint16_t* p, __m256 v) {
    const __m256i w = _mm256_castps_si256(v);  // lanes < 2^16: unsigned saturation keeps them
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
}
// r[i] = row i of an 8x8 block  ->  r[i] = column i.
inline void transpose8x8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}
#endif

// Rows n0 .. n0+nr-1 (nr <= kNR), columns k0 .. k0+kc-1 of a row-major [*, K] matrix of 32- or 16-bit elements,
// transposed into Wp [kc][kNR]; rows past nr are zero.
template <class E>
void pack_block(E* Wp, const E* W, int64_t K, int64_t n0, int64_t nr, int64_t k0, int64_t kc) {
#ifdef PL_AVX512
    for (int64_t j0 = 0; j0 < kNR; j0 += 16) {
        for (int64_t k = 0; k < kc; k += 16) {
            const int64_t m = std::min<int64_t>(16, kc - k);
            const __mmask16 mask = tail_mask(m);
            __m512 r[16];
            for (int64_t i = 0; i < 16; ++i)
                r[i] = j0 + i < nr ? load_bits(W + (n0 + j0 + i) * K + k0 + k, mask) : _mm512_setzero_ps();
            transpose16x16(r);
            for (int64_t i = 0; i < m; ++i) store_bits(Wp + (k + i) * kNR + j0, r[i]);
        }
    }
#else
    int64_t k8 = 0;  // the first k the scalar loop below packs
#ifdef PL_AVX2
    for (; k8 + 8 <= kc; k8 += 8)
        for (int64_t j0 = 0; j0 < kNR; j0 += 8) {
            __m256 r[8];
            for (int64_t i = 0; i < 8; ++i)
                r[i] = j0 + i < nr ? load_bits(W + (n0 + j0 + i) * K + k0 + k8) : _mm256_setzero_ps();
            transpose8x8(r);
            for (int64_t i = 0; i < 8; ++i) store_bits(Wp + (k8 + i) * kNR + j0, r[i]);
        }
#endif
    // 16 k at a time: each row's 16 values are one read, the [16][kNR] destination stays in L1.
    for (int64_t kb = k8; kb < kc; kb += 16) {
        const int64_t m = std::min<int64_t>(16, kc - kb);
        for (int64_t j = 0; j < kNR; ++j)
            for (int64_t k = 0; k < m; ++k) Wp[(kb + k) * kNR + j] = j < nr ? W[(n0 + j) * K + k0 + kb + k] : E(0);
    }
#endif
}

// BF16 whose rows are not 32-bit aligned (odd K, or a tensor at an address = 2 mod 4): the pairs are
// assembled one value at a time.
void pack_bf16_by_value(uint16_t* dst, const uint16_t* W, int64_t N, int64_t K) {
    const int64_t Ks = stored_k(DType::BF16, K);
    for (int64_t p = 0; p < n_panels(N); ++p)
        for (int64_t j = 0; j < kPanel; ++j)
            for (int64_t k = 0; k < Ks; ++k) {
                const int64_t r = p * kPanel + j;
                dst[p * kPanel * Ks + panel_at(true, k, j)] = r < N && k < K ? W[r * K + k] : 0;
            }
}

// Panel block [k0, k0 + kc) of a packed panel P as f32 [kc][kNR]: the panel itself for F32, else converted into
// buf (16-bit values widen exactly).
const float* panel_f32(float* /*buf*/, const float* P, int64_t k0, int64_t /*kc*/) { return P + k0 * kNR; }
const float* panel_f32(float* buf, const F16* P, int64_t k0, int64_t kc) {
    convert_row(buf, P + k0 * kNR, kc * kNR);
    return buf;
}
// (The AVX-512 build reads BF16 panels directly, see direct_rows: there this is the unused scalar loop.)
const float* panel_f32(float* buf, const BF16* P, int64_t k0, int64_t kc) {  // pairs; k0 even
#if defined(PL_AVX2)
    const uint32_t* w = reinterpret_cast<const uint32_t*>(P) + k0 / 2 * kNR;
    for (int64_t k = 0; k < kc; k += 2, w += kNR)
        for (int64_t j = 0; j < kNR; j += 8) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + j));
            _mm256_store_ps(buf + k * kNR + j, bf16_even(v));
            _mm256_store_ps(buf + (k + 1) * kNR + j, bf16_odd(v));  // buf has room for an odd kc's pad row
        }
#else
    for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = 0; j < kNR; ++j) buf[k * kNR + j] = to_f32(P[panel_at(true, k0 + k, j)]);
#endif
    return buf;
}

// Decode: out[32p .. 32p+31] = W x for panels p0 .. p1-1, each output one fma chain over k.
template <class T>
void matvec_panels(float* out, const float* x, const T* W, int64_t N, int64_t K, int64_t p0, int64_t p1) {
    const int64_t Ks = stored_k(dtype_of<T>(), K);
    for (int64_t p = p0; p < p1; ++p) {
        const T* P = W + p * kPanel * Ks;
        const int64_t nr = std::min(kPanel, N - p * kPanel);
#ifdef PL_AVX512
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;
        if constexpr (std::is_same_v<T, BF16>) {
            const uint32_t* w = reinterpret_cast<const uint32_t*>(P);
            int64_t k = 0;
            for (; k + 2 <= K; k += 2, w += kNR) {
                const __m512i v0 = _mm512_loadu_si512(w), v1 = _mm512_loadu_si512(w + 16);
                const __m512 xe = _mm512_set1_ps(x[k]), xo = _mm512_set1_ps(x[k + 1]);
                a0 = _mm512_fmadd_ps(xe, bf16_even(v0), a0);
                a1 = _mm512_fmadd_ps(xe, bf16_even(v1), a1);
                a0 = _mm512_fmadd_ps(xo, bf16_odd(v0), a0);
                a1 = _mm512_fmadd_ps(xo, bf16_odd(v1), a1);
            }
            if (k < K) {
                const __m512 xe = _mm512_set1_ps(x[k]);
                a0 = _mm512_fmadd_ps(xe, bf16_even(_mm512_loadu_si512(w)), a0);
                a1 = _mm512_fmadd_ps(xe, bf16_even(_mm512_loadu_si512(w + 16)), a1);
            }
        } else {
            for (int64_t k = 0; k < K; ++k) {
                const __m512 xb = _mm512_set1_ps(x[k]);
                a0 = _mm512_fmadd_ps(xb, load16(P + k * kNR), a0);
                a1 = _mm512_fmadd_ps(xb, load16(P + k * kNR + 16), a1);
            }
        }
        float* o = out + p * kPanel;
        _mm512_mask_storeu_ps(o, nr >= 16 ? __mmask16(0xffff) : tail_mask(nr), a0);
        if (nr > 16) _mm512_mask_storeu_ps(o + 16, nr >= 32 ? __mmask16(0xffff) : tail_mask(nr - 16), a1);
#elif defined(PL_AVX2)
        __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        if constexpr (std::is_same_v<T, BF16>) {
            const __m256i* w = reinterpret_cast<const __m256i*>(P);  // per k pair: 32 words = 4 vectors
            int64_t k = 0;
            for (; k + 2 <= K; k += 2, w += 4) {
                const __m256 xe = _mm256_broadcast_ss(x + k), xo = _mm256_broadcast_ss(x + k + 1);
                for (int v = 0; v < 4; ++v) {
                    const __m256i wv = _mm256_loadu_si256(w + v);
                    a[v] = _mm256_fmadd_ps(xo, bf16_odd(wv), _mm256_fmadd_ps(xe, bf16_even(wv), a[v]));
                }
            }
            if (k < K) {
                const __m256 xe = _mm256_broadcast_ss(x + k);
                for (int v = 0; v < 4; ++v) a[v] = _mm256_fmadd_ps(xe, bf16_even(_mm256_loadu_si256(w + v)), a[v]);
            }
        } else {
            for (int64_t k = 0; k < K; ++k) {
                const __m256 xb = _mm256_broadcast_ss(x + k);
                for (int v = 0; v < 4; ++v) a[v] = _mm256_fmadd_ps(xb, load8(P + k * kNR + 8 * v), a[v]);
            }
        }
        for (int v = 0; v < 4; ++v) {
            float* o = out + p * kPanel + 8 * v;
            if (nr == kPanel)
                _mm256_storeu_ps(o, a[v]);
            else
                _mm256_maskstore_ps(o, lane_mask(nr - 8 * v), a[v]);
        }
#else
        float acc[kNR] = {};
        for (int64_t k = 0; k < K; ++k) {
            const float xv = x[k];
            for (int64_t j = 0; j < kNR; ++j)
                acc[j] += xv * to_f32(P[panel_at(std::is_same_v<T, BF16>, k, j)]);
        }
        std::copy(acc, acc + nr, out + p * kPanel);
#endif
    }
}

void matvec_panels_any(const MatmulJob& j, const float* x, int64_t p0, int64_t p1) {
    const PackedMatrix& W = *j.W;
    switch (W.dtype) {
        case DType::F32: return matvec_panels(j.out, x, static_cast<const float*>(W.data), W.N, W.K, p0, p1);
        case DType::F16: return matvec_panels(j.out, x, static_cast<const F16*>(W.data), W.N, W.K, p0, p1);
        case DType::BF16: return matvec_panels(j.out, x, static_cast<const BF16*>(W.data), W.N, W.K, p0, p1);
    }
}

// out_i = W_i x for every job, in one parallel region: the panels of all jobs, end to end, are cut into one
// contiguous range per thread, so each thread streams its share of the weights once.
void matvec_many(const MatmulJob* jobs, int n_jobs, const float* x, int64_t K) {
    int64_t panels = 0;
    for (int i = 0; i < n_jobs; ++i) panels += n_panels(jobs[i].W->N);
#pragma omp parallel if (panels * kPanel * K >= kParallelWork)
    {
        const int nt = omp_get_num_threads(), id = omp_get_thread_num();
        const int64_t g0 = panels * id / nt, g1 = panels * (id + 1) / nt;
        int64_t base = 0;
        for (int i = 0; i < n_jobs; ++i) {
            const int64_t np = n_panels(jobs[i].W->N), lo = std::max(g0, base), hi = std::min(g1, base + np);
            if (lo < hi) matvec_panels_any(jobs[i], x, lo - base, hi - base);
            base += np;
        }
    }
}

// 16-bit weights in prefill: a tile of at most direct_rows<T>() rows runs micro_tile on the packed panel itself,
// widening in registers (once per row tile); a taller one widens each panel block once into a per-thread
// buffer first. Measured on Zen 4, [N, 2048] x [T, 2048], direct / widened time:
//   AVX-512 F16    T 2-16: 0.37-0.73 (few rows cannot repay widening a block, and waiting on memory while
//                  doing it), T 32-48: 0.88-0.98, T 96-128: 1.06-1.14
//   AVX-512 BF16   0.25 (T 2), 0.6 (T 8), 0.85 (T 32), 0.91-0.97 (T 128) (exact mode, or no AVX512_BF16)
//   AVX2 F16       0.84-0.98 for every T up to 128
//   AVX2 BF16      1.3-1.7 for T 8-128, with 6-row tiles or 3-row ones (so AVX2 widens BF16)
// The scalar build always widens (a software F16 conversion per use would cost more than the products).
template <class T>
constexpr int64_t direct_rows() {
    [[maybe_unused]] constexpr int64_t all = std::numeric_limits<int64_t>::max();
#if defined(PL_AVX512)
    return std::is_same_v<T, F16> ? 48 : std::is_same_v<T, BF16> ? all : 0;
#elif defined(PL_AVX2)
    return std::is_same_v<T, F16> ? all : 0;
#else
    return 0;
#endif
}

// Prefill, one tile: out[t0 .. t1-1, n0 .. n0+nr-1] of out [T, N] = x W^T from panel n0 / kPanel, a K block at
// a time as f32 (F32: the panel itself; F16, BF16: widened in registers or first into a per-thread buffer, as
// direct_rows says).
template <class T>
void gemm_tile(float* out, const float* x, const T* W, int64_t N, int64_t K, int64_t t0, int64_t t1, int64_t n0,
               int64_t nr) {
    const T* P = W + n0 * stored_k(dtype_of<T>(), K);
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
        const int64_t kc = std::min(kKC, K - k0);
        if constexpr (direct_rows<T>() > 0) {
            if (t1 - t0 <= direct_rows<T>()) {
                tile_rows(out, N, x, K, P + k0 * kNR, kNR, t0, t1, n0, nr, k0, kc);
                continue;
            }
        }
        float* buf = thread_buffer(size_t(kKC * kNR));  // [kc][kNR]
        tile_rows(out, N, x, K, panel_f32(buf, P, k0, kc), kNR, t0, t1, n0, nr, k0, kc);
    }
}

#if defined(PL_AVX512) && defined(__AVX512BF16__)
// BF16 weights in prefill: x rounded to BF16 (as llama.cpp does for BF16 weights) and `vdpbf16ps`, which
// multiplies pairs of BF16 exactly and accumulates in f32: twice the FMA rate of the f32 path. The panels
// already hold the pairs (k, k+1) as 32-bit words, [K/2][kNR].
#define PL_BF16_DOT 1
constexpr int64_t kKCP = kKC / 2;  // k pairs per block

template <int MR>
void micro_tile_bf16(float* out, int64_t ldo, const uint32_t* x, int64_t ldx, const uint32_t* Wp, int64_t pc,
                     int64_t nr, bool accumulate) {
    OutTile<MR> c(out, ldo, nr, accumulate);
    for (int64_t p = 0; p < pc; ++p) {
        const __m512bh w0 = (__m512bh)_mm512_loadu_si512(Wp + p * kNR);
        const __m512bh w1 = (__m512bh)_mm512_loadu_si512(Wp + p * kNR + 16);
        for (int i = 0; i < MR; ++i) {
            const __m512bh xb = (__m512bh)_mm512_set1_epi32(int(x[i * ldx + p]));
            c.acc0[i] = _mm512_dpbf16_ps(c.acc0[i], xb, w0);
            c.acc1[i] = _mm512_dpbf16_ps(c.acc1[i], xb, w1);
        }
    }
    c.store(out, ldo);
}

// x [T, K] rounded to BF16 pairs [T, ceil(K/2)] (an odd K's last pair padded with 0), in a per-thread buffer.
const uint32_t* bf16_pairs(const float* x, int64_t T_, int64_t K) {
    const int64_t Kp = (K + 1) / 2;
    static thread_local std::vector<uint32_t> xb_buf;
    if (xb_buf.size() < size_t(T_ * Kp)) xb_buf.resize(size_t(T_ * Kp));
    uint32_t* xb = xb_buf.data();
    for (int64_t t = 0; t < T_; ++t) {
        const float* xr = x + t * K;
        uint16_t* dst = reinterpret_cast<uint16_t*>(xb + t * Kp);
        int64_t k = 0;
        for (; k + 32 <= K; k += 32)
            _mm512_storeu_si512(dst + k,
                                (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(xr + k + 16), _mm512_loadu_ps(xr + k)));
        for (; k < K; ++k) dst[k] = f32_to_bf16(xr[k]);
        if (K % 2) dst[K] = 0;
    }
    return xb;
}

// One tile as gemm_tile, with xb = bf16_pairs(x).
void gemm_tile_bf16_dot(float* out, const uint32_t* xb, const BF16* W, int64_t N, int64_t K, int64_t t0, int64_t t1,
                        int64_t n0, int64_t nr) {
    const int64_t Kp = (K + 1) / 2;
    const uint32_t* P = reinterpret_cast<const uint32_t*>(W) + n0 * Kp;  // [Kp][kNR] pairs
    for (int64_t p0 = 0; p0 < Kp; p0 += kKCP) {
        const int64_t pc = std::min(kKCP, Kp - p0);
        for_each_row_tile(t0, t1, [&](int64_t t, auto MR) {
            micro_tile_bf16<MR()>(out + t * N + n0, N, xb + t * Kp + p0, Kp, P + p0 * kNR, pc, nr, p0 > 0);
        });
    }
}
#endif

// Prefill for several products of the same x [T, K]: one tile space over the panels of all jobs, so one
// parallel region (one barrier, and no thread idle at the end of each matrix).
void gemm_many(const MatmulJob* jobs, int n_jobs, const float* x, int64_t T_, bool exact) {
    const int64_t K = jobs[0].W->K;
    std::vector<int64_t> first(size_t(n_jobs) + 1, 0);  // first[i]: job i's first panel in the joint space
    [[maybe_unused]] bool dot = false;
    for (int i = 0; i < n_jobs; ++i) {
        first[size_t(i) + 1] = first[size_t(i)] + n_panels(jobs[i].W->N);
        dot = dot || (jobs[i].W->dtype == DType::BF16 && !exact);
    }
#ifdef PL_BF16_DOT
    const uint32_t* xb = dot ? bf16_pairs(x, T_, K) : nullptr;
#endif
    for_each_tile(T_, first.back() * kNR, K, [&](int64_t t0, int64_t t1, int64_t g0, int64_t) {
        const int64_t gp = g0 / kNR;
        int i = 0;
        while (gp >= first[size_t(i) + 1]) ++i;
        const PackedMatrix& W = *jobs[i].W;
        const int64_t n0 = (gp - first[size_t(i)]) * kNR, nr = std::min(kNR, W.N - n0);
        float* out = jobs[i].out;
        switch (W.dtype) {
            case DType::F32: return gemm_tile(out, x, static_cast<const float*>(W.data), W.N, K, t0, t1, n0, nr);
            case DType::F16: return gemm_tile(out, x, static_cast<const F16*>(W.data), W.N, K, t0, t1, n0, nr);
            case DType::BF16:
#ifdef PL_BF16_DOT
                if (!exact)
                    return gemm_tile_bf16_dot(out, xb, static_cast<const BF16*>(W.data), W.N, K, t0, t1, n0, nr);
#endif
                return gemm_tile(out, x, static_cast<const BF16*>(W.data), W.N, K, t0, t1, n0, nr);
        }
    });
}

}  // namespace

const char* kernels_isa() {
#if defined(PL_BF16_DOT)
    return "avx512_bf16";
#elif defined(PL_AVX512)
    return "avx512";
#elif defined(PL_AVX2)
    return "avx2";
#else
    return "scalar";
#endif
}

void rmsnorm(void* y, const void* x, DType xt, const void* w, DType wt, int64_t rows, int64_t n, float eps) {
    switch (xt) {
        case DType::F32:
            return rmsnorm_x(static_cast<float*>(y), static_cast<const float*>(x), w, wt, rows, n, eps);
        case DType::F16:
            return rmsnorm_x(static_cast<F16*>(y), static_cast<const F16*>(x), w, wt, rows, n, eps);
        case DType::BF16:
            return rmsnorm_x(static_cast<BF16*>(y), static_cast<const BF16*>(x), w, wt, rows, n, eps);
    }
}

size_t packed_bytes(DType t, int64_t N, int64_t K) {
    return size_t(n_panels(N) * kPanel * stored_k(t, K)) * dtype_size(t);
}

void pack_matrix(void* dst, const void* W, DType t, int64_t N, int64_t K) {
    if (t == DType::BF16 && (K % 2 || reinterpret_cast<uintptr_t>(W) % 4))
        return pack_bf16_by_value(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(W), N, K);
    // Per panel, a transpose of 32-bit words (F32 values, or BF16 pairs (k, k+1)) or of 16-bit F16 values.
    const int64_t panels = n_panels(N);
#pragma omp parallel for schedule(static) if (N * K >= kParallelWork)
    for (int64_t p = 0; p < panels; ++p) {
        const int64_t n0 = p * kPanel, nr = std::min(kPanel, N - n0);
        if (t == DType::F16) {
            pack_block(static_cast<uint16_t*>(dst) + n0 * K, static_cast<const uint16_t*>(W), K, n0, nr, 0, K);
        } else {
            const int64_t Kw = t == DType::BF16 ? K / 2 : K;
            pack_block(static_cast<uint32_t*>(dst) + n0 * Kw, static_cast<const uint32_t*>(W), Kw, n0, nr, 0, Kw);
        }
    }
}

PackedWeights::PackedWeights(size_t capacity) : capacity_(capacity) {
    const size_t huge = size_t(1) << 21, align = capacity >= huge ? huge : 64;
    void* p = nullptr;
    if (::posix_memalign(&p, align, std::max<size_t>(1, (capacity + align - 1) / align * align)) != 0)
        throw std::bad_alloc();
    if (capacity >= huge) ::madvise(p, (capacity + huge - 1) / huge * huge, MADV_HUGEPAGE);  // advice only
    data_.reset(static_cast<char*>(p));
}

PackedMatrix PackedWeights::add(const void* W, DType t, int64_t N, int64_t K) {
    static_assert(kPanel * 2 % 64 == 0, "a packed matrix must keep the next one 64-byte aligned");
    const size_t n = packed_bytes(t, N, K);  // a multiple of 64 (kPanel rows of 2 or 4 bytes): the next stays aligned
    if (n > capacity_ - used_) throw std::length_error("PackedWeights: capacity exceeded");
    void* dst = data_.get() + used_;
    used_ += n;
    pack_matrix(dst, W, t, N, K);
    return PackedMatrix{dst, t, N, K};
}

void matmul(float* out, const float* x, const PackedMatrix& W, int64_t T, bool exact) {
    const MatmulJob job{out, &W};
    matmul_many(&job, 1, x, T, exact);
}

void matmul_many(const MatmulJob* jobs, int n_jobs, const float* x, int64_t T, bool exact) {
    if (T < 1 || n_jobs < 1) return;
    if (T == 1) return matvec_many(jobs, n_jobs, x, jobs[0].W->K);
    gemm_many(jobs, n_jobs, x, T, exact);
}

void matmul_nn(float* out, const float* x, int64_t ldx, const float* B, int64_t T, int64_t N, int64_t K) {
    if (T < 1 || N < 1) return;
    for_each_tile(T, N, K, [&](int64_t t0, int64_t t1, int64_t n0, int64_t nr) {
        for (int64_t k0 = 0; k0 < K; k0 += kKC)
            tile_rows(out, N, x, ldx, B + k0 * N + n0, N, t0, t1, n0, nr, k0, std::min(kKC, K - k0));
    });
}

void gemv_acc(float* y, const float* x, const float* B, int64_t K, int64_t N) {
    if (K < 1) return;
    for (int64_t n0 = 0; n0 < N; n0 += kNR) micro_tile<1>(y + n0, 0, x, 0, B + n0, N, K, std::min(kNR, N - n0), true);
}

void matmul_reference(float* out, const float* x, const void* W, DType wt, int64_t T, int64_t N, int64_t K) {
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t r = 0; r < N; ++r) {
        convert_to_f32(row.data(), static_cast<const uint8_t*>(W) + r * K * int64_t(dtype_size(wt)), wt, K);
        for (int64_t t = 0; t < T; ++t) {
            double a = 0.0;
            for (int64_t k = 0; k < K; ++k) a += double(x[t * K + k]) * double(row[size_t(k)]);
            out[t * N + r] = float(a);
        }
    }
}

void convert_to_f32(float* out, const void* src, DType t, int64_t n) {
    switch (t) {
        case DType::F32: return convert_row(out, static_cast<const float*>(src), n);
        case DType::F16: return convert_row(out, static_cast<const F16*>(src), n);
        case DType::BF16: return convert_row(out, static_cast<const BF16*>(src), n);
    }
}

void rope_rotate_half(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) {
    const int64_t half = head_dim / 2;
    for (int64_t h = 0; h < n_heads; ++h) {
        float* a = x + h * head_dim;
        float* b = a + half;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
            const float ai = a[i], bi = b[i];
            a[i] = ai * cos[i] - bi * sin[i];
            b[i] = bi * cos[i] + ai * sin[i];
        }
    }
}

void softmax(float* x, int64_t n, float scale) {
    float mx = -HUGE_VALF;
#pragma omp simd reduction(max : mx)
    for (int64_t i = 0; i < n; ++i) {  // (written so that GCC 12 vectorises it; with std::max it does not)
        const float v = x[i] * scale;
        x[i] = v;
        mx = mx > v ? mx : v;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) {
        x[i] = exp_f32(x[i] - mx);
        sum += x[i];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void silu_mul(float* g, const float* u, int64_t n) {
    // In blocks, e^-g first: with the division in the same loop GCC if-converts it into each of exp_f32's
    // edge cases (four masked divides per vector: [128, 2048] took 310 us instead of 84 on 2 threads).
    constexpr int64_t kBlock = 256;
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
    for (int64_t b = 0; b < n; b += kBlock) {
        const int64_t m = std::min(kBlock, n - b);
        alignas(64) float e[kBlock];
#pragma omp simd
        for (int64_t i = 0; i < m; ++i) e[i] = exp_f32(-g[b + i]);
#pragma omp simd
        for (int64_t i = 0; i < m; ++i) g[b + i] = g[b + i] / (1.0f + e[i]) * u[b + i];
    }
}

void add_inplace(float* y, const float* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= 4 * kParallelWork)
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace plainllama
