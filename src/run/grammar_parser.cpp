// GBNF text -> Grammar: a recursive-descent parser, then the checks the matcher relies on (every rule defined, a
// root, no left recursion).
#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "plainllama/run/grammar.h"

namespace plainllama {

bool CharClass::contains(uint32_t cp) const {
    if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
    auto it = std::upper_bound(ranges.begin(), ranges.end(), cp, [](uint32_t c, const Range& r) { return c < r.lo; });
    return it != ranges.begin() && cp <= (it - 1)->hi;
}

bool CharClass::intersects(uint32_t lo, uint32_t hi) const {
    // The first range that ends at or after lo: it intersects when it starts at or before hi.
    auto it = std::lower_bound(ranges.begin(), ranges.end(), lo, [](const Range& r, uint32_t c) { return r.hi < c; });
    return it != ranges.end() && it->lo <= hi;
}

namespace {

constexpr uint32_t kMaxRepeat = 10000;            // the largest m or n of {m,n}
constexpr size_t kMaxElements = size_t(1) << 22;  // elements of all rules, after repetitions are written out
constexpr int kMaxNesting = 1000;                 // groups within groups (the parser recurses on each)

using Elem = Grammar::Elem;
using Seq = std::vector<Elem>;

// Sorts and merges ranges (touching ones too), then fills the ASCII bitmap.
CharClass make_class(std::vector<CharClass::Range> r, bool negate) {
    std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.lo < b.lo; });
    CharClass c;
    for (const auto& x : r) {
        if (!c.ranges.empty() && x.lo <= c.ranges.back().hi + 1)
            c.ranges.back().hi = std::max(c.ranges.back().hi, x.hi);
        else
            c.ranges.push_back(x);
    }
    if (negate) {
        std::vector<CharClass::Range> inv;
        uint32_t next = 0;
        for (const auto& x : c.ranges) {
            if (x.lo > next) inv.push_back({next, x.lo - 1});
            next = x.hi + 1;
        }
        if (next <= Grammar::kMaxCodePoint) inv.push_back({next, Grammar::kMaxCodePoint});
        c.ranges = std::move(inv);
    }
    for (const auto& x : c.ranges)
        for (uint32_t cp = x.lo; cp <= std::min<uint32_t>(x.hi, 127); ++cp)
            c.ascii[cp >> 6] |= uint64_t(1) << (cp & 63);
    return c;
}

class Parser {
   public:
    explicit Parser(const std::string& text) : s_(text) {}
    Grammar run();

   private:
    struct Rule {
        std::string name;
        std::vector<Seq> alts;
        bool defined = false;
        size_t at = 0;  // where it was defined (or first used, while undefined)
    };

    const std::string& s_;
    size_t p_ = 0;
    std::vector<Rule> rules_;
    std::unordered_map<std::string, uint32_t> ids_;
    std::vector<CharClass> classes_;
    size_t n_elems_ = 0;
    int nesting_ = 0;  // groups open

    [[noreturn]] void fail(size_t at, const std::string& what) const;
    bool eof() const { return p_ >= s_.size(); }
    char peek(size_t k = 0) const { return p_ + k < s_.size() ? s_[p_ + k] : '\0'; }
    void skip_space(bool newlines);
    std::string name();
    uint32_t rule_id(const std::string& name, size_t at);
    uint32_t new_rule(const std::string& base, size_t at, std::vector<Seq> alts);
    uint32_t code_point();  // one character of a literal or class, escapes decoded
    uint32_t number();
    std::vector<Seq> alternatives(const std::string& rule, bool nested);
    Seq sequence(const std::string& rule, bool nested);
    void count(size_t n);
    void check(const Grammar& g) const;
};

void Parser::fail(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
        if (s_[i] == '\n') {
            ++line;
            col = 1;
        } else if ((static_cast<unsigned char>(s_[i]) & 0xC0) != 0x80) {
            ++col;
        }
    }
    throw GrammarError("line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
}

void Parser::skip_space(bool newlines) {
    while (!eof()) {
        const char c = peek();
        if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
            ++p_;
        } else if (c == '#') {
            while (!eof() && peek() != '\n') ++p_;
        } else {
            break;
        }
    }
}

