// Numbers within bounds as grammars (json_schema_parts.h): decimal strings compared digit by digit.
//
// Integers in [a, b] of one length are the classic construction: a common prefix, then at the first digit where a
// and b differ, either a's digit followed by anything >= the rest of a, a digit strictly between followed by any
// digits, or b's digit followed by anything <= the rest of b. Lengths between those of a and b take any digits.
// Fractions compare the same way with the shorter side padded with zeros ("5" > "49").
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "plainllama/run/json_schema_parts.h"
#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

constexpr size_t kDigits = 16;  // integer and fraction digits of a number without a bound on that side

std::string lit(char c) { return std::string("\"") + c + "\""; }
std::string digit_range(char a, char b) { return a == b ? lit(a) : std::string("[") + a + "-" + b + "]"; }
std::string digits(size_t lo, size_t hi) {  // [0-9]{lo,hi}
    if (hi == 0) return "";
    if (lo == hi) return lo == 1 ? "[0-9]" : "[0-9]{" + std::to_string(lo) + "}";
    return "[0-9]{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}
std::string zeros(size_t lo, size_t hi) {  // "0"{lo,hi}
    if (hi == 0) return "";
    return "\"0\"{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}
std::string cat(const std::string& a, const std::string& b) { return a.empty() ? b : b.empty() ? a : a + " " + b; }
std::string alt(const std::vector<std::string>& v) {
    if (v.size() == 1) return v[0];
    std::string s = "(";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? " | " : "") + v[i];
    return s + ")";
}
bool all_of(const std::string& s, size_t i, char c) { return s.find_first_not_of(c, i) == std::string::npos; }

// Digit strings of s.size() - i digits that are >= (ge) or <= (le) s[i..].
std::string ge_same(const std::string& s, size_t i) {
    const size_t n = s.size() - i;
    if (n == 0) return "";
    if (all_of(s, i, '0')) return digits(n, n);
    std::vector<std::string> a = {cat(lit(s[i]), ge_same(s, i + 1))};
    if (s[i] < '9') a.push_back(cat(digit_range(char(s[i] + 1), '9'), digits(n - 1, n - 1)));
    return alt(a);
}
std::string le_same(const std::string& s, size_t i) {
    const size_t n = s.size() - i;
    if (n == 0) return "";
    if (all_of(s, i, '9')) return digits(n, n);
    std::vector<std::string> a = {cat(lit(s[i]), le_same(s, i + 1))};
    if (s[i] > '0') a.push_back(cat(digit_range('0', char(s[i] - 1)), digits(n - 1, n - 1)));
    return alt(a);
}
// Digit strings between x[i..] and y[i..] (same length, x <= y).
std::string between_same(const std::string& x, const std::string& y, size_t i) {
    const size_t n = x.size() - i;
    if (n == 0) return "";
    if (x[i] == y[i]) return cat(lit(x[i]), between_same(x, y, i + 1));
    std::vector<std::string> a = {cat(lit(x[i]), ge_same(x, i + 1))};
    if (x[i] + 1 <= y[i] - 1) a.push_back(cat(digit_range(char(x[i] + 1), char(y[i] - 1)), digits(n - 1, n - 1)));
    a.push_back(cat(lit(y[i]), le_same(y, i + 1)));
    return alt(a);
}
// Canonical non-negative integers in [a, b] (digit strings, a <= b).
std::string uint_range(const std::string& a, const std::string& b) {
    std::vector<std::string> v;
    for (size_t len = a.size(); len <= b.size(); ++len) {
        std::string lo = a;
        if (len != a.size()) {  // 10...0
            lo.assign(len, '0');
            lo[0] = '1';
        }
        const std::string hi = len == b.size() ? b : std::string(len, '9');
        v.push_back(between_same(lo, hi, 0));
    }
    return alt(v);
}

std::string inc_digits(std::string s) {
    size_t i = s.size();
    while (i > 0 && s[i - 1] == '9') s[--i] = '0';
    if (i == 0) return "1" + s;
    ++s[i - 1];
    return s;
}
std::string dec_digits(std::string s) {  // s > 0
    size_t i = s.size();
    while (s[i - 1] == '0') s[--i] = '9';
    --s[i - 1];
    if (s.size() > 1 && s[0] == '0') s.erase(0, 1);
    return s;
}
int compare_digits(const std::string& a, const std::string& b) {  // canonical integers
    if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
    return a < b ? -1 : a > b ? 1 : 0;
}

// Fractions: nothing, or "." and 1..fd digits; f a bound's fraction digits (no trailing zeros), fd >= f.size().
std::string frac_any(size_t fd) { return "(\".\" " + digits(1, fd) + ")?"; }
std::string ge_pad(const std::string& f, size_t i, size_t fd) {  // digits from position i, padded >= f[i..]
    if (i == f.size()) return digits(0, fd - i);
    std::vector<std::string> a = {cat(lit(f[i]), ge_pad(f, i + 1, fd))};
    if (f[i] < '9') a.push_back(cat(digit_range(char(f[i] + 1), '9'), digits(0, fd - i - 1)));
    return alt(a);
}
std::string le_pad(const std::string& f, size_t i, size_t fd) {  // digits from position i (i > 0: may stop), <= f[i..]
    if (i == f.size()) return zeros(0, fd - i);
    std::vector<std::string> a;
    if (i > 0) a.push_back("");
    a.push_back(cat(lit(f[i]), le_pad(f, i + 1, fd)));
    if (f[i] > '0') a.push_back(cat(digit_range('0', char(f[i] - 1)), digits(0, fd - i - 1)));
    return alt(a);
}
std::string btw_pad(const std::string& lo, const std::string& hi, size_t i, size_t fd) {
    if (i == lo.size()) return le_pad(hi, i, fd);
    if (lo[i] == hi[i]) return cat(lit(lo[i]), btw_pad(lo, hi, i + 1, fd));
    std::vector<std::string> a = {cat(lit(lo[i]), ge_pad(lo, i + 1, fd))};
    if (lo[i] + 1 <= hi[i] - 1) a.push_back(cat(digit_range(char(lo[i] + 1), char(hi[i] - 1)), digits(0, fd - i - 1)));
    a.push_back(cat(lit(hi[i]), le_pad(hi, i + 1, fd)));
    return alt(a);
}
std::string frac_ge(const std::string& f, size_t fd) { return f.empty() ? frac_any(fd) : "\".\" " + ge_pad(f, 0, fd); }
std::string frac_le(const std::string& f, size_t fd) {
    return f.empty() ? "(\".\" " + zeros(1, fd) + ")?" : "(\".\" " + le_pad(f, 0, fd) + ")?";
}
std::string frac_between(const std::string& lo, const std::string& hi, size_t fd) {
    if (lo.empty()) return frac_le(hi, fd);
    return "\".\" " + btw_pad(lo, hi, 0, fd);
}
std::string quoted(const std::string& digits_) { return "\"" + digits_ + "\""; }

// Non-negative decimals in [lo, hi] (hi open when absent).
std::string nonneg_decimals(const Decimal& lo, const std::optional<Decimal>& hi, size_t fd) {
    std::vector<std::string> v;
    if (!hi) {
        const size_t cap = std::max(kDigits, lo.int_digits.size() + 1);
        v.push_back(cat(quoted(lo.int_digits), frac_ge(lo.frac_digits, fd)));
        v.push_back(cat(uint_range(inc_digits(lo.int_digits), std::string(cap, '9')), frac_any(fd)));
    } else if (lo.int_digits == hi->int_digits) {
        v.push_back(cat(quoted(lo.int_digits), frac_between(lo.frac_digits, hi->frac_digits, fd)));
    } else {
        v.push_back(cat(quoted(lo.int_digits), frac_ge(lo.frac_digits, fd)));
        const std::string a = inc_digits(lo.int_digits), b = dec_digits(hi->int_digits);
        if (compare_digits(a, b) <= 0) v.push_back(cat(uint_range(a, b), frac_any(fd)));
        v.push_back(cat(quoted(hi->int_digits), frac_le(hi->frac_digits, fd)));
    }
    return alt(v);
}

Decimal magnitude(Decimal d) {
    d.neg = false;
    return d;
}

}  // namespace

