// A compiled Oniguruma regex for the byte-level BPE's pre-tokenizer: UTF-8, Oniguruma's default syntax and no
// options, as HF tokenizers' onig crate compiles it (Regex::new).
#pragma once
#include <oniguruma.h>

#include <string>
#include <string_view>

namespace plainllama {

class Regex {
   public:
    // Error "<where>: the regex does not compile: <reason>".
    Regex(const std::string& pattern, const std::string& where);
    ~Regex();
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // The first match in s[from, size): [*begin, *end), false when none; Error when the search gives up (its retry
    // limit: a pathological text such as millions of spaces). `region` is the caller's scratch (onig_region_new).
    bool search(std::string_view s, size_t from, size_t* begin, size_t* end, OnigRegion* region) const;

   private:
    OnigRegex re_ = nullptr;
};

}  // namespace plainllama
