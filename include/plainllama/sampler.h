// Choosing the next token from logits. The chain, in order (llama.cpp's):
//   repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw
// temp == 0 is greedy (argmax after the repetition penalty). Each stage is a free function, tested alone.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace plainllama {

struct SamplerParams {
    float temp = 0.8f;            // 0 = greedy
    int32_t top_k = 40;           // 0 = off (keep all)
    float top_p = 0.95f;          // 1 = off
    float min_p = 0.05f;          // 0 = off
    float repeat_penalty = 1.0f;  // 1 = off
    int32_t repeat_last_n = 64;   // how many recent tokens the penalty looks at; 0 = off, -1 = all
    uint64_t seed = 0;
};

// A candidate token and its logit; stages shrink or rescale a list of these.
struct Candidate {
    int32_t id;
    float logit;
};

// llama.cpp's penalty: a logit l of a token among the last tokens becomes l / p if l > 0, else l * p.
void apply_repeat_penalty(std::vector<Candidate>& c, const std::vector<int32_t>& recent, float penalty);
// Keeps the k highest logits (all when k <= 0 or k >= size), sorted descending.
void apply_top_k(std::vector<Candidate>& c, int32_t k);
// Keeps the smallest prefix, by descending probability, whose mass is >= p (at least one).
void apply_top_p(std::vector<Candidate>& c, float p);
// Keeps tokens whose probability is >= min_p * the largest probability (at least one).
void apply_min_p(std::vector<Candidate>& c, float min_p);
// Softmax of logits / temp over the candidates, as probabilities in candidate order.
std::vector<double> candidate_probs(const std::vector<Candidate>& c, float temp);

class Sampler {
public:
    explicit Sampler(const SamplerParams& p);
    // Next token from logits [n_vocab]; `history` is every token so far (prompt included).
    int32_t sample(const float* logits, int32_t n_vocab, const std::vector<int32_t>& history);
    const SamplerParams& params() const { return params_; }

private:
    SamplerParams params_;
    std::mt19937_64 rng_;
    std::vector<Candidate> cands_;
};

}  // namespace plainllama
