#include "plainllama/serve/http_listener.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "plainllama/sys/clock.h"
#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

constexpr uint64_t kListenId = 0, kWakeId = 1;
constexpr double kLingerSeconds = 2;  // after an error answer, the client's further bytes are read and dropped
constexpr double kSweepSeconds = 0.1;
// While draining, a connection accepted but not yet sent its first request has this long to send it (its client
// connected before it could know): closed at once, it would see a reset, not the 503 that says why.
constexpr double kDrainFirstRequestSeconds = 1;
constexpr size_t kReadSize = 64 << 10;

std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g s", s);
    return buf;
}

}  // namespace

struct HttpListener::Conn {
    enum class State { reading, answering, lingering };
    uint64_t id = 0;
    int fd = -1;
    State state = State::reading;
    std::string in;  // received, not yet parsed (a pipelined request waits here while one is answered)
    std::unique_ptr<RequestParser> parser;
    std::shared_ptr<HttpResponse::Shared> res;  // the response being sent (answering)
    // reading: the end of the idle time, or of the time the request has to arrive; answering: a stalled write's
    // end; lingering: when to close
    double deadline = 0;
    double accepted = 0;
    bool answered_one = false;  // a keep-alive connection, idle between requests
    bool request_started = false, continued = false, peer_eof = false, closed = false;
    uint32_t events = 0;
};

HttpListener::HttpListener(HttpListenerOptions o, Refusal refuse) : o_(std::move(o)), refuse_(std::move(refuse)) {}

HttpListener::~HttpListener() { stop(); }

void HttpListener::route(const std::string& method, const std::string& path, Handler h, Runs runs) {
    routes_.push_back({method, path, std::move(h), runs});
}

int HttpListener::start() {
    const std::string where = o_.host + ":" + std::to_string(o_.port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* ai = nullptr;
    if (const int rc = ::getaddrinfo(o_.host.c_str(), std::to_string(o_.port).c_str(), &hints, &ai); rc != 0)
        throw Error("cannot listen on " + where + ": " + ::gai_strerror(rc));
    int err = 0;
    for (addrinfo* a = ai; a && listen_fd_ < 0; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        // SO_REUSEADDR: a restart binds while the last run's connections are in TIME_WAIT. Not SO_REUSEPORT,
        // which would let a second server listen on the same port and take part of the requests.
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
            listen_fd_ = fd;
        } else {
            err = errno;
            ::close(fd);
        }
    }
    ::freeaddrinfo(ai);
    if (listen_fd_ < 0)
        throw Error("cannot listen on " + where + ": " +
                    (err == EADDRINUSE ? std::string("the address is in use (another server on this port?)")
                                       : std::string(std::strerror(err))));
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    const int port = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                                      : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);

    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0) throw Error(std::string("epoll: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenId;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    ev.data.u64 = kWakeId;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    thread_ = std::thread([this] { run(); });
    return port;
}

void HttpListener::drain() { draining_ = true; }

void HttpListener::stop() {
    if (!thread_.joinable()) return;
    stopping_ = true;
    wake(kWakeId);
    thread_.join();
    {
        std::unique_lock<std::mutex> lock(handlers_mutex_);
        handlers_done_.wait(lock, [&] { return handlers_ == 0; });
    }
    ::close(epoll_fd_);
    ::close(wake_fd_);
}

void HttpListener::wake(uint64_t id) {
    {
        std::lock_guard<std::mutex> lock(wake_mutex_);
        woken_.push_back(id);
    }
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
}

void HttpListener::run() {
    epoll_event events[64];
    double last_sweep = now_seconds();
    std::vector<uint64_t> ids;
    while (!stopping_) {
        const int n = ::epoll_wait(epoll_fd_, events, 64, int(kSweepSeconds * 1000));
        const double now = now_seconds();
        for (int i = 0; i < n; ++i) {
            const uint64_t id = events[i].data.u64;
            if (id == kListenId) {
                accept_all(now);
            } else if (id == kWakeId) {
                uint64_t count;
                while (::read(wake_fd_, &count, sizeof count) > 0) {
                }
                {
                    std::lock_guard<std::mutex> lock(wake_mutex_);
                    ids.swap(woken_);
                }
                for (uint64_t w : ids)
                    if (auto it = conns_.find(w); it != conns_.end() && it->second->res) {
                        flush(*it->second, now);
                        parse(*it->second, now);  // a pipelined request after the response just finished
                    }
                ids.clear();
            } else if (auto it = conns_.find(id); it != conns_.end()) {
                on_event(*it->second, events[i].events, now);
            }
        }
        if (now - last_sweep >= kSweepSeconds) {
            sweep(now);
            last_sweep = now;
        }
        std::erase_if(conns_, [](const auto& kv) { return kv.second->closed; });
    }
    for (auto& [id, c] : conns_) close_conn(*c);
    conns_.clear();
    ::close(listen_fd_);
}

void HttpListener::accept_all(double now) {
    for (;;) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                // out of descriptors: stop accepting for a moment rather than spin on a socket that stays readable
                epoll_event ev{};
                ev.data.u64 = kListenId;
                ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
                accept_paused_until_ = now + kSweepSeconds;
            }
            return;
        }
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // each stream event goes out at once
        const int open =
            int(std::count_if(conns_.begin(), conns_.end(), [](const auto& kv) { return !kv.second->closed; }));
        if (open >= o_.max_connections) {
            // Answered 503 and closed: what the client sent already is read first, so that the close does not
            // reset the connection before the client reads the answer.
            char buf[4096];
            while (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
            }
            auto s = std::make_shared<HttpResponse::Shared>();
            s->keep_alive = false;
            s->wake = [] {};
            HttpResponse r(s);
            refuse_(HttpRequest{}, 503,
                    "too many connections (" + std::to_string(o_.max_connections) + ", --max-connections); retry later",
                    r);
            (void)!::send(fd, s->out.data(), s->out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            ::shutdown(fd, SHUT_WR);
            ::close(fd);
            continue;
        }
        auto c = std::make_unique<Conn>();
        c->id = next_id_++;
        c->fd = fd;
        c->parser = std::make_unique<RequestParser>(o_.limits);
        c->deadline = now + o_.timeout;
        c->accepted = now;
        watch(*c, EPOLLIN | EPOLLRDHUP);
        conns_.emplace(c->id, std::move(c));
    }
}

