// Reading a whole file.
#pragma once
#include <filesystem>
#include <string>

namespace plainllama {

// The bytes of the regular file at `path`. Throws Error naming the file: "<path>: cannot open: <reason>",
// "<path>: not a regular file" (a FIFO or a device is refused before any read, so it cannot hang), or
// "<path>: cannot be read: <reason>".
std::string read_file(const std::filesystem::path& path);

// The text a user points at: a file, a pipe or a device (-f /dev/stdin, -f <(cmd)), read to its end; "-" is stdin
// (a closed stdin or a directory there is an error, not empty text). Throws Error naming the path.
std::string read_input(const std::string& path);

// Writes `bytes` to `path` so that a failure never loses what was there: into a new file beside it, every write,
// the flush to disk and the close checked, then renamed over it. An existing path that is not a regular file (a
// device, a FIFO) is written in place, checked likewise. An existing file keeps its mode and owner; a new one gets
// `new_mode` less the umask. Throws Error "<path>: cannot be written: <reason>" (the temporary file removed).
void write_file_atomic(const std::filesystem::path& path, const std::string& bytes, unsigned new_mode = 0644);

}  // namespace plainllama
