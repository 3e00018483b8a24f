// Which quantized format each weight matrix takes (--quant): llama.cpp's schemes of the same names.
//   none    every matrix in its own float type (exact)
//   q8_0    every matrix q8_0
//   q6_k    every matrix q6_k
//   q4_k_m  q4_k, but q6_k for lm_head (the output projection, tied or not) and for v_proj and down_proj in the
//           layers llama.cpp gives more bits: the first and last eighth of the layers and every third between
//           (layer i of n: i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2)
// A matrix whose input dimension is not a multiple of the format's block falls back: q4_k, q6_k -> q8_0 -> its float
// type. Token embeddings are gathered a row at a time, not multiplied: they stay in their float type.
#pragma once
#include <string>

#include "plainllama/io/config.h"
#include "plainllama/kernels/quant.h"
#include "plainllama/model/weights.h"

namespace plainllama {

enum class QuantScheme { none, q8_0, q6_k, q4_k_m };

const char* scheme_name(QuantScheme s);  // "none", "q8_0", "q6_k", "q4_k_m"
// The names above; throws UsageError naming `what` (e.g. "--quant") otherwise.
QuantScheme parse_scheme(const std::string& name, const std::string& what);

// The format of matrix s (a TensorSpec with matrix set; `lm_head` for the tied output projection) under scheme.
QuantType quant_for(QuantScheme scheme, const TensorSpec& s, const LlamaConfig& c);
// The tied output projection (the embedding's tensor, multiplied as lm_head).
QuantType quant_for_tied_lm_head(QuantScheme scheme, const LlamaConfig& c);

}  // namespace plainllama
