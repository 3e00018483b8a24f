// The mask of allowed tokens from a grammar state and the vocabulary's prefix tree (grammar_constraint.h).
#include "plainllama/run/grammar_constraint.h"

#include <algorithm>
#include <bit>

#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

// Bounds on what a constraint keeps: the matcher's states (a row of 256 transitions each) and the masks by state.
// Past them the caches are dropped and rebuilt from the current state; the bounds cap memory per sequence.
constexpr size_t kMaxStates = 8192;
constexpr size_t kMaxMasks = 64;

// A token's bytes as text for a message: printable ASCII as it is, anything else as \xHH.
std::string shown(const std::string& b) {
    std::string s;
    for (unsigned char c : b) {
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
            s += char(c);
        } else {
            static const char* hex = "0123456789abcdef";
            s += "\\x";
            s += hex[c >> 4];
            s += hex[c & 15];
        }
    }
    return s;
}

}  // namespace

int32_t TokenMask::count() const {
    int32_t c = 0;
    for (uint64_t w : bits) c += std::popcount(w);
    return c;
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> vocab,
                                     std::vector<int32_t> stop_ids)
    : vocab_(std::move(vocab)), stop_ids_(std::move(stop_ids)), matcher_(std::move(grammar)), state_(matcher_.start()) {
    stop_ids_.erase(std::remove_if(stop_ids_.begin(), stop_ids_.end(),
                                   [&](int32_t id) { return id < 0 || id >= vocab_->n_vocab(); }),
                    stop_ids_.end());
    uint16_t depth = 0;
    for (const TokenTrie::Node& n : vocab_->nodes()) depth = std::max(depth, n.depth);
    walk_.resize(size_t(depth) + 1);
}

void GrammarConstraint::reset() {
    state_ = matcher_.start();
    ended_ = false;
}

// Stop ids: allowed exactly where the grammar can end, whatever bytes they have.
void GrammarConstraint::finish_mask(TokenMask& m) const {
    const bool end = matcher_.can_end(state_);
    for (int32_t id : stop_ids_) {
        if (end)
            m.set(id);
        else
            m.reset(id);
    }
}

void GrammarConstraint::compute_mask(TokenMask& m) {
    m.clear(vocab_->n_vocab());
    // The hot loop: one node, one table lookup; raw pointers, as nothing here can move them but a new transition.
    const TokenTrie::Node* nodes = vocab_->nodes().data();
    const size_t n_nodes = vocab_->nodes().size();
    const int32_t* tokens = vocab_->tokens().data();
    uint64_t* bits = m.bits.data();
    int32_t* walk = walk_.data();
    const int32_t* trans = matcher_.transitions();
    walk[0] = state_;
    for (size_t i = 1; i < n_nodes;) {
        const TokenTrie::Node n = nodes[i];
        const int32_t s = walk[n.depth - 1];
        int32_t t = trans[size_t(s) * 256 + n.byte];
        if (t == GrammarMatcher::kUnknown) {
            t = matcher_.next(s, n.byte);
            trans = matcher_.transitions();
        }
        if (t == GrammarMatcher::kDead) {
            i = n.skip;  // no token under this prefix
            continue;
        }
        walk[n.depth] = t;
        for (uint32_t k = n.first_token, e = k + n.n_tokens; k < e; ++k)
            bits[uint32_t(tokens[k]) >> 6] |= uint64_t(1) << (tokens[k] & 63);
        ++i;
    }
    finish_mask(m);
}

void GrammarConstraint::compute_mask_brute_force(TokenMask& m) {
    m.clear(vocab_->n_vocab());
    for (int32_t id = 0; id < vocab_->n_vocab(); ++id) {
        const std::string& b = vocab_->bytes(id);
        if (!b.empty() && matcher_.feed(state_, b) != GrammarMatcher::kDead) m.set(id);
    }
    finish_mask(m);
}

const TokenMask& GrammarConstraint::allowed() {
    if (ended_) throw Error("grammar: a stop token has ended the text: no token may follow");
    if (matcher_.n_states() > kMaxStates) {
        state_ = matcher_.forget_all_but(state_);
        masks_.clear();
    }
    auto it = masks_.find(state_);
    if (it != masks_.end()) {
        ++n_cached_;
        return it->second;
    }
    ++n_computed_;
    if (masks_.size() >= kMaxMasks) masks_.clear();
    TokenMask& m = masks_[state_];
    compute_mask(m);
    if (m.count() == 0) {
        masks_.erase(state_);
        throw Error(
            "grammar: no token of the vocabulary can continue the text here (the grammar needs a character "
            "that no token, nor a sequence of byte tokens, can produce)");
    }
    return m;
}

void GrammarConstraint::accept(int32_t id) {
    if (ended_) throw Error("grammar: a stop token has ended the text: no token may follow");
    if (std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) {
        if (!matcher_.can_end(state_))
            throw Error("grammar: stop token " + std::to_string(id) + " before the grammar is complete");
        ended_ = true;
        return;
    }
    if (id < 0 || id >= vocab_->n_vocab())
        throw Error("grammar: token id " + std::to_string(id) + " is outside the vocabulary");
    const std::string& b = vocab_->bytes(id);
    const int32_t t = b.empty() ? GrammarMatcher::kDead : matcher_.feed(state_, b);
    if (t == GrammarMatcher::kDead)
        throw Error("grammar: token " + std::to_string(id) + " (\"" + shown(b) + "\") is not allowed here");
    state_ = t;
}

void GrammarConstraint::accept_text(std::string_view bytes) {
    if (ended_) throw Error("grammar: a stop token has ended the text: no text may follow");
    const int32_t t = matcher_.feed(state_, bytes);
    if (t == GrammarMatcher::kDead)
        throw Error("grammar: the text \"" + shown(std::string(bytes)) + "\" is not allowed here");
    state_ = t;
}

}  // namespace plainllama
