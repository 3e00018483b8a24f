// The OpenAI API's JSON (chat completions, completions): a request body checked field by field and turned into an
// engine job, and the replies built from a job's output, whole or as stream chunks. Knows nothing of sockets.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "plainllama/tokenizer/tokenizer.h"
#include "plainllama/run/chat_template.h"
#include "plainllama/serve/engine.h"

namespace plainllama {

// A request the API refuses: HTTP status, OpenAI's error type and code, the offending field (or empty).
struct ApiError : std::runtime_error {
    ApiError(int status, std::string type, const std::string& message, std::string param = {}, std::string code = {})
        : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)),
          code(std::move(code)) {}
    int status;
    std::string type, param, code;
};
// 400 invalid_request_error naming `param`.
ApiError bad_request(const std::string& message, const std::string& param = {}, const std::string& code = {});
// {"error": {"message", "type", "param", "code"}} (null where empty).
nlohmann::json error_json(const ApiError& e);

// What the requests are checked and rendered against.
struct ApiModel {
    std::string id;  // the model's name in replies and /v1/models
    const Tokenizer* tok = nullptr;
    const ChatTemplate* tmpl = nullptr;
    SamplerParams defaults;  // for the sampling fields a request leaves out
    bool random_seed = true; // a request without "seed" gets a random one (else defaults.seed)
    int64_t n_ctx = 0;       // positions per slot
};

struct ApiRequest {
    bool chat = true;  // /v1/chat/completions; false: /v1/completions
    bool stream = false, include_usage = false;
    JobParams job;
};

// Parses and checks a body: malformed JSON, a field of the wrong type or out of range, n > 1, unsupported
// penalties, a prompt the context cannot hold: ApiError (400).
ApiRequest parse_request(const std::string& body, bool chat, const ApiModel& m);

// The whole reply of a finished job.
nlohmann::json completion_json(const ApiRequest& r, const JobOutput& out, const std::string& id, int64_t created,
                               const ApiModel& m);
// A stream chunk: `text` as the delta (chat: the first carries the role), or the finish reason when `finish`.
nlohmann::json chunk_json(const ApiRequest& r, const std::string& id, int64_t created, const ApiModel& m,
                          const std::string& text, bool first, Finish finish);
// The last chunk when include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const ApiRequest& r, const std::string& id, int64_t created, const ApiModel& m,
                                const JobOutput& out);
// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}
nlohmann::json usage_json(const JobOutput& out);

}  // namespace plainllama
