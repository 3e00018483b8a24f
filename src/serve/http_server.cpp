#include "plainllama/serve/http_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#include "plainllama/sys/error.h"

namespace plainllama {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(dump(body), "application/json");
}

void reply_error(httplib::Response& res, const ApiError& e) { reply(res, e.status, error_json(e)); }

ApiError unavailable(const std::string& message, const std::string& code) {
    return ApiError(503, "server_error", message, "", code);
}

// The error a job that did not finish ends with: cancelled by the shutdown (503), or failed (500).
ApiError ended(const JobOutput& out) {
    if (out.finish == Finish::cancelled)
        return unavailable(out.error.empty() ? "cancelled" : out.error, "shutting_down");
    return ApiError(500, "server_error", out.error.empty() ? "generation failed" : out.error);
}

// One line per completion on stderr: what it asked, what it got, where the time went.
void log_job(const std::string& id, int status, bool stream, const JobOutput& out, const std::string& note) {
    char buf[512];
    const double tps = out.generate_s > 0 ? double(out.completion_tokens) / out.generate_s : 0.0;
    std::snprintf(buf, sizeof buf,
                  "%s %d%s: slot %d, prompt %lld tokens (%lld cached), %lld generated, finish %s%s; queued %.3f s, "
                  "prompt %.3f s, generation %.3f s (%.1f tokens/s)",
                  id.c_str(), status, stream ? " stream" : "", out.slot, (long long)out.prompt_tokens,
                  (long long)out.cached_tokens, (long long)out.completion_tokens, finish_name(out.finish), note.c_str(),
                  out.queued_s, out.prompt_s, out.generate_s, tps);
    std::fprintf(stderr, "%s\n", buf);
}

// A streaming reply's state, shared by the content provider calls and the releaser.
struct Stream {
    std::shared_ptr<Job> job;
    ApiRequest req;
    ApiModel model;
    std::string id;
    int64_t created = 0;
    size_t sent = 0;
    bool started = false, logged = false, gone = false;
};

}  // namespace

struct HttpServer::Impl {
    HttpOptions o;
    httplib::Server svr;
    std::thread thread;
    std::atomic<Engine*> engine{nullptr};
    ApiModel model;
    std::atomic<bool> draining{false};
    std::atomic<uint64_t> next_id{1};
    std::atomic<int> in_flight{0};  // completions submitted whose response is not yet written
    std::atomic<bool> listen_ended{false};

    void routes();
    void complete(const httplib::Request& req, httplib::Response& res, bool chat);
    bool stream_more(Stream& st, httplib::DataSink& sink);
};

HttpServer::HttpServer(const HttpOptions& o) : impl_(std::make_unique<Impl>()) {
    impl_->o = o;
    impl_->routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::Impl::routes() {
    const int threads = o.threads;
    svr.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
    svr.set_payload_max_length(o.max_body);
    svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (o.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
        const std::string auth = req.get_header_value("Authorization");
        const std::string want = "Bearer " + o.api_key;
        // the same time whatever the first wrong byte
        unsigned diff = auth.size() != want.size();
        for (size_t i = 0; i < want.size(); ++i) diff |= unsigned(i < auth.size() ? auth[i] ^ want[i] : 1);
        if (diff == 0) return httplib::Server::HandlerResponse::Unhandled;
        reply_error(res, ApiError(401, "authentication_error",
                                  auth.empty() ? "no API key: send the header Authorization: Bearer KEY"
                                               : "wrong API key",
                                  "", "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
    });
    svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (draining.load())
            reply(res, 503, {{"status", "shutting down"}});
        else if (!engine.load())
            reply(res, 503, {{"status", "loading"}});
        else
            reply(res, 200, {{"status", "ok"}});
    });
    svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
        if (!engine.load()) return reply_error(res, unavailable("the model is loading", "loading"));
        reply(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", model.id},
                                      {"object", "model"},
                                      {"created", int64_t(std::time(nullptr))},
                                      {"owned_by", "plainllama"}}})}});
    });
    svr.Post("/v1/chat/completions",
             [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, true); });
    svr.Post("/v1/completions",
             [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, false); });
    svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        if (res.status == 413)
            reply_error(res, ApiError(413, "invalid_request_error", "the request body is larger than the server takes "
                                                                    "(--max-body)",
                                      "", "request_too_large"));
        else if (res.status == 404)
            reply_error(res, ApiError(404, "not_found_error", "no endpoint " + req.method + " " + req.path, "",
                                      "not_found"));
        else
            reply_error(res, ApiError(res.status, "invalid_request_error", "HTTP status " + std::to_string(res.status)));
    });
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        reply_error(res, ApiError(500, "server_error", what));
    });
    svr.set_logger([](const httplib::Request& req, const httplib::Response& res) {
        if (res.has_header("X-Request-Id")) return;  // a completion: logged with its figures when it ends
        std::fprintf(stderr, "%s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
    });
}

