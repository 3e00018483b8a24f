// `plainllama chat` end to end: scripted sessions through a pipe on stories260K (raw template, greedy).
// Each reply is one chunk of stdout ending in "\n"; replies are compared between sessions rather than split.
#include <gtest/gtest.h>

#include <algorithm>

#include "test_util.h"

namespace plainllama {
namespace {

using test::model_dir;
using test::run_binary;

// Greedy, one thread, -n 30 unless `extra` gives -n.
test::RunResult chat(const std::string& input, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"chat", "-m", model_dir().string(), "--temp", "0", "-t", "1"};
    if (std::find(extra.begin(), extra.end(), "-n") == extra.end()) args.insert(args.end(), {"-n", "30"});
    args.insert(args.end(), extra.begin(), extra.end());
    return run_binary(args, input);
}

bool has(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

// Turn 1 of the raw template is BOS + the text: the reply is what `generate` continues the same prompt with.
TEST(ChatCli, FirstReplyEqualsGenerate) {
    const auto g = run_binary({"generate", "-m", model_dir().string(), "-p", "Once upon a time", "--temp", "0", "-t",
                               "1", "-n", "30", "--quiet"});
    const auto c = chat("Once upon a time\n", {"--quiet"});
    ASSERT_EQ(g.status, 0) << g.err;
    ASSERT_EQ(c.status, 0) << c.err;
    EXPECT_EQ(c.err, "");
    EXPECT_EQ("Once upon a time" + c.out, g.out);
}

// Later turns see the conversation: a second turn's reply differs from the same text in a fresh session.
// /reset returns to a fresh session's state.
TEST(ChatCli, MultiTurnAndReset) {
    const auto a = chat("Once upon a time\nThe dog\n");
    const auto first = chat("Once upon a time\n"), alone = chat("The dog\n");
    ASSERT_EQ(a.status, 0) << a.err;
    ASSERT_EQ(first.out.back(), '\n');
    ASSERT_EQ(a.out.rfind(first.out, 0), 0u) << a.out;
    EXPECT_NE(a.out.substr(first.out.size()), alone.out);
    EXPECT_FALSE(alone.out.empty());
    const auto r = chat("Once upon a time\nThe dog\n/reset\nOnce upon a time\nThe dog\n");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, a.out + a.out);
    EXPECT_TRUE(has(r.err, "conversation cleared")) << r.err;
}

// /system TEXT sets the system prompt from the next message on (a session with --system TEXT gives the same reply);
// /system alone clears it.
TEST(ChatCli, SystemCommand) {
    const auto set = chat("/system A story about a dog.\nOnce upon a time\n");
    const auto flag = chat("Once upon a time\n", {"--system", "A story about a dog."});
    const auto none = chat("Once upon a time\n");
    ASSERT_EQ(set.status, 0) << set.err;
    EXPECT_EQ(set.out, flag.out);
    EXPECT_NE(set.out, none.out);
    EXPECT_TRUE(has(set.err, "system prompt set; it applies from the next message")) << set.err;
    const auto cleared = chat("/system A story about a dog.\n/system\nOnce upon a time\n");
    EXPECT_EQ(cleared.out, none.out);
    EXPECT_TRUE(has(cleared.err, "system prompt cleared")) << cleared.err;
}

// -c 64: the second long turn drops the first (said on stderr); the kept conversation is the second turn alone,
// so its reply is a fresh session's. A turn too long even alone is refused; the session goes on, and piped input
// then exits 1 when it is done.
TEST(ChatCli, ContextOverflow) {
    const std::string u1 = "Once upon a time there was a little girl named Lily who loved to play in the park";
    const std::string u2 = "One day a big dog came to the park and wanted to play with the ball";
    std::string huge;
    for (int i = 0; i < 10; ++i) huge += u1 + " ";
    const auto a = chat(u1 + "\n" + u2 + "\n" + huge + "\n" + "Lily smiled\n", {"-c", "64", "-n", "16"});
    const auto b1 = chat(u1 + "\n", {"-c", "64", "-n", "16"}), b2 = chat(u2 + "\n", {"-c", "64", "-n", "16"});
    ASSERT_EQ(a.status, 1) << a.err;
    EXPECT_TRUE(has(a.err, "[the context of 64 tokens is full: dropped the oldest 1 turn")) << a.err;
    EXPECT_TRUE(has(a.err, "it was not sent")) << a.err;
    ASSERT_EQ(a.out.rfind(b1.out + b2.out, 0), 0u) << a.out;
    EXPECT_GT(a.out.size(), b1.out.size() + b2.out.size() + 1);  // "Lily smiled" was answered
    EXPECT_FALSE(has(a.err, "error:")) << a.err;
}

TEST(ChatCli, EofCommandsAndBadInput) {
    // Empty stdin: a clean exit.
    auto r = chat("");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "");
    // The last line without "\n" is still a turn; unknown commands and bad arguments are one line each, and make
    // piped input exit 1 once it is done.
    r = chat("/bogus\n/save\n/load /nonexistent/x.json\n\n   \n\xff\xfe\nOnce upon a time", {"--quiet"});
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_EQ(r.out, chat("Once upon a time\n", {"--quiet"}).out);
    EXPECT_EQ(r.err,
              "unknown command /bogus (/help lists the commands)\n"
              "error: /save needs a file name: /save FILE\n"
              "error: /nonexistent/x.json: cannot open: No such file or directory\n"
              "this line is not valid UTF-8; it was not sent\n");
    // /exit stops reading; /help and /stats go to stderr.
    r = chat("/help\n/stats\n/exit\nOnce upon a time\n");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(has(r.err, "/system TEXT")) << r.err;
    EXPECT_TRUE(has(r.err, "context: 0 / 512 tokens used")) << r.err;
    // "//" sends a line starting with "/".
    r = chat("//Once upon a time\n", {"--quiet"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_FALSE(r.out.empty());
}

TEST(ChatCli, StatsCountsTokens) {
    const auto r = chat("Once upon a time\n/stats\n", {"-n", "10"});
    ASSERT_EQ(r.status, 0) << r.err;
    // the conversation: BOS + 4 prompt tokens + 10 generated
    EXPECT_TRUE(has(r.err, "context: 15 / 512 tokens used")) << r.err;
    EXPECT_TRUE(has(r.err, "prompt eval time")) << r.err;
    EXPECT_TRUE(has(r.err, "/    10 tokens")) << r.err;
}

// /save writes the transcript; /load in another session restores it (saving again gives the same file), and
// the next reply is the same as after /load anywhere.
TEST(ChatCli, SaveAndLoadRoundTrip) {
    test::TempDir tmp;
    const std::string f1 = (tmp / "a.json").string(), f2 = (tmp / "b.json").string();
    const auto a = chat("Once upon a time\nThe dog\n/save " + f1 + "\n", {"--system", "A short story."});
    ASSERT_EQ(a.status, 0) << a.err;
    const auto j = test::read_json(f1);
    EXPECT_EQ(j["template"], "raw");
    EXPECT_EQ(j["system"], "A short story.");
    ASSERT_EQ(j["messages"].size(), 4u);
    EXPECT_EQ(j["messages"][0], (nlohmann::json{{"role", "user"}, {"content", "Once upon a time"}}));
    EXPECT_EQ(j["messages"][2], (nlohmann::json{{"role", "user"}, {"content", "The dog"}}));
    EXPECT_EQ(j["messages"][1]["role"], "assistant");
    EXPECT_EQ(j["messages"][3]["role"], "assistant");
    // The replies saved are the replies printed.
    EXPECT_EQ(a.out, j["messages"][1]["content"].get<std::string>() + "\n" +
                         j["messages"][3]["content"].get<std::string>() + "\n");

    const auto b = chat("/load " + f1 + "\n/save " + f2 + "\nLily smiled\n");
    ASSERT_EQ(b.status, 0) << b.err;
    EXPECT_TRUE(has(b.err, "loaded 4 messages")) << b.err;
    EXPECT_EQ(test::read_file(f2), test::read_file(f1));
    // /stats after /load counts the loaded conversation, as it counts the same conversation held live
    auto context_line = [](const std::string& err) {
        const size_t at = err.rfind("context: ");
        return err.substr(at, err.find('\n', at) - at);
    };
    const auto live = chat("Once upon a time\nThe dog\n/stats\n", {"--system", "A short story."});
    const auto loaded = chat("Tom had a ball, a big red ball\n/load " + f1 + "\n/stats\n");
    EXPECT_EQ(context_line(loaded.err), context_line(live.err)) << loaded.err;
    // /load also replaces a conversation in progress (and its system prompt).
    const auto c = chat("Tom had a ball\n/load " + f1 + "\nLily smiled\n");
    ASSERT_EQ(c.status, 0) << c.err;
    EXPECT_EQ(c.out.substr(c.out.find('\n') + 1), b.out);

    test::write_file(tmp / "bad.json", R"({"messages": [{"role": "assistant", "content": "x"}]})");
    const auto d = chat("/load " + (tmp / "bad.json").string() + "\n", {"--quiet"});
    EXPECT_EQ(d.status, 1);
    EXPECT_TRUE(has(d.err, "bad.json: message 1: role is \"assistant\", expected \"user\"")) << d.err;
}

// /save writes through a temporary file renamed into place: a failed write (a full device) is an error naming the
// file and its reason, never "saved"; a good one leaves the transcript and no temporary file beside it.
TEST(ChatCli, SaveFailsLoudlyAndWritesWhole) {
    test::TempDir tmp;
    const std::string f = (tmp / "t.json").string();
    test::write_file(f, "old transcript");
    const auto full = chat("Once upon a time\n/save /dev/full\n");
    EXPECT_EQ(full.status, 1);
    EXPECT_TRUE(has(full.err, "/dev/full: cannot be written: No space left on device")) << full.err;
    EXPECT_FALSE(has(full.err, "saved")) << full.err;
    const auto good = chat("Once upon a time\n/save " + f + "\n");
    ASSERT_EQ(good.status, 0) << good.err;
    EXPECT_TRUE(has(good.err, "saved 2 messages")) << good.err;
    EXPECT_EQ(nlohmann::json::parse(test::read_file(f))["messages"].size(), 2u);
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(tmp.path())) files += e.is_regular_file();
    EXPECT_EQ(files, 1);  // no temporary file left
    // a folder that does not exist: an error, and the old file elsewhere untouched
    const auto missing = chat("Once upon a time\n/save " + (tmp / "no" / "t.json").string() + "\n");
    EXPECT_EQ(missing.status, 1);
    EXPECT_TRUE(has(missing.err, "cannot be written")) << missing.err;
}

// A chat template on a model without one: llama2's <s> and </s> are stories260K's BOS and EOS.
TEST(ChatCli, TemplatesRun) {
    for (const char* t : {"llama2", "zephyr", "chatml"}) {
        const auto r = chat("Hello\nHow are you?\n", {"--template", t, "-n", "8"});
        EXPECT_EQ(r.status, 0) << t << "\n" << r.err;
        EXPECT_TRUE(has(r.err, std::string("chat template: ") + t)) << r.err;
        EXPECT_GE(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
        EXPECT_EQ(has(r.err, "'<|im_start|>' is not in the vocabulary"), std::string(t) == "chatml") << r.err;
    }
}

TEST(ChatCli, AutoTemplateFromTokenizerConfig) {
    test::TempDir tmp;
    test::copy_model(model_dir(), tmp / "m");
    test::write_file(tmp / "m" / "tokenizer_config.json",
                     R"({"chat_template": "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"})");
    const auto r = run_binary({"chat", "-m", (tmp / "m").string(), "--temp", "0", "-t", "1", "-n", "5"}, "Hi\n");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.err, "chat template: llama2")) << r.err;
}

