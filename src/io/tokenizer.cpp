#include "plainllama/io/tokenizer.h"

#include <sentencepiece_processor.h>

#include "plainllama/sys/error.h"

namespace plainllama {

Tokenizer::Tokenizer(const std::filesystem::path& model_file)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(model_file, ec))
        throw Error(model_file.string() + ": not found or not a regular file (expected a SentencePiece tokenizer.model)");
    const auto status = sp_->Load(model_file.string());
    if (!status.ok()) throw Error(model_file.string() + ": not a SentencePiece model: " + status.ToString());
}

Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool add_bos) const {
    std::vector<int> ids;
    const auto status = sp_->Encode(text, &ids);
    if (!status.ok()) throw Error("tokenizer: cannot encode the text: " + status.ToString());
    std::vector<int32_t> out;
    out.reserve(ids.size() + 1);
    if (add_bos && bos_id() >= 0) out.push_back(bos_id());
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
    std::vector<int> v(ids.begin(), ids.end());
    for (int id : v)
        if (id < 0 || id >= vocab_size())
            throw Error("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                        std::to_string(vocab_size()) + ")");
    std::string text;
    const auto status = sp_->Decode(v, &text);
    if (!status.ok()) throw Error("tokenizer: cannot decode: " + status.ToString());
    return text;
}

std::string Tokenizer::piece(int32_t id) const { return sp_->IdToPiece(id); }
int32_t Tokenizer::piece_to_id(const std::string& p) const {
    const int id = sp_->PieceToId(p);
    return id == sp_->unk_id() && p != sp_->IdToPiece(id) ? -1 : id;
}
int32_t Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int32_t Tokenizer::bos_id() const { return sp_->bos_id(); }
int32_t Tokenizer::eos_id() const { return sp_->eos_id(); }

namespace {

// True when s ends in U+FFFD (what SentencePiece emits for an incomplete byte sequence) or in the
// first bytes of an unfinished UTF-8 character.
bool ends_incomplete(const std::string& s) {
    if (s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0) return true;
    for (size_t back = 1; back <= 4 && back <= s.size(); ++back) {
        const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
        const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back;
    }
    return false;
}

}  // namespace

std::string StreamDecoder::push(int32_t id) {
    // A checkpoint may pad its embedding past the tokenizer's pieces: a sampled padding id has no text.
    if (id >= tok_.vocab_size()) return "";
    ids_.push_back(id);
    const std::vector<int32_t> ctx(ids_.begin() + long(prefix_), ids_.begin() + long(read_));
    const std::vector<int32_t> all(ids_.begin() + long(prefix_), ids_.end());
    const std::string before = tok_.decode(ctx), now = tok_.decode(all);
    if (now.size() <= before.size() || ends_incomplete(now) || now.compare(0, before.size(), before) != 0)
        return "";
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
