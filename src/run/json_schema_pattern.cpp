// A regular expression (JSON Schema's `pattern`, ECMA-262 syntax) as a grammar for the inside of a JSON string
// (json_schema_parts.h). Each character set of the expression becomes one JSON-escaped character from that set.
//
// Where ECMA-262 and Python's `re` differ, the grammar keeps to what both accept: \d \w \s are their ASCII sets, and
// \D \W \S the ASCII characters outside them; `.` is any character but \n \r U+2028 U+2029.
#include <algorithm>
#include <cctype>

#include "plainllama/run/json_schema_parts.h"
#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

using Set = std::vector<CharClass::Range>;

Set normalized(Set s) {
    std::sort(s.begin(), s.end(), [](const auto& a, const auto& b) { return a.lo < b.lo; });
    Set out;
    for (const auto& r : s) {
        if (!out.empty() && r.lo <= out.back().hi + 1)
            out.back().hi = std::max(out.back().hi, r.hi);
        else
            out.push_back(r);
    }
    return out;
}

Set complement(const Set& s, uint32_t max) {  // within [0, max]
    Set out;
    uint32_t next = 0;
    for (const auto& r : normalized(s)) {
        if (r.lo > max) break;
        if (r.lo > next) out.push_back({next, r.lo - 1});
        next = r.hi + 1;
    }
    if (next <= max) out.push_back({next, max});
    return out;
}

const Set kDigit = {{'0', '9'}};
const Set kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Set kSpace = {{'\t', '\r'}, {' ', ' '}};
// Python counts U+001C..U+001F as whitespace too: \S leaves them out for both engines to agree.
const Set kSpacePython = {{'\t', '\r'}, {0x1C, 0x1F}, {' ', ' '}};

class PatternParser {
   public:
    explicit PatternParser(const std::string& p) : s_(p) {}
    std::string run();

   private:
    const std::string& s_;
    size_t p_ = 0;
    int depth_ = 0;  // groups open

    [[noreturn]] void fail(const std::string& what) const {
        throw Error("pattern \"" + s_ + "\": " + what + " (at character " + std::to_string(p_ + 1) + ")");
    }
    bool eof() const { return p_ >= s_.size(); }
    char peek(size_t k = 0) const { return p_ + k < s_.size() ? s_[p_ + k] : '\0'; }
    uint32_t utf8();
    uint32_t hex_digits(int n);
    // An escape after '\' (p_ on the letter); in_class: \b is a backspace there. A set, or one code point.
    Set escape(bool in_class);
    Set char_class();
    std::string alternatives();
    std::string sequence();
};

uint32_t PatternParser::utf8() {
    const auto c = static_cast<unsigned char>(s_[p_]);
    const int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || p_ + size_t(n) > s_.size()) fail("not valid UTF-8");
    uint32_t v = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
        const auto k = static_cast<unsigned char>(peek(size_t(i)));
        if ((k & 0xC0) != 0x80) fail("not valid UTF-8");
        v = v << 6 | (k & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < kMin[n] || v > Grammar::kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) fail("not valid UTF-8");
    p_ += size_t(n);
    return v;
}

uint32_t PatternParser::hex_digits(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i, ++p_) {
        const char h = peek();
        const int d = h >= '0' && h <= '9'   ? h - '0'
                      : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                             : -1;
        if (d < 0) fail("expected " + std::to_string(n) + " hex digits");
        v = v << 4 | uint32_t(d);
    }
    return v;
}

Set PatternParser::escape(bool in_class) {
    const char e = peek();
    if (eof()) fail("a '\\' at the end");
    ++p_;
    switch (e) {
        case 'd':
            return kDigit;
        case 'w':
            return kWord;
        case 's':
            return kSpace;
        case 'D':
            return complement(kDigit, 0x7F);
        case 'W':
            return complement(kWord, 0x7F);
        case 'S':
            return complement(kSpacePython, 0x7F);
        case 't':
            return {{'\t', '\t'}};
        case 'n':
            return {{'\n', '\n'}};
        case 'r':
            return {{'\r', '\r'}};
        case 'f':
            return {{'\f', '\f'}};
        case 'v':
            return {{'\v', '\v'}};
        case '0':
            return {{0, 0}};
        case 'x': {
            const uint32_t v = hex_digits(2);
            return {{v, v}};
        }
        case 'u': {
            if (peek() == '{') fail("\\u{...} is not supported (write \\uHHHH)");
            const uint32_t v = hex_digits(4);
            if (v >= 0xD800 && v <= 0xDFFF) fail("a surrogate escape is not a character");
            return {{v, v}};
        }
        case 'b':
            if (in_class) return {{'\b', '\b'}};
            fail("word boundaries (\\b) are not supported");
        case 'B':
            fail("word boundaries (\\B) are not supported");
        case 'p':
        case 'P':
            fail("Unicode property escapes (\\p{...}) are not supported");
        case 'k':
            fail("named backreferences (\\k<...>) are not supported");
        case 'c':
            fail("control escapes (\\cX) are not supported");
        default:
            break;
    }
    if (e >= '1' && e <= '9') fail("backreferences (\\1 ...) are not supported");
    if (std::isalnum(static_cast<unsigned char>(e))) fail(std::string("unknown escape \\") + e);
    --p_;
    const uint32_t cp = utf8();  // an escaped punctuation character stands for itself
    return {{cp, cp}};
}

