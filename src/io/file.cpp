#include "plainllama/io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "plainllama/sys/error.h"

namespace plainllama {

std::string read_file(const std::filesystem::path& path) {
    const std::string p = path.string();
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // O_NONBLOCK: a FIFO must not hang open()
    if (fd < 0) throw Error(p + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(p + ": not a regular file");
    }
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
            throw Error(p + ": cannot be read: " + std::strerror(e));
        }
    }
    ::close(fd);
    return bytes;
}

}  // namespace plainllama
