// libFuzzer target: config.json text -> nlohmann::json::parse (no exceptions) -> parse_config. A config is
// either rejected with a one-line plainllama::Error, or every field the model uses is in range and the tensor
// table and RoPE frequencies built from it are sane (invariants.h). Anything else is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "invariants.h"
#include "plainllama/io/config.h"
#include "plainllama/sys/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace plainllama;
    const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 0;
    std::string violation;
    try {
        violation = fuzz::config_violation(parse_config(j, "config.json"));
    } catch (const Error& e) {
        violation = fuzz::error_violation(e.what());
    }
    if (!violation.empty()) {
        std::fprintf(stderr, "fuzz_config: %s\n", violation.c_str());
        std::abort();
    }
    return 0;
}
