// The quantized formats (quant.h): block sizes, and quantizing and dequantizing a row.
#include "plainllama/kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "plainllama/io/dtype.h"
#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

constexpr float kZeroGroup = 1e-15f;  // a group whose largest |x| is below this is all zeros

// Round to nearest, ties to even (the FPU's default mode).
inline int round_even(float v) { return int(std::nearbyint(v)); }

void put_f16(uint8_t* p, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(p, &h, 2);
}
float get_f16(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16_to_f32(h);
}

// ---- q8_0 ----------------------------------------------------------------------------------------------

void quantize_q8_0(const float* x, uint8_t* y, int64_t K) {
    for (int64_t b = 0; b < K / 32; ++b, x += 32, y += 34) {
        float amax = 0.0f;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        put_f16(y, d);
        for (int i = 0; i < 32; ++i) y[2 + i] = uint8_t(int8_t(std::round(x[i] * id)));
    }
}

void dequantize_q8_0(const uint8_t* x, float* y, int64_t K) {
    for (int64_t b = 0; b < K / 32; ++b, x += 34, y += 32) {
        const float d = get_f16(x);
        for (int i = 0; i < 32; ++i) y[i] = float(int8_t(x[2 + i])) * d;
    }
}

// ---- q4_k ----------------------------------------------------------------------------------------------

// x[i] ~ scale * L[i] - neg_min with L in [0, nmax], fitted by weighted least squares (weights w): the inverse
// scale is tried at (nmax + rmin + rdelta * s) / (max - min) for s = 0 .. nsteps, each candidate's best (scale, min)
// solved for its L, the lowest weighted squared error kept. The min is at most 0.
float fit_scale_min(const float* x, const float* w, int n, int nmax, uint8_t* L, float* neg_min) {
    constexpr float rmin = -1.0f, rdelta = 0.1f;
    constexpr int nsteps = 20;
    float mn = x[0], mx = x[0], sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; ++i) {
        mn = std::min(mn, x[i]);
        mx = std::max(mx, x[i]);
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    mn = std::min(mn, 0.0f);
    if (mx == mn) {
        std::fill_n(L, n, uint8_t(0));
        *neg_min = -mn;
        return 0.0f;
    }
    float iscale = float(nmax) / (mx - mn), scale = 1.0f / iscale, best = 0.0f;
    for (int i = 0; i < n; ++i) {
        L[i] = uint8_t(std::clamp(round_even(iscale * (x[i] - mn)), 0, nmax));
        const float diff = scale * float(L[i]) + mn - x[i];
        best += w[i] * diff * diff;
    }
    uint8_t Lc[256];
    for (int s = 0; s <= nsteps; ++s) {
        iscale = (rmin + rdelta * float(s) + float(nmax)) / (mx - mn);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::clamp(round_even(iscale * (x[i] - mn)), 0, nmax);
            Lc[i] = uint8_t(l);
            sum_l += w[i] * float(l);
            sum_l2 += w[i] * float(l) * float(l);
            sum_xl += w[i] * float(l) * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D <= 0) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D, this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; ++i) {
            const float diff = this_scale * float(Lc[i]) + this_min - x[i];
            err += w[i] * diff * diff;
        }
        if (err < best) {
            std::copy_n(Lc, n, L);
            best = err;
            scale = this_scale;
            mn = this_min;
        }
    }
    *neg_min = -mn;
    return scale;
}

