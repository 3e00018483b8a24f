#include "plainllama/tokenizer/onig_regex.h"

#include <mutex>

#include "plainllama/sys/error.h"

namespace plainllama {

Regex::Regex(const std::string& pattern, const std::string& where) {
    static std::once_flag once;
    std::call_once(once, [] {
        OnigEncoding enc = ONIG_ENCODING_UTF8;
        onig_initialize(&enc, 1);
    });
    OnigErrorInfo info;
    const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
    const int r =
        onig_new(&re_, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &info);
    if (r != ONIG_NORMAL) {
        OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, r, &info);
        throw Error(where + ": the regex does not compile: " + reinterpret_cast<const char*>(msg));
    }
}

Regex::~Regex() { onig_free(re_); }

bool Regex::search(std::string_view s, size_t from, size_t* begin, size_t* end, OnigRegion* region) const {
    const auto* str = reinterpret_cast<const OnigUChar*>(s.data());
    const int r = onig_search(re_, str, str + s.size(), str + from, str + s.size(), region, ONIG_OPTION_NONE);
    if (r == ONIG_MISMATCH) return false;
    if (r < 0) {
        OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, r);
        throw Error(std::string("tokenizer: the pre-tokenizer's regex failed on this text: ") +
                    reinterpret_cast<const char*>(msg));
    }
    *begin = size_t(region->beg[0]);
    *end = size_t(region->end[0]);
    return true;
}

}  // namespace plainllama
