// The grammar's pushdown states and their byte transitions, computed on first use (grammar_matcher.h).
#include "plainllama/run/grammar_matcher.h"

#include <algorithm>

namespace plainllama {

namespace {

constexpr int kMaxDepth =
    5000;  // nested expansions in one step: far past any sensible grammar (and the C stack holds it)

// The bytes a UTF-8 sequence starting with `lead` has, or 0 when it cannot start one.
int utf8_length(uint8_t lead) {
    if (lead < 0x80) return 1;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead >= 0xE0 && lead <= 0xEF) return 3;
    if (lead >= 0xF0 && lead <= 0xF4) return 4;
    return 0;
}

// The range of the byte after `lead` in a valid sequence (no overlong forms, surrogates or code points past
// U+10FFFF); any later byte is 80..BF.
void second_byte_range(uint8_t lead, uint8_t& lo, uint8_t& hi) {
    lo = 0x80, hi = 0xBF;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
}

uint32_t decode(const uint8_t* b, int n) {
    uint32_t cp = n == 1 ? b[0] : b[0] & (0x7F >> n);
    for (int i = 1; i < n; ++i) cp = cp << 6 | (b[i] & 0x3F);
    return cp;
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) { clear(); }

void GrammarMatcher::clear() {
    nodes_.assign(1, Node{UINT32_MAX, 0});
    node_ids_.clear();
    pool_.clear();
    states_.clear();
    state_ids_.clear();
    trans_.clear();
    found_.clear();
    seen_few_.clear();
    seen_.clear();
    for (uint32_t a : g_->alts[g_->root]) expand(a, 0, found_, 0);
    start_ = intern(found_, 0);
}

uint32_t GrammarMatcher::node(uint32_t pos, uint32_t parent) {
    const uint64_t key = uint64_t(pos) << 32 | parent;
    auto [it, added] = node_ids_.try_emplace(key, uint32_t(nodes_.size()));
    if (added) nodes_.push_back({pos, parent});
    return it->second;
}

// Expands the stack (pos, parent) until a class is on top, adding each stack so found (0 for the empty stack) to
// out. first_visit keeps two stacks that meet again from being expanded twice.
void GrammarMatcher::expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out, int depth) {
    if (depth > kMaxDepth) throw Error("grammar: the rules nest too deeply here (more than 5000 levels)");
    if (!first_visit(uint64_t(pos) << 32 | parent)) return;
    const Grammar::Elem e = g_->elems[pos];
    switch (e.kind) {
        case Grammar::kEnd:
            if (parent == 0) {
                out.push_back(0);
            } else {
                const Node below = nodes_[parent];
                expand(below.pos, below.parent, out, depth + 1);
            }
            break;
        case Grammar::kChars:
            out.push_back(node(pos, parent));
            break;
        case Grammar::kRule: {
            // A rule at the end of an alternative returns straight to the node below (no node for the end).
            const uint32_t ret = g_->elems[pos + 1].kind == Grammar::kEnd ? parent : node(pos + 1, parent);
            for (uint32_t a : g_->alts[e.arg]) expand(a, ret, out, depth + 1);
            break;
        }
    }
}

int32_t GrammarMatcher::intern(std::vector<uint32_t>& stacks, uint32_t partial) {
    std::sort(stacks.begin(), stacks.end());
    stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
    uint64_t h = 0x9E3779B97F4A7C15ull ^ partial;
    for (uint32_t id : stacks) h = (h ^ id) * 0x100000001B3ull + (h >> 29);
    const auto [b, e] = state_ids_.equal_range(h);
    for (auto it = b; it != e; ++it) {
        const State& st = states_[size_t(it->second)];
        if (st.partial == partial && st.size == stacks.size() &&
            std::equal(stacks.begin(), stacks.end(), pool_.begin() + st.begin))
            return it->second;
    }
    const int32_t id = int32_t(states_.size());
    state_ids_.emplace(h, id);
    states_.push_back({uint32_t(pool_.size()), uint32_t(stacks.size()), partial});
    pool_.insert(pool_.end(), stacks.begin(), stacks.end());
    trans_.resize(trans_.size() + 256, kUnknown);
    return id;
}