Set PatternParser::char_class() {  // after '['
    const bool negate = peek() == '^';
    if (negate) ++p_;
    if (peek() == ']') fail("a class that begins with ']' ([] and [^] differ between engines; write \\])");
    Set set;
    while (peek() != ']') {
        if (eof()) fail("a '[' without its ']'");
        Set lo;
        if (peek() == '\\') {
            ++p_;
            lo = escape(true);
        } else {
            const uint32_t c = utf8();
            lo = {{c, c}};
        }
        if (peek() == '-' && peek(1) != ']' && p_ + 1 < s_.size()) {
            ++p_;
            Set hi;
            if (peek() == '\\') {
                ++p_;
                hi = escape(true);
            } else {
                const uint32_t c = utf8();
                hi = {{c, c}};
            }
            if (lo.size() != 1 || hi.size() != 1 || lo[0].lo != lo[0].hi || hi[0].lo != hi[0].hi)
                fail("a range with a class escape at one end");
            if (hi[0].lo < lo[0].lo) fail("a range whose end is below its start");
            set.push_back({lo[0].lo, hi[0].lo});
        } else {
            set.insert(set.end(), lo.begin(), lo.end());
        }
    }
    ++p_;
    set = negate ? complement(set, Grammar::kMaxCodePoint) : normalized(set);
    if (set.empty()) fail("the class matches no character");
    return set;
}

std::string PatternParser::alternatives() {
    std::string s = sequence();
    bool several = false;
    while (peek() == '|') {
        ++p_;
        s += " | " + sequence();
        several = true;
    }
    return several ? "(" + s + ")" : s;
}

std::string PatternParser::sequence() {
    std::string out;
    while (!eof() && peek() != '|' && peek() != ')') {
        const char c = peek();
        if (c == '$' && depth_ == 0 && (p_ + 1 == s_.size() || peek(1) == '|')) break;  // the end anchor
        if (c == '^' || c == '$') fail("'^' and '$' are supported only at the start and the end of the pattern");
        if (c == '*' || c == '+' || c == '?' || c == '{')
            fail(std::string("'") + c + "' with nothing before it to repeat");
        std::string atom;
        if (c == '(') {
            ++p_;
            if (peek() == '?') {
                if (peek(1) == ':') {
                    p_ += 2;
                } else if (peek(1) == '=' || peek(1) == '!' || (peek(1) == '<' && (peek(2) == '=' || peek(2) == '!'))) {
                    fail("lookaround (?= (?! (?<= (?<! is not supported");
                } else if (peek(1) == '<' || (peek(1) == 'P' && peek(2) == '<')) {  // a named group: a group
                    while (!eof() && peek() != '>') ++p_;
                    ++p_;
                } else {
                    fail("group flags (?...) are not supported");
                }
            }
            if (++depth_ > 1000) fail("groups nest deeper than 1000 levels");
            atom = "(" + alternatives() + ")";
            --depth_;
            if (peek() != ')') fail("a '(' without its ')'");
            ++p_;
        } else if (c == '[') {
            ++p_;
            atom = json_char_gbnf(char_class());
        } else if (c == '.') {
            ++p_;
            atom = json_char_gbnf(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, Grammar::kMaxCodePoint));
        } else {
            Set set;
            if (c == '\\') {
                ++p_;
                set = escape(false);
            } else {
                const uint32_t cp = utf8();
                set = {{cp, cp}};
            }
            atom = json_char_gbnf(set);
        }
        // A quantifier, maybe lazy (the same strings match).
        const char q = peek();
        std::string quant;
        if (q == '*' || q == '+' || q == '?') {
            ++p_;
            quant = std::string(1, q);
        } else if (q == '{') {
            const size_t b = ++p_;
            while (!eof() && (std::isdigit(static_cast<unsigned char>(peek())) || peek() == ',')) ++p_;
            const std::string body = s_.substr(b, p_ - b);
            const size_t comma = body.find(',');
            const std::string m = body.substr(0, comma), n = comma == std::string::npos ? m : body.substr(comma + 1);
            if (peek() != '}' || m.empty() || m.size() > 5 || n.size() > 5 ||
                body.find(',', comma + 1) != std::string::npos)
                fail(
                    "'{' must start a quantifier {m}, {m,} or {m,n} with m, n up to 10000 (write \\{ for the "
                    "character)");
            ++p_;
            if (std::stoul(m) > 10000 || (!n.empty() && std::stoul(n) > 10000)) fail("a repetition count above 10000");
            if (!n.empty() && std::stoul(n) < std::stoul(m)) fail("{m,n} with n below m");
            quant = "{" + body + "}";
        }
        if (!quant.empty() && peek() == '?') ++p_;
        if (!quant.empty() && (peek() == '*' || peek() == '+' || peek() == '{'))
            fail("a quantifier after a quantifier");
        if (!quant.empty() && atom.front() != '(') atom = "(" + atom + ")";
        out += (out.empty() ? "" : " ") + atom + quant;
    }
    return out.empty() ? "\"\"" : out;
}

std::string PatternParser::run() {
    const std::string any = "(" + json_char_gbnf({{0, Grammar::kMaxCodePoint}}) + ")*";
    std::vector<std::string> alts;
    for (;;) {
        const bool start = peek() == '^';
        if (start) ++p_;
        std::string body = sequence();
        if (peek() == ')') fail("a ')' without its '('");
        const bool end = peek() == '$';
        if (end) {
            ++p_;
            if (!eof() && peek() != '|') fail("'^' and '$' are supported only at the start and the end of the pattern");
        }
        alts.push_back((start ? "" : any + " ") + body + (end ? "" : " " + any));
        if (eof()) break;
        if (peek() == ')') fail("a ')' without its '('");
        ++p_;  // '|'
    }
    if (alts.size() == 1) return alts[0];
    std::string s = "(";
    for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
    return s + ")";
}

}  // namespace

std::string pattern_gbnf(const std::string& pattern) { return PatternParser(pattern).run(); }

}  // namespace plainllama
