// The routes of `plainllama serve` over the HTTP layer (http_listener.h): the API key, the OpenAI error shape,
// Server-Sent Events, one log line per request on stderr. It listens before the model is loaded (GET /health
// answers 503 "loading" until set_ready), then hands each completion to the Engine as a Job and streams or returns
// its output. Every 503 carries Retry-After.
//   GET  /                       the chat page (and its files, /app.js, /style.css), unless HttpOptions::webui is off
//   GET  /health                 {"status": "ok"}; 503 while loading or shutting down
//   GET  /ready                  {"status": "ready"} when a slot is free; 503 otherwise
//   GET  /metrics                Prometheus' text format (metrics.h); asks for the API key
//   GET  /v1/models              the one model
//   POST /v1/chat/completions    messages rendered with the model's chat template
//   POST /v1/completions         a prompt continued
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "plainllama/serve/engine.h"
#include "plainllama/serve/openai.h"

namespace plainllama {

struct HttpOptions {
    std::string host = "127.0.0.1";
    int port = 8080;            // 0: any free port
    std::string api_key;        // empty: none asked
    size_t max_body = 8 << 20;  // bytes; a larger request body gets 413
    int max_connections = 512;  // open at once; one more gets 503
    int max_completions = 16;   // completions answered at once (queued or generating); one more gets 503
    double timeout = 30;        // seconds for a request to arrive whole; idle and stalled connections close after it
    bool webui = true;          // GET / serves the chat page
    std::string version;        // for /metrics (plainllama_build_info)
};

class HttpServer {
   public:
    explicit HttpServer(const HttpOptions& o);
    ~HttpServer();
    // Binds the socket and starts serving (503 until set_ready); returns the port. Error when the address cannot
    // be bound (in use, or not this machine's).
    int start();
    // From now on completions go to `engine` (which outlives the server or stop()); the model took `load_seconds`
    // to load (/metrics).
    void set_ready(Engine* engine, const ApiModel& model, double load_seconds = 0);
    // /health answers 503 "shutting down", new completions 503; those running go on. Connections close after
    // their response.
    void set_draining();
    // Requests received whose response is not yet sent whole.
    int in_flight() const;
    // Closes the listening socket and every connection at once, and waits for the handlers to return.
    void stop();

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace plainllama
