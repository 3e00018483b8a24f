// Constrained decoding: which tokens may come next so that the text stays a prefix of a sentence of a grammar.
//
// One GrammarConstraint per generated sequence (a `generate` run, a server slot's job); the Grammar and the
// vocabulary's TokenTrie are immutable and shared. Each step:
//
//   const TokenMask& m = c.allowed();           // the tokens the grammar allows now (Error when there is none)
//   int32_t id = sampler.sample(logits, n_vocab, history, &m);
//   if (is a stop id) -> the reply is over (the mask allows stop ids only where the grammar can end)
//   c.accept(id);
//   if (c.must_end()) -> the reply is over: the grammar is complete and nothing may follow
//
// The mask is a walk over the prefix tree from the grammar's state (grammar_matcher.h), skipping every subtree whose
// prefix the grammar refuses; masks are kept per state, so a state seen again (inside a string, between list items)
// costs a lookup.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "plainllama/run/grammar.h"
#include "plainllama/run/grammar_matcher.h"
#include "plainllama/run/token_trie.h"

namespace plainllama {

// One bit per token id.
struct TokenMask {
    std::vector<uint64_t> bits;  // [ceil(n / 64)]
    int32_t n = 0;

    void clear(int32_t n_tokens) {
        n = n_tokens;
        bits.assign((size_t(n_tokens) + 63) / 64, 0);
    }
    bool test(int32_t id) const { return id >= 0 && id < n && (bits[size_t(id) >> 6] >> (id & 63)) & 1; }
    void set(int32_t id) { bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63); }
    void reset(int32_t id) { bits[size_t(id) >> 6] &= ~(uint64_t(1) << (id & 63)); }
    int32_t count() const;
};

class GrammarConstraint {
   public:
    // stop_ids: the tokens that end a reply (EOS, end of turn), allowed exactly where the grammar can end.
    GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> vocab,
                      std::vector<int32_t> stop_ids);

    // The tokens allowed next, [vocab->n_vocab()]. Error when the grammar allows none (no token of the vocabulary
    // can continue the text), and after a stop id was accepted. The reference holds until the next call.
    const TokenMask& allowed();
    // Takes the chosen token into the state. Error when the grammar does not allow it.
    void accept(int32_t id);
    // Takes text into the state as if tokens had produced it (text forced into a reply; tests). Error when the
    // grammar refuses it (the state is then unchanged).
    void accept_text(std::string_view bytes);
    // The text so far is a whole sentence: a stop id may come.
    bool can_end() const { return !ended_ && matcher_.can_end(state_); }
    // The text is a whole sentence and nothing may follow it (or a stop id was accepted).
    bool must_end() const { return ended_ || matcher_.must_end(state_); }
    // Back to the start of the grammar, for a new sequence.
    void reset();
    // allowed() calls so far that walked the tree, and that found the state's mask kept.
    int64_t masks_computed() const { return n_computed_; }
    int64_t masks_cached() const { return n_cached_; }

    // The mask of the state, computed by walking the prefix tree (what allowed() calls on a state it has not seen).
    void compute_mask(TokenMask& m);
    // The same mask by trying every token's bytes one by one: the reference the tests compare the walk with.
    void compute_mask_brute_force(TokenMask& m);

   private:
    void finish_mask(TokenMask& m) const;

    std::shared_ptr<const TokenTrie> vocab_;
    std::vector<int32_t> stop_ids_;
    GrammarMatcher matcher_;
    int32_t state_;
    bool ended_ = false;
    int64_t n_computed_ = 0, n_cached_ = 0;
    std::unordered_map<int32_t, TokenMask> masks_;  // by state
    std::vector<int32_t> walk_;                     // [max depth + 1] scratch: the state at each depth of the walk
};

}  // namespace plainllama
