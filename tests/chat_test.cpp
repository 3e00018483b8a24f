// Chat templates (rendered strings and ids against expectations built here from the HF strings, encode() of
// their segments and the special ids) and the chat session on stories260K: reply equal to generate(), only new
// tokens evaluated per turn, /system, reset, context overflow, interruption, JSON transcripts.
#include "plainllama/run/chat.h"

#include <gtest/gtest.h>

#include <cstring>

#include "plainllama/run/chat_template.h"
#include "plainllama/run/generate.h"
#include "plainllama/sys/error.h"
#include "plainllama/sys/threads.h"
#include "plainllama/tokenizer/sentencepiece_tokenizer.h"
#include "test_util.h"

namespace plainllama {
namespace {

using test::model_dir;
using Ids = std::vector<int32_t>;
namespace fs = std::filesystem;

fs::path llama2_tokenizer() { return test::shared_dir() / "tokenizers/llama2/tokenizer.model"; }

Ids cat(std::initializer_list<Ids> parts) {
    Ids r;
    for (const Ids& p : parts) r.insert(r.end(), p.begin(), p.end());
    return r;
}

using test::generated;
using test::user;
ChatMessage assistant(const std::string& s) { return {Role::assistant, s, false, {}}; }

// One SentencePiece piece as a serialized ModelProto.pieces entry: {1: piece, 2: score (float), 3: type}.
std::string proto_piece(const std::string& piece, int type) {
    std::string m;
    m += char(0x0A);
    m += char(piece.size());
    m += piece;
    m += char(0x15);
    m.append(4, '\0');  // score 0.0f
    m += char(0x18);
    m += char(type);
    return std::string(1, char(0x0A)) + char(m.size()) + m;
}

// The Llama 2 tokenizer with <|im_start|> and <|im_end|> appended as CONTROL pieces (ids 32000, 32001), as
// ChatML fine-tunes add them: a repeated field appended at the end of a protobuf message extends the list.
fs::path chatml_tokenizer(const test::TempDir& tmp) {
    const fs::path p = tmp / "chatml.model";
    test::write_file(
        p, test::read_file(llama2_tokenizer()) + proto_piece("<|im_start|>", 3) + proto_piece("<|im_end|>", 3));
    return p;
}

TEST(ChatTemplate, Names) {
    for (const char* n : {"raw", "llama2", "zephyr", "chatml"})
        EXPECT_STREQ(template_name(parse_template_name(n, "--template")), n);
    try {
        parse_template_name("vicuna", "--template");
        FAIL() << "expected an Error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--template"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("vicuna"), std::string::npos) << e.what();
    }
}

TEST(ChatTemplate, DetectFromTokenizerConfig) {
    test::TempDir tmp;
    EXPECT_EQ(detect_template(tmp.path()).kind, TemplateKind::raw);  // no tokenizer_config.json
    auto with = [&](const nlohmann::json& j) {
        test::write_file(tmp / "tokenizer_config.json", j.dump());
        return detect_template(tmp.path());
    };
    // The chat_template strings of meta-llama/Llama-2-7b-chat-hf, HuggingFaceH4/zephyr-7b-beta,
    // teknium/OpenHermes-2.5-Mistral-7B and microsoft/Phi-3-mini (abridged to the parts that matter).
    const std::string llama2 =
        "{% if messages[0]['role'] == 'system' %}...{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
        "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}";
    const std::string zephyr =
        "{% for message in messages %}\n{% if message['role'] == 'user' %}\n"
        "{{ '<|user|>\n' + message['content'] + eos_token }}\n{% endif %}{% endfor %}";
    const std::string chatml =
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
        "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";
    const std::string phi3 = "{% for message in messages %}{{'<|user|>' + '\n' + message['content'] + '<|end|>'}}";
    EXPECT_EQ(with({{"chat_template", llama2}}).kind, TemplateKind::llama2);
    EXPECT_EQ(with({{"chat_template", zephyr}}).kind, TemplateKind::zephyr);
    EXPECT_EQ(with({{"chat_template", chatml}}).kind, TemplateKind::chatml);
    EXPECT_EQ(with({{"chat_template",
                     {{{"name", "tool_use"}, {"template", llama2}}, {{"name", "default"}, {"template", chatml}}}}})
                  .kind,
              TemplateKind::chatml);
    TemplateChoice c = with({{"chat_template", phi3}});
    EXPECT_EQ(c.kind, TemplateKind::raw);
    EXPECT_NE(c.warning.find("--template"), std::string::npos) << c.warning;
    c = with({{"bos_token", {{"content", "<B>"}, {"lstrip", false}}}, {"eos_token", "<E>"}, {"add_bos_token", false}});
    EXPECT_EQ(c.kind, TemplateKind::raw);
    EXPECT_EQ(c.warning, "");
    EXPECT_EQ(c.bos_token, "<B>");
    EXPECT_EQ(c.eos_token, "<E>");
    EXPECT_EQ(c.add_bos, false);
    c = with({{"bos_token", nullptr}});  // absent or null: the tokenizer's
    EXPECT_FALSE(c.bos_token.has_value());
    EXPECT_FALSE(c.eos_token.has_value());
    EXPECT_FALSE(c.add_bos.has_value());
    test::write_file(tmp / "tokenizer_config.json", "{not json");
    EXPECT_THROW(detect_template(tmp.path()), Error);
}

// meta-llama/Llama-2-7b-chat-hf: known HF ids for [{"role": "user", "content": "Hello"}].
TEST(ChatTemplate, Llama2KnownIds) {
    SentencePieceTokenizer tok(llama2_tokenizer());
    ChatTemplate t(TemplateKind::llama2, tok);
    EXPECT_EQ(t.render("", {user("Hello")}, true), (Ids{1, 518, 25580, 29962, 15043, 518, 29914, 25580, 29962}));
    EXPECT_EQ(t.end_of_turn_ids(), Ids{2});
    EXPECT_TRUE(t.warnings().empty());
}

TEST(ChatTemplate, Llama2) {
    SentencePieceTokenizer tok(llama2_tokenizer());
    ChatTemplate t(TemplateKind::llama2, tok);
    // strip() applies to the whole first content, system block included: the user's leading space stays.
    const std::vector<ChatMessage> m = {user(" What is 2+2? "), assistant(" It is 4.\n"), user(" And 3+3?\n")};
    EXPECT_EQ(
        t.render_text("Be brief.", m, true),
        "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n What is 2+2? [/INST] It is 4. </s><s>[INST] And 3+3? [/INST]");
    EXPECT_EQ(t.render("Be brief.", m, true),
              cat({{1},
                   tok.encode("[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n What is 2+2? [/INST] It is 4. ", false),
                   {2, 1},
                   tok.encode("[INST] And 3+3? [/INST]", false)}));
    // No system prompt: no <<SYS>> block; the generation prompt adds nothing.
    EXPECT_EQ(t.render_text("", {user("Hi")}, false), "<s>[INST] Hi [/INST]");
    EXPECT_EQ(t.render("", {user("Hi")}, false), t.render("", {user("Hi")}, true));
}

TEST(ChatTemplate, Zephyr) {
    SentencePieceTokenizer tok(llama2_tokenizer());
    ChatTemplate t(TemplateKind::zephyr, tok);
    const std::vector<ChatMessage> m = {user("Hi"), assistant("Hello!"), user("Bye")};
    EXPECT_EQ(
        t.render_text("Be kind.", m, true),
        "<s><|system|>\nBe kind.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n<|user|>\nBye</s>\n<|assistant|>\n");
    EXPECT_EQ(t.render("Be kind.", m, true), cat({{1},
                                                  tok.encode("<|system|>\nBe kind.", false),
                                                  {2},
                                                  tok.encode("\n<|user|>\nHi", false),
                                                  {2},
                                                  tok.encode("\n<|assistant|>\nHello!", false),
                                                  {2},
                                                  tok.encode("\n<|user|>\nBye", false),
                                                  {2},
                                                  tok.encode("\n<|assistant|>\n", false)}));
    EXPECT_EQ(t.render("", {user("Hi")}, false),
              cat({{1}, tok.encode("<|user|>\nHi", false), {2}, tok.encode("\n", false)}));
    EXPECT_EQ(t.end_of_turn_ids(), Ids{2});
}

TEST(ChatTemplate, ChatmlWithSpecialTokens) {
    test::TempDir tmp;
    SentencePieceTokenizer tok(chatml_tokenizer(tmp));
    ASSERT_EQ(tok.piece_to_id("<|im_start|>"), 32000);
    const int32_t S = 32000, E = 32001;
    ChatTemplate t(TemplateKind::chatml, tok);
    EXPECT_TRUE(t.warnings().empty());
    const std::vector<ChatMessage> m = {user("Hi"), assistant("Hello!"), user("Bye")};
    EXPECT_EQ(t.render_text("Be kind.", m, true),
              "<s><|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
              "Hello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
    const Ids nl = tok.encode("\n", false);
    EXPECT_EQ(t.render("Be kind.", m, true), cat({{1, S},
                                                  tok.encode("system\nBe kind.", false),
                                                  {E},
                                                  nl,
                                                  {S},
                                                  tok.encode("user\nHi", false),
                                                  {E},
                                                  nl,
                                                  {S},
                                                  tok.encode("assistant\nHello!", false),
                                                  {E},
                                                  nl,
                                                  {S},
                                                  tok.encode("user\nBye", false),
                                                  {E},
                                                  nl,
                                                  {S},
                                                  tok.encode("assistant\n", false)}));
    EXPECT_EQ(t.end_of_turn_ids(), Ids{E});
    // add_bos_token false: no BOS.
    TemplateChoice no_bos;
    no_bos.add_bos = false;
    ChatTemplate t2(TemplateKind::chatml, tok, no_bos);
    EXPECT_EQ(t2.render("", {user("Hi")}, true),
              cat({{S}, tok.encode("user\nHi", false), {E}, nl, {S}, tok.encode("assistant\n", false)}));
}

// A vocabulary without <|im_start|>/<|im_end|>: one warning each, and they are tokenized as text.
TEST(ChatTemplate, ChatmlWithoutSpecialTokensWarns) {
    SentencePieceTokenizer tok(llama2_tokenizer());
    ChatTemplate t(TemplateKind::chatml, tok);
    ASSERT_EQ(t.warnings().size(), 2u);
    EXPECT_NE(t.warnings()[0].find("<|im_start|>"), std::string::npos) << t.warnings()[0];
    EXPECT_NE(t.warnings()[1].find("<|im_end|>"), std::string::npos) << t.warnings()[1];
    EXPECT_EQ(t.render("", {user("Hi")}, true),
              cat({{1}, tok.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", false)}));
    EXPECT_TRUE(t.end_of_turn_ids().empty());
}

TEST(ChatTemplate, Raw) {
    SentencePieceTokenizer tok(model_dir() / "tokenizer.model");
    ChatTemplate t(TemplateKind::raw, tok);
    // Turn 1 is exactly what `generate` evaluates for the same text.
    EXPECT_EQ(t.render("", {user("Once upon a time")}, true), tok.encode("Once upon a time", true));
    // Later user messages are their own segments; a loaded reply continues the text before it.
    const std::vector<ChatMessage> m = {user("Once upon a time"), assistant(", there was a cat."), user("The dog")};
    EXPECT_EQ(t.render("", m, true),
              cat({tok.encode("Once upon a time, there was a cat.", true), tok.encode("The dog", false)}));
    EXPECT_EQ(t.render_text("", m, true), "<s>Once upon a time, there was a cat. The dog");
    EXPECT_EQ(t.render("A story.", {user("Tom")}, true), cat({tok.encode("A story.", true), tok.encode("Tom", false)}));
    EXPECT_TRUE(t.end_of_turn_ids().empty());
}

// A generated reply is its ids: each turn's rendering extends the previous prompt plus the reply.
TEST(ChatTemplate, GeneratedRepliesKeepTheirIds) {
    test::TempDir tmp;
    SentencePieceTokenizer llama(llama2_tokenizer()), chatml_tok(chatml_tokenizer(tmp));
    const Ids reply = {15043, 727};  // "▁Hello▁there", as a model might generate it after "[/INST]"
    for (TemplateKind k : {TemplateKind::llama2, TemplateKind::zephyr, TemplateKind::chatml, TemplateKind::raw}) {
        const Tokenizer& tok = k == TemplateKind::chatml ? chatml_tok : llama;
        ChatTemplate t(k, tok);
        const Ids p1 = t.render("Sys", {user("Hi")}, true);
        const Ids p2 = t.render("Sys", {user("Hi"), generated("Hello there", reply), user("Bye")}, true);
        ASSERT_GT(p2.size(), p1.size() + reply.size()) << template_name(k);
        EXPECT_EQ(Ids(p2.begin(), p2.begin() + long(p1.size())), p1) << template_name(k);
        EXPECT_EQ(Ids(p2.begin() + long(p1.size()), p2.begin() + long(p1.size() + reply.size())), reply)
            << template_name(k);
        const Ids added(p2.begin() + long(p1.size() + reply.size()), p2.end());
        Ids expected;
        switch (k) {
            case TemplateKind::llama2:
                expected = cat({{2, 1}, tok.encode("[INST] Bye [/INST]", false)});
                break;
            case TemplateKind::zephyr:
                expected =
                    cat({{2}, tok.encode("\n<|user|>\nBye", false), {2}, tok.encode("\n<|assistant|>\n", false)});
                break;
            case TemplateKind::chatml:
                expected = cat({{32001},
                                tok.encode("\n", false),
                                {32000},
                                tok.encode("user\nBye", false),
                                {32001},
                                tok.encode("\n", false),
                                {32000},
                                tok.encode("assistant\n", false)});
                break;
            case TemplateKind::raw:
                expected = tok.encode("Bye", false);
                break;
            case TemplateKind::llama3:  // (BPE: ChatTemplateLlama3 below)
                FAIL();
        }
        EXPECT_EQ(added, expected) << template_name(k);
    }
}

TEST(ChatTemplate, RolesMustAlternate) {
    SentencePieceTokenizer tok(llama2_tokenizer());
    ChatTemplate t(TemplateKind::chatml, tok);
    EXPECT_THROW(t.render("", {assistant("x")}, true), Error);
    EXPECT_THROW(t.render("", {user("a"), user("b")}, true), Error);
}

// ---- ChatSession on stories260K (greedy) ----

struct ChatFixture {
    Model model{model_dir()};
    SentencePieceTokenizer tok{model_dir() / "tokenizer.model"};
    Context ctx;
    ChatTemplate tmpl;
    ChatSession session;
    ChatFixture(TemplateKind k = TemplateKind::raw, int64_t n_ctx = 0)
        : ctx(model, ContextParams{n_ctx, 512}), tmpl(k, tok), session(ctx, tok, tmpl, greedy(), stop_ids()) {
        set_threads(1);
    }
    static SamplerParams greedy() {
        SamplerParams p;
        p.temp = 0;
        return p;
    }
    std::vector<int32_t> stop_ids() const {
        Ids s = tmpl.end_of_turn_ids();
        for (int32_t id : eos_ids(model.config(), tok))
            if (std::find(s.begin(), s.end(), id) == s.end()) s.push_back(id);
        return s;
    }
    // The reply's ids: what the session keeps for the last assistant message.
    const Ids& last_ids() const { return session.messages().back().ids; }
};

TEST(ChatSession, FirstReplyEqualsGenerate) {
    ChatFixture f;
    std::string streamed;
    const ChatTurn t = f.session.send("Once upon a time", 40, [&](const std::string& s) { streamed += s; });
    // generate() on the same text, on a fresh context.
    Context ctx(f.model);
    Sampler sampler(ChatFixture::greedy());
    StreamDecoder dec(f.tok);
    Ids tokens = f.tok.encode("Once upon a time", true);
    const size_t n0 = tokens.size();
    std::string text;
    for (int32_t id : tokens) dec.push(id);
    const GenerateStats g =
        generate(ctx, sampler, dec, tokens, 40, eos_ids(f.model.config(), f.tok), [&](int32_t, const std::string& s) {
            text += s;
            return true;
        });
    text += dec.flush();
    EXPECT_EQ(t.stats.n_prompt, int64_t(n0));
    EXPECT_EQ(t.stats.n_generated, g.n_generated);
    EXPECT_EQ(f.last_ids(), Ids(tokens.begin() + long(n0), tokens.end()));
    EXPECT_EQ(streamed, text);
    EXPECT_EQ(t.reply, text);
    EXPECT_EQ(text.substr(0, 5), ", the") << text;
}

// A Ctrl-C while the prompt is evaluated (the stop flag) ends the turn before its reply: nothing of that prompt
// is in the cache, and the next turn evaluates it along with the new message, then replies as usual.
TEST(ChatSession, AStopDuringThePromptLeavesItToTheNextTurn) {
    ChatFixture f;
    std::atomic<bool> stop{true};
    std::string streamed;
    const ChatTurn t = f.session.send(
        "Once upon a time", 40, [&](const std::string& s) { streamed += s; }, &stop);
    EXPECT_TRUE(t.stats.interrupted);
    EXPECT_EQ(t.stats.n_prompt, 0);
    EXPECT_EQ(t.stats.n_generated, 0);
    EXPECT_EQ(streamed, "");
    EXPECT_EQ(f.ctx.n_past(), 0);
    ASSERT_EQ(f.session.messages().size(), 2u);  // the message, with an empty reply
    EXPECT_EQ(f.session.messages()[1].content, "");
    stop = false;
    const ChatTurn next = f.session.send(
        "Lily smiled", 20, [](const std::string&) {}, &stop);
    EXPECT_FALSE(next.stats.interrupted);
    EXPECT_EQ(next.reused, 0);
    // Both messages evaluated now (raw template: the texts one after the other).
    EXPECT_GE(next.stats.n_prompt,
              int64_t(f.tok.encode("Once upon a time", true).size() + f.tok.encode("Lily smiled", false).size()));
    EXPECT_EQ(next.stats.n_prompt, f.ctx.n_past() - next.stats.n_generated + 1);
    EXPECT_GT(next.stats.n_generated, 0);
    EXPECT_EQ(f.session.messages().size(), 4u);
}

// generate() reports a stop that cut the prompt, also when nothing was to be sampled (-n 0).
TEST(Generate, AStopDuringThePromptIsReported) {
    ChatFixture f;
    for (int64_t n_predict : {0, 5}) {
        Context ctx(f.model);
        Sampler sampler(ChatFixture::greedy());
        StreamDecoder dec(f.tok);
        Ids tokens = f.tok.encode("Once upon a time", true);
        const std::atomic<bool> stop{true};
        const GenerateStats g = generate(
            ctx, sampler, dec, tokens, n_predict, {}, [](int32_t, const std::string&) { return true; }, &stop);
        EXPECT_TRUE(g.interrupted) << n_predict;
        EXPECT_EQ(g.n_prompt, 0);
        EXPECT_EQ(g.n_generated, 0);
        EXPECT_EQ(ctx.n_past(), 0);
    }
}

// Turn N evaluates only its new tokens: the new user message's segment, plus the last reply token when the
// reply stopped at n_predict (sampled, not yet evaluated).
TEST(ChatSession, EachTurnEvaluatesOnlyNewTokensRaw) {
    ChatFixture f;
    const std::vector<std::string> users = {"Once upon a time", "The dog ran to the park", "Lily smiled"};
    for (size_t i = 0; i < users.size(); ++i) {
        const int64_t before = f.ctx.n_past();
        const ChatTurn t = f.session.send(users[i], 20, nullptr);
        const int64_t expected =
            i == 0 ? int64_t(f.tok.encode(users[i], true).size()) : int64_t(f.tok.encode(users[i], false).size()) + 1;
        EXPECT_EQ(t.stats.n_prompt, expected) << "turn " << i + 1;
        EXPECT_EQ(t.reused, before) << "turn " << i + 1;
        EXPECT_EQ(t.stats.n_generated, 20);
        EXPECT_FALSE(t.stats.stopped_eos);  // so the last reply token is the pending one
    }
    EXPECT_EQ(f.session.messages().size(), 6u);
    // The cache holds the rendering of the conversation but the last reply token.
    const Ids all = f.session.render(false);
    EXPECT_EQ(f.session.cached(), Ids(all.begin(), all.end() - 1));
    EXPECT_EQ(f.ctx.n_past(), int64_t(all.size()) - 1);
}

TEST(ChatSession, EachTurnEvaluatesOnlyNewTokensLlama2) {
    ChatFixture f(TemplateKind::llama2);
    ChatTurn t = f.session.send("Tell me a story.", 12, nullptr);
    EXPECT_EQ(t.stats.n_prompt, int64_t(1 + f.tok.encode("[INST] Tell me a story. [/INST]", false).size()));
    const bool eos = t.stats.stopped_eos;
    t = f.session.send("Another one.", 12, nullptr);
    // (the last reply token if it is pending) </s> <s> [INST] Another one. [/INST]
    EXPECT_EQ(t.stats.n_prompt, int64_t((eos ? 0 : 1) + 2 + f.tok.encode("[INST] Another one. [/INST]", false).size()));
}

// A changed history (here the system prompt) is re-evaluated from the first token that differs.
TEST(ChatSession, SystemChangeKeepsCommonPrefix) {
    ChatFixture f;
    f.session.send("Once upon a time", 10, nullptr);
    const Ids r1 = f.last_ids();
    f.session.set_system("Tom had a red ball.");
    const ChatTurn t = f.session.send("The end", 10, nullptr);
    // BOS stays; then the system segment, turn 1, its reply and the new message are evaluated.
    EXPECT_EQ(t.reused, 1);
    const Ids prompt = cat({f.tok.encode("Tom had a red ball.", true), f.tok.encode("Once upon a time", false), r1,
                            f.tok.encode("The end", false)});
    EXPECT_EQ(t.stats.n_prompt, int64_t(prompt.size()) - 1);
    const Ids all = f.session.render(false);
    EXPECT_EQ(Ids(all.begin(), all.begin() + long(prompt.size())), prompt);
}

TEST(ChatSession, ResetGivesTheFreshReply) {
    ChatFixture f;
    const std::string r1 = f.session.send("Once upon a time", 30, nullptr).reply;
    f.session.send("The dog", 30, nullptr);
    f.session.reset();
    EXPECT_TRUE(f.session.messages().empty());
    EXPECT_EQ(f.ctx.n_past(), 0);
    const ChatTurn t = f.session.send("Once upon a time", 30, nullptr);
    EXPECT_EQ(t.reply, r1);
    EXPECT_EQ(t.stats.n_prompt, int64_t(f.tok.encode("Once upon a time", true).size()));
}

// Seeded sampling: reset restores the sampler's random state too.
TEST(ChatSession, ResetRestartsTheSeed) {
    Model model(model_dir());
    SentencePieceTokenizer tok(model_dir() / "tokenizer.model");
    Context ctx(model);
    ChatTemplate tmpl(TemplateKind::raw, tok);
    SamplerParams p;
    p.temp = 1.0f;
    p.seed = 7;
    ChatSession s(ctx, tok, tmpl, p, eos_ids(model.config(), tok));
    const std::string r1 = s.send("Once upon a time", 30, nullptr).reply;
    s.send("Once upon a time", 30, nullptr);
    s.reset();
    EXPECT_EQ(s.send("Once upon a time", 30, nullptr).reply, r1);
}

TEST(ChatSession, ContextOverflowDropsOldestTurns) {
    ChatFixture f(TemplateKind::raw, 64);
    const std::string u1 = "Once upon a time there was a little girl named Lily who loved to play in the park";
    const std::string u2 = "One day a big dog came to the park and wanted to play with the ball";
    std::vector<std::string> notices;
    auto note = [&](const std::string& s) { notices.push_back(s); };
    ChatTurn t = f.session.send(u1, 16, nullptr, nullptr, note);
    EXPECT_EQ(t.dropped_turns, 0);
    t = f.session.send(u2, 16, nullptr, nullptr, note);
    EXPECT_EQ(t.dropped_turns, 1);
    ASSERT_EQ(notices.size(), 1u);
    EXPECT_NE(notices[0].find("dropped the oldest 1 turn"), std::string::npos) << notices[0];
    ASSERT_EQ(f.session.messages().size(), 2u);
    EXPECT_EQ(f.session.messages()[0].content, u2);
    EXPECT_LE(f.ctx.n_past(), 64);
    // The kept conversation is just u2: the same reply as a fresh session given u2.
    ChatFixture fresh(TemplateKind::raw, 64);
    EXPECT_EQ(t.reply, fresh.session.send(u2, 16, nullptr).reply);

    // A message too long for the context even alone is rejected; nothing changes.
    const int64_t n_past = f.ctx.n_past();
    std::string longer;
    for (int i = 0; i < 8; ++i) longer += u1 + " ";
    notices.clear();
    t = f.session.send(longer, 16, nullptr, nullptr, note);
    EXPECT_TRUE(t.rejected);
    ASSERT_EQ(notices.size(), 1u);
    EXPECT_NE(notices[0].find("/reset"), std::string::npos) << notices[0];
    EXPECT_EQ(f.session.messages().size(), 2u);
    EXPECT_EQ(f.ctx.n_past(), n_past);
    // And the session goes on.
    t = f.session.send("Lily smiled", 8, nullptr, nullptr, note);
    EXPECT_FALSE(t.rejected);
    EXPECT_EQ(t.stats.n_generated, 8);
}

// A reply that fills the context is cut (and said so); the next turn drops old turns and goes on.
TEST(ChatSession, ReplyCutByFullContext) {
    ChatFixture f(TemplateKind::raw, 32);
    std::vector<std::string> notices;
    auto note = [&](const std::string& s) { notices.push_back(s); };
    ChatTurn t = f.session.send("Once upon a time", -1, nullptr, nullptr, note);
    EXPECT_TRUE(t.stats.stopped_ctx);
    ASSERT_EQ(notices.size(), 1u);
    EXPECT_NE(notices[0].find("cut"), std::string::npos) << notices[0];
    t = f.session.send("The dog", 4, nullptr, nullptr, note);
    EXPECT_EQ(t.dropped_turns, 1);
    EXPECT_EQ(t.stats.n_generated, 4);
}

// Stopping mid-reply keeps what was generated; all of it is in the cache, so the next turn evaluates only the
// new message.
TEST(ChatSession, InterruptedReplyIsKept) {
    ChatFixture f;
    std::atomic<bool> stop{false};
    int pieces = 0;
    ChatTurn t = f.session.send(
        "Once upon a time", 100,
        [&](const std::string&) {
            if (++pieces == 5) stop = true;
        },
        &stop);
    EXPECT_TRUE(t.stats.interrupted);
    EXPECT_EQ(t.stats.n_generated, 5);
    EXPECT_EQ(f.last_ids().size(), 5u);
    stop = false;
    t = f.session.send("The dog", 5, nullptr, &stop);
    EXPECT_EQ(t.stats.n_prompt, int64_t(f.tok.encode("The dog", false).size()));
}

TEST(ChatSession, JsonRoundTrip) {
    ChatFixture f;
    f.session.set_system("A story.");
    f.session.send("Once upon a time", 10, nullptr);
    f.session.send("The dog", 10, nullptr);
    const nlohmann::json j = f.session.to_json();
    EXPECT_EQ(j["template"], "raw");
    EXPECT_EQ(j["system"], "A story.");
    ASSERT_EQ(j["messages"].size(), 4u);
    EXPECT_EQ(j["messages"][0], (nlohmann::json{{"role", "user"}, {"content", "Once upon a time"}}));
    EXPECT_EQ(j["messages"][1]["role"], "assistant");
    EXPECT_EQ(j["messages"][1]["content"], f.session.messages()[1].content);

    ChatFixture g;
    g.session.from_json(j, "t.json");
    EXPECT_EQ(g.session.to_json(), j);
    EXPECT_EQ(g.session.system(), "A story.");
    // Loaded replies are re-encoded from their text; the next turn evaluates the whole rendering.
    const ChatTurn t = g.session.send("Lily smiled", 5, nullptr);
    EXPECT_EQ(t.reused, 0);
    const std::string a1 = j["messages"][1]["content"], a2 = j["messages"][3]["content"];
    const Ids prompt = cat({g.tok.encode("A story.", true), g.tok.encode("Once upon a time" + a1, false),
                            g.tok.encode("The dog" + a2, false), g.tok.encode("Lily smiled", false)});
    EXPECT_EQ(t.stats.n_prompt, int64_t(prompt.size()));

    const std::vector<nlohmann::json> bad = {
        nlohmann::json::array(),
        {{"messages", 3}},
        {{"messages", {{{"role", "assistant"}, {"content", "x"}}}}},
        {{"messages", {{{"role", "user"}, {"content", "x"}}}}},  // no reply
        {{"messages", {{{"role", "user"}, {"content", 5}}, {{"role", "assistant"}, {"content", "y"}}}}},
        {{"system", 1}, {"messages", nlohmann::json::array()}},
    };
    for (const auto& b : bad) {
        const nlohmann::json before = g.session.to_json();
        try {
            g.session.from_json(b, "bad.json");
            ADD_FAILURE() << "accepted " << b.dump();
        } catch (const Error& e) {
            EXPECT_EQ(std::string(e.what()).rfind("bad.json", 0), 0u) << e.what();
        }
        EXPECT_EQ(g.session.to_json(), before) << "changed by " << b.dump();
    }
}

}  // namespace
}  // namespace plainllama
