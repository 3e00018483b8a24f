// Which quantized format each weight matrix takes (--quant): llama.cpp's mixes of the same names (llama-quant.cpp's
// llama_tensor_get_type for its file types Q8_0, Q6_K, Q4_K_M, Q5_K_M and Q4_0, without an importance matrix).
//   none    every tensor in its own type (exact)
//   q8_0    every matrix q8_0
//   q6_k    every matrix q6_k
//   q4_k_m  q4_k, but q6_k for v_proj and down_proj in the layers llama.cpp gives more bits: the first and last eighth
//           of the layers and every third between (layer i of n: i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2)
//   q5_k_m  q5_k, with q6_k where q4_k_m has it
//   q4_0    every matrix q4_0
// The output projection (lm_head, tied or not) takes q6_k under every scheme but q8_0 (q8_0 there). The token
// embedding is quantized too, gathered a row at a time: to the scheme's format (untied), or to the output projection's
// (tied: one tensor serves both, as llama.cpp stores it). A matrix whose input dimension is not a multiple of the
// format's block falls back as llama.cpp's does: q4_k and q5_k -> q5_0, q6_k -> q8_0 (and the output projection to
// q8_0), and a 32-weight format that does not fit either -> its float type. The norms keep their type.
#pragma once
#include <string>

#include "plainllama/io/config.h"
#include "plainllama/kernels/quant.h"
#include "plainllama/model/weights.h"

namespace plainllama {

enum class QuantScheme { none, q8_0, q6_k, q4_k_m, q5_k_m, q4_0 };

const char* scheme_name(QuantScheme s);  // "none", "q8_0", "q6_k", "q4_k_m", "q5_k_m", "q4_0"
std::string scheme_names();              // "none, q8_0, q6_k, q4_k_m, q5_k_m, q4_0"
// The names above; throws UsageError naming `what` (e.g. "--quant") otherwise.
QuantScheme parse_scheme(const std::string& name, const std::string& what);

// The format of matrix s (a TensorSpec with matrix set) under scheme.
QuantType quant_for(QuantScheme scheme, const TensorSpec& s, const LlamaConfig& c);
// The tied output projection (the embedding's tensor, multiplied as lm_head).
QuantType quant_for_tied_lm_head(QuantScheme scheme, const LlamaConfig& c);
// The token embedding's format (the output projection's when tied).
QuantType quant_for_embedding(QuantScheme scheme, const LlamaConfig& c);

}  // namespace plainllama
