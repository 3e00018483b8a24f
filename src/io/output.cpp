#include "plainllama/io/output.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "plainllama/sys/error.h"

namespace plainllama {

namespace fs = std::filesystem;

namespace {

// What the signal handler removes: a fixed table of paths (no allocation in the handler), each slot used once (a path
// is never rewritten while the handler may read it).
enum SlotState : int { kFree, kFile, kFolder, kDone };
struct Slot {
    std::atomic<int> state{kFree};
    char path[PATH_MAX];
};
constexpr int kSlots = 256;
Slot g_slots[kSlots];
std::atomic<int> g_used{0};

// SIGXFSZ too: a file size limit (ulimit -f) ends a writer mid-file.
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGXFSZ};
constexpr int kNumSignals = 4;
struct sigaction g_previous[kNumSignals];

void on_signal(int sig) {
    const int n = std::min(g_used.load(std::memory_order_acquire), kSlots);
    for (int i = 0; i < n; ++i)
        if (g_slots[i].state.load(std::memory_order_acquire) == kFile) ::unlink(g_slots[i].path);
    for (int i = n; i-- > 0;)  // innermost folder first
        if (g_slots[i].state.load(std::memory_order_acquire) == kFolder) ::rmdir(g_slots[i].path);
    // then the signal's own action (the default: the process ends with it, as without us)
    for (int k = 0; k < kNumSignals; ++k)
        if (kSignals[k] == sig) ::sigaction(sig, &g_previous[k], nullptr);
    ::raise(sig);
}

// Installs on_signal for the signals whose action is the default (once); a command that handles a signal itself
// (generate's Ctrl-C) keeps its handler.
void install_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        for (int s : kSignals) sigaddset(&sa.sa_mask, s);
        for (int k = 0; k < kNumSignals; ++k) {
            if (::sigaction(kSignals[k], nullptr, &g_previous[k]) != 0) continue;
            if (!(g_previous[k].sa_flags & SA_SIGINFO) && g_previous[k].sa_handler == SIG_DFL)
                ::sigaction(kSignals[k], &sa, nullptr);
        }
    });
}

// A slot for `p` (made absolute: the handler runs wherever), or -1 when the table is full or the path too long (then
// only the destructor removes it).
int add_slot(const fs::path& p, SlotState kind) {
    install_handler();
    std::error_code ec;
    const std::string abs = fs::absolute(p, ec).string();
    if (ec || abs.size() >= PATH_MAX) return -1;
    const int i = g_used.fetch_add(1);
    if (i >= kSlots) return -1;
    std::memcpy(g_slots[i].path, abs.c_str(), abs.size() + 1);
    g_slots[i].state.store(kind, std::memory_order_release);
    return i;
}

void drop_slot(int i) {
    if (i >= 0) g_slots[i].state.store(kDone, std::memory_order_release);
}

std::string partial_name(const fs::path& final_path) {
    std::string name = ".";  // built by appends: GCC 12 warns falsely on "." + string
    name.append(final_path.filename().string()).append(".").append(std::to_string(::getpid())).append(".partial");
    return name;
}

}  // namespace

