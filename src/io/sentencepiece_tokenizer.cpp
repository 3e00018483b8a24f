#include "plainllama/io/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "plainllama/sys/error.h"

namespace plainllama {

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& model_file)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(model_file, ec))
        throw Error(model_file.string() + ": not found or not a regular file (expected a SentencePiece tokenizer.model)");
    const auto status = sp_->Load(model_file.string());
    if (!status.ok()) throw Error(model_file.string() + ": not a SentencePiece model: " + status.ToString());
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(const std::string& text, bool add_bos) const {
    std::vector<int> ids;
    const auto status = sp_->Encode(text, &ids);
    if (!status.ok()) throw Error("tokenizer: cannot encode the text: " + status.ToString());
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
    if (!status.ok()) throw Error("tokenizer: cannot decode: " + status.ToString());
    return text;
}

std::string SentencePieceTokenizer::piece(int32_t id) const { return sp_->IdToPiece(id); }
int32_t SentencePieceTokenizer::piece_to_id(const std::string& p) const {
    const int id = sp_->PieceToId(p);
    return id == sp_->unk_id() && p != sp_->IdToPiece(id) ? -1 : id;
}
int32_t SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int32_t SentencePieceTokenizer::bos_id() const { return sp_->bos_id(); }
int32_t SentencePieceTokenizer::eos_id() const { return sp_->eos_id(); }

std::vector<SpecialToken> SentencePieceTokenizer::special_tokens() const {
    std::vector<SpecialToken> v;
    for (int32_t id = 0; id < vocab_size(); ++id)
        if (sp_->IsControl(id) || sp_->IsUnknown(id)) v.push_back({id, piece(id)});
    return v;
}

}  // namespace plainllama