std::string Parser::name() {
    const size_t b = p_;
    while (!eof() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '-' || peek() == '_')) ++p_;
    return s_.substr(b, p_ - b);
}

uint32_t Parser::rule_id(const std::string& n, size_t at) {
    auto [it, added] = ids_.try_emplace(n, uint32_t(rules_.size()));
    if (added) {
        rules_.push_back({});
        rules_.back().name = n;
        rules_.back().at = at;
    }
    return it->second;
}

uint32_t Parser::new_rule(const std::string& base, size_t at, std::vector<Seq> alts) {
    // "base/K": no name written in a grammar has a '/', and K (the rule count) is new each time.
    const uint32_t id = rule_id(base + "/" + std::to_string(rules_.size()), at);
    rules_[id].alts = std::move(alts);
    rules_[id].defined = true;
    return id;
}

void Parser::count(size_t n) {
    n_elems_ += n;
    if (n_elems_ > kMaxElements)
        fail(p_, "the grammar is too large once its repetitions are written out (more than " +
                     std::to_string(kMaxElements) + " elements)");
}

uint32_t Parser::number() {
    const size_t b = p_;
    uint64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
        v = v * 10 + uint64_t(peek() - '0');
        if (v > kMaxRepeat) fail(b, "a repetition count above " + std::to_string(kMaxRepeat));
        ++p_;
    }
    if (p_ == b) fail(b, "expected a number in {m,n}");
    return uint32_t(v);
}

uint32_t Parser::code_point() {
    const size_t at = p_;
    const auto c = static_cast<unsigned char>(peek());
    if (c == '\\') {
        ++p_;
        const char e = peek();
        ++p_;
        int digits = 0;
        switch (e) {
            case 'n':
                return '\n';
            case 'r':
                return '\r';
            case 't':
                return '\t';
            case '\\':
            case '"':
            case '[':
            case ']':
            case '-':
            case '^':
            case '/':
                return uint32_t(e);
            case 'x':
                digits = 2;
                break;
            case 'u':
                digits = 4;
                break;
            case 'U':
                digits = 8;
                break;
            default:
                fail(at, e ? std::string("unknown escape '\\") + e +
                                 "' (expected \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\^ \\/ \\xHH \\uHHHH or \\UHHHHHHHH)"
                           : "an escape at the end of the text");
        }
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i, ++p_) {
            const char h = peek();
            const int d = h >= '0' && h <= '9'   ? h - '0'
                          : h >= 'a' && h <= 'f' ? h - 'a' + 10
                          : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                 : -1;
            if (d < 0) fail(p_, "expected " + std::to_string(digits) + " hex digits after \\" + e);
            v = v << 4 | uint32_t(d);
        }
        if (v > Grammar::kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF))
            fail(at, "the escape is not a Unicode scalar value (a surrogate or above U+10FFFF)");
        return v;
    }
    // A UTF-8 character as written.
    const int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || p_ + size_t(n) > s_.size()) fail(at, "the text is not valid UTF-8");
    uint32_t v = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
        const auto k = static_cast<unsigned char>(s_[p_ + size_t(i)]);
        if ((k & 0xC0) != 0x80) fail(at, "the text is not valid UTF-8");
        v = v << 6 | (k & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < kMin[n] || v > Grammar::kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF))
        fail(at, "the text is not valid UTF-8");
    p_ += size_t(n);
    return v;
}

std::vector<Seq> Parser::alternatives(const std::string& rule, bool nested) {
    std::vector<Seq> alts;
    alts.push_back(sequence(rule, nested));
    while (peek() == '|') {
        ++p_;
        skip_space(true);  // a newline after '|' continues the rule
        alts.push_back(sequence(rule, nested));
    }
    return alts;
}