std::optional<Decimal> parse_decimal(const std::string& s) {
    size_t i = 0;
    Decimal d;
    if (i < s.size() && s[i] == '-') d.neg = true, ++i;
    const size_t int_begin = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    std::string digs = s.substr(int_begin, i - int_begin);
    if (digs.empty() || (digs.size() > 1 && digs[0] == '0')) return std::nullopt;
    long point = long(digs.size());
    if (i < s.size() && s[i] == '.') {
        const size_t b = ++i;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
        if (i == b) return std::nullopt;
        digs += s.substr(b, i - b);
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        bool neg_exp = false;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg_exp = s[i++] == '-';
        const size_t b = i;
        long e = 0;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
            e = e * 10 + (s[i++] - '0');
            if (e > 400) return std::nullopt;  // past any double: not a bound worth a grammar
        }
        if (i == b) return std::nullopt;
        point += neg_exp ? -e : e;
    }
    if (i != s.size()) return std::nullopt;
    if (point <= 0) {
        d.int_digits = "0";
        d.frac_digits = std::string(size_t(-point), '0') + digs;
    } else if (size_t(point) >= digs.size()) {
        d.int_digits = digs + std::string(size_t(point) - digs.size(), '0');
    } else {
        d.int_digits = digs.substr(0, size_t(point));
        d.frac_digits = digs.substr(size_t(point));
    }
    const size_t nz = d.int_digits.find_first_not_of('0');
    d.int_digits = nz == std::string::npos ? "0" : d.int_digits.substr(nz);
    while (!d.frac_digits.empty() && d.frac_digits.back() == '0') d.frac_digits.pop_back();
    if (d.int_digits == "0" && d.frac_digits.empty()) d.neg = false;
    return d;
}

