#include "plainllama/tokenizer/gguf_tokenizer.h"

#include <cstring>

#include "plainllama/sys/error.h"
#include "plainllama/tokenizer/bpe_tokenizer.h"
#include "plainllama/tokenizer/sentencepiece_tokenizer.h"

namespace plainllama {

namespace {

// Protocol Buffers' wire format, the few pieces a SentencePiece ModelProto needs (sentencepiece_model.proto):
// ModelProto { repeated SentencePiece pieces = 1; TrainerSpec trainer_spec = 2; NormalizerSpec normalizer_spec = 3; }
// SentencePiece { string piece = 1; float score = 2; Type type = 3; }
void put_varint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
        out += char(uint8_t(v) | 0x80);
        v >>= 7;
    }
    out += char(uint8_t(v));
}
void put_tag(std::string& out, int field, int wire) { put_varint(out, uint64_t(field) << 3 | uint64_t(wire)); }
void put_int(std::string& out, int field, int64_t v) {  // int32, enum or bool (negative: ten bytes, as protobuf)
    put_tag(out, field, 0);
    put_varint(out, uint64_t(v));
}
void put_bytes(std::string& out, int field, std::string_view b) {
    put_tag(out, field, 2);
    put_varint(out, b.size());
    out.append(b);
}
void put_float(std::string& out, int field, float f) {
    put_tag(out, field, 5);
    char b[4];
    std::memcpy(b, &f, 4);
    out.append(b, 4);
}

// A reader of the same wire format: the fields of one message.
struct ProtoField {
    int field, wire;
    uint64_t value;         // varint, or the 32/64-bit bits
    std::string_view data;  // length-delimited
};
bool get_varint(std::string_view s, size_t* pos, uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *pos < s.size(); shift += 7) {
        const uint8_t b = uint8_t(s[(*pos)++]);
        *v |= uint64_t(b & 0x7f) << shift;
        if (b < 0x80) return true;
    }
    return false;
}
std::vector<ProtoField> fields(std::string_view s, const std::string& source) {
    std::vector<ProtoField> out;
    size_t pos = 0;
    auto bad = [&] {
        return Error(source + ": not a SentencePiece model (bad protobuf at byte " + std::to_string(pos) + ")");
    };
    while (pos < s.size()) {
        uint64_t tag = 0;
        if (!get_varint(s, &pos, &tag)) throw bad();
        ProtoField f{int(tag >> 3), int(tag & 7), 0, {}};
        if (f.wire == 0) {
            if (!get_varint(s, &pos, &f.value)) throw bad();
        } else if (f.wire == 2) {
            uint64_t n = 0;
            if (!get_varint(s, &pos, &n) || n > s.size() - pos) throw bad();
            f.data = s.substr(pos, size_t(n));
            pos += size_t(n);
        } else if (f.wire == 5 || f.wire == 1) {
            const size_t n = f.wire == 5 ? 4 : 8;
            if (n > s.size() - pos) throw bad();
            std::memcpy(&f.value, s.data() + pos, n);
            pos += n;
        } else {
            throw bad();
        }
        out.push_back(f);
    }
    return out;
}

}  // namespace

std::string sentencepiece_model_proto(const GgufVocab& v) {
    std::string out, msg;
    bool bytes = false;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        msg.clear();
        put_bytes(msg, 1, v.tokens[i]);
        put_float(msg, 2, v.scores[i]);
        put_int(msg, 3, v.types[i]);
        put_bytes(out, 1, msg);
        bytes = bytes || v.types[i] == kTokByte;
    }
    // TrainerSpec: BPE (merges by score), byte fallback when the vocabulary has byte tokens, the special pieces.
    msg.clear();
    put_int(msg, 3, 2);       // model_type BPE
    put_int(msg, 35, bytes);  // byte_fallback
    put_int(msg, 40, v.unk);  // unk_id
    put_int(msg, 41, v.bos);  // bos_id
    put_int(msg, 42, v.eos);  // eos_id
    put_int(msg, 43, -1);     // pad_id
    if (v.unk >= 0) put_bytes(msg, 45, v.tokens[size_t(v.unk)]);
    if (v.bos >= 0) put_bytes(msg, 46, v.tokens[size_t(v.bos)]);
    if (v.eos >= 0) put_bytes(msg, 47, v.tokens[size_t(v.eos)]);
    put_bytes(out, 2, msg);
    // NormalizerSpec: no normalization, as llama.cpp: spaces as U+2581 and a prefix one, no whitespace removal.
    msg.clear();
    put_bytes(msg, 1, "identity");
    put_int(msg, 3, v.add_space_prefix);  // add_dummy_prefix
    put_int(msg, 4, 0);                   // remove_extra_whitespaces
    put_int(msg, 5, 1);                   // escape_whitespaces
    put_bytes(out, 3, msg);
    return out;
}

std::unique_ptr<Tokenizer> gguf_tokenizer(const GgufFile& f) {
    const GgufVocab v = read_gguf_vocab(f);
    if (v.model == "gpt2") return std::make_unique<BpeTokenizer>(v, f.source());
    return std::make_unique<SentencePieceTokenizer>(sentencepiece_model_proto(v), f.source(), int32_t(v.bos),
                                                    int32_t(v.eos), v.add_bos);
}

GgufVocab gguf_vocab_of(const Tokenizer& tok, const std::string& source) {
    if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tok)) return bpe->gguf_vocab();
    const auto* sp = dynamic_cast<const SentencePieceTokenizer*>(&tok);
    PL_CHECK(sp);
    GgufVocab v;
    v.model = "llama";
    v.pre = "default";
    const std::string proto = sp->model_proto();
    for (const ProtoField& f : fields(proto, source)) {
        if (f.field == 1 && f.wire == 2) {  // a piece
            std::string piece;
            float score = 0;
            int32_t type = kTokNormal;
            for (const ProtoField& p : fields(f.data, source)) {
                if (p.field == 1 && p.wire == 2) piece = std::string(p.data);
                if (p.field == 2 && p.wire == 5) std::memcpy(&score, &p.value, 4);
                if (p.field == 3 && p.wire == 0) type = int32_t(p.value);
            }
            if (type < kTokNormal || type > kTokByte)
                throw Error(source + ": piece " + std::to_string(v.tokens.size()) + " has type " +
                            std::to_string(type) + ", which GGUF cannot store");
            if (type == kTokUnknown) v.unk = int64_t(v.tokens.size());
            v.tokens.push_back(piece);
            v.scores.push_back(score);
            v.types.push_back(type);
        } else if (f.field == 3 && f.wire == 2) {  // the normalizer
            for (const ProtoField& p : fields(f.data, source)) {
                if (p.field == 3 && p.wire == 0) v.add_space_prefix = p.value != 0;
                if (p.field == 1 && p.wire == 2 && p.data != "identity")
                    throw Error(source + ": its normalizer is \"" + std::string(p.data) +
                                "\"; a GGUF's llama vocabulary has none (identity)");
            }
        }
    }
    v.bos = tok.bos_id();
    v.eos = tok.eos_id();
    v.add_bos = tok.add_bos();
    return v;
}

}  // namespace plainllama
