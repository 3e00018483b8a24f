// The quantizers' bytes against llama.cpp's searches written plainly here, one group or block at a time: q4_0 and
// q5_0's reference quantizers, q4_k and q5_k's make_qkx2_quants search, q6_k's exact products.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "plainllama/kernels/kernels.h"
#include "plainllama/kernels/quant.h"
#include "quant_ref.h"
#include "test_util.h"

namespace plainllama {
namespace quantizer_ref {

using namespace quant_ref;

// ---- q4_k's quantizer written plainly, one group of 32 at a time ---------------------------------------------------

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")  // a multiply, then an add, as the quantizer; fma only where written

// v truncated to that many significant bits (the searches' fit weights).
float keep_bits(float v, int bits) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u &= ~0u << (24 - bits);
    std::memcpy(&v, &u, 4);
    return v;
}

// clamp(round half to even of the exact product a b, lo, hi); NaN to lo.
float level_ref(float a, float b, float lo, float hi) {
    const double p = double(a) * double(b);  // exact: 24 x 24 bits
    if (std::isnan(p)) return lo;
    return float(std::min(std::max(std::nearbyint(p), double(lo)), double(hi))) + 0.0f;  // +0 for -0, as the library
}
int round_ref(float v) {  // half to even, within +-2^22 (NaN to 2^22)
    constexpr float big = 4194304.0f;
    v = v < big ? v : big;
    v = v > -big ? v : -big;
    return int(std::nearbyint(v));
}

// The documented search (quantizers.inc: llama.cpp's make_qkx2_quants with steps of 0.2 from its first candidate to
// its last, then the winner's neighbours at -0.1 and +0.1: 13 candidates for q4_k, 10 for q5_k; errors from the sums,
// levels from the exact product, the weights truncated to 16 bits and w x to 20 (q5_k, 5-bit levels: 14 and 19), the
// sums fused) for one group: scale, -min, and the inverse scale and shift of the winner's levels.
struct KSearchRef {
    int nmax;    // 15 (q4_k) or 31 (q5_k)
    float rmin;  // llama.cpp's first candidate: c = nmax + rmin
    int nsteps;  // the steps of 0.2 after it
    int w_bits, wx_bits;
};
constexpr KSearchRef kQ4K = {15, -1.0f, 10, 16, 20}, kQ5K = {31, -0.5f, 7, 14, 19};
struct KGroup {
    float scale, neg_min, l_iscale, l_shift;
};
KGroup fit_k_group_ref(const float* x, const KSearchRef& p) {
    const int nmax = p.nmax;
    float sum_x2 = 0;
    for (int i = 0; i < 32; ++i) sum_x2 += x[i] * x[i];
    const float root = std::sqrt(sum_x2 / 32.0f);
    float w[32], wx[32];
    for (int i = 0; i < 32; ++i)
        w[i] = keep_bits(root + std::fabs(x[i]), p.w_bits), wx[i] = keep_bits(w[i] * x[i], p.wx_bits);
    float mn = x[0], mx = x[0], sum_w = w[0], sum_x = w[0] * x[0], sum_xx = w[0] * x[0] * x[0];
    for (int i = 1; i < 32; ++i) {
        mn = x[i] < mn ? x[i] : mn;
        mx = mx < x[i] ? x[i] : mx;
        sum_w += w[i];
        sum_x += w[i] * x[i];
        sum_xx += w[i] * x[i] * x[i];
    }
    mn = 0.0f < mn ? 0.0f : mn;
    const float range = mx - mn, iscale0 = float(nmax) / range;
    float scale = 1.0f / iscale0, best = 0.0f, best_iscale = iscale0, best_shift = mn;
    for (int i = 0; i < 32; ++i) {
        const float diff = scale * level_ref(iscale0, x[i] - mn, 0, float(nmax)) + mn - x[i];
        best += w[i] * diff * diff;
    }
    float c_win = float(nmax), coarse = 0;     // the winner's c; the coarse steps' winner's
    for (int s = 0; s <= p.nsteps + 2; ++s) {  // the steps of 0.2, then the winner's -0.1 and +0.1
        if (s == p.nsteps + 1) coarse = c_win;
        const float c = s <= p.nsteps       ? p.rmin + 0.2f * float(s) + float(nmax)
                        : s == p.nsteps + 1 ? coarse - 0.1f
                                            : coarse + 0.1f;
        const float iscale = c / (mx - mn);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < 32; ++i) {
            const float l = level_ref(iscale, x[i] - mn, 0, float(nmax)), wl = w[i] * l;
            const bool exact = double(w[i]) * l == double(wl) && double(wl) * l == double(wl * l) &&
                               double(wx[i]) * l == double(wx[i] * l);
            if (!exact)
                ADD_FAILURE() << "a product of the search is not exact: w " << w[i] << " wx " << wx[i] << " l " << l;
            sum_l += wl;
            sum_l2 = std::fma(wl, l, sum_l2);
            sum_xl = std::fma(wx[i], l, sum_xl);
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l, inv_d = 1.0f / D;
        const float a = (sum_w * sum_xl - sum_x * sum_l) * inv_d, b = (sum_l2 * sum_x - sum_l * sum_xl) * inv_d;
        const float this_scale = b > 0 ? sum_xl / sum_l2 : a, this_min = b > 0 ? 0.0f : b;
        const float err = this_scale * this_scale * sum_l2 + 2.0f * this_scale * this_min * sum_l +
                          this_min * this_min * sum_w - 2.0f * this_scale * sum_xl - 2.0f * this_min * sum_x + sum_xx;
        if (D > 0 && err < best)
            best = err, best_iscale = iscale, best_shift = mn, scale = this_scale, mn = this_min, c_win = c;
    }
    if (range == 0.0f) return {0.0f, -mn, 0.0f, 0.0f};
    return {scale, -mn, best_iscale, best_shift};
}

// One q4_k (q5_k) super-block from its 8 groups' fits: 6-bit scales and mins against the largest, then each weight's
// level against its group's quantized scale and min (times the inverse scale; the winner's levels for a scale of 0).
void quantize_k_block_ref(const float* x, uint8_t* y, const KSearchRef& p) {
    const bool q5 = p.nmax == 31;
    KGroup g[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        g[j] = fit_k_group_ref(x + 32 * j, p);
        max_scale = max_scale < g[j].scale ? g[j].scale : max_scale;
        max_min = max_min < g[j].neg_min ? g[j].neg_min : max_min;
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f, inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    int sc[8], m[8];
    uint8_t* s = y + 4;
    std::fill(s, s + 12, 0);
    for (int j = 0; j < 8; ++j) {
        sc[j] = std::min(round_ref(inv_scale * g[j].scale), 63), m[j] = std::min(round_ref(inv_min * g[j].neg_min), 63);
        if (j < 4) {
            s[j] = uint8_t(sc[j]), s[j + 4] = uint8_t(m[j]);
        } else {  // GGUF's packing (gguf_decode above)
            s[j + 4] = uint8_t((sc[j] & 15) | (m[j] & 15) << 4);
            s[j - 4] |= uint8_t((sc[j] >> 4) << 6), s[j] |= uint8_t((m[j] >> 4) << 6);
        }
    }
    const uint16_t hd = f32_to_f16(max_scale / 63.0f), hm = f32_to_f16(max_min / 63.0f);
    std::memcpy(y, &hd, 2), std::memcpy(y + 2, &hm, 2);
    const float d = test::decode_f16(hd), dmin = test::decode_f16(hm);
    if (q5) std::fill(y + 16, y + 48, 0);
    for (int j = 0; j < 8; ++j) {
        const float dj = d * float(sc[j]), mj = dmin * float(m[j]);
        for (int i = 0; i < 32; ++i) {
            const float v = x[32 * j + i];
            const int l = int(dj != 0.0f ? level_ref(1.0f / dj, v + mj, 0, float(p.nmax))
                                         : level_ref(g[j].l_iscale, v - g[j].l_shift, 0, float(p.nmax)));
            uint8_t& q = y[(q5 ? 48 : 16) + 32 * (j / 2) + i];
            q = j % 2 ? uint8_t(q | (l & 15) << 4) : uint8_t(l & 15);
            if (q5) y[16 + i] = uint8_t(y[16 + i] | (l >> 4) << j);  // the 5th bit: bit j of qh[i]
        }
    }
}

// llama.cpp's quantize_row_q4_0_ref and quantize_row_q5_0_ref written plainly, one block of 32.
void quantize_q4_0_q5_0_block_ref(const float* x, uint8_t* y, bool q5) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j)
        if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
    const float d = max / (q5 ? -16.0f : -8.0f), id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(y, &h, 2);
    uint32_t qh = 0;
    uint8_t* qs = y + (q5 ? 6 : 2);
    for (int j = 0; j < 16; ++j) {
        const float x0 = x[j] * id, x1 = x[16 + j] * id;
        const int top = q5 ? 31 : 15;
        const int l0 = std::min(top, int(int8_t(x0 + (q5 ? 16.5f : 8.5f))));
        const int l1 = std::min(top, int(int8_t(x1 + (q5 ? 16.5f : 8.5f))));
        qs[j] = uint8_t((l0 & 15) | (l1 & 15) << 4);
        qh |= uint32_t(l0 >> 4) << j | uint32_t(l1 >> 4) << (16 + j);
    }
    if (q5)
        for (int i = 0; i < 4; ++i) y[2 + i] = uint8_t(qh >> (8 * i));
}