bool stale_partial(const std::string& name) {
    constexpr const char* kSuffix = ".partial";
    const size_t sl = std::strlen(kSuffix);
    if (name.size() < 1 + 1 + 1 + 1 + sl || name[0] != '.' || name.compare(name.size() - sl, sl, kSuffix) != 0)
        return false;
    const size_t end = name.size() - sl, dot = name.rfind('.', end - 1);
    if (dot == std::string::npos || dot < 2 || dot + 1 == end) return false;
    long pid = 0;
    for (size_t i = dot + 1; i < end; ++i) {
        if (name[i] < '0' || name[i] > '9' || pid > 1'000'000'000) return false;
        pid = pid * 10 + (name[i] - '0');
    }
    // gone: no such process (EPERM means one runs, of another user)
    return pid > 0 && pid != ::getpid() && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH;
}

PartialFile::PartialFile(fs::path final_path, unsigned mode) : final_(std::move(final_path)) {
    const fs::path dir = final_.has_parent_path() ? final_.parent_path() : fs::path(".");
    partial_ = dir / partial_name(final_);
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    fd_ = ::open(partial_.c_str(), flags, mode_t(mode));
    if (fd_ < 0 && errno == EEXIST) {  // our own name: left by an earlier process that had this pid
        ::unlink(partial_.c_str());
        fd_ = ::open(partial_.c_str(), flags, mode_t(mode));
    }
    if (fd_ < 0) fail(errno);
    slot_ = add_slot(partial_, kFile);
}

PartialFile::~PartialFile() {
    if (committed_) return;
    if (fd_ >= 0) ::close(fd_);
    if (!partial_.empty()) ::unlink(partial_.c_str());
    drop_slot(slot_);
}

void PartialFile::fail(int err) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw Error(final_.string() + ": cannot be written: " + std::strerror(err));
}

void PartialFile::write(const void* data, size_t n) {
    PL_CHECK(fd_ >= 0);
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        const ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t(1) << 30));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) fail(errno);
        if (w == 0) fail(ENOSPC);  // a regular file takes at least one byte or says why; 0 only when full
        p += w;
        n -= size_t(w);
    }
}

void PartialFile::commit() {
    PL_CHECK(fd_ >= 0 && !committed_);
    if (::fsync(fd_) != 0) fail(errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(errno);
    if (::rename(partial_.c_str(), final_.c_str()) != 0) fail(errno);
    committed_ = true;
    drop_slot(slot_);
    const fs::path dir = final_.has_parent_path() ? final_.parent_path() : fs::path(".");
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // the new name on disk too
    if (dfd >= 0) {
        (void)::fsync(dfd);
        ::close(dfd);
    }
}

OutputFolder::OutputFolder(fs::path dir) : dir_(std::move(dir)) {
    const std::string shown = dir_.string();
    std::error_code ec;
    const fs::file_status st = fs::status(dir_, ec);
    if (st.type() == fs::file_type::not_found) {
        // the missing folders, outermost first
        std::vector<fs::path> missing;
        fs::path p = dir_.lexically_normal();
        if (p.filename().empty()) p = p.parent_path();  // a trailing slash
        struct stat lst {};
        while (!p.empty() && ::lstat(p.c_str(), &lst) != 0 && errno == ENOENT) {
            missing.push_back(p);
            if (p.parent_path() == p) break;
            p = p.parent_path();
        }
        std::reverse(missing.begin(), missing.end());
        for (const fs::path& p : missing) {
            if (::mkdir(p.c_str(), 0777) != 0 && errno != EEXIST)
                throw Error(p.string() + ": cannot create the folder: " + std::strerror(errno));
            created_.push_back(p);
            slots_.push_back(add_slot(p, kFolder));
        }
        return;
    }
    if (ec) throw Error(shown + ": " + ec.message());
    if (st.type() != fs::file_type::directory) throw Error(shown + ": exists and is not a folder");
    std::vector<std::string> others, stale;
    for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
        const std::string name = e.path().filename().string();
        (stale_partial(name) && e.is_regular_file(ec) ? stale : others).push_back(name);
    }
    if (ec) throw Error(shown + ": cannot list the folder: " + ec.message());
    if (!others.empty()) {
        std::sort(others.begin(), others.end());
        std::string held = "'" + others[0] + "'";
        if (others.size() > 1) held += " and " + std::to_string(others.size() - 1) + " more";
        throw Error(shown + ": is not empty (holds " + held + "); the output folder must be new or empty");
    }
    for (const std::string& name : stale) ::unlink((dir_ / name).c_str());  // a killed writer's: the folder is ours
}

OutputFolder::~OutputFolder() {
    for (int s : slots_) drop_slot(s);
    if (kept_) return;
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) ::rmdir(it->c_str());  // only if empty
}

}  // namespace plainllama
