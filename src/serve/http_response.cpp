#include "plainllama/serve/http_response.h"

#include <cstdio>
#include <ctime>

#include "plainllama/sys/error.h"

namespace plainllama {

const char* http_reason(int status) {
    switch (status) {
        case 100:
            return "Continue";
        case 200:
            return "OK";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 413:
            return "Content Too Large";
        case 414:
            return "URI Too Long";
        case 417:
            return "Expectation Failed";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 501:
            return "Not Implemented";
        case 503:
            return "Service Unavailable";
        case 505:
            return "HTTP Version Not Supported";
        default:
            return "";
    }
}

namespace {

std::string date_now() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return buf;
}

}  // namespace

void HttpResponse::header(std::string name, std::string value) {
    headers_.emplace_back(std::move(name), std::move(value));
}

void HttpResponse::head(int status, std::string_view content_type, const std::string* body) {
    Shared& s = *s_;
    PL_CHECK(s.status == 0);
    s.status = status;
    std::string h = "HTTP/1.1 " + std::to_string(status) + " " + http_reason(status) + "\r\nDate: " + date_now() +
                    "\r\nContent-Type: " + std::string(content_type) + "\r\n";
    if (body) {
        h += "Content-Length: " + std::to_string(body->size()) + "\r\n";
    } else if (s.minor >= 1) {
        s.chunked = true;
        h += "Transfer-Encoding: chunked\r\n";
    } else {
        s.keep_alive = false;  // HTTP/1.0 has no chunks: the stream ends with the connection
    }
    if (!s.keep_alive)
        h += "Connection: close\r\n";
    else if (s.minor == 0)
        h += "Connection: keep-alive\r\n";
    for (const auto& [k, v] : headers_) h += k + ": " + v + "\r\n";
    h += "\r\n";
    s.out += h;
    if (body && !s.head) s.out += *body;
}

void HttpResponse::send(int status, std::string_view content_type, std::string_view body) {
    {
        std::lock_guard<std::mutex> lock(s_->mutex);
        const std::string b(body);
        head(status, content_type, &b);
        s_->ended = true;
    }
    s_->wake();
}

void HttpResponse::start(int status, std::string_view content_type) {
    {
        std::lock_guard<std::mutex> lock(s_->mutex);
        head(status, content_type, nullptr);
    }
    s_->wake();
}

bool HttpResponse::write(std::string_view data) {
    {
        std::unique_lock<std::mutex> lock(s_->mutex);
        PL_CHECK(s_->status != 0 && !s_->ended);
        s_->sent.wait(lock, [&] { return s_->gone || s_->unsent() < kMaxUnsent; });
        if (s_->gone) return false;
        if (data.empty() || s_->head) return true;
        if (s_->chunked) {
            char size[24];
            std::snprintf(size, sizeof size, "%zx\r\n", data.size());
            s_->out += size;
        }
        s_->out += data;
        if (s_->chunked) s_->out += "\r\n";
    }
    s_->wake();
    return true;
}

void HttpResponse::end() {
    {
        std::unique_lock<std::mutex> lock(s_->mutex);
        if (s_->ended) return;
        if (s_->chunked && !s_->head) s_->out += "0\r\n\r\n";
        s_->ended = true;
    }
    s_->wake();
}

bool HttpResponse::client_gone() const {
    std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->gone;
}

bool HttpResponse::answered() const {
    std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->status != 0;
}

bool HttpResponse::ended() const {
    std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->ended;
}

int HttpResponse::status() const {
    std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->status;
}

}  // namespace plainllama
