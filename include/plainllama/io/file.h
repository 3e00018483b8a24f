// Reading a whole file.
#pragma once
#include <filesystem>
#include <string>

namespace plainllama {

// The bytes of the regular file at `path`. Throws Error naming the file: "<path>: cannot open: <reason>",
// "<path>: not a regular file" (a FIFO or a device is refused before any read, so it cannot hang), or
// "<path>: cannot be read: <reason>".
std::string read_file(const std::filesystem::path& path);

}  // namespace plainllama
