#include "plainllama/serve/openai.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "plainllama/io/utf8.h"
#include "plainllama/sys/error.h"

namespace plainllama {

using nlohmann::json;

ApiError bad_request(const std::string& message, const std::string& param, const std::string& code) {
    return ApiError(400, "invalid_request_error", message, param, code);
}

json error_json(const ApiError& e) {
    auto opt = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
    return {{"error", {{"message", e.what()}, {"type", e.type}, {"param", opt(e.param)}, {"code", opt(e.code)}}}};
}

namespace {

const char* type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::string: return "a string";
        case json::value_t::array: return "an array";
        case json::value_t::object: return "an object";
        default: return "a number";
    }
}

ApiError wrong_type(const std::string& field, const char* want, const json& v) {
    return bad_request("'" + field + "' must be " + want + ", not " + type_name(v), field);
}

// The field's value when present and not null.
const json* field(const json& body, const char* name) {
    const auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& body, const char* name, double lo, double hi, double fallback) {
    const json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_number()) throw wrong_type(name, "a number", *v);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
        throw bad_request("'" + std::string(name) + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                              ", not " + v->dump(),
                          name);
    return x;
}

int64_t integer(const json& body, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
    const json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_number_integer() && !(v->is_number_float() && v->get<double>() == std::floor(v->get<double>())))
        throw bad_request("'" + std::string(name) + "' must be an integer, not " + v->dump(), name);
    // a float is compared below 2^63 (double(INT64_MAX) rounds up to 2^63, which int64_t cannot hold)
    if (v->is_number_float() ? (v->get<double>() < std::max(double(lo), -0x1p63) ||
                                v->get<double>() >= std::min(double(hi) + 1, 0x1p63))
                             : v->is_number_unsigned() ? v->get<uint64_t>() > uint64_t(hi)
                                                       : (v->get<int64_t>() < lo || v->get<int64_t>() > hi))
        throw bad_request("'" + std::string(name) + "' must be between " + std::to_string(lo) + " and " +
                              std::to_string(hi) + ", not " + v->dump(),
                          name);
    return v->is_number_float() ? int64_t(v->get<double>()) : v->get<int64_t>();
}

bool boolean(const json& body, const char* name) {
    const json* v = field(body, name);
    if (!v) return false;
    if (!v->is_boolean()) throw wrong_type(name, "a boolean", *v);
    return v->get<bool>();
}

