// The server's HTTP/1.1 connections: one thread runs an epoll loop over the listening socket and every
// connection (non-blocking sockets), so a connection costs a file descriptor and its buffers, never a thread, and a
// slow or idle client holds nothing but its own connection. The loop reads and parses requests (http_request.h),
// answers them in order (pipelined requests wait for the one before), sends the responses (http_response.h) and
// enforces the limits:
//   - a request (line, headers and body) must arrive whole within `timeout` seconds of its first byte (408), an
//     idle connection is closed after `timeout` seconds, and so is one whose response the client stops reading;
//   - at most `max_connections` at once: one more is answered 503 and closed;
//   - the bodies (http_request.h): 413 before reading one too large, or as soon as a chunked one passes the limit.
// A route's handler runs on the loop (it must answer at once: /health, /v1/models) or, for a route added with
// `on_thread`, on a thread of its own (a completion waits for the engine); at most `max_handlers` such threads run
// at once (one more request is answered 503). stop() closes every connection at once: nothing waits on a client.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "plainllama/serve/http_request.h"
#include "plainllama/serve/http_response.h"

namespace plainllama {

struct HttpListenerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;  // 0: any free port
    HttpLimits limits;
    int max_connections = 512;
    int max_handlers = 16;
    double timeout = 30;  // seconds
};

class HttpListener {
   public:
    using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
    // Answers a request the listener refuses itself (status 400, 404, 405, 408, 413, 414, 417, 431, 501, 503, 505);
    // `req` holds what was parsed of it (method and path may be empty).
    using Refusal = std::function<void(const HttpRequest& req, int status, const std::string& message, HttpResponse&)>;

    HttpListener(HttpListenerOptions o, Refusal refuse);
    ~HttpListener();  // stop()

    // Where a route's handler runs: on the loop (it answers at once), or on a thread of its own (it may wait).
    enum Runs { on_loop, on_thread };
    // Routes (before start()): `method` `path` (exact; HEAD is answered by a GET route, without the body).
    void route(const std::string& method, const std::string& path, Handler h, Runs runs = on_loop);

    // Binds and listens (an address in use is an Error: no SO_REUSEPORT, so two servers never share a port), then
    // starts the loop; returns the port.
    int start();
    // From now on responses close their connection, and idle connections are closed.
    void drain();
    // Requests received whose response is not yet sent whole.
    int busy() const { return busy_.load(); }
    // Closes the listening socket and every connection (handlers writing to one see client_gone()), and waits for
    // the handlers' threads to return.
    void stop();

   private:
    struct Conn;
    struct Route {
        std::string method, path;
        Handler handler;
        Runs runs;
    };
    void run();
    void accept_all(double now);
    void on_event(Conn& c, uint32_t events, double now);
    bool read_some(Conn& c);
    void parse(Conn& c, double now);
    void dispatch(Conn& c, HttpRequest req, const Handler& h, Runs runs, bool close, double now);
    void refuse(Conn& c, const HttpRequest& req, int status, const std::string& message, double now);
    void flush(Conn& c, double now);
    void finished(Conn& c, double now);
    void close_conn(Conn& c);
    void watch(Conn& c, uint32_t events);
    void sweep(double now);
    void wake(uint64_t id);
    std::shared_ptr<HttpResponse::Shared> new_response(const Conn& c, const HttpRequest& req);

    const HttpListenerOptions o_;
    const Refusal refuse_;
    std::vector<Route> routes_;
    int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
    std::thread thread_;
    std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;  // the loop's only
    uint64_t next_id_ = 2;                                       // 0: the listening socket, 1: the wake-up eventfd
    double accept_paused_until_ = 0;
    std::atomic<bool> stopping_{false}, draining_{false};
    std::atomic<int> busy_{0};

    std::mutex wake_mutex_;
    std::vector<uint64_t> woken_;  // connections whose response has new bytes

    std::mutex handlers_mutex_;
    std::condition_variable handlers_done_;
    int handlers_ = 0;  // threads running a handler
};

}  // namespace plainllama
