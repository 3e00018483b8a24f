#include "plainllama/run/chat.h"

#include <algorithm>

#include "plainllama/sys/error.h"

namespace plainllama {

ChatSession::ChatSession(Context& ctx, const Tokenizer& tok, const ChatTemplate& tmpl, const SamplerParams& sampling,
                         std::vector<int32_t> stop_ids)
    : ctx_(ctx), tok_(tok), tmpl_(tmpl), sampling_(sampling), sampler_(sampling), stop_ids_(std::move(stop_ids)) {
    ctx_.reset();
}

void ChatSession::reset() {
    messages_.clear();
    ctx_.reset();
    cached_.clear();
    sampler_ = Sampler(sampling_);
}

ChatTurn ChatSession::send(const std::string& user, int64_t n_predict, const OnText& on_text,
                           const std::atomic<bool>* stop, const OnNotice& notice) {
    ChatTurn turn;
    const int64_t n_ctx = ctx_.n_ctx();
    auto say = [&](const std::string& s) {
        if (notice) notice(s);
    };
    ChatMessage msg{Role::user, user, false, {}};

    // Does the message fit alone, with the system prompt and one token of reply?
    const int64_t alone = int64_t(tmpl_.render(system_, {msg}, true).size());
    if (alone == 0) {
        turn.rejected = true;
        say("this message renders to no tokens; it was not sent");
        return turn;
    }
    if (alone >= n_ctx) {
        turn.rejected = true;
        say("this message needs " + std::to_string(alone) +
            " tokens (with the template and system prompt) but the "
            "context holds " +
            std::to_string(n_ctx) +
            "; it was not sent. Shorten it, or /reset with a shorter /system" +
            (n_ctx < ctx_.model().config().max_position_embeddings ? ", or raise -c" : ""));
        return turn;
    }

    messages_.push_back(std::move(msg));
    std::vector<int32_t> tokens = render(true);
    const int64_t reserve = std::max<int64_t>(1, std::min(n_predict < 0 ? n_ctx : n_predict, n_ctx / 4));
    while (int64_t(tokens.size()) + reserve > n_ctx && messages_.size() > 1) {
        messages_.erase(messages_.begin(), messages_.begin() + 2);  // the oldest user message and its reply
        ++turn.dropped_turns;
        tokens = render(true);
    }

    // Keep the longest prefix the cache holds; evaluate at least one token (its logits start the reply).
    size_t keep = 0;
    while (keep < cached_.size() && keep < tokens.size() && cached_[keep] == tokens[keep]) ++keep;
    if (keep == tokens.size()) --keep;
    ctx_.truncate(int64_t(keep));
    cached_.resize(keep);
    turn.reused = int64_t(keep);
    if (turn.dropped_turns > 0)
        say("the context of " + std::to_string(n_ctx) + " tokens is full: dropped the oldest " +
            std::to_string(turn.dropped_turns) + (turn.dropped_turns == 1 ? " turn" : " turns") +
            (system_.empty() ? "" : " (the system prompt stays)") + "; evaluating " +
            std::to_string(tokens.size() - keep) + " tokens of the kept conversation");

    // The reply streams with the prompt's last token as left context, so its first word keeps its space.
    StreamDecoder decoder(tok_);
    decoder.push(tokens.back());
    const size_t n_rendered = tokens.size();
    std::string text;
    turn.stats = generate(
        ctx_, sampler_, decoder, tokens, n_predict, stop_ids_,
        [&](int32_t, const std::string& piece) {
            text += piece;
            if (on_text && !piece.empty()) on_text(piece);
            return true;
        },
        stop);
    const std::string tail = decoder.flush();
    if (!tail.empty()) {
        text += tail;
        if (on_text) on_text(tail);
    }

    ChatMessage reply{Role::assistant, text, true, std::vector<int32_t>(tokens.begin() + long(n_rendered), tokens.end())};
    if (turn.stats.stopped_eos) reply.ids.pop_back();  // the end-of-turn id: the template writes its own
    if (tmpl_.kind() != TemplateKind::raw) {
        const size_t b = reply.content.find_first_not_of(" \t\n\r\f\v");
        reply.content.erase(0, b == std::string::npos ? reply.content.size() : b);
    }
    turn.reply = reply.content;
    messages_.push_back(std::move(reply));
    cached_.assign(tokens.begin(), tokens.begin() + long(ctx_.n_past()));
    if (turn.stats.stopped_ctx)
        say("the context of " + std::to_string(n_ctx) +
            " tokens is full: the reply was cut (older turns are dropped "
            "at the next message)");

    total_prompt_ += turn.stats.n_prompt;
    total_generated_ += turn.stats.n_generated;
    total_prompt_s_ += turn.stats.prompt_seconds;
    total_generate_s_ += turn.stats.generate_seconds;
    return turn;
}

nlohmann::json ChatSession::to_json() const {
    nlohmann::json msgs = nlohmann::json::array();
    for (const ChatMessage& m : messages_) msgs.push_back({{"role", role_name(m.role)}, {"content", m.content}});
    return {{"template", template_name(tmpl_.kind())}, {"system", system_}, {"messages", msgs}};
}

void ChatSession::from_json(const nlohmann::json& j, const std::string& what) {
    if (!j.is_object()) throw Error(what + ": expected a JSON object {\"template\", \"system\", \"messages\"}");
    std::string system;
    if (j.contains("system") && !j["system"].is_null()) {
        if (!j["system"].is_string()) throw Error(what + ": \"system\" must be a string");
        system = j["system"].get<std::string>();
    }
    if (!j.contains("messages") || !j["messages"].is_array())
        throw Error(what + ": expected \"messages\": [{\"role\", \"content\"}, ...]");
    std::vector<ChatMessage> msgs;
    for (const auto& m : j["messages"]) {
        const std::string where = what + ": message " + std::to_string(msgs.size() + 1);
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
            !m["content"].is_string())
            throw Error(where + ": expected {\"role\": string, \"content\": string}");
        const std::string role = m["role"].get<std::string>();
        if (role != "user" && role != "assistant")
            throw Error(where + ": role is " + m["role"].dump() + ", expected \"user\" or \"assistant\"");
        msgs.push_back({role == "user" ? Role::user : Role::assistant, m["content"].get<std::string>(), false, {}});
    }
    check_roles(msgs, what);
    if (msgs.size() % 2 != 0) throw Error(what + ": the last message must be an assistant reply");
    system_ = std::move(system);
    messages_ = std::move(msgs);
}

}  // namespace plainllama