// Sub-block j's 6-bit scale and min from the 12 packed bytes (see quant.h).
inline void q4k_scale_min(int j, const uint8_t* s, int* sc, int* m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

void quantize_q4_k(const float* x, uint8_t* y, int64_t K) {
    for (int64_t b = 0; b < K / 256; ++b, x += 256, y += 144) {
        uint8_t L[256];
        float scales[8], mins[8], w[32], max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; ++j) {
            const float* xj = x + 32 * j;
            float sum_x2 = 0;
            for (int i = 0; i < 32; ++i) sum_x2 += xj[i] * xj[i];
            const float av = std::sqrt(sum_x2 / 32);
            for (int i = 0; i < 32; ++i) w[i] = av + std::fabs(xj[i]);
            scales[j] = fit_scale_min(xj, w, 32, 15, L + 32 * j, &mins[j]);
            max_scale = std::max(max_scale, scales[j]);
            max_min = std::max(max_min, mins[j]);
        }
        const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f, inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
        uint8_t* s = y + 4;
        std::memset(s, 0, 12);
        for (int j = 0; j < 8; ++j) {
            const int ls = std::min(63, round_even(inv_scale * scales[j]));
            const int lm = std::min(63, round_even(inv_min * mins[j]));
            if (j < 4) {
                s[j] = uint8_t(ls);
                s[j + 4] = uint8_t(lm);
            } else {
                s[j + 4] = uint8_t((ls & 0xF) | (lm & 0xF) << 4);
                s[j - 4] |= uint8_t((ls >> 4) << 6);
                s[j] |= uint8_t((lm >> 4) << 6);
            }
        }
        put_f16(y, max_scale / 63.0f);
        put_f16(y + 2, max_min / 63.0f);
        const float d = get_f16(y), dmin = get_f16(y + 2);
        for (int j = 0; j < 8; ++j) {  // the values again, against the quantized scale and min
            int sc, m;
            q4k_scale_min(j, s, &sc, &m);
            const float dj = d * float(sc), mj = dmin * float(m);
            if (dj == 0.0f) continue;
            for (int i = 0; i < 32; ++i) L[32 * j + i] = uint8_t(std::clamp(round_even((x[32 * j + i] + mj) / dj), 0, 15));
        }
        uint8_t* q = y + 16;
        for (int g = 0; g < 256; g += 64, q += 32)
            for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[g + l] | L[g + 32 + l] << 4);
    }
}

void dequantize_q4_k(const uint8_t* x, float* y, int64_t K) {
    for (int64_t b = 0; b < K / 256; ++b, x += 144) {
        const float d = get_f16(x), dmin = get_f16(x + 2);
        const uint8_t* q = x + 16;
        for (int g = 0; g < 4; ++g, q += 32) {
            int sc0, m0, sc1, m1;
            q4k_scale_min(2 * g, x + 4, &sc0, &m0);
            q4k_scale_min(2 * g + 1, x + 4, &sc1, &m1);
            const float d0 = d * float(sc0), n0 = dmin * float(m0), d1 = d * float(sc1), n1 = dmin * float(m1);
            for (int l = 0; l < 32; ++l) *y++ = d0 * float(q[l] & 0xF) - n0;
            for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] >> 4) - n1;
        }
    }
}

// ---- q6_k ----------------------------------------------------------------------------------------------

