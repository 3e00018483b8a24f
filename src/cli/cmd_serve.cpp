// plainllama serve: an OpenAI-compatible HTTP server. The socket is bound first (so a wrong --port fails at once
// and /health answers "loading"), then the model is loaded and the engine's slots start. SIGINT/SIGTERM: no new
// requests, those in flight finish (at most kDrainSeconds, or until a second signal); what still runs then ends
// with an error event or a 503, every connection closes, and the server exits 0. A signal while loading exits at
// once (128 + the signal).
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "commands.h"
#include "common.h"
#include "plainllama/serve/engine.h"
#include "plainllama/serve/http_server.h"
#include "plainllama/serve/openai.h"
#include "plainllama/sys/clock.h"
#include "plainllama/sys/error.h"

namespace plainllama::cli {

namespace {

constexpr double kDrainSeconds = 10;  // for the requests in flight to finish after a signal
constexpr double kAbortSeconds = 1;   // for the error answers of those cut short to be sent

// The API key: --api-key, else $PLAINLLAMA_API_KEY when it is set. An empty key (an unset shell variable) would
// mean no authentication without a word: refused. Blanks and line breaks around it (a key file's newline) are
// left out with a warning; a key with a blank, a control or a non-ASCII byte inside is refused (clients could not
// send it as it is).
std::string resolve_api_key(bool flag_given, const std::string& flag) {
    std::string key = flag, from = "--api-key";
    if (!flag_given) {
        const char* env = std::getenv("PLAINLLAMA_API_KEY");
        if (!env) return "";
        key = env;
        from = "PLAINLLAMA_API_KEY";
    }
    const char* blanks = " \t\r\n";
    const size_t b = key.find_first_not_of(blanks), e = key.find_last_not_of(blanks);
    const std::string stripped = b == std::string::npos ? "" : key.substr(b, e - b + 1);
    if (stripped.empty())
        throw UsageError(from + " is " + (key.empty() ? "empty" : "blank") + ": give a key, or leave " +
                         (flag_given ? "the flag out" : "the variable unset") + " for a server without one");
    for (size_t i = 0; i < stripped.size(); ++i)
        if (uint8_t(stripped[i]) <= 0x20 || uint8_t(stripped[i]) >= 0x7f)
            throw UsageError(from + ": byte " + std::to_string(b + i + 1) +
                             " of the key is a blank, a control character or not ASCII; a key is printable ASCII "
                             "without blanks");
    if (stripped.size() != key.size())
        std::fprintf(stderr,
                     "plainllama serve: warning: %s has blanks or line breaks around the key; the key is "
                     "what is between them\n",
                     from.c_str());
    return stripped;
}

// SIGINT and SIGTERM, taken by a thread of their own with sigwait (blocked in every other thread, which inherit
// the mask): no async-signal-safety to worry about, and a signal never interrupts a socket call.
class Signals {
   public:
    Signals() {
        sigemptyset(&set_);
        sigaddset(&set_, SIGINT);
        sigaddset(&set_, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set_, nullptr);
        std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not the end of the process
        thread_ = std::thread([this] {
            for (;;) {
                int sig = 0;
                if (sigwait(&set_, &sig) != 0) continue;
                std::lock_guard<std::mutex> lock(mutex_);
                if (!ready_) {  // still loading: nothing to finish
                    std::fprintf(stderr, "plainllama serve: %s while loading\n",
                                 sig == SIGINT ? "interrupted" : "terminated");
                    std::_Exit(128 + sig);
                }
                ++count_;
                changed_.notify_all();
            }
        });
        thread_.detach();
    }
    void ready() {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_ = true;
    }
    // Waits until more than `n` signals came, at most `seconds` (< 0: forever); the count.
    int wait(int n, double seconds) {
        std::unique_lock<std::mutex> lock(mutex_);
        auto more = [&] { return count_ > n; };
        if (seconds < 0)
            changed_.wait(lock, more);
        else
            changed_.wait_for(lock, std::chrono::duration<double>(seconds), more);
        return count_;
    }

