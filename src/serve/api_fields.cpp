#include "plainllama/serve/api_fields.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "plainllama/io/utf8.h"
#include "plainllama/run/json_schema.h"
#include "plainllama/sys/error.h"

namespace plainllama::api {

const char* type_name(const In& v) {
    switch (v.type()) {
        case In::value_t::null:
            return "null";
        case In::value_t::boolean:
            return "a boolean";
        case In::value_t::string:
            return "a string";
        case In::value_t::array:
            return "an array";
        case In::value_t::object:
            return "an object";
        default:
            return "a number";
    }
}

ApiError wrong_type(const std::string& field, const char* want, const In& v) {
    return bad_request("'" + field + "' must be " + want + ", not " + type_name(v), field);
}

// The field's value when present and not null.
const In* field(const In& body, const char* name) {
    const auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const In& body, const char* name, double lo, double hi, double fallback) {
    const In* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_number()) throw wrong_type(name, "a number", *v);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
        throw bad_request("'" + std::string(name) + "' must be between " + In(lo).dump() + " and " + In(hi).dump() +
                              ", not " + v->dump(),
                          name);
    return x;
}

int64_t integer(const In& body, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
    const In* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_number_integer() && !(v->is_number_float() && v->get<double>() == std::floor(v->get<double>())))
        throw bad_request("'" + std::string(name) + "' must be an integer, not " + v->dump(), name);
    // a float is compared below 2^63 (double(INT64_MAX) rounds up to 2^63, which int64_t cannot hold)
    if (v->is_number_float()
            ? (v->get<double>() < std::max(double(lo), -0x1p63) || v->get<double>() >= std::min(double(hi) + 1, 0x1p63))
        : v->is_number_unsigned() ? (v->get<uint64_t>() > uint64_t(hi) || (lo > 0 && v->get<uint64_t>() < uint64_t(lo)))
                                  : (v->get<int64_t>() < lo || v->get<int64_t>() > hi))
        throw bad_request("'" + std::string(name) + "' must be between " + std::to_string(lo) + " and " +
                              std::to_string(hi) + ", not " + v->dump(),
                          name);
    return v->is_number_float() ? int64_t(v->get<double>()) : v->get<int64_t>();
}

bool boolean(const In& body, const char* name) {
    const In* v = field(body, name);
    if (!v) return false;
    if (!v->is_boolean()) throw wrong_type(name, "a boolean", *v);
    return v->get<bool>();
}

std::string text_of(const In& v, const std::string& name) {
    if (!v.is_string()) throw wrong_type(name, "a string", v);
    const std::string s = v.get<std::string>();
    if (invalid_utf8_at(s) != std::string::npos) throw bad_request("'" + name + "' is not valid UTF-8", name);
    return s;
}