std::string text_of(const json& v, const std::string& name) {
    if (!v.is_string()) throw wrong_type(name, "a string", v);
    const std::string s = v.get<std::string>();
    if (invalid_utf8_at(s) != std::string::npos) throw bad_request("'" + name + "' is not valid UTF-8", name);
    return s;
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts, joined.
std::string content_of(const json& m, const std::string& where) {
    const auto it = m.find("content");
    if (it == m.end() || it->is_null()) return "";
    if (it->is_string()) return text_of(*it, where + ".content");
    if (!it->is_array()) throw wrong_type(where + ".content", "a string or an array of text parts", *it);
    std::string s;
    for (size_t i = 0; i < it->size(); ++i) {
        const json& part = (*it)[i];
        const std::string w = where + ".content[" + std::to_string(i) + "]";
        if (!part.is_object()) throw wrong_type(w, "an object", part);
        const auto type = part.find("type");
        if (type == part.end() || !type->is_string() || *type != "text" || !part.contains("text"))
            throw bad_request(w + ": only {\"type\": \"text\", \"text\": ...} parts are supported", w);
        s += text_of(part["text"], w + ".text");
    }
    return s;
}

std::vector<int32_t> chat_prompt(const json& body, const ApiModel& m) {
    const json* msgs = field(body, "messages");
    if (!msgs) throw bad_request("'messages' is required", "messages");
    if (!msgs->is_array()) throw wrong_type("messages", "an array of messages", *msgs);
    if (msgs->empty()) throw bad_request("'messages' is empty", "messages");
    std::string system;
    std::vector<ChatMessage> conv;
    for (size_t i = 0; i < msgs->size(); ++i) {
        const json& msg = (*msgs)[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!msg.is_object()) throw wrong_type(where, "an object", msg);
        const json* role = field(msg, "role");
        if (!role) throw bad_request(where + ".role is required", where + ".role");
        if (!role->is_string()) throw wrong_type(where + ".role", "a string", *role);
        const std::string r = role->get<std::string>();
        const std::string content = content_of(msg, where);
        if (r == "system" || r == "developer") {
            if (!conv.empty())
                throw bad_request(where + ": a system message must come before the conversation", where + ".role");
            system += (system.empty() ? "" : "\n\n") + content;
        } else if (r == "user" || r == "assistant") {
            const Role want = conv.size() % 2 == 0 ? Role::user : Role::assistant;
            const Role got = r == "user" ? Role::user : Role::assistant;
            if (got != want)
                throw bad_request(where + ": role is \"" + r + "\", expected \"" + role_name(want) +
                                      "\" (after the system messages, roles alternate user, assistant, ...)",
                                  where + ".role");
            conv.push_back({got, content, false, {}});
        } else {
            throw bad_request(where + ": role \"" + r + "\" is not supported (system, developer, user, assistant)",
                              where + ".role");
        }
    }
    if (conv.empty() || conv.back().role != Role::user)
        throw bad_request("the last message must be the user's", "messages");
    return m.tmpl->render(system, conv, true);
}

std::vector<int32_t> completion_prompt(const json& body, const ApiModel& m) {
    const json* p = field(body, "prompt");
    if (!p) throw bad_request("'prompt' is required", "prompt");
    std::string text;
    if (p->is_array() && p->size() == 1 && (*p)[0].is_string())
        text = text_of((*p)[0], "prompt");
    else if (p->is_array())
        throw bad_request("'prompt' must be a string (or an array of one string)", "prompt");
    else
        text = text_of(*p, "prompt");
    return m.tok->encode(text, m.tok->add_bos());
}


// A request's seed: any 64-bit integer, signed or not (-2^63 .. 2^64-1; a negative one is its two's complement, so
// -1 and 2^64-1 are one seed). A number written as a float must be an integer that a double holds exactly (below
// 2^53 in size): JSON parsers read an integer beyond 64 bits as a float, rounded.
uint64_t seed_of(const json& v) {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer()) return uint64_t(v.get<int64_t>());
    if (!v.is_number()) throw wrong_type("seed", "an integer", v);
    const double x = v.get<double>();
    if (x != std::floor(x) || std::fabs(x) >= 0x1p53)
        throw bad_request("'seed' must be an integer from -2^63 to 2^64-1, not " + v.dump(), "seed");
    return uint64_t(int64_t(x));
}

// The body as JSON. A number beyond a double's range (1e999) is refused naming the top-level field it is in.
json parse_json(const std::string& text) {
    std::string field;
    try {
        return json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
            if (event == json::parse_event_t::key && depth == 1) field = parsed.get<std::string>();
            return true;
        });
    } catch (const json::parse_error& e) {
        throw bad_request(std::string("the body is not valid JSON: ") + e.what());
    } catch (const json::exception& e) {  // out_of_range 406: "number overflow parsing '1e999'"
        std::string what = e.what();
        const size_t q = what.find('\'');
        const std::string number = q == std::string::npos ? "" : what.substr(q + 1, what.rfind('\'') - q - 1);
        const std::string msg = "the number " + number + " is out of range (a JSON number here must fit a double)";
        if (field.empty()) throw bad_request("the body holds " + msg.substr(4));
        throw bad_request("'" + field + "': " + msg, field);
    }
}

}  // namespace

