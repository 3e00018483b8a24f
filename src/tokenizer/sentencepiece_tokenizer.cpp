#include "plainllama/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

// A SentencePiece status as words for a user: the library's source location ("./src/x.cc(1101) ") and the failed
// expression after it ("[model_proto->ParseFromArray(...)]") are left out.
std::string reason(const sentencepiece::util::Status& status) {
    std::string m = status.message();
    const size_t loc = m.find(".cc(");
    if (loc != std::string::npos) {
        const size_t close = m.find(") ", loc);
        m.erase(0, close == std::string::npos ? m.size() : close + 2);
        if (!m.empty() && m[0] == '[') {
            const size_t end = m.find("] ");
            m.erase(0, end == std::string::npos ? m.size() : end + 2);
        }
    }
    while (!m.empty() && (m.back() == ' ' || m.back() == '\n')) m.pop_back();
    return m.empty() ? "the file cannot be parsed (truncated or not a SentencePiece model)" : m;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& model_file)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(model_file, ec))
        throw Error(model_file.string() +
                    ": not found or not a regular file (expected a SentencePiece tokenizer.model)");
    const auto status = sp_->Load(model_file.string());
    if (!status.ok()) throw Error(model_file.string() + ": not a SentencePiece model: " + reason(status));
    bos_ = sp_->bos_id();
    eos_ = sp_->eos_id();
}

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_proto, const std::string& source, int32_t bos,
                                               int32_t eos, bool add_bos)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), bos_(bos), eos_(eos), add_bos_(add_bos) {
    const auto status = sp_->LoadFromSerializedProto(model_proto);
    if (!status.ok()) throw Error(source + ": not a SentencePiece vocabulary: " + reason(status));
}

std::string SentencePieceTokenizer::model_proto() const {
    const auto bytes = sp_->serialized_model_proto();
    return std::string(bytes.data(), bytes.size());
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(const std::string& text, bool add_bos) const {
    std::vector<int> ids;
    const auto status = sp_->Encode(text, &ids);
    if (!status.ok()) throw Error("tokenizer: cannot encode the text: " + reason(status));
    std::vector<int32_t> out;
    out.reserve(ids.size() + 1);
    if (add_bos && bos_id() >= 0) out.push_back(bos_id());
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
    std::vector<int> v(ids.begin(), ids.end());
    for (int id : v)
        if (id < 0 || id >= vocab_size())
            throw Error("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                        std::to_string(vocab_size()) + ")");
    std::string text;
    const auto status = sp_->Decode(v, &text);
    if (!status.ok()) throw Error("tokenizer: cannot decode: " + reason(status));
    return text;
}

std::string SentencePieceTokenizer::piece(int32_t id) const { return sp_->IdToPiece(id); }
std::string SentencePieceTokenizer::token_bytes(int32_t id) const {
    if (id < 0 || id >= vocab_size() || sp_->IsControl(id) || sp_->IsUnknown(id) || sp_->IsUnused(id)) return "";
    const std::string p = sp_->IdToPiece(id);
    if (sp_->IsByte(id)) return std::string(1, char(std::stoi(p.substr(3, 2), nullptr, 16)));  // "<0x0A>"
    std::string out;
    for (size_t i = 0; i < p.size(); ++i) {
        if (p.compare(i, 3, "\xE2\x96\x81") == 0) {  // U+2581 '▁' stands for a space
            out += ' ';
            i += 2;
        } else {
            out += p[i];
        }
    }
    return out;
}
int32_t SentencePieceTokenizer::piece_to_id(const std::string& p) const {
    const int id = sp_->PieceToId(p);
    return id == sp_->unk_id() && p != sp_->IdToPiece(id) ? -1 : id;
}
int32_t SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::vector<SpecialToken> SentencePieceTokenizer::special_tokens() const {
    std::vector<SpecialToken> v;
    for (int32_t id = 0; id < vocab_size(); ++id)
        if (sp_->IsControl(id) || sp_->IsUnknown(id)) v.push_back({id, piece(id)});
    return v;
}

}  // namespace plainllama