#pragma GCC pop_options

// Every variant's q4_0 and q5_0 bytes are llama.cpp's reference quantizers written plainly: rows of several scales,
// blocks whose largest magnitude comes twice with both signs (the first is taken), zeros of either sign, all-zero
// blocks (d stored as -0), and values on the rounding boundaries (x / d + 8.5 an integer).
TEST(QuantFormat, Q4_0AndQ5_0AreLlamaCppsReference) {
    std::mt19937 rng(13);
    const int64_t K = 2048;
    for (QuantType t : {QuantType::q4_0, QuantType::q5_0})
        for (int trial = 0; trial < 6; ++trial) {
            auto x = random_row(K, rng, trial == 0 ? 1.0f : trial == 1 ? 1e-3f : 30.0f);
            if (trial == 2)
                for (int64_t b = 0; b < K; b += 32)
                    x[size_t(b + 3)] = -x[size_t(b + 9)] * 1e3f, x[size_t(b + 20)] = -x[size_t(b + 3)];
            if (trial == 3)
                for (int64_t i = 0; i < K; ++i) x[size_t(i)] = i % 64 < 32 ? (i % 3 ? -0.0f : 0.0f) : x[size_t(i)];
            if (trial == 4)  // multiples of the step: x / d on the half-way points of the truncation
                for (int64_t i = 0; i < K; ++i) x[size_t(i)] = float(int(rng() % 33) - 16) * 0.25f;
            if (trial == 5)
                for (float& v : x) v = std::nearbyint(v * 4.0f) / 8.0f;
            const size_t bb = quant_block_bytes(t);
            std::vector<uint8_t> want(quant_row_bytes(t, K)), got(want.size());
            for (int64_t b = 0; b < K / 32; ++b)
                quantize_q4_0_q5_0_block_ref(&x[size_t(32 * b)], &want[bb * size_t(b)], t == QuantType::q5_0);
            for (const std::string& v : kernel_variants()) {
                test::UseKernels scope(v);
                quantize_row(t, x.data(), got.data(), K);
                for (int64_t b = 0; b < K / 32; ++b)
                    ASSERT_TRUE(std::equal(got.begin() + long(bb) * b, got.begin() + long(bb) * (b + 1),
                                           want.begin() + long(bb) * b))
                        << v << " " << quant_name(t) << " trial " << trial << " block " << b;
            }
        }
}

