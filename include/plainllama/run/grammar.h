// A context-free grammar over Unicode code points, parsed from llama.cpp's GBNF (docs/structured-output.md):
//
//   root   ::= "{" ws pair ("," ws pair)* "}"     # rules; `root` is where the text starts
//   pair   ::= [a-z]+ ":" (digit{1,3} | "null")  # strings, classes, groups, * + ? {m} {m,} {m,n}
//   digit  ::= [0-9]
//   ws     ::= [ \t\n]?
//
// Groups and repetitions become generated rules, so each rule is a list of alternatives, each a sequence of
// elements: a character class (one code point from a set) or a reference to a rule. Parsing refuses what the
// matcher cannot run: undefined rules, a missing root, and left recursion (a rule that can reach itself again
// before any character, which would expand forever).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plainllama/sys/error.h"

namespace plainllama {

// A bad grammar: the message names the line and column and what was expected there.
class GrammarError : public Error {
   public:
    using Error::Error;
};

// A set of code points: sorted, disjoint, non-adjacent inclusive ranges, with the ASCII part as a bitmap too.
struct CharClass {
    struct Range {
        uint32_t lo, hi;
    };
    std::vector<Range> ranges;
    uint64_t ascii[2] = {0, 0};  // bit c: code point c < 128 is in the set

    bool contains(uint32_t cp) const;
    // Whether any code point of [lo, hi] is in the set.
    bool intersects(uint32_t lo, uint32_t hi) const;
};

struct Grammar {
    enum Kind : uint8_t {
        kEnd,    // the end of an alternative
        kChars,  // one code point of classes[arg]
        kRule,   // rule number arg
    };
    struct Elem {
        Kind kind;
        uint32_t arg;
    };
    static constexpr uint32_t kMaxCodePoint = 0x10FFFF;

    std::vector<Elem> elems;                  // every alternative's elements, each alternative ended by kEnd
    std::vector<std::vector<uint32_t>> alts;  // [rule] the offsets in elems where its alternatives start
    std::vector<std::string>
        names;  // [rule] the name written, or "name/N" for rules made for groups and repetitions in rule `name`
    std::vector<CharClass> classes;
    uint32_t root = 0;
};

// Parses GBNF text. GrammarError ("line L, column C: ...") for anything malformed.
Grammar parse_gbnf(const std::string& text);

}  // namespace plainllama
