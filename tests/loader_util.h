// Helpers of the loader tests: the Error a call throws, and safetensors files built by hand.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <exception>
#include <string>

#include "plainllama/io/safetensors.h"
#include "plainllama/model/model.h"
#include "plainllama/sys/error.h"
#include "test_util.h"

namespace plainllama::test {

// The message of the plainllama::Error that f throws; a test failure when it throws nothing or anything else.
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "not a plainllama::Error: " << e.what();
        return "";
    }
    ADD_FAILURE() << "no error thrown";
    return "";
}

inline std::string checkpoint_error(const fs::path& dir) {
    return error_of([&] { Checkpoint c(dir); });
}
inline std::string model_error(const fs::path& dir) {
    return error_of([&] { Model m(dir); });
}

inline std::string bytes_of(const TensorView& t) { return std::string(static_cast<const char*>(t.data), t.nbytes); }

// A safetensors file from a literal header and data: 8-byte little-endian length, header, data.
inline std::string raw_file(const std::string& header, const std::string& data, uint64_t header_len = ~uint64_t(0)) {
    if (header_len == ~uint64_t(0)) header_len = header.size();
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[size_t(i)] = char((header_len >> (8 * i)) & 0xff);
    return out + header + data;
}

}  // namespace plainllama::test