void HttpListener::watch(Conn& c, uint32_t events) {
    if (c.closed || events == c.events) return;
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = c.id;
    ::epoll_ctl(epoll_fd_, c.events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c.fd, &ev);
    c.events = events;
}

void HttpListener::on_event(Conn& c, uint32_t events, double now) {
    if (c.closed) return;
    if (events & (EPOLLERR | EPOLLHUP)) return close_conn(c);  // reset, or closed both ways: nobody to answer
    switch (c.state) {
        case Conn::State::lingering: {
            char buf[kReadSize];
            for (int i = 0; i < 4; ++i) {
                const ssize_t k = ::recv(c.fd, buf, sizeof buf, 0);
                if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) return close_conn(c);
                if (k < 0 && errno == EAGAIN) return;
            }
            return;
        }
        case Conn::State::answering:
            if (events & EPOLLOUT) flush(c, now);
            if (!c.closed && c.state == Conn::State::answering && (events & EPOLLRDHUP)) {
                c.peer_eof = true;  // the client closed its side: it is gone, the response with it
                return close_conn(c);
            }
            return parse(c, now);
        case Conn::State::reading:
            if (read_some(c)) parse(c, now);
            return;
    }
}

bool HttpListener::read_some(Conn& c) {
    char buf[kReadSize];
    for (int i = 0; i < 4; ++i) {
        const ssize_t k = ::recv(c.fd, buf, sizeof buf, 0);
        if (k > 0) {
            c.in.append(buf, size_t(k));
            if (size_t(k) < sizeof buf) break;
        } else if (k == 0) {
            c.peer_eof = true;
            break;
        } else if (errno != EINTR) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            close_conn(c);
            return false;
        }
    }
    return true;
}

