// UTF-8: validation, lossy repair, encoding a code point.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace plainllama {

// Offset of the first byte that is not part of a valid UTF-8 sequence, or npos.
size_t invalid_utf8_at(const std::string& s);
// s with every ill-formed sequence replaced by U+FFFD, one per maximal subpart (as Unicode recommends, and Rust's
// from_utf8_lossy and Python's errors="replace" do): an incomplete character at the end becomes one U+FFFD.
std::string utf8_lossy(const std::string& s);
// Appends code point cp (< 0x110000) encoded as UTF-8.
void append_utf8(std::string& out, uint32_t cp);

}  // namespace plainllama
