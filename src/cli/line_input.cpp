#include "line_input.h"

#include <histedit.h>
#include <langinfo.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common.h"
#include "plainllama/io/file.h"
#include "plainllama/sys/error.h"

namespace plainllama::cli {

namespace {

constexpr int kHistorySize = 1000;  // lines kept in the file

void warn(const std::string& s) { std::fprintf(stderr, "warning: %s\n", s.c_str()); }

// Every missing folder of `dir`, each made private (0700), as the XDG base directory rules ask.
bool make_private_dirs(const std::filesystem::path& dir) {
    std::filesystem::path p;
    for (const auto& part : dir) {
        p /= part;
        if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) return false;
    }
    return true;
}

}  // namespace

struct LineInput::Editor {
    EditLine* el = nullptr;
    History* hist = nullptr;
    FILE* out = nullptr;  // the terminal (a dup of stdout, or of stderr when only that is one)
    std::string prompt;
    std::filesystem::path file;
    std::vector<std::string> added;  // this session's lines, appended to the file's at save

    static char* prompt_of(EditLine* el) {
        void* self = nullptr;
        el_get(el, EL_CLIENTDATA, &self);
        return static_cast<Editor*>(self)->prompt.data();
    }
};

std::filesystem::path default_history_file() {
    const char* state = std::getenv("XDG_STATE_HOME");
    if (state && state[0] == '/') return std::filesystem::path(state) / "plainllama" / "history";
    const char* home = std::getenv("HOME");
    if (home && home[0]) return std::filesystem::path(home) / ".local" / "state" / "plainllama" / "history";
    return {};
}

LineInput::LineInput(std::filesystem::path history_file) {
    if (!::isatty(0)) return;
    // libedit decodes keys by the locale's character set; the model reads UTF-8, so a terminal left in the C
    // locale is edited as UTF-8 too.
    std::setlocale(LC_CTYPE, "");
    if (std::strcmp(nl_langinfo(CODESET), "UTF-8") != 0) std::setlocale(LC_CTYPE, "C.UTF-8");

    auto e = std::make_unique<Editor>();
    // The prompt and the echo go to the terminal, through a FILE of their own: an echo a Ctrl-C interrupts must not
    // mark stdout, whose errors decide the exit status.
    const int out_fd = ::dup(::isatty(1) || !::isatty(2) ? 1 : 2);
    e->out = out_fd >= 0 ? ::fdopen(out_fd, "w") : nullptr;
    if (!e->out && out_fd >= 0) ::close(out_fd);
    e->el = e->out ? el_init("plainllama", stdin, e->out, stderr) : nullptr;
    e->hist = history_init();
    if (!e->el || !e->hist) {
        if (e->el) el_end(e->el);
        if (e->hist) history_end(e->hist);
        if (e->out) std::fclose(e->out);
        warn("line editing is not available (libedit could not start); lines are read as typed");
        return;
    }
    HistEvent ev;
    history(e->hist, &ev, H_SETSIZE, kHistorySize);
    history(e->hist, &ev, H_SETUNIQUE, 1);
    el_set(e->el, EL_CLIENTDATA, e.get());
    el_set(e->el, EL_PROMPT, &Editor::prompt_of);
    el_set(e->el, EL_EDITOR, "emacs");
    el_set(e->el, EL_HIST, history, e->hist);
    el_source(e->el, nullptr);  // the user's ~/.editrc (bindings, vi mode), when there is one

    e->file = std::move(history_file);
    std::error_code ec;
    const auto type = e->file.empty() ? std::filesystem::file_type::not_found : std::filesystem::status(e->file, ec).type();
    if (type == std::filesystem::file_type::regular) {
        if (history(e->hist, &ev, H_LOAD, e->file.c_str()) < 0)
            warn(e->file.string() + ": not a history file libedit can read; earlier sessions' lines are not recalled");
    } else if (type != std::filesystem::file_type::not_found) {
        warn(e->file.string() + ": not a regular file; the history is not read or written");
        e->file.clear();  // a FIFO there would block the read and the write
    }
    editor_ = std::move(e);
}

LineInput::~LineInput() {
    if (!editor_) return;
    el_end(editor_->el);  // restores the terminal's mode
    history_end(editor_->hist);
    std::fclose(editor_->out);
}

ReadStatus LineInput::next(std::string& line, const char* prompt) {
    if (editor_) {
        editor_->prompt = prompt;
        int count = 0;
        const char* s = el_gets(editor_->el, &count);
        if (!s || count <= 0) {
            if (g_interrupted.load()) return ReadStatus::interrupted;
            return ReadStatus::eof;
        }
        line.assign(s, size_t(count));
        while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
        return ReadStatus::line;
    }
    if (prompt[0]) {
        std::fputs(prompt, stdout);
        std::fflush(stdout);
    }
    for (;;) {
        const size_t nl = buf_.find('\n');
        if (nl != std::string::npos) {
            line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            return ReadStatus::line;
        }
        if (eof_) {
            if (buf_.empty()) return ReadStatus::eof;
            line.swap(buf_);
            buf_.clear();
            return ReadStatus::line;
        }
        if (g_interrupted.load()) return ReadStatus::interrupted;
        char tmp[4096];
        const ssize_t n = ::read(0, tmp, sizeof tmp);
        if (n > 0) {
            buf_.append(tmp, size_t(n));
        } else if (n < 0 && errno == EINTR) {
            continue;  // g_interrupted is checked above
        } else {
            eof_ = true;
        }
    }
}

void LineInput::remember(const std::string& line) {
    if (!editor_ || line.empty()) return;
    HistEvent ev;
    history(editor_->hist, &ev, H_ENTER, line.c_str());
    editor_->added.push_back(line);
}

void LineInput::save_history() {
    if (!editor_ || editor_->file.empty() || editor_->added.empty()) return;
    const std::filesystem::path& file = editor_->file;
    // The file as it is now (another chat may have written to it since this one started), then this session's
    // lines after it.
    History* h = history_init();
    if (!h) return warn(file.string() + ": history not saved (libedit could not start)");
    HistEvent ev;
    history(h, &ev, H_SETSIZE, kHistorySize);
    history(h, &ev, H_SETUNIQUE, 1);
    std::error_code ec;
    if (std::filesystem::exists(file, ec)) history(h, &ev, H_LOAD, file.c_str());
    for (const std::string& s : editor_->added) history(h, &ev, H_ENTER, s.c_str());
    // libedit writes a FILE with a descriptor (it fchmods it): an unnamed temporary one, read back, then written
    // to the file whole.
    FILE* tmp = std::tmpfile();
    std::string bytes;
    bool made = tmp && history(h, &ev, H_SAVE_FP, tmp) >= 0 && std::fflush(tmp) == 0;
    if (made) {
        std::rewind(tmp);
        char buf[1 << 14];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, tmp)) > 0) bytes.append(buf, n);
        made = !std::ferror(tmp);
    }
    if (tmp) std::fclose(tmp);
    history_end(h);
    if (!made) return warn(file.string() + ": history not saved (libedit could not write it)");
    if (!make_private_dirs(file.parent_path()))
        return warn(file.parent_path().string() + ": cannot be made (" + std::strerror(errno) +
                    "); history not saved (--no-history turns it off)");
    try {
        write_file_atomic(file, bytes, 0600);
        editor_->added.clear();
    } catch (const Error& e) {
        warn(std::string(e.what()) + "; history not saved (--no-history turns it off)");
    }
}

}  // namespace plainllama::cli