Seq Parser::sequence(const std::string& rule, bool nested) {
    Seq seq;
    size_t last = 0;  // where the last item's elements start in seq (what a quantifier repeats)
    bool have_item = false;
    for (;;) {
        skip_space(nested);
        const size_t at = p_;
        const char c = peek();
        if (eof() || c == '|' || c == ')' || c == '\n' || c == '\r') break;
        if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (!have_item) fail(at, std::string("'") + c + "' with nothing before it to repeat");
            ++p_;
            Seq op(seq.begin() + std::ptrdiff_t(last), seq.end());
            seq.resize(last);
            if (op.size() > 1) op = {Elem{Grammar::kRule, new_rule(rule, at, {op})}};
            uint32_t lo = 0, hi = 0;
            bool unbounded = false;
            if (c == '*') {
                unbounded = true;
            } else if (c == '+') {
                lo = 1, unbounded = true;
            } else if (c == '?') {
                hi = 1;
            } else {
                skip_space(nested);
                lo = number();
                skip_space(nested);
                if (peek() == ',') {
                    ++p_;
                    skip_space(nested);
                    if (peek() == '}')
                        unbounded = true;
                    else
                        hi = number();
                } else {
                    hi = lo;
                }
                skip_space(nested);
                if (peek() != '}') fail(p_, "expected '}' to close {m,n}");
                ++p_;
                if (!unbounded && hi < lo)
                    fail(at,
                         "{" + std::to_string(lo) + "," + std::to_string(hi) + "}: the maximum is below the minimum");
            }
            have_item = false;         // "a**" is refused: a quantifier needs an item
            if (op.empty()) continue;  // "" or () repeated: still nothing
            count(lo + (unbounded ? 2 : 2 * (hi - lo)));
            for (uint32_t i = 0; i < lo; ++i) seq.push_back(op[0]);
            if (unbounded) {  // R ::= op R | (empty)
                const uint32_t r = new_rule(rule, at, {});
                rules_[r].alts = {{op[0], Elem{Grammar::kRule, r}}, {}};
                seq.push_back(Elem{Grammar::kRule, r});
            } else if (hi > lo) {  // T1 ::= op | (empty); Tk ::= op T(k-1) | (empty)
                uint32_t t = new_rule(rule, at, {{op[0]}, {}});
                for (uint32_t k = 2; k <= hi - lo; ++k) t = new_rule(rule, at, {{op[0], Elem{Grammar::kRule, t}}, {}});
                seq.push_back(Elem{Grammar::kRule, t});
            }
            continue;
        }
        last = seq.size();
        have_item = true;
        if (c == '"') {
            ++p_;
            while (peek() != '"') {
                if (eof() || peek() == '\n') fail(at, "the string is not closed with '\"'");
                const uint32_t cp = code_point();
                classes_.push_back(make_class({{cp, cp}}, false));
                seq.push_back(Elem{Grammar::kChars, uint32_t(classes_.size() - 1)});
            }
            ++p_;
            count(seq.size() - last);
        } else if (c == '[') {
            ++p_;
            const bool negate = peek() == '^';
            if (negate) ++p_;
            std::vector<CharClass::Range> r;
            while (peek() != ']') {
                if (eof() || peek() == '\n') fail(at, "the character class is not closed with ']'");
                const size_t from = p_;
                const uint32_t lo = code_point();
                uint32_t hi = lo;
                if (peek() == '-' && peek(1) != ']') {
                    ++p_;
                    if (eof() || peek() == '\n') fail(at, "the character class is not closed with ']'");
                    hi = code_point();
                    if (hi < lo) fail(from, "the range's end is below its start");
                }
                r.push_back({lo, hi});
            }
            ++p_;
            CharClass k = make_class(std::move(r), negate);
            if (k.ranges.empty()) fail(at, "the character class matches no character");
            classes_.push_back(std::move(k));
            seq.push_back(Elem{Grammar::kChars, uint32_t(classes_.size() - 1)});
            count(1);
        } else if (c == '.') {
            ++p_;
            classes_.push_back(make_class({{0, Grammar::kMaxCodePoint}}, false));
            seq.push_back(Elem{Grammar::kChars, uint32_t(classes_.size() - 1)});
            count(1);
        } else if (c == '(') {
            ++p_;
            if (++nesting_ > kMaxNesting)
                fail(at, "groups nest deeper than " + std::to_string(kMaxNesting) + " levels");
            skip_space(true);
            std::vector<Seq> alts = alternatives(rule, true);
            --nesting_;
            if (peek() != ')') fail(at, "the group is not closed with ')'");
            ++p_;
            if (alts.size() == 1) {
                seq.insert(seq.end(), alts[0].begin(), alts[0].end());
            } else {
                seq.push_back(Elem{Grammar::kRule, new_rule(rule, at, std::move(alts))});
            }
            count(1);
        } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
            const std::string n = name();
            skip_space(false);
            if (peek() == ':' && peek(1) == ':' && peek(2) == '=')
                fail(at, "expected the end of the line before the next rule '" + n + "'");
            seq.push_back(Elem{Grammar::kRule, rule_id(n, at)});
            count(1);
        } else if (c == '<' || c == '!') {
            fail(at, "token references (<...>, <[id]>, !<...>) are not supported: write the text as a string");
        } else {
            fail(at, std::string("expected a string, a character class, '.', '(' or a rule name, got '") + c + "'");
        }
    }
    return seq;
}

