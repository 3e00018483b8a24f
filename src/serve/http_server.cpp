#include "plainllama/serve/http_server.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "plainllama/serve/http_listener.h"
#include "plainllama/serve/metrics.h"
#include "plainllama/serve/webui.h"
#include "plainllama/sys/clock.h"
#include "plainllama/sys/error.h"

namespace plainllama {

using nlohmann::json;

// The request log: lines written to stderr by a thread of their own, so that the listener's loop, which logs the
// requests it answers itself, never waits on stderr (a pipe whose reader is slow or stopped). Lines beyond
// kMaxLines waiting are dropped, and counted in the next line written.
class RequestLog {
   public:
    RequestLog() : thread_([this] { run(); }) {}
    ~RequestLog() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        more_.notify_all();
        thread_.join();
    }
    void line(std::string s) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (lines_.size() >= kMaxLines) return void(++dropped_);
            lines_.push_back(std::move(s));
        }
        more_.notify_all();
    }

   private:
    static constexpr size_t kMaxLines = 10000;
    void run() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            more_.wait(lock, [&] { return stop_ || !lines_.empty(); });
            if (lines_.empty()) return;
            std::deque<std::string> out;
            out.swap(lines_);
            const size_t dropped = std::exchange(dropped_, 0);
            lock.unlock();
            if (dropped) std::fprintf(stderr, "(%zu log lines dropped: stderr was not read)\n", dropped);
            for (const std::string& s : out) std::fprintf(stderr, "%s\n", s.c_str());
            lock.lock();
        }
    }
    std::mutex mutex_;
    std::condition_variable more_;
    std::deque<std::string> lines_;
    size_t dropped_ = 0;
    bool stop_ = false;
    std::thread thread_;
};

namespace {

// Seconds a client is asked to wait after a 503 (loading, busy, queue full, shutting down).
constexpr const char* kRetryAfter = "1";
// How often a waiting handler looks at its client (gone: the job is cancelled).
constexpr double kPollSeconds = 0.25;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply(HttpResponse& res, int status, const json& body) {
    if (status == 503) res.header("Retry-After", kRetryAfter);
    res.send(status, "application/json", dump(body));
}

void reply_error(HttpResponse& res, const ApiError& e) { reply(res, e.status, error_json(e)); }

ApiError unavailable(const std::string& message, const std::string& code) {
    return ApiError(503, "server_error", message, "", code);
}

// The error a job that did not finish ends with: cancelled by the shutdown (503), or failed (500).
ApiError ended(const JobOutput& out) {
    if (out.finish == Finish::cancelled)
        return unavailable(out.error.empty() ? "cancelled" : out.error, "shutting_down");
    return ApiError(500, "server_error", out.error.empty() ? "generation failed" : out.error);
}

// What the HTTP layer refuses itself, in OpenAI's error shape.
ApiError refusal(int status, const std::string& message) {
    switch (status) {
        case 404:
        case 405:
            return ApiError(status, "not_found_error", message, "", "not_found");
        case 408:
            return ApiError(status, "invalid_request_error", message, "", "timeout");
        case 413:
            return ApiError(status, "invalid_request_error", message + " (--max-body)", "", "request_too_large");
        case 500:
            return ApiError(status, "server_error", message);
        case 503:
            return unavailable(message, "server_busy");
        default:
            return ApiError(status, "invalid_request_error", message);
    }
}

// One line per completion: what it asked, what it got, where the time went.
void job_line(RequestLog& log, const std::string& id, int status, bool stream, const JobOutput& out,
              const std::string& note) {
    char buf[512];
    const double tps = out.generate_s > 0 ? double(out.completion_tokens) / out.generate_s : 0.0;
    std::snprintf(buf, sizeof buf,
                  "%s %d%s: slot %d, prompt %lld tokens (%lld cached), %lld generated, finish %s%s; queued %.3f s, "
                  "prompt %.3f s, generation %.3f s (%.1f tokens/s)",
                  id.c_str(), status, stream ? " stream" : "", out.slot, (long long)out.prompt_tokens,
                  (long long)out.cached_tokens, (long long)out.completion_tokens, finish_name(out.finish), note.c_str(),
                  out.queued_s, out.prompt_s, out.generate_s, tps);
    log.line(buf);
}

// Whether `header` is "Bearer KEY" (the scheme in any case) with `key`; as long whatever the first wrong byte.
bool bearer_matches(const std::string* header, const std::string& key) {
    const std::string_view h = header ? std::string_view(*header) : std::string_view();
    const std::string_view scheme = "bearer ";
    bool ok = h.size() >= scheme.size();
    for (size_t i = 0; ok && i < scheme.size(); ++i) ok = char(std::tolower(uint8_t(h[i]))) == scheme[i];
    std::string_view got = ok ? h.substr(scheme.size()) : std::string_view();
    while (!got.empty() && got.front() == ' ') got.remove_prefix(1);
    unsigned diff = !ok || got.size() != key.size();
    for (size_t i = 0; i < key.size(); ++i)
        diff |= unsigned(uint8_t(i < got.size() ? got[i] : ~key[i]) ^ uint8_t(key[i]));
    return diff == 0;
}

}  // namespace