// Parses what has arrived; answers each whole request in turn, while the answer is sent at once (a pipelined
// request waits in `in` for the response before it).
void HttpListener::parse(Conn& c, double now) {
    while (!c.closed && c.state == Conn::State::reading) {
        c.in.erase(0, c.parser->feed(c.in));
        const RequestParser::State st = c.parser->state();
        if (st == RequestParser::State::failed) {
            return refuse(c, c.parser->request(), c.parser->error_status(), c.parser->error(), now);
        }
        if (st != RequestParser::State::done) {
            if (c.peer_eof) return close_conn(c);  // the client is done, without a whole request
            if (c.parser->started() && !c.request_started) {
                c.request_started = true;  // from its first byte, the request has `timeout` seconds to arrive
                c.deadline = now + o_.timeout;
            }
            if (c.parser->wants_continue() && !c.continued && c.in.empty()) {
                c.continued = true;
                static const char k100[] = "HTTP/1.1 100 Continue\r\n\r\n";
                (void)!::send(c.fd, k100, sizeof k100 - 1, MSG_NOSIGNAL);
            }
            return;
        }
        HttpRequest req = std::move(c.parser->request());
        const Route* route = nullptr;
        bool path_known = false;
        for (const Route& r : routes_) {
            if (r.path != req.path) continue;
            path_known = true;
            if (r.method == req.method || (req.method == "HEAD" && r.method == "GET")) {
                route = &r;
                break;
            }
        }
        if (route) {
            dispatch(c, std::move(req), route->handler, route->runs, false, now);
        } else {
            const int status = path_known ? 405 : 404;
            const std::string message =
                "no endpoint " + req.method + " " + req.path + (path_known ? " (the path takes another method)" : "");
            dispatch(
                c, std::move(req),
                [this, status, message](const HttpRequest& r, HttpResponse& res) { refuse_(r, status, message, res); },
                on_loop, false, now);
        }
    }
}

std::shared_ptr<HttpResponse::Shared> HttpListener::new_response(const Conn& c, const HttpRequest& req) {
    auto s = std::make_shared<HttpResponse::Shared>();
    s->minor = req.minor;
    s->head = req.method == "HEAD";
    s->keep_alive = req.keep_alive() && !draining_ && !c.peer_eof;
    s->wake = [this, id = c.id] { wake(id); };
    return s;
}

namespace {

// Runs a handler; a handler that throws or answers nothing gets a 500; a stream it left open is ended.
void run_handler(const HttpListener::Handler& h, const HttpListener::Refusal& refuse, const HttpRequest& req,
                 HttpResponse& res) {
    std::string error = "the handler gave no response";
    try {
        h(req, res);
    } catch (const std::exception& e) {
        error = e.what();
    }
    if (!res.answered()) refuse(req, 500, error, res);
    res.end();
}

}  // namespace

void HttpListener::dispatch(Conn& c, HttpRequest req, const Handler& h, Runs runs, bool close, double now) {
    c.res = new_response(c, req);
    if (close) c.res->keep_alive = false;
    c.state = Conn::State::answering;
    c.deadline = now + o_.timeout;
    c.request_started = c.continued = false;
    c.parser = std::make_unique<RequestParser>(o_.limits);
    ++busy_;
    watch(c, EPOLLRDHUP);  // no EPOLLIN while answering: a pipelined request waits in the kernel's buffer
    std::shared_ptr<HttpResponse::Shared> s = c.res;
    bool inline_ = runs == on_loop;
    if (runs == on_thread) {
        std::lock_guard<std::mutex> lock(handlers_mutex_);
        if (handlers_ < o_.max_handlers) {
            ++handlers_;
            try {
                std::thread([this, s, h, req]() {
                    HttpResponse res(s);
                    run_handler(h, refuse_, req, res);
                    std::lock_guard<std::mutex> lock(handlers_mutex_);
                    --handlers_;
                    handlers_done_.notify_all();
                }).detach();
            } catch (const std::system_error&) {
                --handlers_;
                inline_ = true;
            }
        } else {
            inline_ = true;
        }
        if (inline_) {  // no thread for it: answered at once
            HttpResponse res(s);
            refuse_(req, 503,
                    "the server is busy (" + std::to_string(o_.max_handlers) + " requests at once); retry later", res);
            inline_ = false;
        }
    }
    if (inline_) {
        HttpResponse res(s);
        run_handler(h, refuse_, req, res);
    }
    flush(c, now);
}