Grammar Parser::run() {
    skip_space(true);
    while (!eof()) {
        const size_t at = p_;
        const std::string n = name();
        if (n.empty()) fail(at, "expected a rule name (letters, digits, '-' or '_')");
        skip_space(false);
        if (s_.compare(p_, 3, "::=") != 0) fail(p_, "expected '::=' after the rule name '" + n + "'");
        p_ += 3;
        skip_space(true);
        const uint32_t id = rule_id(n, at);
        if (rules_[id].defined) fail(at, "rule '" + n + "' is defined twice");
        rules_[id].defined = true;
        rules_[id].at = at;
        std::vector<Seq> alts = alternatives(n, false);
        if (peek() == ')') fail(p_, "')' without a '(' before it");
        rules_[id].alts = std::move(alts);
        skip_space(true);
    }
    for (const Rule& r : rules_)
        if (!r.defined) fail(r.at, "rule '" + r.name + "' is used but never defined");
    if (!ids_.count("root")) throw GrammarError("no rule named 'root' (the grammar starts there)");

    Grammar g;
    g.root = ids_.at("root");
    g.classes = std::move(classes_);
    g.alts.resize(rules_.size());
    for (size_t i = 0; i < rules_.size(); ++i) {
        g.names.push_back(rules_[i].name);
        for (const Seq& a : rules_[i].alts) {
            g.alts[i].push_back(uint32_t(g.elems.size()));
            g.elems.insert(g.elems.end(), a.begin(), a.end());
            g.elems.push_back(Elem{Grammar::kEnd, 0});
        }
    }
    check(g);
    return g;
}

