// libFuzzer target: parse_safetensors over arbitrary bytes. A parse either throws plainllama::Error with a
// one-line message, or returns tensors that lie inside the buffer (invariants.h). Anything else (a crash, a
// sanitizer report, another exception, a violated invariant) is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "invariants.h"
#include "plainllama/io/safetensors.h"
#include "plainllama/sys/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace plainllama;
    std::string violation;
    try {
        const SafetensorsContents c = parse_safetensors(data, size, "fuzz.safetensors");
        violation = fuzz::safetensors_violation(c, data, size);
        volatile uint8_t sink = 0;
        for (const TensorView& t : c.tensors) {  // touch both ends: ASan reports a read outside the input
            const auto* p = static_cast<const uint8_t*>(t.data);
            if (t.nbytes > 0) sink = sink + p[0] + p[t.nbytes - 1];
        }
        (void)sink;
    } catch (const Error& e) {
        violation = fuzz::error_violation(e.what());
    }
    if (!violation.empty()) {
        std::fprintf(stderr, "fuzz_safetensors: %s\n", violation.c_str());
        std::abort();
    }
    return 0;
}
