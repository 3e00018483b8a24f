// plainllama chat: an interactive REPL over a ChatSession. Each line on stdin is a user turn (a terminal gets a
// "> " prompt; a pipe scripts the session); replies stream to stdout, one line each; everything else goes to
// stderr.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <optional>

#include "commands.h"
#include "common.h"
#include "line_input.h"
#include "plainllama/io/file.h"
#include "plainllama/io/utf8.h"
#include "plainllama/run/chat.h"
#include "plainllama/sys/error.h"

namespace plainllama::cli {

namespace {

const char* kCommands =
    "Commands:\n"
    "  /help           this list\n"
    "  /reset          clear the conversation and the cache (the system prompt stays)\n"
    "  /system TEXT    set the system prompt (empty: none); it applies from the next message\n"
    "  /save FILE      write the transcript as JSON {\"template\", \"system\", \"messages\": [{\"role\", "
    "\"content\"}]}\n"
    "  /load FILE      replace the conversation with a saved transcript\n"
    "  /stats          tokens used of the context, speeds\n"
    "  /exit           quit (as does Ctrl-D; Ctrl-C stops a reply, or quits at the prompt)\n"
    "A line starting with // sends the rest of it, starting with /.";

void out(const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
}

void err(const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); }

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t");
    return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

void print_stats(const ChatSession& s, const ChatTurn* last) {
    const Context& ctx = s.context();
    // the conversation as the next turn renders it (after /load, the cache still holds the previous one)
    const int64_t used = s.messages().empty() ? 0 : int64_t(s.render(false).size());
    char buf[256];
    std::snprintf(buf, sizeof buf, "context: %lld / %lld tokens used (%.1f%%); %zu messages, template %s",
                  (long long)used, (long long)ctx.n_ctx(), 100.0 * double(used) / double(ctx.n_ctx()),
                  s.messages().size(), template_name(s.chat_template().kind()));
    err(buf);
    if (last) {
        err("last turn:");
        err(perf_line("prompt eval time", last->stats.prompt_seconds, last->stats.n_prompt));
        err(perf_line("eval time", last->stats.generate_seconds, last->stats.n_generated));
    }
    err("session:");
    err(perf_line("prompt eval time", s.total_prompt_seconds(), s.total_prompt_tokens()));
    err(perf_line("eval time", s.total_generate_seconds(), s.total_generated_tokens()));
}

// Runs a slash command (`line` starts with '/'); false for /exit. Errors are printed (and `failed` set), the
// session goes on.
bool run_command(const std::string& line, ChatSession& session, const ChatTemplate& tmpl, bool quiet,
                 std::optional<ChatTurn>& last, bool& failed) {
    const size_t sp = line.find(' ');
    const std::string name = line.substr(0, sp), arg = sp == std::string::npos ? "" : trim(line.substr(sp + 1));
    try {
        if (name == "/exit" || name == "/quit") {
            return false;
        } else if (name == "/help") {
            err(kCommands);
        } else if (name == "/reset") {
            session.reset();
            last.reset();
            if (!quiet) err("conversation cleared");
        } else if (name == "/system") {
            session.set_system(arg);
            if (!quiet)
                err(arg.empty() ? "system prompt cleared" : "system prompt set; it applies from the next message");
        } else if (name == "/save") {
            if (arg.empty()) throw Error("/save needs a file name: /save FILE");
            write_file_atomic(arg, session.to_json().dump(2) + "\n");
            if (!quiet) err("saved " + std::to_string(session.messages().size()) + " messages to " + arg);
        } else if (name == "/load") {
            if (arg.empty()) throw Error("/load needs a file name: /load FILE");
            nlohmann::json j;
            try {
                j = nlohmann::json::parse(read_file(arg));
            } catch (const nlohmann::json::exception&) {
                throw Error(arg + ": not valid JSON (/load)");
            }
            session.from_json(j, arg);
            last.reset();
            if (!quiet) {
                err("loaded " + std::to_string(session.messages().size()) + " messages from " + arg);
                if (j.contains("template") && j["template"] != template_name(tmpl.kind()))
                    err("note: the transcript was saved with template " + j["template"].dump() +
                        "; it is rendered with " + template_name(tmpl.kind()));
            }
        } else if (name == "/stats") {
            print_stats(session, last ? &*last : nullptr);
        } else {
            err("unknown command " + name + " (/help lists the commands)");
            failed = true;
        }
    } catch (const Error& e) {
        err(std::string("error: ") + e.what());
        failed = true;
    }
    return true;
}

}  // namespace

