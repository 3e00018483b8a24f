#include "plainllama/io/utf8.h"

namespace plainllama {

namespace {

// Bytes of the valid sequence at s[i], or 0; *subpart: how many bytes of s[i ..] begin a valid sequence (at least
// 1), for the replacement of an ill-formed one.
size_t sequence_at(const std::string& s, size_t i, size_t* subpart) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    *subpart = 1;
    if (c < 0x80) return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (Unicode table 3-7)
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    for (size_t k = 1; k < n; ++k) {
        if (i + k >= s.size()) return 0;
        const unsigned char d = static_cast<unsigned char>(s[i + k]);
        if (k == 1 ? d < lo || d > hi : (d & 0xC0) != 0x80) return 0;
        *subpart = k + 1;
    }
    return n;
}

}  // namespace

size_t invalid_utf8_at(const std::string& s) {
    size_t sub;
    for (size_t i = 0; i < s.size();) {
        const size_t n = sequence_at(s, i, &sub);
        if (n == 0) return i;
        i += n;
    }
    return std::string::npos;
}

std::string utf8_lossy(const std::string& s) {
    if (invalid_utf8_at(s) == std::string::npos) return s;
    std::string out;
    out.reserve(s.size() + 8);
    size_t sub;
    for (size_t i = 0; i < s.size();) {
        const size_t n = sequence_at(s, i, &sub);
        if (n > 0) {
            out.append(s, i, n);
            i += n;
        } else {
            out += "\xEF\xBF\xBD";
            i += sub;
        }
    }
    return out;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | cp >> 6);
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | cp >> 12);
        out += char(0x80 | (cp >> 6 & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | cp >> 18);
        out += char(0x80 | (cp >> 12 & 0x3F));
        out += char(0x80 | (cp >> 6 & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

}  // namespace plainllama
