#include "plainllama/io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

mode_t current_umask() {
    const mode_t m = ::umask(0);
    ::umask(m);
    return m;
}

// Every byte of [p, p + n) to fd; errno set on failure.
bool write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;  // nothing taken and no reason given: a file or device that is full
            return false;
        }
        p += w;
        n -= size_t(w);
    }
    return true;
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, const std::string& bytes, unsigned new_mode) {
    const std::string shown = path.string();
    auto fail = [&](int e) { throw Error(shown + ": cannot be written: " + std::strerror(e)); };
    // A symlink is written through: the file it points at is replaced, the link stays.
    std::error_code ec;
    std::filesystem::path target = path;
    if (std::filesystem::is_symlink(path, ec)) {
        target = std::filesystem::weakly_canonical(path, ec);
        if (ec) fail(ec.value());
    }
    const std::string p = target.string();
    // In place, checked: an existing non-regular file (/dev/stdout, a FIFO: nothing to replace), or a file in a
    // folder where no temporary file can be made.
    auto in_place = [&](int flags) {
        const int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC | flags, mode_t(new_mode));
        if (fd < 0) fail(errno);
        bool ok = write_all(fd, bytes.data(), bytes.size());
        int e = errno;
        if (ok && (flags & O_TRUNC) && ::fsync(fd) != 0) {
            ok = false;
            e = errno;
        }
        if (::close(fd) != 0 && ok) fail(errno);
        if (!ok) fail(e);
    };
    struct stat st {};
    const bool exists = ::stat(p.c_str(), &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) return in_place(0);
    if (exists && ::access(p.c_str(), W_OK) != 0) fail(errno);  // a read-only file stays as it is
    const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
    std::string name = ".";  // ".NAME.XXXXXX" (built by appends: GCC 12 warns falsely on "." + string)
    name.append(target.filename().string()).append(".XXXXXX");
    std::string tmp = (dir / name).string();
    const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) {
        const int e = errno;
        if (exists && (e == EACCES || e == EPERM)) return in_place(O_TRUNC);  // a folder we cannot write to
        fail(e);
    }
    bool ok = ::fchmod(fd, exists ? st.st_mode & 07777 : mode_t(new_mode) & ~current_umask()) == 0;
    if (ok && exists && (st.st_uid != ::geteuid() || st.st_gid != ::getegid()))
        (void)::fchown(fd, st.st_uid, st.st_gid);  // best effort: the owner's file stays the owner's
    ok = ok && write_all(fd, bytes.data(), bytes.size()) && ::fsync(fd) == 0;
    int e = errno;
    if (::close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && ::rename(tmp.c_str(), p.c_str()) != 0) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        ::unlink(tmp.c_str());
        fail(e);
    }
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // the new name on disk too
    if (dfd >= 0) {
        (void)::fsync(dfd);
        ::close(dfd);
    }
}

namespace {

// Everything fd holds until end of file (name: for messages), at most kMaxInput bytes (-f /dev/zero must not
// fill the memory); fd closed.
constexpr size_t kMaxInput = size_t(1) << 30;
std::string read_all(int fd, const std::string& name) {
    std::string bytes;
    char buf[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0 && bytes.size() + size_t(n) > kMaxInput) {
            ::close(fd);
            throw Error(name + ": larger than " + std::to_string(kMaxInput >> 20) + " MiB");
        } else if (n > 0) {
            bytes.append(buf, size_t(n));
        } else if (n == 0) {
            break;
        } else if (errno != EINTR) {
            const int e = errno;
            ::close(fd);
            throw Error(name + ": cannot be read: " + std::strerror(e));
        }
    }
    ::close(fd);
    return bytes;
}

}  // namespace

std::string read_file(const std::filesystem::path& path) {
    const std::string p = path.string();
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // O_NONBLOCK: a FIFO must not hang open()
    if (fd < 0) throw Error(p + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(p + ": not a regular file");
    }
    return read_all(fd, p);
}

std::string read_input(const std::string& path) {
    if (path == "-") {
        struct stat st {};
        if (::fstat(0, &st) != 0) throw Error(std::string("stdin: cannot be read: ") + std::strerror(errno));
        if (S_ISDIR(st.st_mode)) throw Error("stdin: is a directory");
        const int fd = ::dup(0);
        if (fd < 0) throw Error(std::string("stdin: cannot be read: ") + std::strerror(errno));
        return read_all(fd, "stdin");
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // blocking: a FIFO's writer may come later
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
        ::close(fd);
        throw Error(path + ": not a file, a pipe or a device");
    }
    return read_all(fd, path);
}

}  // namespace plainllama
