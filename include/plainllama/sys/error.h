// Errors. Bad input (a file, a tensor, a flag) throws Error with one line naming what was wrong and
// what was expected; only main() catches, prints it on stderr and exits non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace plainllama {

// A runtime failure caused by input: exit status 1.
class Error : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
};

// A bad command line (unknown flag, value out of range): exit status 2.
class UsageError : public Error {
   public:
    using Error::Error;
};

// Internal invariant, always checked (also in Release builds, unlike assert).
[[noreturn]] void check_failed(const char* expr, const char* file, int line);
#define PL_CHECK(cond)                                                      \
    do {                                                                    \
        if (!(cond)) ::plainllama::check_failed(#cond, __FILE__, __LINE__); \
    } while (0)

}  // namespace plainllama