Run add_chat(CLI::App& app) {
    auto* cmd =
        app.add_subcommand("chat", "Chat with a model: a REPL on a terminal, or one user turn per line of stdin");
    struct Opts {
        ModelOpts m;
        SamplingOpts s;
        std::string system, tmpl = "auto";
        int64_t n_predict = -1;
        bool no_history = false;
    };
    auto o = std::make_shared<Opts>();
    add_model_options(cmd, o->m);
    cmd->add_option("--system", o->system, "System prompt");
    cmd->add_option(
           "--template", o->tmpl,
           "Chat template; auto: the model's tokenizer_config.json chat_template, else raw (plain continuation)")
        ->check(CLI::IsMember({"auto", "raw", "llama2", "zephyr", "chatml", "llama3"}))
        ->capture_default_str();
    cmd->add_option("-n,--n-predict", o->n_predict,
                    "Most tokens per reply; -1 = until the end of the turn or a full context")
        ->transform(int_range(-1, int64_t(1) << 30))
        ->capture_default_str();
    cmd->add_flag("--no-history", o->no_history,
                  "On a terminal, neither read nor write the history file (up-arrow recalls this session's lines "
                  "only); without it: $XDG_STATE_HOME/plainllama/history or ~/.local/state/plainllama/history");
    add_sampling_options(cmd, o->s);
    cmd->footer(cmd->get_footer() + "\n\n" + kCommands);
    return [o] {
        Loaded l = load(o->m);
        const bool quiet = o->m.quiet;
        const Tokenizer& tok = *l.tokenizer;
        const TemplateChoice choice = choose_template(o->m.model, o->tmpl);
        const ChatTemplate tmpl(choice.kind, tok, choice);
        Context ctx(*l.model, ContextParams{o->m.ctx_size, 512, false, 1, cache_type(o->m)});
        const std::vector<int32_t> stop = reply_stop_ids(tmpl, l);
        ChatSession session(ctx, tok, tmpl, resolve_sampling(o->s, quiet), stop);
        session.set_system(o->system);

        const bool interactive = ::isatty(0);
        if (!quiet) {
            err(std::string("chat template: ") + template_name(choice.kind) + " (" + choice.reason + "); context " +
                std::to_string(ctx.n_ctx()) + " tokens");
            if (!choice.warning.empty()) err("warning: " + choice.warning);
            for (const std::string& w : tmpl.warnings()) err("warning: " + w);
            print_busy_note(l);
            if (interactive) err("/help for commands; Ctrl-D exits");
        }

        install_sigint_handler(/*restart_io=*/false);
        LineInput input(o->no_history ? HistoryFile() : default_history_file());
        std::optional<ChatTurn> last;  // the last reply, for /stats
        int status = 0;
        bool failed = false;  // a line refused or a command failed: piped input exits 1 at the end
        std::string line;
        for (;;) {
            const ReadStatus rs = input.next(line, interactive ? "> " : "");
            if (rs != ReadStatus::line) {
                if (interactive) out("\n");
                if (rs == ReadStatus::interrupted) status = 130;
                break;
            }
            const std::string t = trim(line);
            if (t.empty()) continue;
            input.remember(line);
            if (invalid_utf8_at(t) != std::string::npos) {
                err("this line is not valid UTF-8; it was not sent");
                failed = true;
                continue;
            }
            if (t[0] == '/' && t.rfind("//", 0) != 0) {
                if (!run_command(t, session, tmpl, quiet, last, failed)) break;
                continue;
            }

            const std::string text = t.rfind("//", 0) == 0 ? t.substr(1) : t;
            // Chat templates: the reply's leading whitespace (llama2's ' ' after [/INST]) is not shown.
            bool started = tmpl.kind() == TemplateKind::raw;
            bool line_open = false;                          // reply text on stdout since the last newline
            bool printed = false;                            // any reply text at all
            const bool stdout_failed = std::ferror(stdout);  // an earlier real write error is kept for the exit
            // Other work may have started or stopped on the cores since the last turn.
            if (refresh_threads(l, o->m.threads, 3) && !quiet) err("note: " + threads_note(l));
            const ChatTurn turn = session.send(
                text, o->n_predict,
                [&](const std::string& piece) {
                    const size_t b = started ? 0 : piece.find_first_not_of(" \t\n\r\f\v");
                    if (b == std::string::npos) return;
                    started = true;
                    out(piece.substr(b));
                    printed = true;
                    line_open = piece.back() != '\n';
                },
                &g_interrupted,
                [&](const std::string& notice) {
                    if (line_open) out("\n");  // the note on a line of its own, not after the reply's last word
                    line_open = false;
                    err("[" + notice + "]");
                });
            if (turn.rejected) {
                failed = true;
                continue;
            }
            last = turn;
            if (line_open || !printed) out("\n");
            if (turn.stats.interrupted || g_interrupted.load()) {  // a Ctrl-C during the reply ends only the reply
                err("[interrupted]");
                g_interrupted = false;
                if (!stdout_failed) std::clearerr(stdout);  // a write the Ctrl-C interrupted (EINTR) set the flag
            }
        }
        input.save_history();
        if (!quiet) {
            err("");
            print_stats(session, nullptr);
        }
        return status != 0 ? status : failed && !interactive ? 1 : 0;
    };
}

}  // namespace plainllama::cli