namespace {

// response_format: text (nothing), json_object (any JSON object), json_schema (the schema compiled to a grammar).
std::shared_ptr<const Grammar> response_format(const In& rf) {
    if (!rf.is_object()) throw wrong_type("response_format", "an object", rf);
    const In* type = field(rf, "type");
    if (!type)
        throw bad_request("'response_format.type' is required (text, json_object or json_schema)",
                          "response_format.type");
    if (!type->is_string()) throw wrong_type("response_format.type", "a string", *type);
    const std::string t = type->get<std::string>();
    if (t == "text") return nullptr;
    if (t == "json_object") return std::make_shared<const Grammar>(parse_gbnf(json_object_gbnf()));
    if (t != "json_schema")
        throw bad_request("'response_format.type' is \"" + t + "\": text, json_object and json_schema are supported",
                          "response_format.type");
    const In* js = field(rf, "json_schema");
    if (!js)
        throw bad_request("'response_format.json_schema' is required with type json_schema",
                          "response_format.json_schema");
    if (!js->is_object()) throw wrong_type("response_format.json_schema", "an object", *js);
    if (const In* name = field(*js, "name"); name && !name->is_string())
        throw wrong_type("response_format.json_schema.name", "a string", *name);
    if (const In* d = field(*js, "description"); d && !d->is_string())
        throw wrong_type("response_format.json_schema.description", "a string", *d);
    if (const In* strict = field(*js, "strict"); strict && !strict->is_boolean())  // the reply always follows it
        throw wrong_type("response_format.json_schema.strict", "a boolean", *strict);
    const In* schema = field(*js, "schema");
    const std::string where = "response_format.json_schema.schema";
    if (!schema) throw bad_request("'" + where + "' is required", where);
    if (!schema->is_object() && !schema->is_boolean()) throw wrong_type(where, "an object", *schema);
    try {
        return json_schema_value_grammar(*schema);
    } catch (const Error& e) {
        throw bad_request("'" + where + "': " + e.what(), where);
    }
}

// logit_bias: {"token id": bias}, ids below the vocabulary's size, biases in [-100, 100].
std::vector<std::pair<int32_t, float>> logit_bias(const In& lb, int64_t n_vocab) {
    if (!lb.is_object()) throw wrong_type("logit_bias", "an object of token ids to biases", lb);
    std::vector<std::pair<int32_t, float>> out;
    for (const auto& [key, value] : lb.items()) {
        char* end = nullptr;
        const long long id = key.empty() ? -1 : std::strtoll(key.c_str(), &end, 10);
        if (key.empty() || *end || id < 0 || id >= n_vocab || !std::isdigit(uint8_t(key[0])))
            throw bad_request(
                "'logit_bias': the key \"" + key + "\" is not a token id (0 to " + std::to_string(n_vocab - 1) + ")",
                "logit_bias");
        if (!value.is_number()) throw wrong_type("logit_bias." + key, "a number", value);
        const double b = value.get<double>();
        if (!(b >= -100 && b <= 100))
            throw bad_request(
                "'logit_bias': the bias of token " + key + " must be between -100 and 100, not " + value.dump(),
                "logit_bias");
        out.emplace_back(int32_t(id), float(b));
    }
    return out;
}

}  // namespace

void parse_output_fields(const In& body, ApiRequest& r, const ApiModel& m) {
    JobParams& j = r.job;
    r.n = int(integer(body, "n", 1, 128, 1));
    if (r.n > m.slots)
        throw bad_request("'n' is " + std::to_string(r.n) + " but the server runs " + std::to_string(m.slots) +
                              " slot" + (m.slots == 1 ? "" : "s") +
                              " (each choice takes one): ask for fewer, or start it with a larger --parallel",
                          "n");
    if (!r.chat) {
        if (integer(body, "best_of", 1, 128, r.n) != r.n)
            throw bad_request("'best_of' is not supported (only equal to n)", "best_of");
        if (const In* v = field(body, "suffix"); v && !(v->is_string() && v->get<std::string>().empty()))
            throw bad_request("'suffix' is not supported (insertion)", "suffix");
    }
    j.frequency_penalty = float(number(body, "frequency_penalty", -2, 2, 0));
    j.presence_penalty = float(number(body, "presence_penalty", -2, 2, 0));
    if (const In* lb = field(body, "logit_bias")) j.logit_bias = logit_bias(*lb, m.n_vocab);

    if (r.chat) {
        const bool lp = boolean(body, "logprobs");
        const int64_t top = integer(body, "top_logprobs", 0, 20, -1);
        if (top >= 0 && !lp) throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
        j.top_logprobs = lp ? int(std::max<int64_t>(top, 0)) : -1;
    } else {
        if (const In* v = field(body, "logprobs"); v && v->is_boolean())
            throw wrong_type("logprobs", "an integer (0 to 20: how many most likely tokens to list)", *v);
        j.top_logprobs = int(integer(body, "logprobs", 0, 20, -1));
        r.echo = boolean(body, "echo");
        j.prompt_logprobs = r.echo && j.top_logprobs >= 0;
    }

    if (const In* v = field(body, "tools"); v && !(v->is_array() && v->empty()))
        throw bad_request("'tools' is not supported (no function calling): use response_format with a json_schema",
                          "tools");
    if (const In* rf = field(body, "response_format")) j.grammar = response_format(*rf);
    if (const In* g = field(body, "grammar")) {
        if (j.grammar) throw bad_request("'grammar' and a JSON 'response_format' are exclusive: give one", "grammar");
        const std::string text = text_of(*g, "grammar");
        try {
            j.grammar = std::make_shared<const Grammar>(parse_gbnf(text));
        } catch (const Error& e) {
            throw bad_request(std::string("'grammar': ") + e.what(), "grammar");
        }
    }
}

}  // namespace plainllama::api