struct HttpServer::Impl {
    HttpOptions o;
    std::unique_ptr<RequestLog> log = std::make_unique<RequestLog>();
    std::unique_ptr<HttpListener> http;
    std::atomic<Engine*> engine{nullptr};
    ApiModel model;
    std::atomic<bool> draining{false};
    std::atomic<uint64_t> next_id{1};
    Metrics metrics;
    std::set<std::string> paths;  // the routes' paths: /metrics counts requests by these ("other" for the rest)
    std::atomic<double> load_seconds{0};

    void routes();
    // The request's log line, and its count in /metrics.
    void log_request(const HttpRequest& req, int status, const std::string& note);
    // A completion's counts in /metrics, before its last bytes go out (a client that has its answer finds it
    // counted); `t0`: when the request was taken up. Then its log line.
    void count_job(const HttpRequest& req, int status, const JobOutput& out, double t0);
    void log_job(const std::string& id, int status, bool stream, const JobOutput& out, const std::string& note);
    // Adds a route; /v1/ routes ask for the API key. A handler `on_thread` may wait (it logs its own line); one
    // `on_loop` answers at once, and its line is logged here.
    void add(const std::string& method, const std::string& path, HttpListener::Handler h,
             HttpListener::Runs runs = HttpListener::on_loop);
    void health(HttpResponse& res);
    void ready(HttpResponse& res);
    void scrape(HttpResponse& res);
    void models(HttpResponse& res);
    void complete(const HttpRequest& req, HttpResponse& res, bool chat);
    void stream(const HttpRequest& req, const ApiRequest& r, const std::shared_ptr<Job>& job, const std::string& id,
                int64_t created, double t0, HttpResponse& res);
};