TEST(ChatCli, InvalidFlags) {
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"chat", "-m", model_dir().string(), "--template", "vicuna"},
                                               {"chat", "-m", model_dir().string(), "-n", "-2"},
                                               {"chat", "-m", model_dir().string(), "--temp", "-1"}}) {
        const auto r = run_binary(args, "Hi\n");
        EXPECT_EQ(r.status, 2) << r.err;
        EXPECT_EQ(r.out, "");
    }
    const auto r = run_binary({"chat", "-m", "/nonexistent/model"}, "Hi\n");
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err.rfind("plainllama: error: ", 0), 0u) << r.err;
}

}  // namespace
}  // namespace plainllama

namespace plainllama {
namespace {

// A 1 MB line (far more tokens than the context) and a binary line with NUL and control bytes: each refused
// or handled with a message, and the session goes on to answer the next line as a fresh session would.
TEST(ChatCliHostile, HugeAndBinaryLines) {
    std::string huge;
    while (huge.size() < (1u << 20)) huge += "Once upon a time ";
    const std::string binary("\x01\x02\x00\x7f\x1b[2J\x00zz", 11);
    const auto fresh = run_binary(
        {"chat", "-m", test::model_dir().string(), "--temp", "0", "-t", "1", "-n", "20", "--quiet"}, "The dog\n");
    const auto r = run_binary({"chat", "-m", test::model_dir().string(), "--temp", "0", "-t", "1", "-n", "20"},
                              huge + "\n" + binary + "\n/reset\nThe dog\n");
    ASSERT_EQ(r.status, 1) << r.err.substr(0, 2000);  // the huge line was refused
    EXPECT_LT(r.err.size(), 4000u) << "the huge line must not be echoed back";
    ASSERT_GE(r.out.size(), fresh.out.size());
    EXPECT_EQ(r.out.substr(r.out.size() - fresh.out.size()), fresh.out);
}

}  // namespace
}  // namespace plainllama
