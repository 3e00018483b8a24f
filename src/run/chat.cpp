#include "plainllama/run/chat.h"

#include <algorithm>
#include <map>

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
            std::to_string(n_ctx) + "; it was not sent. Shorten it, or /reset with a shorter /system" +
            (n_ctx < ctx_.model().config().max_position_embeddings ? ", or raise -c" : ""));
        return turn;
    }

    messages_.push_back(std::move(msg));
    const int64_t reserve = std::max<int64_t>(1, std::min(n_predict < 0 ? n_ctx : n_predict, n_ctx / 4));
    std::vector<int32_t> tokens = drop_oldest_turns(n_ctx - reserve, &turn.dropped_turns);

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

    ChatMessage reply{Role::assistant, text, true,
                      std::vector<int32_t>(tokens.begin() + long(n_rendered), tokens.end())};
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

std::vector<int32_t> ChatSession::drop_oldest_turns(int64_t budget, int64_t* dropped) {
    // The conversation is rendered whole once (a loaded transcript may hold thousands of messages). The rendering
    // of messages [k, m) is the same as the tail of the whole one from message k's first id, give or take what the
    // template writes differently at the start (llama2's system block goes into the first message kept): each
    // candidate k is rendered exactly, but only its kept messages, which fit the context or nearly. The first k
    // estimated from the whole rendering is then moved by galloping steps and bisection to the fewest pairs that
    // fit (the rendering shrinks as k grows), as dropping them two by two from the front would.
    const size_t m = messages_.size();
    std::vector<size_t> starts;
    std::vector<int32_t> whole = tmpl_.render(system_, messages_, true, &starts);
    *dropped = 0;
    if (int64_t(whole.size()) <= budget || m <= 1) return whole;
    const size_t k_max = (m - 1) / 2 * 2;  // the last message (the user's) always stays
    std::map<size_t, std::vector<int32_t>> rendered;
    auto render_from = [&](size_t k) -> const std::vector<int32_t>& {
        auto it = rendered.find(k);
        if (it == rendered.end()) {
            const std::vector<ChatMessage> kept(messages_.begin() + long(k), messages_.end());
            it = rendered.emplace(k, tmpl_.render(system_, kept, true)).first;
        }
        return it->second;
    };
    auto fits = [&](size_t k) { return k >= k_max || int64_t(render_from(k).size()) <= budget; };
    size_t guess = 2;  // the estimate: the fewest pairs whose ids in the whole rendering bring it within the budget
    while (guess < k_max && int64_t(whole.size() - (starts[guess] - starts[0])) > budget) guess += 2;
    // Then fits(hi) and not fits(lo) (k = 0 is the whole rendering: over the budget), and bisection between them.
    size_t lo = 0, hi = guess;
    if (fits(guess)) {
        for (size_t step = 2; hi > 0; step *= 2) {
            const size_t k = hi > step ? hi - step : 0;
            if (k == 0 || !fits(k)) {
                lo = k;
                break;
            }
            hi = k;
        }
    } else {
        lo = guess;
        for (size_t step = 2;; step *= 2) {
            const size_t k = std::min(k_max, hi + step);
            if (fits(k)) {
                hi = k;
                break;
            }
            lo = hi = k;
        }
    }
    while (hi - lo > 2) {
        const size_t mid = lo + (hi - lo) / 4 * 2;  // even
        (fits(mid) ? hi : lo) = mid;
    }
    std::vector<int32_t> tokens = render_from(hi);
    messages_.erase(messages_.begin(), messages_.begin() + long(hi));  // the oldest user messages and their replies
    *dropped = int64_t(hi / 2);
    return tokens;
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
