// Rotary position embedding frequencies, as HF computes them for LLaMA (incl. rope_scaling).
#pragma once
#include <vector>

#include "plainllama/io/config.h"

namespace plainllama {

// inv_freq[i] = rope_theta^(-2i/head_dim), i < head_dim/2, then scaled per rope_scaling:
// freq_factors (a GGUF's rope_freqs.weight) divide each one; "linear" divides by factor; "llama3" divides low
// frequencies by factor and blends the middle band.
std::vector<double> rope_inv_freq(const LlamaConfig& c);

// cos/sin tables for positions 0 .. n_pos-1: each [n_pos, head_dim/2], angle = pos * inv_freq[i].
void rope_tables(const std::vector<double>& inv_freq, int64_t n_pos, std::vector<float>* cos, std::vector<float>* sin);

}  // namespace plainllama
