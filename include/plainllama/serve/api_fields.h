// Reading an OpenAI request body field by field: each helper takes the value when present and not null, checks its
// type and range, and throws ApiError (400) naming the field. The body is parsed keeping key order
// (ordered_json), so a JSON Schema's properties keep the order written.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "plainllama/serve/openai.h"

namespace plainllama::api {

using In = nlohmann::ordered_json;

const char* type_name(const In& v);  // "null", "a boolean", "a string", ...
ApiError wrong_type(const std::string& field, const char* want, const In& v);
// The field's value when present and not null.
const In* field(const In& body, const char* name);
// A number in [lo, hi], `fallback` when absent.
double number(const In& body, const char* name, double lo, double hi, double fallback);
// An integer in [lo, hi] (a float with no fraction is one), `fallback` when absent.
int64_t integer(const In& body, const char* name, int64_t lo, int64_t hi, int64_t fallback);
// A boolean, false when absent.
bool boolean(const In& body, const char* name);
// A string of valid UTF-8 (`name` in the message).
std::string text_of(const In& v, const std::string& name);

// The fields beyond the prompt and the basic sampling ones: n, frequency_penalty, presence_penalty, logit_bias,
// logprobs, top_logprobs, echo, response_format, grammar, tools. Fills r (n, echo) and r.job.
void parse_output_fields(const In& body, ApiRequest& r, const ApiModel& m);

}  // namespace plainllama::api
