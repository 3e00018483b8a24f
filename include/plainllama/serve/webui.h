// The chat page's files (src/serve/webui/), compiled into the binary: CMake turns each file into a byte array of a
// generated source (src/serve/webui/embed.cmake), rebuilt when a file changes.
#pragma once
#include <string_view>
#include <vector>

namespace plainllama {

struct WebFile {
    std::string_view name;          // "index.html", "app.js", ...
    std::string_view content_type;  // "text/html; charset=utf-8", ...
    std::string_view body;
};

// Every file of the page, index.html first.
const std::vector<WebFile>& web_files();

}  // namespace plainllama
