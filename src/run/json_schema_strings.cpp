// JSON string pieces as grammars (json_schema_parts.h): GBNF literals and classes, one JSON-escaped character of a
// set, and the string formats.
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "plainllama/run/json_schema_parts.h"

namespace plainllama {

namespace {

std::string hex(uint32_t v, int digits) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%0*X", digits, v);
    return buf;
}

// A code point inside a GBNF class: letters and digits as they are, anything else escaped.
std::string class_char(uint32_t c) {
    if (c < 128 && std::isalnum(int(c))) return std::string(1, char(c));
    if (c < 0x100) return "\\x" + hex(c, 2);
    if (c < 0x10000) return "\\u" + hex(c, 4);
    return "\\U" + hex(c, 8);
}

std::vector<CharClass::Range> subtract(const std::vector<CharClass::Range>& set, uint32_t lo, uint32_t hi) {
    std::vector<CharClass::Range> out;
    for (const auto& r : set) {
        if (r.hi < lo || r.lo > hi) {
            out.push_back(r);
            continue;
        }
        if (r.lo < lo) out.push_back({r.lo, lo - 1});
        if (r.hi > hi) out.push_back({hi + 1, r.hi});
    }
    return out;
}

}  // namespace

std::string gbnf_literal(const std::string& text) {
    std::string s = "\"";
    for (unsigned char c : text) {
        if (c == '"')
            s += "\\\"";
        else if (c == '\\')
            s += "\\\\";
        else if (c == '\n')
            s += "\\n";
        else if (c == '\r')
            s += "\\r";
        else if (c == '\t')
            s += "\\t";
        else if (c < 0x20 || c == 0x7F)
            s += "\\x" + hex(c, 2);
        else
            s += char(c);  // UTF-8 as it is
    }
    return s + "\"";
}

std::string gbnf_class(const std::vector<CharClass::Range>& set) {
    std::string s;
    for (CharClass::Range r : set) {
        // Surrogates are no characters: the parts of the range on either side of them.
        std::vector<CharClass::Range> parts;
        if (r.lo < 0xD800 && r.hi >= 0xD800) {
            parts.push_back({r.lo, 0xD7FF});
            if (r.hi > 0xDFFF) parts.push_back({0xE000, r.hi});
        } else if (r.lo >= 0xD800 && r.lo <= 0xDFFF) {
            if (r.hi > 0xDFFF) parts.push_back({0xE000, r.hi});
        } else {
            parts.push_back(r);
        }
        for (const auto& p : parts) {
            s += class_char(p.lo);
            if (p.hi > p.lo) s.append("-").append(class_char(p.hi));
        }
    }
    return s.empty() ? "" : "[" + s + "]";
}

std::string json_char_gbnf(const std::vector<CharClass::Range>& set) {
    auto has = [&](uint32_t c) {
        for (const auto& r : set)
            if (c >= r.lo && c <= r.hi) return true;
        return false;
    };
    std::vector<std::string> alts;
    // The set less '"', '\\' and the controls: written as they are.
    const auto plain = subtract(subtract(subtract(set, 0, 0x1F), '"', '"'), '\\', '\\');
    if (const std::string c = gbnf_class(plain); !c.empty()) alts.push_back(c);
    if (has('"')) alts.push_back(gbnf_literal("\\\""));
    if (has('\\')) alts.push_back(gbnf_literal("\\\\"));
    bool all_controls = true;
    for (uint32_t c = 0; c < 0x20; ++c) all_controls = all_controls && has(c);
    if (all_controls) {
        alts.push_back("\"\\\\\" ([bfnrt] | \"u00\" [01] [0-9a-fA-F])");
    } else {
        for (uint32_t c = 0; c < 0x20; ++c) {
            if (!has(c)) continue;
            const char* esc = c == '\b'   ? "b"
                              : c == '\f' ? "f"
                              : c == '\n' ? "n"
                              : c == '\r' ? "r"
                              : c == '\t' ? "t"
                                          : nullptr;
            std::string e = "\\";
            e += esc ? std::string(esc) : std::string("u00").append(hex(c, 2));
            alts.push_back(gbnf_literal(e));
        }
    }
    if (alts.empty()) return "";
    if (alts.size() == 1) return alts[0];
    std::string s = "(";
    for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
    return s + ")";
}

std::optional<std::string> format_gbnf(const std::string& format) {
    // Days 01-28 in every month, 29 and 30 in all but February, 31 in the months that have it; February 29 only in
    // leap years (divisible by 4, and by 400 when by 100: the last two digits a multiple of 4 but not 00, or the
    // first two a multiple of 4 and then 00).
    static const std::string date =
        "([1-9] [0-9]{3} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | "
        "(\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | "
        "\"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])) | "
        "([1-9] [0-9] (\"0\" [48] | [2468] [048] | [13579] [26]) | ([2468] [048] | [13579] [26]) \"00\") \"-02-29\")";
    static const std::string hh = "([01] [0-9] | \"2\" [0-3])";
    static const std::string time = "(" + hh +
                                    " \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [+\\-] " + hh +
                                    " \":\" [0-5] [0-9]))";
    if (format == "date") return date;
    if (format == "time") return time;
    if (format == "date-time") return "(" + date + " \"T\" " + time + ")";
    if (format == "uuid")
        return "([0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12})";
    return std::nullopt;
}

}  // namespace plainllama
