#include "plainllama/serve/http_request.h"

#include <algorithm>

namespace plainllama {

namespace {

constexpr size_t kMaxChunkLine = 4096;  // a chunk's size line, extensions included

char lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

// RFC 9110's tchar: the characters of a method or a header name.
bool is_tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(c); });
}

// A control character other than tab (NUL, CR, LF, DEL, ...): never part of a header value or a target.
bool is_ctl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// The comma-separated elements of a header value, trimmed; empty ones left out.
std::vector<std::string_view> elements(std::string_view v) {
    std::vector<std::string_view> out;
    for (;;) {
        const size_t comma = v.find(',');
        const std::string_view e = trim(v.substr(0, comma));
        if (!e.empty()) out.push_back(e);
        if (comma == std::string_view::npos) return out;
        v.remove_prefix(comma + 1);
    }
}

}  // namespace

const std::string* HttpRequest::header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (k == name) return &v;
    return nullptr;
}

bool HttpRequest::keep_alive() const {
    bool close = false, keep = false;
    for (const auto& [k, v] : headers)
        if (k == "connection")
            for (std::string_view e : elements(v)) {
                close = close || iequals(e, "close");
                keep = keep || iequals(e, "keep-alive");
            }
    return !close && (minor >= 1 || keep);
}

bool RequestParser::wants_continue() const {
    const std::string* e = req_.header("expect");
    return state_ == State::body && req_.body.empty() && req_.minor >= 1 && e && iequals(*e, "100-continue");
}

bool RequestParser::fail(int status, std::string why) {
    state_ = State::failed;
    error_status_ = status;
    error_ = std::move(why);
    return false;
}

// Moves bytes of `data` from `used` up to and including the next LF into `line` (without the CR LF or LF);
// `complete` says whether the LF came. False when the line would pass `limit` bytes (nothing is moved).
bool RequestParser::take_line(std::string_view& data, size_t& used, size_t limit, std::string& line, bool& complete) {
    const size_t lf = data.find('\n', used);
    const size_t end = lf == std::string_view::npos ? data.size() : lf + 1;
    if (line.size() + (end - used) > limit) return false;
    line.append(data.substr(used, end - used));
    used = end;
    complete = lf != std::string_view::npos;
    if (complete) {
        line.pop_back();  // LF
        if (!line.empty() && line.back() == '\r') line.pop_back();
    }
    return true;
}

size_t RequestParser::feed(std::string_view data) {
    size_t used = 0;
    while (used < data.size() && (state_ == State::head || state_ == State::body)) {
        started_ = true;
        if (state_ == State::body && (body_ == Body::length || body_ == Body::chunk_data)) {
            const size_t n = size_t(std::min<uint64_t>(left_, data.size() - used));
            req_.body.append(data.substr(used, n));
            used += n;
            left_ -= n;
            if (left_ == 0) {
                if (body_ == Body::length)
                    state_ = State::done;
                else
                    body_ = Body::chunk_end;
            }
            continue;
        }
        const bool chunk_line = state_ == State::body && (body_ == Body::chunk_size || body_ == Body::chunk_end);
        const size_t before = used;
        bool complete = false;
        if (!take_line(data, used, chunk_line ? kMaxChunkLine : limits_.max_head - head_bytes_, line_, complete)) {
            const std::string n = std::to_string(chunk_line ? kMaxChunkLine : limits_.max_head);
            if (chunk_line)
                fail(400, "a chunk's size line is longer than " + n + " bytes");
            else if (state_ == State::body)
                fail(431, "the body's trailers are larger than " + n + " bytes");
            else if (!seen_line_)
                fail(414, "the request line is longer than " + n + " bytes");
            else
                fail(431, "the request's headers are larger than " + n + " bytes");
            return used;
        }
        if (!chunk_line) head_bytes_ += used - before;
        if (!complete) return used;
        const std::string line = std::move(line_);
        line_.clear();
        if (line.find('\r') != std::string::npos) {
            fail(400, "a bare CR in the request's head");
        } else if (state_ == State::head) {
            head_line(line);
        } else if (body_ == Body::chunk_size) {
            chunk_size_line(line);
        } else if (body_ == Body::chunk_end) {
            if (!line.empty()) fail(400, "a chunk's data is not followed by CRLF");
            body_ = Body::chunk_size;
        } else if (line.empty()) {  // the trailers' end (trailer fields are read and left out)
            state_ = State::done;
        } else if (++trailers_ > limits_.max_headers) {
            fail(431, "the body has more than " + std::to_string(limits_.max_headers) + " trailer lines");
        }
    }
    return used;
}

bool RequestParser::head_line(const std::string& line) {
    if (!seen_line_) {
        if (line.empty()) return true;  // empty lines before the request line are ignored (RFC 9112 2.2)
        seen_line_ = true;
        return request_line(line);
    }
    if (line.empty()) return end_of_head();
    return header_line(line);
}