void HttpListener::refuse(Conn& c, const HttpRequest& req, int status, const std::string& message, double now) {
    dispatch(
        c, req, [this, status, message](const HttpRequest& r, HttpResponse& res) { refuse_(r, status, message, res); },
        on_loop, true, now);  // what follows on the connection cannot be trusted: closed after the answer
}

void HttpListener::flush(Conn& c, double now) {
    if (c.closed || !c.res) return;
    bool failed = false, pending = false, done = false;
    {
        HttpResponse::Shared& s = *c.res;
        std::lock_guard<std::mutex> lock(s.mutex);
        while (s.unsent() > 0) {
            const ssize_t k = ::send(c.fd, s.out.data() + s.pos, s.unsent(), MSG_NOSIGNAL);
            if (k > 0) {
                s.pos += size_t(k);
                c.deadline = now + o_.timeout;  // progress: the stalled-write clock starts again
            } else if (k < 0 && errno == EINTR) {
                continue;
            } else {
                failed = !(k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
                break;
            }
        }
        if (s.unsent() == 0) {
            s.out.clear();
            s.pos = 0;
        } else if (s.pos >= HttpResponse::kMaxUnsent) {
            s.out.erase(0, s.pos);
            s.pos = 0;
        }
        pending = s.unsent() > 0;
        done = s.ended && !pending;
    }
    c.res->sent.notify_all();
    if (failed) return close_conn(c);
    watch(c, EPOLLRDHUP | (pending ? uint32_t(EPOLLOUT) : 0u));
    if (done) finished(c, now);
}

void HttpListener::finished(Conn& c, double now) {
    --busy_;
    bool keep;
    {
        std::lock_guard<std::mutex> lock(c.res->mutex);
        keep = c.res->keep_alive;
    }
    c.res.reset();
    c.answered_one = true;
    if (keep && !(c.peer_eof && c.in.empty())) {
        c.state = Conn::State::reading;
        c.deadline = now + o_.timeout;
        watch(c, EPOLLIN | EPOLLRDHUP);
        return;
    }
    if (c.peer_eof) return close_conn(c);
    // Lingering close: our side is shut, and what the client still sends is read and dropped for a moment, so
    // that the close does not reset the connection before the client has read the answer.
    ::shutdown(c.fd, SHUT_WR);
    c.state = Conn::State::lingering;
    c.in.clear();
    c.deadline = now + kLingerSeconds;
    watch(c, EPOLLIN | EPOLLRDHUP);
}

void HttpListener::close_conn(Conn& c) {
    if (c.closed) return;
    if (c.res) {
        {
            std::lock_guard<std::mutex> lock(c.res->mutex);
            c.res->gone = true;
        }
        c.res->sent.notify_all();
        c.res.reset();
        --busy_;
    }
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    c.closed = true;
}

void HttpListener::sweep(double now) {
    if (accept_paused_until_ > 0 && now >= accept_paused_until_) {
        accept_paused_until_ = 0;
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = kListenId;
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
    }
    for (auto& [id, cp] : conns_) {
        Conn& c = *cp;
        if (c.closed) continue;
        const bool idle = c.state == Conn::State::reading && !c.request_started && c.in.empty();
        if (idle && draining_ && (c.answered_one || now - c.accepted >= kDrainFirstRequestSeconds)) {
            close_conn(c);
            continue;
        }
        if (now < c.deadline) continue;
        switch (c.state) {
            case Conn::State::reading:
                if (idle)
                    close_conn(c);
                else
                    refuse(c, c.parser->request(), 408,
                           "the request did not arrive whole within " + seconds(o_.timeout), now);
                break;
            case Conn::State::answering: {
                bool stalled;
                {
                    std::lock_guard<std::mutex> lock(c.res->mutex);
                    stalled = c.res->unsent() > 0;
                }
                if (stalled)
                    close_conn(c);  // the client stopped reading its response
                else
                    c.deadline = now + o_.timeout;
                break;
            }
            case Conn::State::lingering:
                close_conn(c);
                break;
        }
    }
}

}  // namespace plainllama