Decimal decimal_of(double v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    PL_CHECK(r.ec == std::errc() && std::isfinite(v));
    const auto d = parse_decimal(std::string(buf, r.ptr));
    PL_CHECK(d.has_value());
    return *d;
}

Decimal exact_decimal(long double v) {
    PL_CHECK(std::isfinite(v));
    std::vector<char> buf(1500);  // 309 integer digits at most, and every digit of the smallest binary fraction
    const int n = std::snprintf(buf.data(), buf.size(), "%.1100Lf", v);
    PL_CHECK(n > 0 && size_t(n) < buf.size());
    const std::string text(buf.data(), size_t(n));
    const size_t dot = text.find('.');
    Decimal d;
    d.neg = text[0] == '-';
    d.int_digits = text.substr(d.neg ? 1 : 0, dot - (d.neg ? 1 : 0));
    d.frac_digits = text.substr(dot + 1);
    while (!d.frac_digits.empty() && d.frac_digits.back() == '0') d.frac_digits.pop_back();
    if (d.int_digits == "0" && d.frac_digits.empty()) d.neg = false;
    return d;
}

Decimal beyond(const Decimal& d, size_t k, bool above) {
    // d * 10^k as an integer, truncated toward zero; exact when nothing was cut.
    const bool exact = d.frac_digits.size() <= k;
    Decimal s;
    s.neg = d.neg;
    s.int_digits = d.int_digits +
                   (exact ? d.frac_digits + std::string(k - d.frac_digits.size(), '0') : d.frac_digits.substr(0, k));
    const size_t nz = s.int_digits.find_first_not_of('0');
    s.int_digits = nz == std::string::npos ? "0" : s.int_digits.substr(nz);
    if (s.int_digits == "0") s.neg = false;
    // Truncation moved toward zero: past d already when that is the wanted side (d < 0 above, d > 0 below).
    const bool past = !exact && (above ? d.neg : !d.neg);
    if (!past) s = above ? plus_one(s) : minus_one(s);
    // Back to k fraction digits.
    Decimal r;
    r.neg = s.neg;
    std::string digs = std::string(k + 1 > s.int_digits.size() ? k + 1 - s.int_digits.size() : 0, '0') + s.int_digits;
    r.int_digits = digs.substr(0, digs.size() - k);
    r.frac_digits = digs.substr(digs.size() - k);
    const size_t nz2 = r.int_digits.find_first_not_of('0');
    r.int_digits = nz2 == std::string::npos ? "0" : r.int_digits.substr(nz2);
    while (!r.frac_digits.empty() && r.frac_digits.back() == '0') r.frac_digits.pop_back();
    if (r.int_digits == "0" && r.frac_digits.empty()) r.neg = false;
    return r;
}

