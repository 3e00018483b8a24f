#include "plainllama/serve/openai.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "plainllama/io/utf8.h"
#include "plainllama/serve/api_fields.h"
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

using namespace api;

// A message's content: a string, or an array of {"type": "text", "text": ...} parts, joined.
std::string content_of(const In& m, const std::string& where) {
    const auto it = m.find("content");
    if (it == m.end() || it->is_null()) return "";
    if (it->is_string()) return text_of(*it, where + ".content");
    if (!it->is_array()) throw wrong_type(where + ".content", "a string or an array of text parts", *it);
    std::string s;
    for (size_t i = 0; i < it->size(); ++i) {
        const In& part = (*it)[i];
        const std::string w = where + ".content[" + std::to_string(i) + "]";
        if (!part.is_object()) throw wrong_type(w, "an object", part);
        const auto type = part.find("type");
        if (type == part.end() || !type->is_string() || *type != "text" || !part.contains("text"))
            throw bad_request(w + ": only {\"type\": \"text\", \"text\": ...} parts are supported", w);
        s += text_of(part["text"], w + ".text");
    }
    return s;
}

std::vector<int32_t> chat_prompt(const In& body, const ApiModel& m) {
    const In* msgs = field(body, "messages");
    if (!msgs) throw bad_request("'messages' is required", "messages");
    if (!msgs->is_array()) throw wrong_type("messages", "an array of messages", *msgs);
    if (msgs->empty()) throw bad_request("'messages' is empty", "messages");
    std::string system;
    std::vector<ChatMessage> conv;
    for (size_t i = 0; i < msgs->size(); ++i) {
        const In& msg = (*msgs)[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!msg.is_object()) throw wrong_type(where, "an object", msg);
        const In* role = field(msg, "role");
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

std::vector<int32_t> completion_prompt(const In& body, const ApiModel& m, std::string& text) {
    const In* p = field(body, "prompt");
    if (!p) throw bad_request("'prompt' is required", "prompt");
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
uint64_t seed_of(const In& v) {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer()) return uint64_t(v.get<int64_t>());
    if (!v.is_number()) throw wrong_type("seed", "an integer", v);
    const double x = v.get<double>();
    if (x != std::floor(x) || std::fabs(x) >= 0x1p53)
        throw bad_request("'seed' must be an integer from -2^63 to 2^64-1, not " + v.dump(), "seed");
    return uint64_t(int64_t(x));
}

// The body as JSON. A number beyond a double's range (1e999) is refused naming the top-level field it is in.
In parse_json(const std::string& text) {
    std::string field;
    try {
        return In::parse(text, [&](int depth, In::parse_event_t event, In& parsed) {
            if (event == In::parse_event_t::key && depth == 1) field = parsed.get<std::string>();
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
    const In body = parse_json(body_text);
    if (!body.is_object()) throw bad_request(std::string("the body must be a JSON object, not ") + type_name(body));
    ApiRequest r;
    r.chat = chat;
    if (const In* model = field(body, "model"); model && !model->is_string())
        throw wrong_type("model", "a string", *model);
    r.stream = boolean(body, "stream");
    if (const In* so = field(body, "stream_options")) {
        if (!so->is_object()) throw wrong_type("stream_options", "an object", *so);
        r.include_usage = boolean(*so, "include_usage");
    }
    parse_output_fields(body, r, m);

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
    if (const In* seed = field(body, "seed"))
        s.seed = seed_of(*seed);
    else if (m.random_seed)
        s.seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    if (const In* stop = field(body, "stop")) {
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

    std::string text;
    j.prompt = chat ? chat_prompt(body, m) : completion_prompt(body, m, text);
    if (r.echo) r.echo_text = text;
    if (j.prompt.empty())
        throw bad_request(chat ? "the messages render to no tokens" : "the prompt is empty",
                          chat ? "messages" : "prompt");
    if (int64_t(j.prompt.size()) >= m.n_ctx)
        throw bad_request(
            "this request's prompt is " + std::to_string(j.prompt.size()) + " tokens but the context holds " +
                std::to_string(m.n_ctx) +
                " (one at least is needed for the reply): shorten it, or start the server with a larger -c",
            chat ? "messages" : "prompt", "context_length_exceeded");
    return r;
}

json usage_json(const std::vector<JobOutput>& outs) {
    int64_t completion = 0;
    for (const JobOutput& o : outs) completion += o.completion_tokens;
    const JobOutput& first = outs.front();
    return {{"prompt_tokens", first.prompt_tokens},
            {"completion_tokens", completion},
            {"total_tokens", first.prompt_tokens + completion},
            {"prompt_tokens_details", {{"cached_tokens", first.cached_tokens}}}};
}

json completion_json(const ApiRequest& r, const std::vector<JobOutput>& outs, const std::string& id, int64_t created,
                     const ApiModel& m) {
    json choices = json::array();
    for (size_t i = 0; i < outs.size(); ++i) {
        const JobOutput& out = outs[i];
        json choice = {{"index", i}, {"finish_reason", finish_name(out.finish)}, {"logprobs", nullptr}};
        if (r.chat) {
            choice["message"] = {{"role", "assistant"}, {"content", out.text}};
            if (r.job.top_logprobs >= 0) choice["logprobs"] = chat_logprobs_json(out.logprobs, *m.tok);
        } else {
            choice["text"] = r.echo ? r.echo_text + out.text : out.text;
            if (r.job.top_logprobs >= 0)
                choice["logprobs"] = legacy_logprobs_json(r.job.prompt_logprobs ? &r.job.prompt : nullptr,
                                                          out.prompt_logprobs, out.logprobs, *m.tok, 0);
        }
        choices.push_back(std::move(choice));
    }
    return {{"id", id},
            {"object", r.chat ? "chat.completion" : "text_completion"},
            {"created", created},
            {"model", m.id},
            {"choices", std::move(choices)},
            {"usage", usage_json(outs)}};
}

json chunk_json(const ApiRequest& r, const std::string& id, int64_t created, const ApiModel& m, const std::string& text,
                bool first, Finish finish, int index, const std::vector<TokenLogprob>& lps, const JobOutput* prompt) {
    json choice = {{"index", index},
                   {"logprobs", nullptr},
                   {"finish_reason", finish == Finish::none ? json(nullptr) : json(finish_name(finish))}};
    if (r.chat) {
        json delta = json::object();
        if (first) delta["role"] = "assistant";
        if (finish == Finish::none) delta["content"] = text;
        choice["delta"] = delta;
        if (r.job.top_logprobs >= 0 && !lps.empty()) choice["logprobs"] = chat_logprobs_json(lps, *m.tok);
    } else {
        choice["text"] = text;
        if (r.job.top_logprobs >= 0 && (!lps.empty() || prompt))
            choice["logprobs"] =
                legacy_logprobs_json(prompt ? &r.job.prompt : nullptr,
                                     prompt ? prompt->prompt_logprobs : std::vector<TokenLogprob>{}, lps, *m.tok, 0);
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
                      const std::vector<JobOutput>& outs) {
    return {{"id", id},
            {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", m.id},
            {"choices", json::array()},
            {"usage", usage_json(outs)}};
}

}  // namespace plainllama
