// An HTTP/1.x request and its incremental parser. The parser takes bytes as they arrive (any split) and stops at
// the end of one request, so that the bytes after it (a pipelined request) stay with the caller. Everything is
// bounded: the request line and headers together (and a chunked body's trailers), the number of headers, and the
// body, whether its length is given (Content-Length, refused before a byte of it is read) or not (chunked, refused
// as soon as the decoded size passes the limit). Knows nothing of sockets.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace plainllama {

struct HttpRequest {
    std::string method;                                        // "GET", "POST", ...
    std::string target;                                        // as sent: "/v1/models?x=1"
    std::string path;                                          // the target's path: "/v1/models"
    int minor = 1;                                             // HTTP/1.minor: 0 or 1
    std::vector<std::pair<std::string, std::string>> headers;  // names in lower case, values without outer blanks
    std::string body;                                          // decoded (no chunked framing)

    // The value of header `name` (lower case), or null; several lines of one name are joined with ", ".
    const std::string* header(std::string_view name) const;
    // Whether the connection stays open after the response: HTTP/1.1 unless "Connection: close", HTTP/1.0 only
    // with "Connection: keep-alive".
    bool keep_alive() const;
};

struct HttpLimits {
    size_t max_head = 16 << 10;  // request line + headers, bytes (a chunked body's trailers count too)
    size_t max_headers = 100;    // header lines
    size_t max_body = 8 << 20;   // decoded body, bytes
};

class RequestParser {
   public:
    enum class State { head, body, done, failed };

    explicit RequestParser(const HttpLimits& limits) : limits_(limits) {}
    // Consumes bytes from the front of `data` up to the end of the request; returns how many it took. Stops taking
    // bytes once the state is done or failed.
    size_t feed(std::string_view data);

    State state() const { return state_; }
    bool started() const { return started_; }  // a byte of this request arrived
    // In State::body with nothing of the body read yet and "Expect: 100-continue" sent: the client waits for
    // "100 Continue" before sending the body.
    bool wants_continue() const;
    HttpRequest& request() { return req_; }
    // State::failed: the status to answer with (400, 413, 414, 431, 501, 505) and why.
    int error_status() const { return error_status_; }
    const std::string& error() const { return error_; }

   private:
    enum class Body { none, length, chunk_size, chunk_data, chunk_end, trailers };
    bool fail(int status, std::string why);
    bool take_line(std::string_view& data, size_t& used, size_t limit, std::string& line, bool& complete);
    bool head_line(const std::string& line);
    bool request_line(const std::string& line);
    bool header_line(const std::string& line);
    bool end_of_head();
    bool chunk_size_line(const std::string& line);

    HttpLimits limits_;
    State state_ = State::head;
    Body body_ = Body::none;
    HttpRequest req_;
    std::string line_;       // a line received in part
    size_t head_bytes_ = 0;  // of the request line and headers (or trailers)
    uint64_t left_ = 0;      // Body::length: bytes still to come; chunk_data: of this chunk
    size_t trailers_ = 0;    // trailer lines read
    bool started_ = false, seen_line_ = false;
    int error_status_ = 0;
    std::string error_;
};

}  // namespace plainllama
