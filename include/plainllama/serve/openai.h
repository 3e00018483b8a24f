// The OpenAI API's JSON (chat completions, completions): a request body checked field by field and turned into an
// engine job, and the replies built from a job's output, whole or as stream chunks. Knows nothing of sockets.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "plainllama/run/chat_template.h"
#include "plainllama/serve/engine.h"
#include "plainllama/tokenizer/tokenizer.h"

namespace plainllama {

// A request the API refuses: HTTP status, OpenAI's error type and code, the offending field (or empty).
struct ApiError : std::runtime_error {
    ApiError(int status, std::string type, const std::string& message, std::string param = {}, std::string code = {})
        : std::runtime_error(message),
          status(status),
          type(std::move(type)),
          param(std::move(param)),
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
    SamplerParams defaults;   // for the sampling fields a request leaves out
    bool random_seed = true;  // a request without "seed" gets a random one (else defaults.seed)
    int64_t n_ctx = 0;        // positions per slot
    int slots = 1;            // the engine's: the most choices (n) a request may ask for
    int64_t n_vocab = 0;      // the model's logits: token ids below it (logit_bias)
};

struct ApiRequest {
    bool chat = true;  // /v1/chat/completions; false: /v1/completions
    bool stream = false, include_usage = false;
    int n = 1;              // choices: one job each, seeds seed, seed + 1, ...
    bool echo = false;      // completions: the prompt's text before the reply
    std::string echo_text;  // the prompt's text when echo
    JobParams job;
};

// Parses and checks a body: malformed JSON, a field of the wrong type or out of range, n over the slots, a schema
// or grammar we cannot honour, a prompt the context cannot hold: ApiError (400) naming the field.
ApiRequest parse_request(const std::string& body, bool chat, const ApiModel& m);

// The whole reply of finished jobs, one choice each.
nlohmann::json completion_json(const ApiRequest& r, const std::vector<JobOutput>& outs, const std::string& id,
                               int64_t created, const ApiModel& m);
// A stream chunk of choice `index`: `text` as the delta (chat: the first carries the role) with the log-probabilities
// of its tokens `lps` (when asked; completions with echo: `prompt` too), or the finish reason when `finish`.
nlohmann::json chunk_json(const ApiRequest& r, const std::string& id, int64_t created, const ApiModel& m,
                          const std::string& text, bool first, Finish finish, int index = 0,
                          const std::vector<TokenLogprob>& lps = {}, const JobOutput* prompt = nullptr);
// The last chunk when include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const ApiRequest& r, const std::string& id, int64_t created, const ApiModel& m,
                                const std::vector<JobOutput>& outs);
// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}: the prompt
// counted once, the completions of every choice.
nlohmann::json usage_json(const std::vector<JobOutput>& outs);

// Log-probabilities in OpenAI's shapes. Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}],
// "refusal": null}. Completions (legacy): {"tokens", "token_logprobs", "top_logprobs", "text_offset"}, with the
// prompt's tokens first when `prompt` (its first token has null log-probabilities); offsets count bytes of the text
// from `offset`.
nlohmann::json chat_logprobs_json(const std::vector<TokenLogprob>& lps, const Tokenizer& tok);
nlohmann::json legacy_logprobs_json(const std::vector<int32_t>* prompt, const std::vector<TokenLogprob>& prompt_lps,
                                    const std::vector<TokenLogprob>& lps, const Tokenizer& tok, size_t offset);

}  // namespace plainllama
