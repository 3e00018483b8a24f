// An HTTP response as a handler writes it, from the listener's loop or from a thread of its own: whole (status,
// headers, body with Content-Length), or streamed in pieces (chunked for HTTP/1.1; for HTTP/1.0, which has no
// chunks, the body ends when the connection closes). The bytes go to a buffer the listener's loop sends from; a
// stream's write() waits while more than kMaxUnsent bytes are unsent (the client reads slowly), so a slow reader
// costs a bounded buffer, never a growing one. Knows nothing of sockets.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace plainllama {

class HttpResponse {
   public:
    static constexpr size_t kMaxUnsent = 64 << 10;

    // What the handler's thread and the listener's loop share, under `mutex`.
    struct Shared {
        std::mutex mutex;
        std::condition_variable sent;  // notified when `out` shrinks and when the connection goes away
        std::string out;               // framed bytes; those from `pos` on are not sent yet
        size_t pos = 0;
        int minor = 1;           // the request's HTTP/1.minor
        bool head = false;       // a HEAD request: headers only
        bool keep_alive = true;  // the connection takes another request after this one
        int status = 0;          // 0 until send() or start()
        bool chunked = false, ended = false;
        bool gone = false;           // the client hung up, the connection failed or timed out, or the server stops
        std::function<void()> wake;  // tells the loop there are bytes to send (set by the listener)
        size_t unsent() const { return out.size() - pos; }
    };

    explicit HttpResponse(std::shared_ptr<Shared> s) : s_(std::move(s)) {}

    // Adds a header line to the response (before send() or start()).
    void header(std::string name, std::string value);
    // The whole response.
    void send(int status, std::string_view content_type, std::string_view body);
    // Starts a streamed response; then write() its pieces and end() it.
    void start(int status, std::string_view content_type);
    // Queues a piece of the stream, waiting while kMaxUnsent bytes are unsent; false when the client is gone.
    bool write(std::string_view data);
    void end();

    bool client_gone() const;
    bool answered() const;  // send() or start() was called
    bool ended() const;
    int status() const;

   private:
    // The status line and headers (and the body, when whole), under the mutex.
    void head(int status, std::string_view content_type, const std::string* body);

    std::shared_ptr<Shared> s_;
    std::vector<std::pair<std::string, std::string>> headers_;
};

// "OK", "Not Found", ... ("" for a status without one here).
const char* http_reason(int status);

}  // namespace plainllama