// Left recursion: a rule that reaches itself again before any character, through a reference with more after it
// in its alternative. The matcher expands rules until a character is next, pushing what comes after each reference;
// such a cycle would push forever. A cycle through references that end their alternatives pushes nothing (the
// matcher sees the same stack again and stops), so x* of an x that can match nothing is fine.
void Parser::check(const Grammar& g) const {
    const size_t n = g.alts.size();
    // The rules each rule's alternatives refer to, reversed: who to look at again when a rule's flag is set.
    std::vector<std::vector<uint32_t>> users(n);
    for (size_t r = 0; r < n; ++r)
        for (uint32_t a : g.alts[r])
            for (size_t i = a; g.elems[i].kind != Grammar::kEnd; ++i)
                if (g.elems[i].kind == Grammar::kRule) users[g.elems[i].arg].push_back(uint32_t(r));
    // The least fixed point of "some alternative of r gets through to its end", where `through(elem, flags)` says
    // whether an element can be passed; a worklist, so that a long chain of rules costs its length, not its square.
    auto fixpoint = [&](auto through) {
        std::vector<char> flag(n, 0);
        std::vector<uint32_t> todo(n);
        for (size_t r = 0; r < n; ++r) todo[r] = uint32_t(n - 1 - r);
        while (!todo.empty()) {
            const uint32_t r = todo.back();
            todo.pop_back();
            if (flag[r]) continue;
            for (uint32_t a : g.alts[r]) {
                size_t i = a;
                while (g.elems[i].kind != Grammar::kEnd && through(g.elems[i], flag)) ++i;
                if (g.elems[i].kind == Grammar::kEnd) {
                    flag[r] = 1;
                    for (uint32_t u : users[r])
                        if (!flag[u]) todo.push_back(u);
                    break;
                }
            }
        }
        return flag;
    };
    // The rule can match the empty text.
    const std::vector<char> nullable = fixpoint(
        [](const Grammar::Elem& e, const std::vector<char>& f) { return e.kind == Grammar::kRule && f[e.arg]; });
    // A grammar whose root can never end matches no text (root ::= a, a ::= a): refused rather than left to fail at
    // the first token. `ends`: the rule can match some finite text.
    const std::vector<char> ends = fixpoint([](const Grammar::Elem& e, const std::vector<char>& f) {
        return e.kind == Grammar::kChars || (e.kind == Grammar::kRule && f[e.arg]);
    });
    if (!ends[g.root])
        fail(rules_[g.root].at,
             "the grammar matches no text: every way through rule 'root' leads to a rule that "
             "only refers to itself and never ends");
    // The references that can come first in r, before any character; `grows`: more follows them.
    struct Edge {
        uint32_t to;
        bool grows;
    };
    std::vector<std::vector<Edge>> first(n), back(n);
    for (size_t r = 0; r < n; ++r)
        for (uint32_t a : g.alts[r])
            for (size_t i = a; g.elems[i].kind == Grammar::kRule; ++i) {
                first[r].push_back({g.elems[i].arg, g.elems[i + 1].kind != Grammar::kEnd});
                back[g.elems[i].arg].push_back({uint32_t(r), false});
                if (!nullable[g.elems[i].arg]) break;
            }
    // Strongly connected components (Kosaraju, with explicit stacks: a chain of rules can be as long as the
    // grammar): rules that reach each other before any character.
    std::vector<uint32_t> order, comp(n, UINT32_MAX);
    std::vector<char> seen(n, 0);
    std::vector<std::pair<uint32_t, size_t>> stack;
    for (uint32_t s0 = 0; s0 < n; ++s0) {
        if (seen[s0]) continue;
        seen[s0] = 1;
        stack.push_back({s0, 0});
        while (!stack.empty()) {
            const uint32_t r = stack.back().first;
            if (stack.back().second == first[r].size()) {
                order.push_back(r);
                stack.pop_back();
                continue;
            }
            const uint32_t t = first[r][stack.back().second++].to;
            if (!seen[t]) {
                seen[t] = 1;
                stack.push_back({t, 0});
            }
        }
    }
    std::vector<uint32_t> todo;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        if (comp[*it] != UINT32_MAX) continue;
        comp[*it] = *it;
        todo.push_back(*it);
        while (!todo.empty()) {
            const uint32_t r = todo.back();
            todo.pop_back();
            for (const Edge& e : back[r])
                if (comp[e.to] == UINT32_MAX) {
                    comp[e.to] = *it;
                    todo.push_back(e.to);
                }
        }
    }
    for (uint32_t r = 0; r < n; ++r)
        for (const Edge& e : first[r]) {
            if (!e.grows || comp[e.to] != comp[r]) continue;
            // r -> e.to -> ... -> r: the way back, breadth-first within the component, for the message.
            std::vector<uint32_t> from(n, UINT32_MAX);
            std::vector<uint32_t> queue = {e.to};
            from[e.to] = e.to;
            for (size_t q = 0; q < queue.size() && from[r] == UINT32_MAX; ++q)
                for (const Edge& f : first[queue[q]])
                    if (comp[f.to] == comp[r] && from[f.to] == UINT32_MAX) {
                        from[f.to] = queue[q];
                        queue.push_back(f.to);
                    }
            std::vector<uint32_t> way;  // r back to e.to
            for (uint32_t x = r;; x = from[x]) {
                way.push_back(x);
                if (x == e.to) break;
            }
            std::string cycle = g.names[r];
            for (auto it = way.rbegin(); it != way.rend(); ++it) cycle += " -> " + g.names[*it];
            const Rule& rule = rules_[r];
            const std::string user = rule.name.substr(0, rule.name.find('/'));
            fail(rule.at, "rule '" + user + "' is left-recursive (" + cycle +
                              " before any character); rewrite it with repetition, e.g. x ::= y (\"+\" y)*");
        }
}

}  // namespace

Grammar parse_gbnf(const std::string& text) { return Parser(text).run(); }

}  // namespace plainllama
