#include "plainllama/sys/error.h"

namespace plainllama {

void check_failed(const char* expr, const char* file, int line) {
    throw std::logic_error(std::string("internal error: check '") + expr + "' failed at " + file + ":" +
                           std::to_string(line));
}

}  // namespace plainllama