ApiRequest parse_request(const std::string& body_text, bool chat, const ApiModel& m) {
    const json body = parse_json(body_text);
    if (!body.is_object()) throw bad_request(std::string("the body must be a JSON object, not ") + type_name(body));
    ApiRequest r;
    r.chat = chat;
    if (const json* model = field(body, "model"); model && !model->is_string())
        throw wrong_type("model", "a string", *model);
    r.stream = boolean(body, "stream");
    if (const json* so = field(body, "stream_options")) {
        if (!so->is_object()) throw wrong_type("stream_options", "an object", *so);
        r.include_usage = boolean(*so, "include_usage");
    }
    if (integer(body, "n", 1, 128, 1) != 1) throw bad_request("'n' must be 1: one choice per request", "n");
    for (const char* p : {"frequency_penalty", "presence_penalty"})
        if (number(body, p, -2, 2, 0) != 0)
            throw bad_request(std::string("'") + p + "' is not supported (only 0); use repeat_penalty (llama.cpp's) instead", p);
    if (boolean(body, "logprobs")) throw bad_request("'logprobs' is not supported", "logprobs");
    if (const json* v = field(body, "tools"); v && !(v->is_array() && v->empty()))
        throw bad_request("'tools' is not supported", "tools");

    JobParams& j = r.job;
    const int64_t limit = int64_t(1) << 30;
    // 0: the prompt only (evaluated, nothing generated)
    j.max_tokens = integer(body, chat && field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens",
                           0, limit, -1);
    SamplerParams& s = j.sampling;
    s = m.defaults;
    s.temp = float(number(body, "temperature", 0, 2, s.temp));
    s.top_p = float(number(body, "top_p", 0, 1, s.top_p));
    if (s.top_p == 0) s.top_p = 1e-9f;  // the most likely token only
    s.top_k = int32_t(integer(body, "top_k", 0, 1 << 30, s.top_k));
    s.min_p = float(number(body, "min_p", 0, 1, s.min_p));
    s.repeat_penalty = float(number(body, "repeat_penalty", 0.01, 100, s.repeat_penalty));
    if (const json* seed = field(body, "seed"))
        s.seed = seed_of(*seed);
    else if (m.random_seed)
        s.seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    if (const json* stop = field(body, "stop")) {
        if (stop->is_string()) {
            j.stop.push_back(text_of(*stop, "stop"));
        } else if (stop->is_array()) {
            if (stop->size() > 16) throw bad_request("'stop' holds at most 16 strings", "stop");
            for (size_t i = 0; i < stop->size(); ++i) j.stop.push_back(text_of((*stop)[i], "stop"));
        } else {
            throw wrong_type("stop", "a string or an array of strings", *stop);
        }
        std::erase_if(j.stop, [](const std::string& x) { return x.empty(); });
    }

    j.prompt = chat ? chat_prompt(body, m) : completion_prompt(body, m);
    if (j.prompt.empty())
        throw bad_request(chat ? "the messages render to no tokens" : "the prompt is empty", chat ? "messages" : "prompt");
    if (int64_t(j.prompt.size()) >= m.n_ctx)
        throw bad_request("this request's prompt is " + std::to_string(j.prompt.size()) +
                              " tokens but the context holds " + std::to_string(m.n_ctx) +
                              " (one at least is needed for the reply): shorten it, or start the server with a larger -c",
                          chat ? "messages" : "prompt", "context_length_exceeded");
    return r;
}

json usage_json(const JobOutput& out) {
    return {{"prompt_tokens", out.prompt_tokens},
            {"completion_tokens", out.completion_tokens},
            {"total_tokens", out.prompt_tokens + out.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", out.cached_tokens}}}};
}

json completion_json(const ApiRequest& r, const JobOutput& out, const std::string& id, int64_t created,
                     const ApiModel& m) {
    json choice = {{"index", 0}, {"finish_reason", finish_name(out.finish)}, {"logprobs", nullptr}};
    if (r.chat)
        choice["message"] = {{"role", "assistant"}, {"content", out.text}};
    else
        choice["text"] = out.text;
    return {{"id", id},
            {"object", r.chat ? "chat.completion" : "text_completion"},
            {"created", created},
            {"model", m.id},
            {"choices", json::array({choice})},
            {"usage", usage_json(out)}};
}

json chunk_json(const ApiRequest& r, const std::string& id, int64_t created, const ApiModel& m, const std::string& text,
                bool first, Finish finish) {
    json choice = {{"index", 0}, {"logprobs", nullptr},
                   {"finish_reason", finish == Finish::none ? json(nullptr) : json(finish_name(finish))}};
    if (r.chat) {
        json delta = json::object();
        if (first) delta["role"] = "assistant";
        if (finish == Finish::none) delta["content"] = text;
        choice["delta"] = delta;
    } else {
        choice["text"] = text;
    }
    json c = {{"id", id},
              {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created},
              {"model", m.id},
              {"choices", json::array({choice})}};
    if (r.include_usage) c["usage"] = nullptr;
    return c;
}

json usage_chunk_json(const ApiRequest& r, const std::string& id, int64_t created, const ApiModel& m,
                      const JobOutput& out) {
    return {{"id", id},
            {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", m.id},
            {"choices", json::array()},
            {"usage", usage_json(out)}};
}

}  // namespace plainllama
