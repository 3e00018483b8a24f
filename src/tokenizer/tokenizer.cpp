#include "plainllama/tokenizer/tokenizer.h"

#include "plainllama/io/gguf.h"
#include "plainllama/sys/error.h"
#include "plainllama/tokenizer/bpe_tokenizer.h"
#include "plainllama/tokenizer/gguf_tokenizer.h"
#include "plainllama/tokenizer/sentencepiece_tokenizer.h"

namespace plainllama {

namespace {
// A name that is present, even as a directory or a dangling link, is the tokenizer: its error says why.
bool present(const std::filesystem::path& p) {
    std::error_code ec;
    return std::filesystem::symlink_status(p, ec).type() != std::filesystem::file_type::not_found;
}
}  // namespace

bool has_tokenizer(const std::filesystem::path& dir) {
    if (std::filesystem::path file; is_gguf_model(dir, &file)) return has_gguf_vocab(GgufFile(file));
    return present(dir / "tokenizer.model") || present(dir / "tokenizer.json");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    if (fs::path file; is_gguf_model(dir, &file)) {
        const GgufFile g(file);
        if (!has_gguf_vocab(g)) throw Error(file.string() + ": no vocabulary ('tokenizer.ggml.model' is missing)");
        return gguf_tokenizer(g);
    }
    if (present(dir / "tokenizer.model")) return std::make_unique<SentencePieceTokenizer>(dir / "tokenizer.model");
    if (present(dir / "tokenizer.json")) {
        const fs::path config = dir / "tokenizer_config.json";
        return std::make_unique<BpeTokenizer>(dir / "tokenizer.json", present(config) ? config : fs::path());
    }
    throw Error(dir.string() +
                ": no tokenizer.model or tokenizer.json (expected a SentencePiece or a Hugging Face "
                "tokenizer)");
}

namespace {

// True when s ends in U+FFFD: how both tokenizers decode an incomplete UTF-8 sequence (their output is always
// valid UTF-8), so the character is not finished yet.
bool ends_incomplete(const std::string& s) { return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0; }

}  // namespace

std::string StreamDecoder::push(int32_t id) {
    // A checkpoint may pad its embedding past the tokenizer's pieces: a sampled padding id has no text.
    if (id >= tok_.vocab_size()) return "";
    ids_.push_back(id);
    const std::vector<int32_t> ctx(ids_.begin() + long(prefix_), ids_.begin() + long(read_));
    const std::vector<int32_t> all(ids_.begin() + long(prefix_), ids_.end());
    const std::string before = tok_.decode(ctx), now = tok_.decode(all);
    if (now.size() <= before.size() || ends_incomplete(now) || now.compare(0, before.size(), before) != 0) return "";
    prefix_ = read_;
    read_ = ids_.size();
    return now.substr(before.size());
}

std::string StreamDecoder::flush() {
    const std::vector<int32_t> ctx(ids_.begin() + long(prefix_), ids_.begin() + long(read_));
    const std::vector<int32_t> all(ids_.begin() + long(prefix_), ids_.end());
    const std::string before = tok_.decode(ctx), now = tok_.decode(all);
    prefix_ = read_ = ids_.size();
    if (now.size() <= before.size() || now.compare(0, before.size(), before) != 0) return "";
    return now.substr(before.size());
}

}  // namespace plainllama