bool RequestParser::request_line(const std::string& line) {
    const size_t sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string::npos || line.find(' ', sp2 + 1) != std::string::npos)
        return fail(400, "the request line is not 'METHOD TARGET HTTP/1.x'");
    req_.method = line.substr(0, sp1);
    req_.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string version = line.substr(sp2 + 1);
    if (!is_token(req_.method)) return fail(400, "the request's method is not a token");
    if (req_.target.empty() ||
        std::any_of(req_.target.begin(), req_.target.end(), [](char c) { return is_ctl(c) || c == ' ' || c == '\t'; }))
        return fail(400, "the request's target is empty or has a control character");
    if (version == "HTTP/1.1" || version == "HTTP/1.0") {
        req_.minor = version.back() - '0';
    } else if (version.size() == 8 && version.compare(0, 5, "HTTP/") == 0 && version[6] == '.') {
        return fail(505, "HTTP version " + version.substr(5) + " is not supported (1.0 and 1.1 are)");
    } else {
        return fail(400, "the request line does not end in HTTP/1.x");
    }
    // origin form "/path?query", or absolute form "http://host/path?query" (what a proxy is sent)
    std::string_view path = req_.target;
    if (const size_t scheme = path.find("://"); scheme != std::string_view::npos && path[0] != '/') {
        const size_t slash = path.find('/', scheme + 3);
        path = slash == std::string_view::npos ? std::string_view("/") : path.substr(slash);
    }
    req_.path = std::string(path.substr(0, path.find('?')));
    return true;
}

bool RequestParser::header_line(const std::string& line) {
    if (line[0] == ' ' || line[0] == '\t') return fail(400, "a header line starts with a blank (obsolete folding)");
    const size_t colon = line.find(':');
    if (colon == std::string::npos || !is_token(std::string_view(line).substr(0, colon)))
        return fail(400, "a header line is not 'Name: value' (" + std::string(line.substr(0, 40)) + ")");
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), lower);
    const std::string_view value = trim(std::string_view(line).substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), [](char c) { return is_ctl(c); }))
        return fail(400, "header " + name + " has a control character in its value");
    if (req_.headers.size() >= limits_.max_headers)
        return fail(431, "the request has more than " + std::to_string(limits_.max_headers) + " headers");
    req_.headers.emplace_back(std::move(name), std::string(value));
    return true;
}

bool RequestParser::end_of_head() {
    if (const std::string* e = req_.header("expect"); e && !iequals(*e, "100-continue"))
        return fail(417, "Expect: " + *e + " is not supported (only 100-continue)");
    std::string te;
    std::string length;  // "5" of "Content-Length: 5", "5, 5" or two lines of 5; empty: none
    for (const auto& [k, v] : req_.headers) {
        if (k == "transfer-encoding") te += (te.empty() ? "" : ", ") + v;
        if (k != "content-length") continue;
        const std::vector<std::string_view> es = elements(v);
        if (es.empty()) return fail(400, "Content-Length is empty");
        for (std::string_view e : es) {  // one length, however often it is said; anything else is refused
            if (!std::all_of(e.begin(), e.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
                (!length.empty() && length != e))
                return fail(400, "Content-Length is not one decimal number");
            length = e;
        }
    }
    if (!te.empty()) {
        if (req_.minor == 0) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
        if (!length.empty()) return fail(400, "both Transfer-Encoding and Content-Length");
        if (!iequals(te, "chunked")) return fail(501, "Transfer-Encoding " + te + " is not supported (only chunked)");
        state_ = State::body;
        body_ = Body::chunk_size;
        return true;
    }
    if (length.empty()) {
        state_ = State::done;
        return true;
    }
    uint64_t n = 0;
    for (char c : length) {
        if (n > (UINT64_MAX - 9) / 10)
            return fail(413, "the body is larger than " + std::to_string(limits_.max_body) + " bytes");
        n = n * 10 + uint64_t(c - '0');
    }
    if (n > limits_.max_body)
        return fail(413, "the body (" + std::to_string(n) + " bytes) is larger than " +
                             std::to_string(limits_.max_body) + " bytes");
    left_ = n;
    state_ = n == 0 ? State::done : State::body;
    body_ = Body::length;
    return true;
}

bool RequestParser::chunk_size_line(const std::string& line) {
    size_t i = 0;
    uint64_t n = 0;
    for (; i < line.size(); ++i) {
        const char c = lower(line[i]);
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) break;
        if (n >> 60) return fail(413, "a chunk is larger than the body may be");
        n = n * 16 + uint64_t(d);
    }
    const std::string_view rest = trim(std::string_view(line).substr(i));
    if (i == 0 || !(rest.empty() || rest[0] == ';')) return fail(400, "a chunk's size is not a hexadecimal number");
    if (n == 0) {
        body_ = Body::trailers;
        head_bytes_ = 0;  // the trailers get a budget of their own
        return true;
    }
    if (n > limits_.max_body - req_.body.size())
        return fail(413, "the body is larger than " + std::to_string(limits_.max_body) + " bytes");
    left_ = n;
    body_ = Body::chunk_data;
    return true;
}

}  // namespace plainllama