// Every variant's q4_k and q5_k bytes are the search written plainly, on rows chosen to reach its corners: groups
// all of one sign (the min at 0), constant groups, ranges so small that their inverse overflows, signed zeros,
// weights near the largest floats' square roots, and a lone large weight (levels at the top clamp).
TEST(QuantFormat, KQuantsAreTheirSearchWrittenPlainly) {
    std::mt19937 rng(11);
    const int64_t K = 4096;
    for (QuantType t : {QuantType::q4_k, QuantType::q5_k})
        for (int trial = 0; trial < 8; ++trial) {
            auto x = random_row(K, rng, trial == 0 ? 1.0f : trial == 1 ? 0.02f : 1e3f);
            if (trial == 2)
                for (float& v : x) v = std::fabs(v);  // every group positive
            if (trial == 3)
                for (int64_t i = 0; i < K; ++i)
                    x[size_t(i)] = i % 64 < 32 ? 0.5f : -1e-38f * float(i % 5);  // tiny ranges
            if (trial == 4)
                for (int64_t i = 0; i < K; ++i) x[size_t(i)] = i % 3 ? -0.0f : 0.0f;
            if (trial == 5)
                for (float& v : x) v *= 1e-41f;  // subnormal weights
            if (trial == 6)  // sums of squares near the largest floats (q5_k's w x L, 2 x^2 31, below them)
                for (float& v : x) v = v * (t == QuantType::q5_k ? 5e14f : 1e15f);
            if (trial == 7)
                for (int64_t i = 0; i < K; i += 32) x[size_t(i + 7)] = 40.0f;  // one large weight per group
            const size_t bb = quant_block_bytes(t);
            std::vector<uint8_t> want(quant_row_bytes(t, K)), got(want.size());
            for (int64_t b = 0; b < K / 256; ++b)
                quantize_k_block_ref(&x[size_t(256 * b)], &want[bb * size_t(b)], t == QuantType::q5_k ? kQ5K : kQ4K);
            for (const std::string& v : kernel_variants()) {
                test::UseKernels scope(v);
                quantize_row(t, x.data(), got.data(), K);
                for (int64_t b = 0; b < K / 256; ++b)
                    ASSERT_TRUE(std::equal(got.begin() + long(bb) * b, got.begin() + long(bb) * (b + 1),
                                           want.begin() + long(bb) * b))
                        << v << " " << quant_name(t) << " trial " << trial << " super-block " << b;
            }
        }
}

// q6_k's search adds products of its weights truncated to 14 bits (x^2) and 19 (x^3) and levels in [-32, 31]: each
// exact in float (so fused and unfused sums agree, quantizers.inc's add_product), for weights of every magnitude.
TEST(QuantFormat, Q6KSearchProductsAreExact) {
    std::mt19937 rng(12);
    std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
    for (int trial = 0; trial < 20000; ++trial) {
        const float x = std::ldexp(mantissa(rng), int(rng() % 100) - 60);
        const float w = keep_bits(x * x, 14), x3 = keep_bits(x * x * x, 19);
        for (int l = -32; l <= 31; ++l) {
            const float wl = w * float(l);
            ASSERT_EQ(double(w) * l, double(wl)) << x << " " << l;
            ASSERT_EQ(double(wl) * l, double(wl * float(l))) << x << " " << l;
            ASSERT_EQ(double(x3) * l, double(x3 * float(l))) << x << " " << l;
        }
    }
}

}  // namespace quantizer_ref
}  // namespace plainllama
