// plainllama: one binary, subcommands over the core library. Only this file catches errors.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <ext/stdio_sync_filebuf.h>
#include <iostream>
#include <map>
#include <string>

#include "commands.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/sys/error.h"

namespace {

// stdio keeps that a write to stdout failed, not why (a later call resets errno): stdout is a FILE of our own over fd 1
// that notes the first errno a write gave (ENOSPC on a full disk or /dev/full), for the message at exit. A write a
// signal interrupts (EINTR: chat's Ctrl-C while output is blocked) fails as before and is not noted.
int g_stdout_errno = 0;

ssize_t write_stdout(void*, const char* buf, size_t n) {
    const ssize_t w = ::write(1, buf, n);
    if (w < 0 && errno != EINTR && g_stdout_errno == 0) g_stdout_errno = errno;
    return w;
}

void own_stdout() {
    cookie_io_functions_t io{};
    io.write = write_stdout;
    std::FILE* f = ::fopencookie(nullptr, "w", io);
    if (!f) return;
    std::setvbuf(f, nullptr, ::isatty(1) ? _IOLBF : _IOFBF, BUFSIZ);
    stdout = f;
    // std::cout (help, --version) through it too; never destroyed: the library flushes std::cout after every static
    // object of ours is gone
    std::cout.rdbuf(new __gnu_cxx::stdio_sync_filebuf<char>(f));
}

// What went to stdout must have got there (a full disk, /dev/full): an error with status 1 otherwise. A closed
// pipe ends the program by SIGPIPE before this, quietly, as other Unix tools; EPIPE (SIGPIPE ignored by the
// parent) ends it quietly too.
int finish_stdout(int status) {
    std::cout.flush();
    errno = 0;
    const bool flushed = std::fflush(stdout) == 0 && !std::cout.fail();
    const int e = g_stdout_errno ? g_stdout_errno : errno;
    if (e == EPIPE) return 141;
    if (!flushed || std::ferror(stdout)) {
        std::fprintf(stderr, "plainllama: error: stdout: write failed%s%s\n", e ? ": " : "", e ? std::strerror(e) : "");
        return 1;
    }
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace plainllama;
    own_stdout();
    CLI::App app{"plainllama: LLaMA inference on the CPU, from Hugging Face checkpoints"};
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "Help for every subcommand");
    std::map<CLI::App*, cli::Run> runs;
    auto add = [&](cli::Run (*f)(CLI::App&), const char* name) {
        cli::Run r = f(app);
        runs[app.get_subcommand(name)] = std::move(r);
    };
    add(cli::add_generate, "generate");
    add(cli::add_chat, "chat");
    add(cli::add_perplexity, "perplexity");
    add(cli::add_bench, "bench");
    add(cli::add_inspect, "inspect");
    add(cli::add_tokenize, "tokenize");
    add(cli::add_quantize, "quantize");
    add(cli::add_serve, "serve");
    app.set_version_flag("--version", std::string("plainllama ") + PLAINLLAMA_VERSION);
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
        names += (names.empty() ? "" : ", ") + sub->get_name();
        known = known || (argc > 1 && sub->get_name() == argv[1]);
    }
    if (argc > 1 && argv[1][0] != '-' && !known) {
        std::fprintf(stderr, "plainllama: error: unknown subcommand '%s' (expected one of: %s; see --help)\n", argv[1],
                     names.c_str());
        return 2;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return finish_stdout(app.exit(e));
    } catch (const CLI::CallForAllHelp& e) {
        return finish_stdout(app.exit(e));
    } catch (const CLI::CallForVersion& e) {
        return finish_stdout(app.exit(e));
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "plainllama: error: %s (see --help)\n", e.what());
        return 2;
    }
    try {
        kernels_isa();  // chooses the kernels now: a PLAINLLAMA_KERNELS this CPU cannot run is an error before any work
        for (auto& [sub, run] : runs)
            if (sub->parsed()) {
                return finish_stdout(run());
            }
        return 2;
    } catch (const UsageError& e) {
        std::fprintf(stderr, "plainllama: error: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "plainllama: error: %s\n", e.what());
        return 1;
    }
}
