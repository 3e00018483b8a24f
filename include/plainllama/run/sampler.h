// Choosing the next token from logits. The chain, in order (llama.cpp's):
//   repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw
// temp == 0 is greedy (argmax after the repetition penalty). Each stage is a free function, tested alone.
// Probabilities are softmax in double over max-subtracted logits. Ties in logit order go to the lower id.
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
// Each distinct token in `recent` is penalised once; ids not among the candidates are ignored.
void apply_repeat_penalty(std::vector<Candidate>& c, const std::vector<int32_t>& recent, float penalty);
// Keeps the k highest logits (all when k <= 0 or k >= size), sorted descending. Sorts only the top k
// (partial sort); the Sampler skips this stage when it is off.
void apply_top_k(std::vector<Candidate>& c, int32_t k);
// Keeps the smallest prefix, by descending probability, whose mass is >= p (at least one); p >= 1 is off.
// Probabilities are the softmax of the candidates' logits at temperature 1. The kept prefix ends up sorted
// descending; only as much of the list is sorted as is needed to reach p.
void apply_top_p(std::vector<Candidate>& c, float p);
// Keeps tokens whose probability is >= min_p * the largest probability (at least one), in their order;
// min_p <= 0 is off.
void apply_min_p(std::vector<Candidate>& c, float min_p);
// Softmax of logits / temp over the candidates, as probabilities in candidate order. temp <= 0 puts all
// the mass on the highest logit (the lowest id among ties).
std::vector<double> candidate_probs(const std::vector<Candidate>& c, float temp);

struct TokenMask;

class Sampler {
   public:
    explicit Sampler(const SamplerParams& p);
    // Next token from logits [n_vocab]; `history` is every token so far (prompt included).
    // The draw: u = (next mt19937_64 output >> 11) * 2^-53, uniform in [0, 1), and the token is the first
    // candidate whose cumulative probability exceeds u. Greedy (temp == 0) uses no random numbers.
    // Throws Error if n_vocab < 1. With `allowed` (constrained decoding, grammar_constraint.h), the tokens outside
    // it are out before the chain runs, as if their logits were -inf; Error when it allows none or its size is not
    // n_vocab.
    int32_t sample(const float* logits, int32_t n_vocab, const std::vector<int32_t>& history,
                   const TokenMask* allowed = nullptr);
    const SamplerParams& params() const { return params_; }

   private:
    SamplerParams params_;
    std::mt19937_64 rng_;
    std::vector<Candidate> cands_;  // [n_vocab], reused between calls
    std::vector<int32_t> recent_;   // [<= repeat_last_n] scratch: the penalty window, sorted and unique
    std::vector<double> probs_;     // [cands_.size()] scratch: the final distribution
};

}  // namespace plainllama
