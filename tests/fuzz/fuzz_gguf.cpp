// libFuzzer target: the GGUF reader over arbitrary bytes, then the config and the vocabulary read from what it
// accepted (invariants.h's gguf_input_violation). Each step either throws plainllama::Error with a one-line message,
// or returns what keeps the invariants (tensors inside the buffer, a config whose every field is in range, a
// vocabulary whose types and ids are). Anything else (a crash, a sanitizer report, another exception, a violated
// invariant) is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string violation = plainllama::fuzz::gguf_input_violation(data, size);
    if (!violation.empty()) {
        std::fprintf(stderr, "fuzz_gguf: %s\n", violation.c_str());
        std::abort();
    }
    return 0;
}
