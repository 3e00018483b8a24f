// TEMPORARY greedy-only stand-in until the sampler branch lands.
#include "plainllama/sampler.h"
#include <algorithm>
namespace plainllama {
Sampler::Sampler(const SamplerParams& p) : params_(p), rng_(p.seed) {}
int32_t Sampler::sample(const float* logits, int32_t n, const std::vector<int32_t>&) {
    return int32_t(std::max_element(logits, logits + n) - logits);
}
}  // namespace plainllama