HttpServer::HttpServer(const HttpOptions& o) : impl_(std::make_unique<Impl>()) {
    impl_->o = o;
    impl_->routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::Impl::log_request(const HttpRequest& req, int status, const std::string& note) {
    log->line((req.method.empty() ? "-" : req.method) + " " + (req.path.empty() ? "-" : req.path) + " " +
              std::to_string(status) + (note.empty() ? "" : ": " + note));
    metrics.request(paths.count(req.path) ? req.path : "other", status);
}

void HttpServer::Impl::count_job(const HttpRequest& req, int status, const JobOutput& out, double t0) {
    metrics.request(req.path, status);
    metrics.completion(out, now_seconds() - t0);
}

void HttpServer::Impl::log_job(const std::string& id, int status, bool stream, const JobOutput& out,
                               const std::string& note) {
    job_line(*log, id, status, stream, out, note);
}

void HttpServer::Impl::add(const std::string& method, const std::string& path, HttpListener::Handler h,
                           HttpListener::Runs runs) {
    paths.insert(path);
    // the API and its figures ask for the key; the page, /health and /ready do not
    const bool keyed = path.rfind("/v1/", 0) == 0 || path == "/metrics";
    http->route(
        method, path,
        [this, h = std::move(h), keyed, runs](const HttpRequest& req, HttpResponse& res) {
            if (keyed && !o.api_key.empty() && !bearer_matches(req.header("authorization"), o.api_key)) {
                reply_error(
                    res, ApiError(401, "authentication_error",
                                  req.header("authorization") ? "wrong API key"
                                                              : "no API key: send the header Authorization: Bearer KEY",
                                  "", "invalid_api_key"));
                return log_request(req, 401, "");
            }
            h(req, res);
            if (runs == HttpListener::on_loop) log_request(req, res.status(), "");
        },
        runs);
}

void HttpServer::Impl::routes() {
    HttpListenerOptions lo;
    lo.host = o.host;
    lo.port = o.port;
    lo.limits.max_body = o.max_body;
    lo.max_connections = o.max_connections;
    lo.max_handlers = o.max_completions;
    lo.timeout = o.timeout;
    http = std::make_unique<HttpListener>(
        lo, [this](const HttpRequest& req, int status, const std::string& message, HttpResponse& res) {
            reply_error(res, refusal(status, message));
            log_request(req, status, status == 404 || status == 405 ? "" : message);
        });
    const auto chat = [this](const HttpRequest& req, HttpResponse& res) { complete(req, res, true); };
    const auto text = [this](const HttpRequest& req, HttpResponse& res) { complete(req, res, false); };
    if (o.webui)
        for (const WebFile& f : web_files())
            add("GET", f.name == "index.html" ? "/" : "/" + std::string(f.name),
                [&f](const HttpRequest&, HttpResponse& res) {
                    res.header("Cache-Control", "no-cache");
                    res.header("X-Content-Type-Options", "nosniff");
                    // the page's own files only: no inline script, nothing from elsewhere
                    res.header("Content-Security-Policy",
                               "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'");
                    res.header("Referrer-Policy", "no-referrer");
                    res.send(200, f.content_type, f.body);
                });
    add("GET", "/health", [this](const HttpRequest&, HttpResponse& res) { health(res); });
    add("GET", "/ready", [this](const HttpRequest&, HttpResponse& res) { ready(res); });
    add("GET", "/metrics", [this](const HttpRequest&, HttpResponse& res) { scrape(res); });
    add("GET", "/v1/models", [this](const HttpRequest&, HttpResponse& res) { models(res); });
    add("POST", "/v1/chat/completions", chat, HttpListener::on_thread);
    add("POST", "/v1/completions", text, HttpListener::on_thread);
}

void HttpServer::Impl::health(HttpResponse& res) {
    if (draining.load())
        reply(res, 503, {{"status", "shutting down"}});
    else if (!engine.load())
        reply(res, 503, {{"status", "loading"}});
    else
        reply(res, 200, {{"status", "ok"}});
}

void HttpServer::Impl::ready(HttpResponse& res) {
    Engine* e = engine.load();
    if (draining.load()) return reply(res, 503, {{"status", "shutting down"}});
    if (!e) return reply(res, 503, {{"status", "loading"}});
    const EngineStats s = e->stats();
    const int free = s.slots - s.busy - s.queued;
    if (free <= 0) return reply(res, 503, {{"status", "busy"}, {"slots_free", 0}});
    reply(res, 200, {{"status", "ready"}, {"slots_free", free}});
}

void HttpServer::Impl::scrape(HttpResponse& res) {
    MetricsState st;
    st.version = o.version;
    st.in_flight = http->busy();
    EngineStats s;
    if (Engine* e = engine.load()) {
        s = e->stats();
        st.engine = &s;
        st.load_seconds = load_seconds.load();
    }
    res.send(200, "text/plain; version=0.0.4; charset=utf-8", metrics.render(st));
}

void HttpServer::Impl::models(HttpResponse& res) {
    if (!engine.load()) return reply_error(res, unavailable("the model is loading; retry in a moment", "loading"));
    reply(res, 200,
          {{"object", "list"},
           {"data", json::array({{{"id", model.id},
                                  {"object", "model"},
                                  {"created", int64_t(std::time(nullptr))},
                                  {"owned_by", "plainllama"}}})}});
}

void HttpServer::Impl::complete(const HttpRequest& req, HttpResponse& res, bool chat) {
    const double t0 = now_seconds();
    auto refuse = [&](const ApiError& err) {
        log_request(req, err.status, err.what());  // counted before the client has the answer
        reply_error(res, err);
    };
    Engine* e = engine.load();
    if (!e) return refuse(unavailable("the model is loading; retry in a moment", "loading"));
    if (draining.load()) return refuse(unavailable("the server is shutting down", "shutting_down"));
    ApiRequest r;
    try {
        r = parse_request(req.body, chat, model);
    } catch (const ApiError& err) {
        return refuse(err);
    } catch (const Error& err) {  // a tokenizer or template error
        return refuse(bad_request(err.what()));
    }
    auto job = std::make_shared<Job>(r.job);
    if (!e->submit(job))
        return refuse(draining.load()
                          ? unavailable("the server is shutting down", "shutting_down")
                          : unavailable("the server is busy (its queue is full); retry later", "queue_full"));
    const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id.fetch_add(1));
    const int64_t created = int64_t(std::time(nullptr));
    res.header("X-Request-Id", id);
    if (r.stream) return stream(req, r, job, id, created, t0, res);

    JobOutput out;
    bool gone = false;
    do {
        out = job->wait_end(kPollSeconds);
        if (!gone && res.client_gone()) job->cancel = gone = true;  // the engine ends it at its next turn
    } while (out.finish == Finish::none);
    const std::string note = gone ? " (client gone)" : "";
    if (out.finish == Finish::cancelled || out.finish == Finish::error) {
        const ApiError err = ended(out);
        count_job(req, err.status, out, t0);
        reply_error(res, err);
        return log_job(id, err.status, false, out, note);
    }
    count_job(req, 200, out, t0);
    reply(res, 200, completion_json(r, out, id, created, model));
    log_job(id, 200, false, out, note);
}