bool GrammarMatcher::first_visit(uint64_t key) {
    constexpr size_t kFew = 32;
    if (seen_few_.size() < kFew) {
        if (std::find(seen_few_.begin(), seen_few_.end(), key) != seen_few_.end()) return false;
        seen_few_.push_back(key);
        return true;
    }
    if (seen_.empty()) seen_.insert(seen_few_.begin(), seen_few_.end());
    return seen_.insert(key).second;
}

int32_t GrammarMatcher::advance(int32_t state, uint32_t cp) {
    const State st = states_[size_t(state)];
    found_.clear();
    seen_few_.clear();
    if (!seen_.empty()) seen_.clear();
    for (uint32_t i = 0; i < st.size; ++i) {
        const uint32_t id = pool_[st.begin + i];
        if (id == 0) continue;
        const Node n = nodes_[id];
        if (g_->classes[g_->elems[n.pos].arg].contains(cp)) expand(n.pos + 1, n.parent, found_, 0);
    }
    if (found_.empty()) return kDead;
    return intern(found_, 0);
}

int32_t GrammarMatcher::compute(int32_t state, uint8_t byte) {
    const State st = states_[size_t(state)];
    uint8_t b[4];
    int have = int(st.partial >> 24);
    for (int i = 0; i < have; ++i) b[i] = uint8_t(st.partial >> (16 - 8 * i));
    int need;
    if (have == 0) {
        need = utf8_length(byte);
        if (need == 0) return kDead;
        if (need == 1) return advance(state, byte);
    } else {
        need = utf8_length(b[0]);
        uint8_t lo = 0x80, hi = 0xBF;
        if (have == 1) second_byte_range(b[0], lo, hi);
        if (byte < lo || byte > hi) return kDead;
    }
    b[have++] = byte;
    if (have == need) return advance(state, decode(b, need));
    // The code points that begin with these bytes: the rest filled with the smallest, then the largest, valid bytes.
    uint8_t lo_b[4] = {}, hi_b[4] = {};
    for (int i = 0; i < need; ++i) {
        if (i < have) {
            lo_b[i] = hi_b[i] = b[i];
        } else if (i == 1) {
            second_byte_range(b[0], lo_b[i], hi_b[i]);
        } else {
            lo_b[i] = 0x80, hi_b[i] = 0xBF;
        }
    }
    const uint32_t lo = decode(lo_b, need), hi = decode(hi_b, need);
    bool possible = false;
    for (uint32_t i = 0; i < st.size && !possible; ++i) {
        const uint32_t id = pool_[st.begin + i];
        possible = id != 0 && g_->classes[g_->elems[nodes_[id].pos].arg].intersects(lo, hi);
    }
    if (!possible) return kDead;
    uint32_t partial = uint32_t(have) << 24;
    for (int i = 0; i < have; ++i) partial |= uint32_t(b[i]) << (16 - 8 * i);
    found_.assign(pool_.begin() + st.begin, pool_.begin() + st.begin + st.size);
    return intern(found_, partial);
}

int32_t GrammarMatcher::feed(int32_t state, std::string_view bytes) {
    for (char c : bytes) {
        if (state < 0) break;
        state = next(state, static_cast<uint8_t>(c));
    }
    return state;
}

bool GrammarMatcher::can_end(int32_t state) const {
    const State& st = states_[size_t(state)];
    return st.partial == 0 && st.size > 0 && pool_[st.begin] == 0;  // sorted: the empty stack (0) comes first
}

bool GrammarMatcher::must_end(int32_t state) const { return can_end(state) && states_[size_t(state)].size == 1; }

int32_t GrammarMatcher::forget_all_but(int32_t keep) {
    const State st = states_[size_t(keep)];
    std::vector<std::vector<uint32_t>> stacks;  // each from top to bottom, as positions
    for (uint32_t i = 0; i < st.size; ++i) {
        stacks.emplace_back();
        for (uint32_t id = pool_[st.begin + i]; id != 0; id = nodes_[id].parent)
            stacks.back().push_back(nodes_[id].pos);
    }
    clear();
    std::vector<uint32_t> ids;
    for (const auto& s : stacks) {
        uint32_t id = 0;
        for (auto it = s.rbegin(); it != s.rend(); ++it) id = node(*it, id);
        ids.push_back(id);
    }
    return intern(ids, st.partial);
}

}  // namespace plainllama
