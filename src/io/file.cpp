#include "plainllama/io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

// Every byte of [p, p + n) to fd; errno set on failure.
bool write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return false;
        }
        p += w;
        n -= size_t(w);
    }
    return true;
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, const std::string& bytes) {
    const std::string p = path.string();
    auto fail = [&](int e) { throw Error(p + ": cannot be written: " + std::strerror(e)); };
    struct stat st {};
    const bool exists = ::stat(p.c_str(), &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) {  // /dev/stdout, a FIFO: no file to replace
        const int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) fail(errno);
        const bool ok = write_all(fd, bytes.data(), bytes.size());
        const int e = errno;
        if (::close(fd) != 0 && ok) fail(errno);
        if (!ok) fail(e);
        return;
    }
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    std::string name = ".";  // ".NAME.PID.tmp" (built by appends: GCC 12 warns falsely on "." + string)
    name.append(path.filename().string()).append(".").append(std::to_string(::getpid())).append(".tmp");
    const std::string tmp = (dir / name).string();
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, exists ? st.st_mode & 07777 : 0644);
    if (fd < 0) fail(errno);
    bool ok = write_all(fd, bytes.data(), bytes.size()) && ::fsync(fd) == 0;
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
}

namespace {

// Everything fd holds until end of file (name: for messages); fd closed.
std::string read_all(int fd, const std::string& name) {
    std::string bytes;
    char buf[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
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
