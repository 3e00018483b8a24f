// Running a Grammar over text, byte by byte.
//
// The grammar's state after some text is a set of stacks, as in llama.cpp: each stack is one way to be inside the
// rules (its top is the character class that must come next, below it where each rule returns to); the empty stack
// means the text so far is a whole sentence. A code point advances every stack whose top accepts it, and each is
// then expanded (rules at the top replaced by their alternatives) until a class is on top again. Left recursion,
// refused by the parser, is what would make that expansion endless.
//
// Stacks are hash-consed linked lists (a node is a position and the node below it), so a push or a pop is one
// lookup and equal stacks are one id. A state (a sorted set of stack ids, plus the bytes of a code point begun but
// not finished) gets an id too, and each (state, byte) transition is computed once and then read from a table: a
// lazily built automaton over bytes, which is what makes a walk over the vocabulary's prefix tree cheap. A byte that
// begins a code point is refused unless some stack's class holds a code point that starts with the bytes so far.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "plainllama/run/grammar.h"

namespace plainllama {

class GrammarMatcher {
   public:
    static constexpr int32_t kDead = -1;     // the text cannot go on this way
    static constexpr int32_t kUnknown = -2;  // in transitions(): not computed yet (next() computes it)

    explicit GrammarMatcher(std::shared_ptr<const Grammar> g);

    int32_t start() const { return start_; }
    // The state after one more byte, or kDead.
    int32_t next(int32_t state, uint8_t byte) {
        const size_t i = size_t(state) * 256 + byte;
        int32_t t = trans_[i];
        if (t == kUnknown) trans_[i] = t = compute(state, byte);
        return t;
    }
    // The state after the bytes, or kDead.
    int32_t feed(int32_t state, std::string_view bytes);
    // The text so far is a whole sentence of the grammar.
    bool can_end(int32_t state) const;
    // ... and nothing may follow it.
    bool must_end(int32_t state) const;

    // States known (each holds a row of 256 transitions): the tables grow with the text and with every prefix of
    // every token tried from the states reached.
    size_t n_states() const { return states_.size(); }
    // Forgets every state and stack but `keep`'s; returns keep's id in the new tables (start() is renewed too).
    int32_t forget_all_but(int32_t keep);

    // The transition table, [n_states, 256]: next(state, byte) when it is not kUnknown. Valid until the next call
    // that computes a transition (which may grow it); for loops that read many transitions.
    const int32_t* transitions() const { return trans_.data(); }

   private:
    struct Node {
        uint32_t pos;     // an element of grammar.elems: the top's class, or where the rule below returns to
        uint32_t parent;  // the node below; 0 is the empty stack
    };
    struct State {
        uint32_t begin, size;  // its stack ids in pool_, sorted
        uint32_t partial;      // bytes of an unfinished code point: count << 24 | b0 << 16 | b1 << 8 | b2
    };

    int32_t compute(int32_t state, uint8_t byte);
    int32_t advance(int32_t state, uint32_t cp);
    void expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out, int depth);
    uint32_t node(uint32_t pos, uint32_t parent);
    int32_t intern(std::vector<uint32_t>& stacks, uint32_t partial);
    bool first_visit(uint64_t key);  // for expand: whether (pos, parent) is new this step
    void clear();

    std::shared_ptr<const Grammar> g_;
    std::vector<Node> nodes_;
    std::unordered_map<uint64_t, uint32_t> node_ids_;
    std::vector<uint32_t> pool_;
    std::vector<State> states_;
    std::unordered_multimap<uint64_t, int32_t> state_ids_;  // a hash of the state's stacks and bytes -> its id
    std::vector<int32_t> trans_;                            // [n_states, 256]
    // Scratch of a step: the stacks found, and (pos, parent) already expanded (a few: a list, then a set).
    std::vector<uint32_t> found_;
    std::vector<uint64_t> seen_few_;
    std::unordered_set<uint64_t> seen_;
    int32_t start_ = 0;
};

}  // namespace plainllama
