// Building blocks of the JSON Schema compiler (json_schema.h), each a GBNF expression (text that can stand on the
// right of `::=`, or inside parentheses) for one kind of JSON text. Only ever part of a bigger grammar; they use no
// rule of their own unless they say so.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plainllama/run/grammar.h"

namespace plainllama {

// A decimal number written out: sign, integer digits without leading zeros ("0" for none), fraction digits without
// trailing zeros. Zero is never negative.
struct Decimal {
    bool neg = false;
    std::string int_digits = "0";
    std::string frac_digits;
};
// "-12.50", "1.5e-7", "3E+2" (JSON's number syntax); nullopt for anything else.
std::optional<Decimal> parse_decimal(const std::string& s);
// The shortest decimal that reads back as d (std::to_chars); d must be finite.
Decimal decimal_of(double d);
// The exact value of v (every binary fraction is a finite decimal); v must be finite.
Decimal exact_decimal(long double v);
// The decimal with at most k fraction digits nearest to d strictly above it (above) or strictly below it.
Decimal beyond(const Decimal& d, size_t k, bool above);
std::string to_string(const Decimal& d);          // plain digits, no exponent
int compare(const Decimal& a, const Decimal& b);  // -1, 0, 1 by value
Decimal ceil(const Decimal& d);
Decimal floor(const Decimal& d);
Decimal plus_one(const Decimal& integer);
Decimal minus_one(const Decimal& integer);

// JSON integers (canonical: no leading zeros, no "-0") in [lo, hi]; an absent bound is open, and then the integers
// have at most 16 digits (or as many as the other bound has). lo <= hi; both integral.
std::string integer_range_gbnf(const std::optional<Decimal>& lo, const std::optional<Decimal>& hi);
// JSON numbers in [lo, hi] written without exponent, with at most max(16, the bounds' own) fraction digits and as
// many integer digits as integer_range_gbnf's; lo <= hi.
std::string decimal_range_gbnf(const std::optional<Decimal>& lo, const std::optional<Decimal>& hi);

// A GBNF string literal for the text (quoted and escaped).
std::string gbnf_literal(const std::string& text);
// A GBNF character class for a set of code points (sorted disjoint ranges, within 0..U+10FFFF, surrogates ignored).
std::string gbnf_class(const std::vector<CharClass::Range>& set);
// One character of a JSON string from the set, as JSON writes it: the character itself, or its escape for '"', '\\'
// and the control characters U+0000..U+001F. Empty when the set holds none.
std::string json_char_gbnf(const std::vector<CharClass::Range>& set);

// The inside of a JSON string (without its quotes) whose value matches an ECMA-262 regular expression, searched
// (unanchored) unless it begins with ^ / ends with $ as JSON Schema's `pattern` says. The subset (docs/
// structured-output.md): literals and escapes, . [...] [^...] \d \w \s \D \W \S, groups (...) (?:...), |, the
// quantifiers * + ? {m} {m,} {m,n} (lazy too). SchemaError-style Error for anything else, naming it.
std::string pattern_gbnf(const std::string& pattern);

// The inside of a JSON string in a `format`: "date" (RFC 3339 full-date, years 1000-9999, days per month and leap
// years exact), "time" (RFC 3339 full-time: hh:mm:ss, optional fraction, Z or an offset), "date-time" (date T
// time), "uuid" (8-4-4-4-12 hex digits). nullopt for any other format.
std::optional<std::string> format_gbnf(const std::string& format);

}  // namespace plainllama
