// The HTTP request parser: the same request whatever the split of its bytes, pipelined requests left to the
// caller, chunked bodies decoded, and every limit answered with its status before the bytes past it are taken.
#include "plainllama/serve/http_request.h"

#include <gtest/gtest.h>

#include <string>

namespace plainllama {
namespace {

HttpLimits small_limits() {
    HttpLimits l;
    l.max_head = 512;
    l.max_headers = 8;
    l.max_body = 64;
    return l;
}

// Feeds `text` in pieces of `step` bytes; the parser and the bytes it took.
struct Fed {
    RequestParser parser{small_limits()};
    size_t used = 0;
};

void feed(Fed& f, const std::string& text, size_t step) {
    for (size_t at = 0; at < text.size(); at += step) {
        const std::string_view piece = std::string_view(text).substr(at, step);
        const size_t n = f.parser.feed(piece);
        f.used += n;
        if (n < piece.size()) return;
    }
}

TEST(HttpRequest, SameRequestWhateverTheSplit) {
    const std::string text =
        "POST /v1/completions?x=1 HTTP/1.1\r\nHost: h\r\nContent-Type:  application/json \r\nContent-Length: 11\r\n"
        "\r\n{\"a\": \"bc\"}";
    for (size_t step : {size_t(1), size_t(2), size_t(7), text.size()}) {
        Fed f;
        feed(f, text, step);
        ASSERT_EQ(f.parser.state(), RequestParser::State::done) << step << ": " << f.parser.error();
        const HttpRequest& r = f.parser.request();
        EXPECT_EQ(f.used, text.size());
        EXPECT_EQ(r.method, "POST");
        EXPECT_EQ(r.target, "/v1/completions?x=1");
        EXPECT_EQ(r.path, "/v1/completions");
        EXPECT_EQ(r.minor, 1);
        ASSERT_NE(r.header("content-type"), nullptr);
        EXPECT_EQ(*r.header("content-type"), "application/json");
        EXPECT_EQ(r.body, "{\"a\": \"bc\"}");
        EXPECT_TRUE(r.keep_alive());
    }
}

TEST(HttpRequest, PipelinedRequestIsLeftToTheCaller) {
    const std::string first = "GET /health HTTP/1.1\r\nHost: h\r\n\r\n";
    RequestParser p(small_limits());
    EXPECT_EQ(p.feed(first + "GET /v1/models HTTP/1.1\r\n\r\n"), first.size());
    EXPECT_EQ(p.state(), RequestParser::State::done);
    EXPECT_EQ(p.feed("more"), 0u);  // done: takes nothing further
}

TEST(HttpRequest, ChunkedBodyDecoded) {
    const std::string text =
        "POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
        "5;name=value\r\nhello\r\nA\r\n, world!!!\r\n0\r\nTrailer: x\r\n\r\nGET";
    for (size_t step : {size_t(1), size_t(3), text.size()}) {
        Fed f;
        feed(f, text, step);
        ASSERT_EQ(f.parser.state(), RequestParser::State::done) << f.parser.error();
        EXPECT_EQ(f.parser.request().body, "hello, world!!!");
        EXPECT_EQ(f.used, text.size() - 3);
    }
}

TEST(HttpRequest, BareLineFeedsAndLeadingEmptyLines) {
    RequestParser p(small_limits());
    p.feed("\r\n\nGET /health HTTP/1.0\nConnection: keep-alive\n\n");
    ASSERT_EQ(p.state(), RequestParser::State::done) << p.error();
    EXPECT_EQ(p.request().minor, 0);
    EXPECT_TRUE(p.request().keep_alive());
}

TEST(HttpRequest, KeepAliveByVersionAndHeader) {
    auto keep = [](const std::string& head) {
        RequestParser p(small_limits());
        p.feed(head + "\r\n");
        EXPECT_EQ(p.state(), RequestParser::State::done) << head;
        return p.request().keep_alive();
    };
    EXPECT_TRUE(keep("GET / HTTP/1.1\r\n"));
    EXPECT_FALSE(keep("GET / HTTP/1.1\r\nConnection: upgrade, Close\r\n"));
    EXPECT_FALSE(keep("GET / HTTP/1.0\r\n"));
    EXPECT_TRUE(keep("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n"));
}

TEST(HttpRequest, ExpectContinueUntilTheBodyStarts) {
    RequestParser p(small_limits());
    p.feed("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
    EXPECT_TRUE(p.wants_continue());
    p.feed("ab");
    EXPECT_FALSE(p.wants_continue());
    p.feed("cd");
    EXPECT_EQ(p.state(), RequestParser::State::done);
}

// The status a request head (and body) is refused with, and how many bytes were taken before.
struct Refused {
    int status;
    size_t used;
};

Refused refuse(const std::string& text) {
    RequestParser p(small_limits());
    const size_t used = p.feed(text);
    EXPECT_EQ(p.state(), RequestParser::State::failed) << text.substr(0, 80);
    EXPECT_FALSE(p.error().empty());
    return {p.error_status(), used};
}

TEST(HttpRequest, LimitsRefusedBeforeTheBytesPastThem) {
    // a declared body over the limit: refused at the end of the head, none of the body taken
    const std::string head = "POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n";
    const Refused r = refuse(head + std::string(65, 'x'));
    EXPECT_EQ(r.status, 413);
    EXPECT_EQ(r.used, head.size());
    // a chunked body: refused at the chunk that passes the limit, before its data
    const std::string chunks =
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n" + std::string(32, 'x') + "\r\n";
    const Refused c = refuse(chunks + "21\r\n" + std::string(33, 'x'));
    EXPECT_EQ(c.status, 413);
    EXPECT_EQ(c.used, chunks.size() + 4);
    EXPECT_EQ(refuse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n").status, 413);
    EXPECT_EQ(refuse("GET /" + std::string(600, 'a') + " HTTP/1.1\r\n\r\n").status, 414);
    EXPECT_EQ(refuse("GET / HTTP/1.1\r\nX: " + std::string(600, 'a') + "\r\n\r\n").status, 431);
    std::string many = "GET / HTTP/1.1\r\n";
    for (int i = 0; i < 9; ++i) many += "X" + std::to_string(i) + ": y\r\n";
    EXPECT_EQ(refuse(many + "\r\n").status, 431);
}

TEST(HttpRequest, MalformedHeadsRefused) {
    EXPECT_EQ(refuse("GET /\r\n\r\n").status, 400);
    EXPECT_EQ(refuse("GET / HTTP/2.0\r\n\r\n").status, 505);
    EXPECT_EQ(refuse("G(T / HTTP/1.1\r\n\r\n").status, 400);
    EXPECT_EQ(refuse("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n").status, 400);
    EXPECT_EQ(refuse(std::string("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 26)).status, 400);
    EXPECT_EQ(refuse("GET / HTTP/1.1\r\nX : a\r\n\r\n").status, 400);
    EXPECT_EQ(refuse("GET / HTTP/1.1\r\n folded\r\n\r\n").status, 400);
    EXPECT_EQ(refuse("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").status, 400);
    EXPECT_EQ(refuse("POST / HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\n").status, 400);
    EXPECT_EQ(refuse("POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n").status, 400);
    EXPECT_EQ(refuse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n").status, 400);
    EXPECT_EQ(refuse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").status, 501);
    EXPECT_EQ(refuse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n").status, 400);
    EXPECT_EQ(refuse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nx\r\n").status, 400);
    EXPECT_EQ(refuse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n").status, 400);
    EXPECT_EQ(refuse("POST / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n").status, 417);
    // the same Content-Length twice is one length
    RequestParser p(small_limits());
    p.feed("POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab");
    EXPECT_EQ(p.state(), RequestParser::State::done) << p.error();
}

}  // namespace
}  // namespace plainllama