std::string to_string(const Decimal& d) {
    return (d.neg ? "-" : "") + d.int_digits + (d.frac_digits.empty() ? "" : "." + d.frac_digits);
}

int compare(const Decimal& a, const Decimal& b) {
    if (a.neg != b.neg) return a.neg ? -1 : 1;
    int m = compare_digits(a.int_digits, b.int_digits);
    if (m == 0) m = a.frac_digits < b.frac_digits ? -1 : a.frac_digits > b.frac_digits ? 1 : 0;
    return a.neg ? -m : m;
}

Decimal plus_one(const Decimal& d) {
    Decimal r = d;
    if (!d.neg) {
        r.int_digits = inc_digits(d.int_digits);
    } else {
        r.int_digits = dec_digits(d.int_digits);
        r.neg = r.int_digits != "0";
    }
    return r;
}

Decimal minus_one(const Decimal& d) {
    Decimal r = d;
    if (d.neg || d.int_digits == "0") {
        r.int_digits = d.neg ? inc_digits(d.int_digits) : "1";
        r.neg = true;
    } else {
        r.int_digits = dec_digits(d.int_digits);
    }
    return r;
}

Decimal ceil(const Decimal& d) {
    if (d.frac_digits.empty()) return d;
    Decimal r = d;
    r.frac_digits.clear();
    if (!d.neg) return plus_one(r);          // 1.5 -> 2
    if (r.int_digits == "0") r.neg = false;  // -0.5 -> 0
    return r;
}

Decimal floor(const Decimal& d) {
    if (d.frac_digits.empty()) return d;
    Decimal r = d;
    r.frac_digits.clear();
    if (d.neg) return minus_one(r);  // -1.5 -> -2
    return r;
}

std::string integer_range_gbnf(const std::optional<Decimal>& lo, const std::optional<Decimal>& hi) {
    PL_CHECK((!lo || lo->frac_digits.empty()) && (!hi || hi->frac_digits.empty()));
    PL_CHECK(!lo || !hi || compare(*lo, *hi) <= 0);
    std::vector<std::string> v;
    if (!lo || lo->neg) {  // -1 and below: "-" and the magnitude
        const std::string m_lo = hi && hi->neg ? hi->int_digits : "1";
        const std::string m_hi = lo ? lo->int_digits : std::string(std::max(kDigits, m_lo.size()), '9');
        v.push_back("\"-\" " + uint_range(m_lo, m_hi));
    }
    if (!hi || !hi->neg) {
        const std::string a = lo && !lo->neg ? lo->int_digits : "0";
        const std::string b = hi ? hi->int_digits : std::string(std::max(kDigits, a.size()), '9');
        v.push_back(uint_range(a, b));
    }
    return alt(v);
}

std::string decimal_range_gbnf(const std::optional<Decimal>& lo, const std::optional<Decimal>& hi) {
    PL_CHECK(!lo || !hi || compare(*lo, *hi) <= 0);
    size_t fd = kDigits;
    if (lo) fd = std::max(fd, lo->frac_digits.size());
    if (hi) fd = std::max(fd, hi->frac_digits.size());
    const Decimal zero;
    std::vector<std::string> v;
    if (!lo || lo->neg) {  // zero and below: "-" and the magnitude, in [|hi| or 0, |lo|]
        const Decimal m_lo = hi && hi->neg ? magnitude(*hi) : zero;
        if (lo) {
            v.push_back("\"-\" " + nonneg_decimals(m_lo, magnitude(*lo), fd));
        } else {
            v.push_back("\"-\" " + nonneg_decimals(m_lo, std::nullopt, fd));
        }
    }
    if (!hi || !hi->neg) v.push_back(nonneg_decimals(lo && !lo->neg ? *lo : zero, hi, fd));
    return alt(v);
}

}  // namespace plainllama
