// A loaded transcript far longer than the context (chat /load): the next turn drops the oldest turns as dropping them
// two by two would (the same turns, the same ids evaluated once), with tokenizer work linear in the transcript, for
// every template. The work is counted through the tokenizer, not timed.
#include <gtest/gtest.h>

#include <map>

#include "plainllama/run/chat.h"
#include "plainllama/run/chat_template.h"
#include "plainllama/sys/threads.h"
#include "plainllama/tokenizer/sentencepiece_tokenizer.h"
#include "test_util.h"

namespace plainllama {
namespace {

using Ids = std::vector<int32_t>;

// A tokenizer that counts the bytes it is asked to encode (the work of rendering a conversation), over a real one.
class CountingTokenizer : public Tokenizer {
   public:
    explicit CountingTokenizer(const Tokenizer& t) : t_(t) {}
    std::vector<int32_t> encode(const std::string& text, bool add_bos) const override {
        bytes += text.size();
        return t_.encode(text, add_bos);
    }
    std::string decode(const std::vector<int32_t>& ids) const override { return t_.decode(ids); }
    std::string piece(int32_t id) const override { return t_.piece(id); }
    std::string token_bytes(int32_t id) const override { return t_.token_bytes(id); }
    int32_t piece_to_id(const std::string& p) const override { return t_.piece_to_id(p); }
    int32_t vocab_size() const override { return t_.vocab_size(); }
    int32_t bos_id() const override { return t_.bos_id(); }
    int32_t eos_id() const override { return t_.eos_id(); }
    bool add_bos() const override { return t_.add_bos(); }
    std::string kind() const override { return t_.kind(); }
    std::vector<SpecialToken> special_tokens() const override { return t_.special_tokens(); }

    mutable size_t bytes = 0;

   private:
    const Tokenizer& t_;
};

struct Fixture {
    Model model{test::model_dir()};
    SentencePieceTokenizer sp{test::model_dir() / "tokenizer.model"};
    CountingTokenizer tok{sp};
    Fixture() { set_threads(1); }
};

// `pairs` user/assistant pairs of a few dozen bytes each, as /save writes them.
nlohmann::json transcript(int pairs, const std::string& system) {
    nlohmann::json msgs = nlohmann::json::array();
    for (int i = 0; i < pairs; ++i) {
        msgs.push_back({{"role", "user"}, {"content", "Tell me about the dog number " + std::to_string(i) + "."}});
        msgs.push_back({{"role", "assistant"}, {"content", "The dog " + std::to_string(i) + " ran in the park."}});
    }
    return {{"system", system}, {"messages", msgs}};
}

struct Outcome {
    ChatTurn turn;
    Ids cached;          // the cache after the turn
    size_t encoded = 0;  // bytes the tokenizer encoded during the turn
};

// Loads the transcript into a fresh session (context n_ctx) and sends one message of 4 tokens of reply at most.
Outcome send_after_load(Fixture& f, TemplateKind kind, const nlohmann::json& j, int64_t n_ctx) {
    Context ctx(f.model, ContextParams{n_ctx, 512});
    const ChatTemplate tmpl(kind, f.tok);
    SamplerParams greedy;
    greedy.temp = 0;
    ChatSession s(ctx, f.tok, tmpl, greedy, tmpl.end_of_turn_ids());
    s.from_json(j, "t.json");
    f.tok.bytes = 0;
    Outcome o;
    o.turn = s.send("Once upon a time", 4, nullptr);
    o.encoded = f.tok.bytes;
    o.cached = s.cached();
    return o;
}

// What dropping pairs two by two from the front gives: the pairs dropped and the rendering of the rest.
std::pair<int64_t, Ids> two_by_two(const Tokenizer& tok, TemplateKind kind, const nlohmann::json& j, int64_t n_ctx,
                                   int64_t reserve) {
    const ChatTemplate tmpl(kind, tok);
    std::vector<ChatMessage> msgs;
    for (const auto& m : j["messages"])
        msgs.push_back({m["role"] == "user" ? Role::user : Role::assistant, m["content"], false, {}});
    msgs.push_back(test::user("Once upon a time"));
    const std::string system = j["system"];
    int64_t dropped = 0;
    Ids ids = tmpl.render(system, msgs, true);
    while (int64_t(ids.size()) + reserve > n_ctx && msgs.size() > 1) {
        msgs.erase(msgs.begin(), msgs.begin() + 2);
        ++dropped;
        ids = tmpl.render(system, msgs, true);
    }
    return {dropped, ids};
}

TEST(ChatLoad, DropsTheTurnsDroppingThemOneByOneWould) {
    Fixture f;
    // stories260K's vocabulary has none of chatml's or llama3's special tokens: their text runs across messages in
    // one segment, so the estimate from the whole rendering is off and the exact search does the work; llama2 puts
    // the system prompt into the first message kept.
    for (TemplateKind kind :
         {TemplateKind::raw, TemplateKind::llama2, TemplateKind::zephyr, TemplateKind::chatml, TemplateKind::llama3})
        for (const std::string& system : {std::string(), std::string("You are a storyteller who likes dogs.")})
            for (int64_t n_ctx : {int64_t(64), int64_t(200), int64_t(512)}) {
                SCOPED_TRACE(std::string(template_name(kind)) + " system '" + system + "' n_ctx " +
                             std::to_string(n_ctx));
                const nlohmann::json j = transcript(60, system);
                const auto [dropped, ids] = two_by_two(f.sp, kind, j, n_ctx, 4);
                const Outcome o = send_after_load(f, kind, j, n_ctx);
                const ChatTemplate tmpl(kind, f.sp);
                if (int64_t(tmpl.render(system, {test::user("Once upon a time")}, true).size()) >= n_ctx) {
                    EXPECT_TRUE(o.turn.rejected);  // the message does not fit even alone
                    continue;
                }
                EXPECT_FALSE(o.turn.rejected);
                EXPECT_EQ(o.turn.dropped_turns, dropped);
                EXPECT_EQ(o.turn.stats.n_prompt, int64_t(ids.size()));  // evaluated once, all of it
                ASSERT_GE(o.cached.size(), ids.size());
                EXPECT_EQ(Ids(o.cached.begin(), o.cached.begin() + long(ids.size())), ids);
            }
}

TEST(ChatLoad, WorkIsLinearInTheTranscript) {
    Fixture f;
    std::map<int, size_t> work, size;
    for (int pairs : {500, 2000}) {
        const nlohmann::json j = transcript(pairs, "A story.");
        const Outcome o = send_after_load(f, TemplateKind::raw, j, 512);
        EXPECT_GT(o.turn.dropped_turns, pairs - 40);
        work[pairs] = o.encoded;
        size[pairs] = j.dump().size();
        // The whole conversation is encoded once, and the kept part (a context's worth) a few times; dropping the
        // pairs one at a time encoded it about `pairs` / 2 times.
        EXPECT_LT(o.encoded, 2 * size[pairs]) << pairs << " pairs";
    }
    EXPECT_LT(double(work[2000]) / double(work[500]), 5.0);  // 4x the messages: 4x the work, not 16x
}

}  // namespace
}  // namespace plainllama