// Server-Sent Events: "data: {chunk}\n\n" per piece of text, the finish (or an error event), the usage chunk when
// asked, "data: [DONE]\n\n". A client gone cancels the job.
void HttpServer::Impl::stream(const HttpRequest& req, const ApiRequest& r, const std::shared_ptr<Job>& job,
                              const std::string& id, int64_t created, double t0, HttpResponse& res) {
    auto event = [&](const std::string& data) { return res.write("data: " + data + "\n\n"); };
    res.header("Cache-Control", "no-cache");
    res.header("X-Accel-Buffering", "no");  // a proxy (nginx) passes each event on as it comes
    res.start(200, "text/event-stream");
    bool ok = !r.chat || event(dump(chunk_json(r, id, created, model, "", true, Finish::none)));
    size_t sent = 0;
    JobOutput out;
    while (ok) {
        out = job->wait(sent, kPollSeconds);  // out.text: the bytes after the `sent` ones
        if (res.client_gone()) {
            ok = false;
            break;
        }
        if (!out.text.empty()) {
            ok = event(dump(chunk_json(r, id, created, model, out.text, false, Finish::none)));
            sent += out.text.size();
        }
        if (out.finish != Finish::none) break;
    }
    if (!ok) {  // the client went away: the job ends with the response
        job->cancel = true;
        do out = job->wait_end(kPollSeconds);
        while (out.finish == Finish::none);
        count_job(req, 200, out, t0);
        return log_job(id, 200, true, out, " (client gone)");
    }
    count_job(req, 200, out, t0);
    if (out.finish == Finish::cancelled || out.finish == Finish::error) {
        ok = event(dump(error_json(ended(out))));
    } else {
        ok = event(dump(chunk_json(r, id, created, model, "", false, out.finish)));
        if (ok && r.include_usage) ok = event(dump(usage_chunk_json(r, id, created, model, out)));
    }
    if (ok) ok = event("[DONE]");
    res.end();
    log_job(id, 200, true, out, ok ? "" : " (client gone)");
}

int HttpServer::start() { return impl_->http->start(); }

int HttpServer::in_flight() const { return impl_->http->busy(); }

void HttpServer::set_ready(Engine* engine, const ApiModel& model, double load_seconds) {
    impl_->model = model;
    impl_->load_seconds = load_seconds;
    impl_->engine.store(engine);
}

void HttpServer::set_draining() {
    impl_->draining = true;
    impl_->http->drain();
}

void HttpServer::stop() {
    impl_->http->stop();
    impl_->log.reset();  // its last lines written
}

}  // namespace plainllama
