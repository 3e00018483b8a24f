// A chat session: the conversation, its rendering through a ChatTemplate, and the KV cache that holds it.
// Each turn renders the whole conversation to ids, keeps the longest prefix the cache already holds
// (ctx.truncate() to it) and evaluates only the rest, so an unchanged history costs nothing; a changed one
// (/system, /load, dropped turns) is re-evaluated from the first token that differs.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plainllama/model/model.h"
#include "plainllama/run/chat_template.h"
#include "plainllama/run/generate.h"
#include "plainllama/run/sampler.h"
#include "plainllama/tokenizer/tokenizer.h"

namespace plainllama {

struct ChatTurn {
    GenerateStats stats;        // of this turn (stats.n_prompt: tokens evaluated before the reply)
    std::string reply;          // the reply's text as kept in the conversation (raw: as streamed; the chat
                                // templates: without leading whitespace)
    bool rejected = false;      // the message does not fit in the context even alone; nothing was changed
    int64_t dropped_turns = 0;  // earlier user/assistant pairs dropped to make room
    int64_t reused = 0;         // tokens of the rendering that were already in the cache
};

// Each new piece of the reply's text, as it is generated.
using OnText = std::function<void(const std::string& text)>;
// One line for the user (context full, turns dropped, reply cut); the CLI prints it on stderr.
using OnNotice = std::function<void(const std::string&)>;

class ChatSession {
   public:
    // stop_ids: ids that end a reply (the template's end of turn plus the model's EOS ids).
    // The context, tokenizer and template must outlive the session.
    ChatSession(Context& ctx, const Tokenizer& tok, const ChatTemplate& tmpl, const SamplerParams& sampling,
                std::vector<int32_t> stop_ids);

    // Adds `user`, evaluates what the cache lacks and generates the reply (at most n_predict tokens, -1 = until
    // the end of the turn or a full context), streaming its text through on_text. A reply stopped by the end of turn,
    // n_predict, a full context or *stop is kept in the conversation.
    //
    // When the context is too small, the oldest turns are dropped (the system prompt stays) until the prompt
    // leaves room for min(n_predict, n_ctx / 4) tokens of reply (n_ctx / 4 when n_predict is -1). When the
    // message does not fit even alone (system prompt + it + at least one token of reply), it is rejected and
    // nothing changes.
    ChatTurn send(const std::string& user, int64_t n_predict, const OnText& on_text,
                  const std::atomic<bool>* stop = nullptr, const OnNotice& notice = nullptr);

    // Clears the conversation (the system prompt stays), the cache and the sampler's random state.
    void reset();
    // Takes effect at the next turn (the cache is kept up to the first token that changes).
    void set_system(const std::string& system) { system_ = system; }
    const std::string& system() const { return system_; }
    const std::vector<ChatMessage>& messages() const { return messages_; }
    const ChatTemplate& chat_template() const { return tmpl_; }
    const Context& context() const { return ctx_; }
    // The rendering of the conversation so far (with the generation prompt: what the next turn starts from).
    std::vector<int32_t> render(bool add_generation_prompt) const {
        return tmpl_.render(system_, messages_, add_generation_prompt);
    }
    // The ids in the KV cache: its first context().n_past() tokens.
    const std::vector<int32_t>& cached() const { return cached_; }

    // {"template", "system", "messages": [{"role", "content"}, ...]}
    nlohmann::json to_json() const;
    // Replaces the system prompt and the conversation (loaded replies are re-encoded from their text; a
    // conversation too long for the context loses its oldest turns at the next send()). `what` names the
    // source in errors. Throws Error when the roles do not alternate user, assistant, ... or a field
    // is missing; the session is then unchanged.
    void from_json(const nlohmann::json& j, const std::string& what);

    // Totals over the session.
    int64_t total_prompt_tokens() const { return total_prompt_; }
    int64_t total_generated_tokens() const { return total_generated_; }
    double total_prompt_seconds() const { return total_prompt_s_; }
    double total_generate_seconds() const { return total_generate_s_; }

   private:
    // Drops the fewest oldest user/assistant pairs that bring the rendering (with the generation prompt) within
    // `budget` tokens, or all but the last message; returns that rendering, the pairs dropped in *dropped. Linear in
    // the conversation's length: a loaded transcript of any size is rendered whole once.
    std::vector<int32_t> drop_oldest_turns(int64_t budget, int64_t* dropped);

    Context& ctx_;
    const Tokenizer& tok_;
    const ChatTemplate& tmpl_;
    SamplerParams sampling_;
    Sampler sampler_;
    std::vector<int32_t> stop_ids_;
    std::string system_;
    std::vector<ChatMessage> messages_;
    std::vector<int32_t> cached_;  // [ctx.n_past()]
    int64_t total_prompt_ = 0, total_generated_ = 0;
    double total_prompt_s_ = 0, total_generate_s_ = 0;
};

}  // namespace plainllama