void HttpServer::Impl::complete(const httplib::Request& req, httplib::Response& res, bool chat) {
    Engine* e = engine.load();
    if (!e) return reply_error(res, unavailable("the model is loading; retry in a moment", "loading"));
    if (draining.load()) return reply_error(res, unavailable("the server is shutting down", "shutting_down"));
    ApiRequest r;
    try {
        r = parse_request(req.body, chat, model);
    } catch (const ApiError& err) {
        return reply_error(res, err);
    } catch (const Error& err) {  // a tokenizer or template error
        return reply_error(res, bad_request(err.what()));
    }
    auto job = std::make_shared<Job>(r.job);
    ++in_flight;  // before submit: a drain that sees 0 has nothing left to write
    if (!e->submit(job)) {
        --in_flight;
        return reply_error(res, draining.load()
                                    ? unavailable("the server is shutting down", "shutting_down")
                                    : unavailable("the server is busy (its queue is full); retry later", "queue_full"));
    }
    const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id.fetch_add(1));
    const int64_t created = int64_t(std::time(nullptr));
    res.set_header("X-Request-Id", id);

    if (!r.stream) {
        JobOutput out;
        do out = job->wait_end(1.0);
        while (out.finish == Finish::none);
        --in_flight;
        if (out.finish == Finish::cancelled || out.finish == Finish::error) {
            const ApiError err = ended(out);
            reply_error(res, err);
            return log_job(id, err.status, false, out, "");
        }
        reply(res, 200, completion_json(r, out, id, created, model));
        return log_job(id, 200, false, out, "");
    }

    auto st = std::make_shared<Stream>();
    st->job = job;
    st->req = r;
    st->model = model;
    st->id = id;
    st->created = created;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [this, st](size_t, httplib::DataSink& sink) { return stream_more(*st, sink); },
        [this, st](bool) {
            // the client went away: the job ends with the response
            if (!st->logged) {
                st->job->cancel = true;
                log_job(st->id, 200, true, st->job->wait_end(0), " (client gone)");
            }
            --in_flight;
        });
}

// Writes what the job produced since the last call; false ends the response (the client is gone).
bool HttpServer::Impl::stream_more(Stream& st, httplib::DataSink& sink) {
    auto event = [&](const std::string& data) {
        const std::string s = "data: " + data + "\n\n";
        return sink.write(s.data(), s.size());
    };
    const ApiRequest& r = st.req;
    if (!st.started) {
        st.started = true;
        if (r.chat && !event(dump(chunk_json(r, st.id, st.created, st.model, "", true, Finish::none)))) return false;
    }
    const JobOutput out = st.job->wait(st.sent, 0.25);  // out.text: the bytes after the `sent` ones
    if (!sink.is_writable()) return false;
    if (!out.text.empty()) {
        if (!event(dump(chunk_json(r, st.id, st.created, st.model, out.text, false, Finish::none)))) return false;
        st.sent += out.text.size();
    }
    if (out.finish == Finish::none) return true;
    if (out.finish == Finish::cancelled || out.finish == Finish::error) {
        if (!event(dump(error_json(ended(out))))) return false;
    } else {
        if (!event(dump(chunk_json(r, st.id, st.created, st.model, "", false, out.finish)))) return false;
        if (r.include_usage && !event(dump(usage_chunk_json(r, st.id, st.created, st.model, out)))) return false;
    }
    if (!event("[DONE]")) return false;
    sink.done();
    st.logged = true;
    log_job(st.id, 200, true, out, "");
    return true;
}

int HttpServer::start() {
    Impl& m = *impl_;
    int port = m.o.port;
    if (port == 0)
        port = m.svr.bind_to_any_port(m.o.host);
    else if (!m.svr.bind_to_port(m.o.host, port))
        port = -1;
    if (port < 0)
        throw Error("cannot listen on " + m.o.host + ":" + std::to_string(m.o.port) +
                    " (in use, or not an address of this machine)");
    m.thread = std::thread([&m] {
        m.svr.listen_after_bind();
        m.listen_ended = true;
    });
    // stop() does nothing to a server not yet running: wait for it, so that stop() always ends the thread
    while (!m.svr.is_running() && !m.listen_ended) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return port;
}

int HttpServer::in_flight() const { return impl_->in_flight.load(); }

void HttpServer::set_ready(Engine* engine, const ApiModel& model) {
    impl_->model = model;
    impl_->engine.store(engine);
}

void HttpServer::set_draining() { impl_->draining = true; }

void HttpServer::stop() {
    if (!impl_->thread.joinable()) return;
    impl_->svr.stop();
    impl_->thread.join();
}

}  // namespace plainllama
