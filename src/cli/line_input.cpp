#include "line_input.h"

#include <fcntl.h>
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
#include "plainllama/io/output.h"
#include "plainllama/sys/error.h"

namespace plainllama::cli {

namespace {

constexpr int kHistorySize = 1000;  // lines kept in the file

void warn(const std::string& s) { std::fprintf(stderr, "warning: %s\n", s.c_str()); }

// libedit's history file starts with this line; a file that does not is not ours.
constexpr char kMagic[] = "_HiStOrY_V2_\n";

// Opens the history file for reading without following a symlink (O_NOFOLLOW); -1 and errno when it cannot be, ELOOP
// for a symlink. A FIFO does not block (O_NONBLOCK); the caller checks that it is a regular file.
int open_history(const std::filesystem::path& file) {
    return ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
}

// Why the file at `file` (open as fd) is not a history file we may read and replace, or "" when it is: a regular file,
// empty or in libedit's format.
std::string not_ours(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return std::string("cannot be read: ") + std::strerror(errno);
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    if (st.st_size == 0) return "";
    char head[sizeof kMagic - 1];
    const ssize_t n = ::pread(fd, head, sizeof head, 0);
    if (n != ssize_t(sizeof head) || std::memcmp(head, kMagic, sizeof head) != 0) return "not a libedit history file";
    return "";
}

// Loads the file open as fd into h (libedit reads a path: the descriptor's own, so the file checked is the file
// read).
bool load_history(History* h, int fd) {
    HistEvent ev;
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    return history(h, &ev, H_LOAD, self.c_str()) >= 0;
}

// Reads `file` into h when it is ours; "" when it is or when there is none yet (a missing folder on the way is for
// the save to report), else why it is not.
std::string read_history(History* h, const std::filesystem::path& file) {
    const int fd = open_history(file);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return "";
        return errno == ELOOP ? "a symbolic link" : std::string("cannot be read: ") + std::strerror(errno);
    }
    std::string why = not_ours(fd);
    struct stat st {};
    if (why.empty() && ::fstat(fd, &st) == 0 && st.st_size > 0 && !load_history(h, fd))
        why = "not a history file libedit can read";
    ::close(fd);
    return why;
}

}  // namespace

HistoryFile default_history_file() {
    const char* state = std::getenv("XDG_STATE_HOME");
    if (state && state[0] == '/') return {std::filesystem::path(state) / "plainllama" / "history", state};
    const char* home = std::getenv("HOME");
    if (home && home[0]) return {std::filesystem::path(home) / ".local" / "state" / "plainllama" / "history", home};
    return {};
}

namespace {

// The folders from `base` (which must exist: a home or state folder is never created) to the history file, each
// missing one made private (0700), as the XDG base directory rules ask. "" when done, else why not.
std::string make_history_dirs(const HistoryFile& h) {
    struct stat st {};
    if (::stat(h.base.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return h.base.string() + ": no such folder; history not saved (--no-history turns it off)";
    std::filesystem::path p = h.base;
    for (const auto& part : h.file.parent_path().lexically_relative(h.base)) {
        p /= part;
        if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
            return p.string() + ": cannot be made (" + std::strerror(errno) +
                   "); history not saved (--no-history turns it off)";
    }
    return "";
}

}  // namespace

struct LineInput::Editor {
    EditLine* el = nullptr;
    History* hist = nullptr;
    FILE* out = nullptr;  // the terminal (a dup of stdout, or of stderr when only that is one)
    std::string prompt;
    HistoryFile history;             // empty file: none
    std::vector<std::string> added;  // this session's lines, appended to the file's at save

    static char* prompt_of(EditLine* el) {
        void* self = nullptr;
        el_get(el, EL_CLIENTDATA, &self);
        return static_cast<Editor*>(self)->prompt.data();
    }
};

LineInput::LineInput(HistoryFile history_file) {
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

    // The file is read only if it is ours: a regular file (never through a symlink), empty or in libedit's format.
    // Anything else is left as it is, with one warning, and the chat runs without history.
    e->history = std::move(history_file);
    if (!e->history.file.empty()) {
        if (const std::string why = read_history(e->hist, e->history.file); !why.empty()) {
            warn(e->history.file.string() + ": " + why +
                 "; left as it is, and this chat runs without history (--no-history: none)");
            e->history = {};
        }
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
    if (!editor_ || editor_->history.file.empty() || editor_->added.empty()) return;
    const HistoryFile& hf = editor_->history;
    const std::string shown = hf.file.string();
    if (const std::string why = make_history_dirs(hf); !why.empty()) return warn(why);
    // The file as it is now (another chat may have written to it since this one started), then this session's
    // lines after it; the file checked again as at the start.
    History* h = history_init();
    if (!h) return warn(shown + ": history not saved (libedit could not start)");
    HistEvent ev;
    history(h, &ev, H_SETSIZE, kHistorySize);
    history(h, &ev, H_SETUNIQUE, 1);
    if (const std::string why = read_history(h, hf.file); !why.empty()) {
        history_end(h);
        return warn(shown + ": " + why + "; left as it is, history not saved");
    }
    for (const std::string& line : editor_->added) history(h, &ev, H_ENTER, line.c_str());
    // libedit writes a FILE with a descriptor (it fchmods it): an unnamed temporary one, read back, then written
    // beside the file and renamed over it (a symlink put there meanwhile is replaced, never written through).
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
    if (!made) return warn(shown + ": history not saved (libedit could not write it)");
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(hf.file.parent_path(), ec))  // a killed chat's
        if (e.path().filename().string().rfind(".history.", 0) == 0 && stale_partial(e.path().filename().string()))
            ::unlink(e.path().c_str());
    try {
        PartialFile f(hf.file, 0600);
        f.write(bytes);
        f.commit();
        editor_->added.clear();
    } catch (const Error& e) {
        warn(std::string(e.what()) + "; history not saved (--no-history turns it off)");
    }
}

}  // namespace plainllama::cli
