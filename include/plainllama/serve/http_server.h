// The HTTP side of `plainllama serve` (cpp-httplib): routes, the API key, body limits, Server-Sent Events, one log
// line per request on stderr. It listens before the model is loaded (GET /health answers 503 "loading" until
// set_ready), then hands each completion to the Engine as a Job and streams or returns its output.
//   GET  /health                 {"status": "ok"}; 503 while loading or shutting down
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
    int port = 8080;           // 0: any free port
    std::string api_key;       // empty: none asked
    size_t max_body = 8 << 20; // bytes; a larger request body gets 413
    int threads = 16;          // connections served at once (a streaming reply holds one)
};

class HttpServer {
public:
    explicit HttpServer(const HttpOptions& o);
    ~HttpServer();
    // Binds the socket and starts serving (503 until set_ready); returns the port. Error when the address cannot
    // be bound.
    int start();
    // From now on completions go to `engine` (which outlives the server or stop()).
    void set_ready(Engine* engine, const ApiModel& model);
    // /health answers 503 "shutting down", new completions 503; those running go on.
    void set_draining();
    // Completions accepted whose response is not yet fully written.
    int in_flight() const;
    // Closes the listening socket and waits for the connections in progress to end.
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace plainllama