   private:
    sigset_t set_{};
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable changed_;
    bool ready_ = false;
    int count_ = 0;
};

}  // namespace

Run add_serve(CLI::App& app) {
    auto* cmd = app.add_subcommand("serve",
                                   "An OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, "
                                   "/v1/models), with a chat page at /, /health, /ready and /metrics");
    struct Opts {
        ModelOpts m;
        SamplingOpts s;
        HttpOptions http;
        int parallel = 1, queue = 64;
        int64_t max_body = 8 << 20;
        std::string tmpl = "auto";
        bool no_webui = false;
    };
    auto o = std::make_shared<Opts>();
    add_model_options(cmd, o->m);
    cmd->get_option("-c")->description(
        "KV cache positions of each slot (prompt + reply); default min(max_position_embeddings, 4096)");
    cmd->add_option("--host", o->http.host,
                    "Address to listen on (127.0.0.1: this machine only; 0.0.0.0: every "
                    "interface)")
        ->capture_default_str();
    cmd->add_option("--port", o->http.port, "TCP port; 0 = any free one (the line 'listening on' says which)")
        ->transform(int_range(0, 65535))
        ->capture_default_str();
    cmd->add_option("--parallel", o->parallel,
                    "Slots: requests generated at once, in batched steps (each slot has its own -c positions)")
        ->transform(int_range(1, 256))
        ->capture_default_str();
    cmd->add_option("--queue", o->queue, "Requests that may wait for a slot; one more gets 503")
        ->transform(int_range(0, 4096))
        ->capture_default_str();
    auto* api_key = cmd->add_option(
        "--api-key", o->http.api_key,
        "Require 'Authorization: Bearer KEY' on /v1/ (default: $PLAINLLAMA_API_KEY, else none); an empty "
        "key is refused");
    cmd->add_option("--max-body", o->max_body, "Largest request body in bytes; larger gets 413")
        ->transform(int_range(1024, int64_t(1) << 30))
        ->capture_default_str();
    cmd->add_option("--max-connections", o->http.max_connections, "Connections open at once; one more gets 503")
        ->transform(int_range(1, 65536))
        ->capture_default_str();
    cmd->add_option("--timeout", o->http.timeout,
                    "Seconds a request (headers and body) has to arrive from its first byte (else 408); idle "
                    "connections, and responses the client stops reading, are closed after as long")
        ->check(CLI::Range(1.0, 3600.0))
        ->capture_default_str();
    cmd->add_flag("--no-webui", o->no_webui, "No chat page at GET / (404 there)");
    cmd->add_option("--template", o->tmpl, "Chat template for /v1/chat/completions (see chat --help)")
        ->check(CLI::IsMember({"auto", "raw", "llama2", "zephyr", "chatml", "llama3"}))
        ->capture_default_str();
    add_sampling_options(cmd, o->s);
    cmd->footer(
        "Sampling flags are the defaults for requests that do not set temperature, top_p, ...; without "
        "--seed each request without a seed gets a random one.");
    return [o, api_key] {
        // Before any thread starts: they all inherit the blocked signals. Never freed: its detached thread may take
        // a signal while the process exits.
        static Signals& signals = *new Signals;
        HttpOptions http = o->http;
        http.api_key = resolve_api_key(api_key->count() > 0, o->http.api_key);
        http.max_body = size_t(o->max_body);
        http.max_completions = o->parallel + o->queue + 4;
        http.webui = !o->no_webui;
        http.version = PLAINLLAMA_VERSION;  // those in the slots and the queue, and a few refused
        // A descriptor per connection, and some for the model's files and the rest: the soft limit is raised
        // toward the hard one when it holds fewer.
        rlimit files{};
        const rlim_t want = rlim_t(http.max_connections) + 64;
        if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY && files.rlim_cur < want) {
            files.rlim_cur = files.rlim_max == RLIM_INFINITY ? want : std::min(files.rlim_max, want);
            ::setrlimit(RLIMIT_NOFILE, &files);
        }
        HttpServer server(http);
        const int port = server.start();
        const bool quiet = o->m.quiet;
        if (!quiet) std::fprintf(stderr, "plainllama serve: loading %s ...\n", o->m.model.c_str());

        const double t_load = now_seconds();
        Loaded l = load(o->m);
        const TemplateChoice choice = choose_template(o->m.model, o->tmpl);
        const ChatTemplate tmpl(choice.kind, *l.tokenizer, choice);
        const std::vector<int32_t> stop = reply_stop_ids(tmpl, l);
        EngineParams ep;
        ep.slots = o->parallel;
        ep.n_ctx = o->m.ctx_size;
        ep.queue = o->queue;
        ep.cache_type = cache_type(o->m);
        Engine engine(*l.model, *l.tokenizer, stop, ep);

        ApiModel api;
        api.id = model_name(o->m.model);
        api.tok = l.tokenizer.get();
        api.tmpl = &tmpl;
        api.defaults = resolve_sampling(o->s, true);
        api.random_seed = o->s.seed < 0;
        api.n_ctx = engine.n_ctx();
        api.slots = engine.slots();
        api.n_vocab = l.model->config().vocab_size;
        server.set_ready(&engine, api, now_seconds() - t_load);
        signals.ready();
        std::fprintf(stderr,
                     "plainllama serve: %s, chat template %s, %d slot%s of %lld tokens, %s; listening on "
                     "http://%s:%d (Ctrl-C stops)\n",
                     api.id.c_str(), template_name(choice.kind), o->parallel, o->parallel == 1 ? "" : "s",
                     (long long)engine.n_ctx(), threads_note(l).c_str(), http.host.c_str(), port);

        signals.wait(0, -1);
        server.set_draining();
        engine.close();
        if (const int n = server.in_flight(); n > 0) {
            std::fprintf(stderr,
                         "plainllama serve: stopping: %d request%s to finish (at most %.0f s; Ctrl-C again ends "
                         "them now)\n",
                         n, n == 1 ? "" : "s", kDrainSeconds);
            const double t0 = now_seconds();
            while (server.in_flight() > 0 && now_seconds() - t0 < kDrainSeconds && signals.wait(1, 0.05) < 2) {
            }
        }
        // What still runs ends with an error (a 503, or an error event in a stream), given a moment to be sent; then
        // every connection closes, whether its client reads or not.
        engine.abort_all("the server is shutting down");
        const double t1 = now_seconds();
        while (server.in_flight() > 0 && now_seconds() - t1 < kAbortSeconds)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        server.stop();
        std::fprintf(stderr, "plainllama serve: stopped\n");
        return 0;
    };
}

}  // namespace plainllama::cli