// x[i] ~ scale * L[i] with L in [-nmax, nmax - 1]: the inverse scale tried at -(nmax + 0.1 s) / max for s = -9 .. 9
// (max: the x of largest magnitude), keeping the one whose least-squares scale explains the most x^2-weighted
// variance. L is stored + nmax.
float fit_scale(const float* x, int n, int nmax, int8_t* L) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(x[i]) > amax) {
            amax = std::fabs(x[i]);
            max = x[i];
        }
    if (amax < kZeroGroup) {
        std::fill_n(L, n, int8_t(0));
        return 0.0f;
    }
    auto fit = [&](float iscale, float* sumlx, float* suml2) {
        *sumlx = *suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::clamp(round_even(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            *sumlx += w * x[i] * float(l);
            *suml2 += w * float(l) * float(l);
        }
    };
    auto assign = [&](float iscale) {
        for (int i = 0; i < n; ++i) L[i] = int8_t(nmax + std::clamp(round_even(iscale * x[i]), -nmax, nmax - 1));
    };
    float sumlx, suml2;
    fit(-float(nmax) / max, &sumlx, &suml2);
    assign(-float(nmax) / max);
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int s = -9; s <= 9; ++s) {
        if (s == 0) continue;
        const float iscale = -(float(nmax) + 0.1f * float(s)) / max;
        fit(iscale, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            assign(iscale);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void quantize_q6_k(const float* x, uint8_t* y, int64_t K) {
    for (int64_t b = 0; b < K / 256; ++b, x += 256, y += 210) {
        int8_t L[256];
        float scales[16], max_scale = 0, max_abs = 0;
        for (int j = 0; j < 16; ++j) {
            scales[j] = fit_scale(x + 16 * j, 16, 32, L + 16 * j);
            if (std::fabs(scales[j]) > max_abs) {
                max_abs = std::fabs(scales[j]);
                max_scale = scales[j];
            }
        }
        uint8_t *ql = y, *qh = y + 128;
        int8_t* sc = reinterpret_cast<int8_t*>(y + 192);
        std::memset(y, 0, 210);
        if (max_abs < kZeroGroup) continue;  // all zeros, d = 0
        const float iscale = -128.0f / max_scale;
        put_f16(y + 208, 1.0f / iscale);
        for (int j = 0; j < 16; ++j) sc[j] = int8_t(std::min(127, round_even(iscale * scales[j])));
        const float d = get_f16(y + 208);
        for (int j = 0; j < 16; ++j) {  // the values again, against the quantized scales
            const float dj = d * float(sc[j]);
            if (dj == 0.0f) continue;
            for (int i = 0; i < 16; ++i)
                L[16 * j + i] = int8_t(32 + std::clamp(round_even(x[16 * j + i] / dj), -32, 31));
        }
        for (int h = 0; h < 256; h += 128, ql += 64, qh += 32)
            for (int l = 0; l < 32; ++l) {
                const int q0 = L[h + l], q1 = L[h + 32 + l], q2 = L[h + 64 + l], q3 = L[h + 96 + l];
                ql[l] = uint8_t((q0 & 0xF) | (q2 & 0xF) << 4);
                ql[32 + l] = uint8_t((q1 & 0xF) | (q3 & 0xF) << 4);
                qh[l] = uint8_t(q0 >> 4 | (q1 >> 4) << 2 | (q2 >> 4) << 4 | (q3 >> 4) << 6);
            }
    }
}

void dequantize_q6_k(const uint8_t* x, float* y, int64_t K) {
    for (int64_t b = 0; b < K / 256; ++b, x += 210) {
        const float d = get_f16(x + 208);
        const uint8_t *ql = x, *qh = x + 128;
        const int8_t* sc = reinterpret_cast<const int8_t*>(x + 192);
        for (int h = 0; h < 2; ++h, ql += 64, qh += 32, sc += 8, y += 128)
            for (int l = 0; l < 32; ++l) {
                const int s = l / 16;
                y[l] = d * float(sc[s]) * float(((ql[l] & 0xF) | (qh[l] & 3) << 4) - 32);
                y[32 + l] = d * float(sc[s + 2]) * float(((ql[32 + l] & 0xF) | (qh[l] >> 2 & 3) << 4) - 32);
                y[64 + l] = d * float(sc[s + 4]) * float(((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4) - 32);
                y[96 + l] = d * float(sc[s + 6]) * float(((ql[32 + l] >> 4) | (qh[l] >> 6 & 3) << 4) - 32);
            }
    }
}

}  // namespace

const char* quant_name(QuantType t) {
    switch (t) {
        case QuantType::none: return "none";
        case QuantType::q8_0: return "q8_0";
        case QuantType::q4_k: return "q4_k";
        case QuantType::q6_k: return "q6_k";
    }
    return "?";
}

bool parse_quant_type(const std::string& s, QuantType* t) {
    for (QuantType q : {QuantType::none, QuantType::q8_0, QuantType::q4_k, QuantType::q6_k})
        if (s == quant_name(q)) {
            *t = q;
            return true;
        }
    return false;
}

int64_t quant_block(QuantType t) { return t == QuantType::q8_0 ? 32 : t == QuantType::none ? 1 : 256; }

size_t quant_block_bytes(QuantType t) {
    switch (t) {
        case QuantType::none: return 0;
        case QuantType::q8_0: return 34;
        case QuantType::q4_k: return 144;
        case QuantType::q6_k: return 210;
    }
    return 0;
}

size_t quant_row_bytes(QuantType t, int64_t K) { return size_t(K / quant_block(t)) * quant_block_bytes(t); }

void quantize_row(QuantType t, const float* x, void* dst, int64_t K) {
    PL_CHECK(t != QuantType::none && K % quant_block(t) == 0);
    uint8_t* y = static_cast<uint8_t*>(dst);
    switch (t) {
        case QuantType::q8_0: return quantize_q8_0(x, y, K);
        case QuantType::q4_k: return quantize_q4_k(x, y, K);
        case QuantType::q6_k: return quantize_q6_k(x, y, K);
        case QuantType::none: return;
    }
}

void dequantize_row(QuantType t, const void* src, float* y, int64_t K) {
    PL_CHECK(t != QuantType::none && K % quant_block(t) == 0);
    const uint8_t* x = static_cast<const uint8_t*>(src);
    switch (t) {
        case QuantType::q8_0: return dequantize_q8_0(x, y, K);
        case QuantType::q4_k: return dequantize_q4_k(x, y, K);
        case QuantType::q6_k: return dequantize_q6_k(x, y, K);
        case QuantType::none: return;
    }
}

}  // namespace plainllama
