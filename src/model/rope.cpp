#include "plainllama/model/rope.h"

#include <cmath>

namespace plainllama {

std::vector<double> rope_inv_freq(const LlamaConfig& c) {
    const int64_t half = c.head_dim / 2;
    std::vector<double> f(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) f[size_t(i)] = 1.0 / std::pow(c.rope_theta, double(2 * i) / double(c.head_dim));
    const RopeScaling& s = c.rope_scaling;
    if (s.freq_factors.size() == f.size())
        for (size_t i = 0; i < f.size(); ++i) f[i] /= s.freq_factors[i];
    if (s.rope_type == RopeType::linear) {
        for (double& x : f) x /= s.factor;
    } else if (s.rope_type == RopeType::llama3) {
        const double old_ctx = double(s.original_max_position_embeddings);
        const double low_wavelen = old_ctx / s.low_freq_factor, high_wavelen = old_ctx / s.high_freq_factor;
        for (double& x : f) {
            const double wavelen = 2.0 * M_PI / x;
            if (wavelen > low_wavelen) {
                x /= s.factor;
            } else if (wavelen >= high_wavelen) {  // medium band: blend
                const double smooth =
                    (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
                x = (1.0 - smooth) * x / s.factor + smooth * x;
            }
        }
    }
    return f;
}

void rope_tables(const std::vector<double>& inv_freq, int64_t n_pos, std::vector<float>* cos, std::vector<float>* sin) {
    const size_t half = inv_freq.size();
    cos->resize(size_t(n_pos) * half);
    sin->resize(size_t(n_pos) * half);
    for (int64_t p = 0; p < n_pos; ++p)
        for (size_t i = 0; i < half; ++i) {
            const double a = double(p) * inv_freq[i];
            (*cos)[size_t(p) * half + i] = float(std::cos(a));
            (*sin)[size_t(p) * half + i] = float(std::sin(a));
        }
}

}  // namespace plainllama
