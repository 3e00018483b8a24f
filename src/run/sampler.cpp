// The token sampler: repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw (llama.cpp's order).
#include "plainllama/run/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "plainllama/run/grammar_constraint.h"
#include "plainllama/sys/error.h"

namespace plainllama {
namespace {

// Descending logit, ties to the lower id. A strict weak order only without NaN: sort what nans_last() leaves
// in front. A function object, so that the std algorithms inline it.
struct Higher {
    bool operator()(const Candidate& a, const Candidate& b) const {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }
};
constexpr Higher higher;

// Moves NaN logits behind the others (sorted by id there) and returns how many are not NaN. A list without
// NaN is left as it is.
size_t nans_last(std::vector<Candidate>& c) {
    const auto mid = std::partition(c.begin(), c.end(), [](const Candidate& x) { return !std::isnan(x.logit); });
    std::sort(mid, c.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
    return size_t(mid - c.begin());
}

// Index of the highest candidate (lowest id among ties; a NaN only when all are); c must not be empty.
size_t best_index(const std::vector<Candidate>& c) {
    size_t b = 0;
    for (size_t i = 1; i < c.size(); ++i)
        if (higher(c[i], c[b]) || (std::isnan(c[b].logit) && !std::isnan(c[i].logit))) b = i;
    return b;
}

// Largest logit, NaN ignored (-inf when there is none).
double max_logit(const std::vector<Candidate>& c) {
    float m = -INFINITY;
    for (const Candidate& x : c) m = std::max(m, x.logit);
    return m;
}

// exp((l - max) / temp): the unnormalised softmax weight. The max weighs 1 (also when it is -inf); NaN weighs 0.
double weight(float l, double max, double inv_temp) {
    if (double(l) == max) return 1.0;
    const double w = std::exp((double(l) - max) * inv_temp);
    return std::isnan(w) ? 0.0 : w;
}

// p[i] = exp((l_i - max) / temp) / sum_j exp((l_j - max) / temp), in double; temp <= 0 is one-hot on the best.
void softmax_into(const std::vector<Candidate>& c, float temp, std::vector<double>& p) {
    p.assign(c.size(), 0.0);
    if (c.empty()) return;
    if (!(temp > 0.0f)) {
        p[best_index(c)] = 1.0;
        return;
    }
    const double m = max_logit(c), inv_temp = 1.0 / double(temp);
    double sum = 0;
    for (size_t i = 0; i < c.size(); ++i) sum += p[i] = weight(c[i].logit, m, inv_temp);
    if (!(sum > 0)) {  // every logit NaN
        std::fill(p.begin(), p.end(), 1.0 / double(p.size()));
        return;
    }
    for (double& x : p) x /= sum;
}

// Penalises each id of `ids` once. `ids` is scratch: it is sorted and deduplicated in place.
// by_id: the list is sorted by id (the sampler's own, whole or masked), so an id is found by bisection.
void penalize(std::vector<Candidate>& c, std::vector<int32_t>& ids, float penalty, bool by_id = false) {
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (const int32_t id : ids) {
        Candidate* hit = nullptr;
        if (id >= 0 && size_t(id) < c.size() && c[size_t(id)].id == id) {
            hit = &c[size_t(id)];  // the sampler's whole list is in id order
        } else if (by_id) {
            auto it = std::lower_bound(c.begin(), c.end(), id, [](const Candidate& x, int32_t v) { return x.id < v; });
            if (it != c.end() && it->id == id) hit = &*it;
        } else {
            auto it = std::find_if(c.begin(), c.end(), [id](const Candidate& x) { return x.id == id; });
            if (it != c.end()) hit = &*it;
        }
        if (hit) hit->logit = hit->logit > 0 ? hit->logit / penalty : hit->logit * penalty;
    }
}

}  // namespace

void apply_repeat_penalty(std::vector<Candidate>& c, const std::vector<int32_t>& recent, float penalty) {
    if (penalty == 1.0f || recent.empty()) return;
    std::vector<int32_t> ids(recent);
    penalize(c, ids, penalty);
}

void apply_top_k(std::vector<Candidate>& c, int32_t k) {
    const size_t n_ok = nans_last(c);
    const size_t keep = k <= 0 || size_t(k) >= c.size() ? c.size() : size_t(k);
    const size_t n_sorted = std::min(keep, n_ok);
    if (n_sorted == n_ok) {
        std::sort(c.begin(), c.begin() + n_ok, higher);
    } else {
        std::partial_sort(c.begin(), c.begin() + n_sorted, c.begin() + n_ok, higher);
    }
    c.resize(keep);
}

void apply_top_p(std::vector<Candidate>& c, float p) {
    if (p >= 1.0f || c.size() <= 1) return;
    const double m = max_logit(c);
    double sum = 0;
    for (const Candidate& x : c) sum += weight(x.logit, m, 1.0);
    const size_t n_ok = nans_last(c);  // NaN weighs 0: they stay behind
    const bool sorted = std::is_sorted(c.begin(), c.begin() + n_ok, higher);
    // Walk down the probabilities, sorting the next block of the tail only when the walk reaches it:
    // after each block the first `end` candidates are the `end` highest, in order. Blocks grow 4x (128, 512, ...);
    // a block is selected (nth_element, linear) and then sorted.
    double cum = 0;
    size_t done = 0;
    while (done < n_ok) {
        size_t end = n_ok;
        if (!sorted) {
            end = std::max<size_t>(128, 4 * done);
            if (2 * end >= n_ok) {
                end = n_ok;
                std::sort(c.begin() + done, c.begin() + n_ok, higher);
            } else {
                std::nth_element(c.begin() + done, c.begin() + end, c.begin() + n_ok, higher);
                std::sort(c.begin() + done, c.begin() + end, higher);
            }
        }
        for (; done < end; ++done) {
            cum += weight(c[done].logit, m, 1.0) / sum;
            if (cum >= p) {
                c.resize(done + 1);
                return;
            }
        }
    }
    // The rounded total stayed below p: everything is kept (now sorted).
}

void apply_min_p(std::vector<Candidate>& c, float min_p) {
    if (!(min_p > 0.0f) || c.empty()) return;
    // p_i >= min_p * p_max  <=>  exp(l_i - l_max) >= min_p: no normalisation needed.
    const double m = max_logit(c);
    const Candidate top = c[best_index(c)];
    c.erase(
        std::remove_if(c.begin(), c.end(), [&](const Candidate& x) { return weight(x.logit, m, 1.0) < double(min_p); }),
        c.end());
    if (c.empty()) c.push_back(top);  // min_p > 1: keep the best one
}

std::vector<double> candidate_probs(const std::vector<Candidate>& c, float temp) {
    std::vector<double> p;
    softmax_into(c, temp, p);
    return p;
}

Sampler::Sampler(const SamplerParams& p) : params_(p), rng_(p.seed) {}

int32_t Sampler::sample(const float* logits, int32_t n_vocab, const std::vector<int32_t>& history,
                        const TokenMask* allowed) {
    if (n_vocab < 1 || logits == nullptr)
        throw Error("sampler: expected logits for n_vocab >= 1 tokens, got n_vocab " + std::to_string(n_vocab) +
                    (logits ? "" : " and no logits"));
    const SamplerParams& p = params_;
    // NaN or +Inf logits come from a NaN or Inf weight (or activations past f32's range), never from a sound model;
    // -Inf is a token ruled out.
    bool sound = true;
    for (int32_t i = 0; i < n_vocab; ++i) sound = sound && logits[i] < INFINITY;  // false for NaN too
    if (!sound) {
        int32_t bad = 0;
        while (logits[bad] < INFINITY) ++bad;
        throw Error("the model's logits are not finite (token " + std::to_string(bad) + ": " +
                    (std::isnan(logits[bad]) ? "NaN" : "Inf") +
                    "): likely a NaN or Inf weight; --check-tensors finds it at load");
    }
    if (!allowed) {
        cands_.resize(size_t(n_vocab));
        for (int32_t i = 0; i < n_vocab; ++i) cands_[size_t(i)] = {i, logits[i]};
    } else {  // only the allowed tokens, in id order
        if (allowed->n != n_vocab)
            throw Error("sampler: the mask of allowed tokens has " + std::to_string(allowed->n) +
                        " tokens, the logits " + std::to_string(n_vocab));
        cands_.clear();
        for (size_t w = 0; w < allowed->bits.size(); ++w)
            for (uint64_t b = allowed->bits[w]; b; b &= b - 1) {
                const int32_t id = int32_t(w * 64 + size_t(std::countr_zero(b)));
                cands_.push_back({id, logits[id]});
            }
        if (cands_.empty()) throw Error("sampler: the mask allows no token");
    }

    if (p.repeat_penalty != 1.0f && p.repeat_last_n != 0 && !history.empty()) {
        const size_t n = p.repeat_last_n < 0 ? history.size() : std::min(history.size(), size_t(p.repeat_last_n));
        recent_.assign(history.end() - std::ptrdiff_t(n), history.end());
        penalize(cands_, recent_, p.repeat_penalty, /*by_id=*/true);
    }
    if (!(p.temp > 0.0f)) return cands_[best_index(cands_)].id;  // greedy: no random numbers

    if (p.top_k > 0 && p.top_k < n_vocab) apply_top_k(cands_, p.top_k);
    apply_top_p(cands_, p.top_p);
    apply_min_p(cands_, p.min_p);
    softmax_into(cands_, p.temp, probs_);

    // u uniform in [0, 1) from the top 53 bits (std::uniform_real_distribution is implementation-defined).
    const double u = double(rng_() >> 11) * 0x1.0p-53;
    double cum = 0;
    for (size_t i = 0; i < cands_.size(); ++i) {
        cum += probs_[i];
        if (u < cum) return cands_[i].id;
    }
    // u at or above the rounded total: the last candidate with any mass.
    for (size_t i = cands_.size(); i-- > 0;)
        if (probs_[i] > 0) return cands_[i].id;
    return cands_.front().id;
}

}  // namespace plainllama
