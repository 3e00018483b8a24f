#include "plainllama/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <queue>
#include <string_view>
#include <unordered_map>

#include "plainllama/io/config.h"
#include "plainllama/io/file.h"
#include "plainllama/io/utf8.h"
#include "plainllama/sys/error.h"
#include "plainllama/tokenizer/onig_regex.h"

namespace plainllama {

namespace {

using json = nlohmann::json;

// GPT-2's pre-tokenizer pattern: what ByteLevel's use_regex runs.
const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3's pre-tokenizer pattern: its tokenizer.json's Split step, llama.cpp's "llama-bpe".
const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-2's byte-to-unicode alphabet: printable bytes stand for themselves, the others for 256 + n in byte order.
struct ByteAlphabet {
    uint32_t cp[256];   // byte -> code point (< 324)
    int16_t byte[324];  // code point -> byte, -1 for none
    ByteAlphabet() {
        std::fill(std::begin(byte), std::end(byte), int16_t(-1));
        uint32_t n = 0;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
            cp[b] = printable ? b : 256 + n++;
            byte[cp[b]] = int16_t(b);
        }
    }
};
const ByteAlphabet& alphabet() {
    static const ByteAlphabet a;
    return a;
}

// The bytes a token's text stands for: each character through the alphabet, or the text itself when a character
// is outside it (as HF's ByteLevel decoder does, for added tokens such as "<|eot_id|>" written in plain text).
std::string bytes_of_piece(const std::string& text) {
    const ByteAlphabet& a = alphabet();
    std::string out;
    for (size_t i = 0; i < text.size();) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t k = 1; k < n && i + k < text.size(); ++k)
            cp = cp << 6 | (static_cast<unsigned char>(text[i + k]) & 0x3F);
        if (cp >= 324 || a.byte[cp] < 0) return text;
        out += char(a.byte[cp]);
        i += n;
    }
    return out;
}

// A pre-tokenizer Split step: the matches of a regex (or of a literal string) and the text between them, each a
// piece of its own ("Isolated").
struct SplitStep {
    std::unique_ptr<Regex> regex;
    std::string pattern;  // the regex's
    std::string literal;
};

const json& field(const json& j, const char* key, const std::string& where) {
    if (!j.is_object() || !j.contains(key)) throw Error(where + ": '" + key + "' is missing");
    return j[key];
}
std::string type_of(const json& j, const std::string& where) {
    const json& t = field(j, "type", where);
    if (!t.is_string()) throw Error(where + ".type must be a string");
    return t.get<std::string>();
}
bool flag(const json& j, const char* key, bool fallback) {
    return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

struct Merge {
    int32_t rank, id;
};
uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

}  // namespace

struct BpeTokenizer::Impl {
    std::string source;                                 // tokenizer.json's path, for messages
    std::vector<std::string> pieces;                    // [vocab_size] the entry as stored (sized once: ids views them)
    std::unordered_map<std::string_view, int32_t> ids;  // the model's vocabulary (what BPE and the merges see) -> id
    std::unordered_map<std::string, int32_t> added_ids;  // added tokens' text -> id
    std::vector<std::string> bytes;                      // [vocab_size] the bytes it stands for
    std::unordered_map<uint64_t, Merge> merges;          // (left id, right id) -> rank, merged id
    int32_t byte_id[256] = {};                           // the token of each single byte
    bool ignore_merges = false;
    std::vector<SplitStep> splits;
    std::vector<SpecialToken> specials;  // added tokens marked special
    std::vector<SpecialToken> matched;   // added tokens not special: matched in the text
    std::vector<int32_t> prefix;         // the post-processor's tokens before the text
    int32_t bos = -1, eos = -1;

    void load_model(const json& model, const json& added);
    // From `pieces`, `specials` and `matched`: the vocabulary's ids (the entries in_vocab), each token's bytes and
    // each byte's token. `where` names the vocabulary in errors.
    void index(const std::vector<bool>& in_vocab, const std::string& where);
    void add_merge(int32_t rank, std::string_view a, std::string_view b, const std::string& where);
    void load_pre_tokenizer(const json& pre, const std::string& where);
    void load_post_processor(const json& post, const std::string& where, bool nested = false);
    int32_t lookup(const std::string& piece) const;  // an added token's id, else the vocabulary's, else -1
    // Appends the ids of one pre-token (its bytes).
    void bpe(std::string_view word, std::vector<int32_t>* out) const;
    // Appends the ids of text (no added tokens in it); cache: ids of the pre-tokens seen, viewing the caller's text.
    void encode_text(std::string_view text, std::vector<int32_t>* out,
                     std::unordered_map<std::string_view, std::vector<int32_t>>* cache) const;
};

void BpeTokenizer::Impl::load_model(const json& model, const json& added) {
    const std::string where = "model";
    const std::string type = type_of(model, where);
    if (type != "BPE") throw Error(where + ".type is \"" + type + "\"; only \"BPE\" is supported");
    if (flag(model, "byte_fallback", false)) throw Error(where + ".byte_fallback: not supported (byte-level BPE only)");
    if (model.contains("dropout") && !model["dropout"].is_null())
        throw Error(where + ".dropout: not supported (expected null)");
    for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
        if (model.contains(affix) && !model[affix].is_null() && model[affix] != "")
            throw Error(where + "." + affix + ": not supported (expected null)");
    ignore_merges = flag(model, "ignore_merges", false);

    // Every entry, vocabulary and added tokens, into pieces (sized first: ids holds views of its strings).
    const json& vocab = field(model, "vocab", where);
    if (!vocab.is_object()) throw Error(where + ".vocab must be an object {token: id}");
    if (!added.is_array()) throw Error("added_tokens must be an array");
    // Ids are dense: at most 1024 past the number of entries (a stray huge id must not allocate gigabytes).
    const int64_t id_limit = int64_t(vocab.size() + added.size()) + 1024;
    int64_t max_id = -1;
    auto check_id = [&](const json& id, const std::string& at) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= id_limit)
            throw Error(at + ": expected an id in [0, " + std::to_string(id_limit) +
                        ") (the entries are numbered "
                        "from 0)");
        max_id = std::max(max_id, id.get<int64_t>());
    };
    for (auto it = vocab.begin(); it != vocab.end(); ++it) check_id(*it, where + ".vocab[\"" + it.key() + "\"]");
    for (size_t i = 0; i < added.size(); ++i) {
        const json& a = added[i];
        const std::string at = "added_tokens[" + std::to_string(i) + "]";
        if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["content"].is_string() ||
            a["content"] == "")
            throw Error(at + ": expected {\"id\": integer, \"content\": non-empty string, ...}");
        check_id(a["id"], at + ".id");
        for (const char* f : {"lstrip", "rstrip", "single_word"})
            if (flag(a, f, false)) throw Error(at + "." + f + ": true is not supported");
    }
    pieces.resize(size_t(max_id + 1));
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        std::string& p = pieces[it->get<size_t>()];
        if (!p.empty())
            throw Error(where + ".vocab: id " + it->dump() + " is both \"" + p + "\" and \"" + it.key() + "\"");
        p = it.key();
    }
    const std::vector<std::string> vocab_pieces = pieces;  // (an added token may reuse its vocabulary entry's id)
    for (size_t i = 0; i < added.size(); ++i) {
        const int32_t id = added[i]["id"].get<int32_t>();
        const std::string content = added[i]["content"].get<std::string>();
        if (!pieces[size_t(id)].empty() && pieces[size_t(id)] != content)
            throw Error("added_tokens[" + std::to_string(i) + "]: id " + std::to_string(id) + " is already \"" +
                        pieces[size_t(id)] + "\"");
        pieces[size_t(id)] = content;
        added_ids[content] = id;
        (flag(added[i], "special", false) ? specials : matched).push_back({id, content});
    }
    std::vector<bool> in_vocab(pieces.size());
    for (size_t id = 0; id < pieces.size(); ++id) in_vocab[id] = !vocab_pieces[id].empty();
    index(in_vocab, where + ".vocab");

    const json& m = field(model, "merges", where);
    if (!m.is_array()) throw Error(where + ".merges must be an array");
    merges.reserve(m.size());
    for (size_t r = 0; r < m.size(); ++r) {
        std::string_view a, b;
        if (m[r].is_string()) {  // "a b"
            const std::string& line = m[r].get_ref<const std::string&>();
            const size_t sp = line.find(' ');
            if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
                throw Error(where + ".merges[" + std::to_string(r) + "] must be two tokens separated by a space");
            a = std::string_view(line).substr(0, sp);
            b = std::string_view(line).substr(sp + 1);
        } else if (m[r].is_array() && m[r].size() == 2 && m[r][0].is_string() && m[r][1].is_string()) {  // [a, b]
            a = m[r][0].get_ref<const std::string&>();
            b = m[r][1].get_ref<const std::string&>();
        } else {
            throw Error(where + ".merges[" + std::to_string(r) + "] must be \"a b\" or [a, b]");
        }
        add_merge(int32_t(r), a, b, where + ".merges[" + std::to_string(r) + "]");
    }
}

void BpeTokenizer::Impl::index(const std::vector<bool>& in_vocab, const std::string& where) {
    std::sort(matched.begin(), matched.end(),  // longest first: the longest match wins
              [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });
    bytes.assign(pieces.size(), std::string());
    ids.reserve(pieces.size());
    for (size_t id = 0; id < pieces.size(); ++id) {  // (an id between entries that has none stays empty)
        if (pieces[id].empty()) continue;
        bytes[id] = bytes_of_piece(pieces[id]);
        if (in_vocab[id]) ids.emplace(std::string_view(pieces[id]), int32_t(id));
    }
    for (const SpecialToken& t : specials) bytes[size_t(t.id)].clear();  // control tokens have no text
    for (int b = 0; b < 256; ++b) {
        std::string ch;
        append_utf8(ch, alphabet().cp[b]);
        const auto it = ids.find(ch);
        if (it == ids.end())
            throw Error(where + " lacks the token of byte " + std::to_string(b) + " (not a byte-level BPE)");
        byte_id[b] = it->second;
    }
}

void BpeTokenizer::Impl::add_merge(int32_t rank, std::string_view a, std::string_view b, const std::string& where) {
    std::string ab(a);
    ab += b;
    const auto ia = ids.find(a), ib = ids.find(b), iab = ids.find(ab);
    if (ia == ids.end() || ib == ids.end() || iab == ids.end())
        throw Error(where + ": a token of \"" + std::string(a) + " " + std::string(b) +
                    "\" or their merge is not in the vocabulary");
    merges.insert_or_assign(pair_key(ia->second, ib->second), Merge{rank, iab->second});  // as HF: the last
}

void BpeTokenizer::Impl::load_pre_tokenizer(const json& pre, const std::string& where) {
    const std::string type = type_of(pre, where);
    std::vector<std::pair<const json*, std::string>> steps;
    if (type == "Sequence") {
        const json& list = field(pre, "pretokenizers", where);
        if (!list.is_array()) throw Error(where + ".pretokenizers must be an array");
        for (size_t i = 0; i < list.size(); ++i)
            steps.push_back({&list[i], where + ".pretokenizers[" + std::to_string(i) + "]"});
        if (steps.empty()) throw Error(where + ".pretokenizers is empty (expected Split steps and ByteLevel)");
    } else {
        steps.push_back({&pre, where});
    }
    for (size_t i = 0; i < steps.size(); ++i) {
        const json& s = *steps[i].first;
        const std::string& at = steps[i].second;
        const std::string t = type_of(s, at);
        if (t == "Split") {
            if (i + 1 == steps.size()) throw Error(at + ": a Split must come before the ByteLevel step");
            const json& behavior = field(s, "behavior", at);
            if (behavior != "Isolated")
                throw Error(at + ".behavior is " + behavior.dump() + "; only \"Isolated\" is supported");
            if (flag(s, "invert", false)) throw Error(at + ".invert: true is not supported");
            const json& pattern = field(s, "pattern", at);
            SplitStep step;
            if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
                step.pattern = pattern["Regex"].get<std::string>();
                step.regex = std::make_unique<Regex>(step.pattern, at);
            } else if (pattern.contains("String") && pattern["String"].is_string() && pattern["String"] != "") {
                step.literal = pattern["String"].get<std::string>();
            } else {
                throw Error(at + ".pattern must be {\"Regex\": ...} or {\"String\": ...}");
            }
            splits.push_back(std::move(step));
        } else if (t == "ByteLevel") {
            if (i + 1 != steps.size()) throw Error(at + ": ByteLevel must be the last step");
            if (flag(s, "add_prefix_space", false)) throw Error(at + ".add_prefix_space: true is not supported");
            if (flag(s, "use_regex", true)) {
                SplitStep step;
                step.pattern = kGpt2Pattern;
                step.regex = std::make_unique<Regex>(step.pattern, at);
                splits.push_back(std::move(step));
            }
        } else {
            throw Error(at + ".type is \"" + t + "\"; supported: Split, ByteLevel, Sequence");
        }
    }
    if (type_of(*steps.back().first, steps.back().second) != "ByteLevel")
        throw Error(where + ": expected a ByteLevel pre-tokenizer (byte-level BPE)");
}

void BpeTokenizer::Impl::load_post_processor(const json& post, const std::string& where, bool nested) {
    if (post.is_null()) return;
    const std::string type = type_of(post, where);
    if (type == "ByteLevel") return;  // offsets only
    if (type == "Sequence") {
        if (nested) throw Error(where + ": a Sequence inside a Sequence is not supported");
        const json& list = field(post, "processors", where);
        if (!list.is_array()) throw Error(where + ".processors must be an array");
        for (size_t i = 0; i < list.size(); ++i)
            load_post_processor(list[i], where + ".processors[" + std::to_string(i) + "]", true);
        return;
    }
    if (type != "TemplateProcessing")
        throw Error(where + ".type is \"" + type + "\"; supported: ByteLevel, TemplateProcessing, Sequence");
    const json& single = field(post, "single", where);
    if (!single.is_array()) throw Error(where + ".single must be an array");
    bool seen_text = false;
    for (const json& item : single) {
        if (item.contains("Sequence")) {
            seen_text = true;
            continue;
        }
        const json* tok = item.contains("SpecialToken") ? &item["SpecialToken"] : nullptr;
        if (!tok || !tok->contains("id") || !(*tok)["id"].is_string())
            throw Error(where + ".single: expected {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}");
        if (seen_text) throw Error(where + ".single: tokens after the text are not supported");
        const std::string name = (*tok)["id"].get<std::string>();
        std::vector<int32_t> tok_ids;
        const json& st = post.contains("special_tokens") ? post["special_tokens"] : json();
        if (st.contains(name) && st[name].contains("ids") && st[name]["ids"].is_array()) {
            for (const json& id : st[name]["ids"]) {
                if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= int64_t(pieces.size()))
                    throw Error(where + ".special_tokens[\"" + name + "\"]: an id is outside the vocabulary");
                tok_ids.push_back(id.get<int32_t>());
            }
        } else {
            const int32_t id = lookup(name);
            if (id < 0) throw Error(where + ".single: token \"" + name + "\" is not in the vocabulary");
            tok_ids.push_back(id);
        }
        prefix.insert(prefix.end(), tok_ids.begin(), tok_ids.end());
    }
}

BpeTokenizer::BpeTokenizer(const std::filesystem::path& tokenizer_json, const std::filesystem::path& tokenizer_config)
    : impl_(std::make_unique<Impl>()) {
    Impl& m = *impl_;
    m.source = tokenizer_json.string();
    json j = json::parse(read_file(tokenizer_json), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw Error(m.source + ": invalid JSON");
    if (!j.is_object()) throw Error(m.source + ": expected a JSON object");
    try {
        if (j.contains("normalizer") && !j["normalizer"].is_null())
            throw Error("normalizer " + json_brief(j["normalizer"]) + " is not supported (expected null)");
        m.load_model(field(j, "model", "tokenizer"), j.contains("added_tokens") ? j["added_tokens"] : json::array());
        m.load_pre_tokenizer(field(j, "pre_tokenizer", "tokenizer"), "pre_tokenizer");
        if (j.contains("post_processor")) m.load_post_processor(j["post_processor"], "post_processor");
        const json& dec = field(j, "decoder", "tokenizer");
        if (type_of(dec, "decoder") != "ByteLevel")
            throw Error("decoder.type is \"" + type_of(dec, "decoder") + "\"; only \"ByteLevel\" is supported");
    } catch (const Error& e) {
        throw Error(m.source + ": " + e.what());
    } catch (const json::exception& e) {  // a value of an unexpected type somewhere
        throw Error(m.source + ": unexpected value (" + e.what() + ")");
    }
    if (!tokenizer_config.empty()) {
        const std::string where = tokenizer_config.string();
        const json c = json::parse(read_file(tokenizer_config), nullptr, false);
        if (c.is_discarded() || !c.is_object()) throw Error(where + ": not a JSON object");
        auto token = [&](const char* key) {  // "<s>" or {"content": "<s>"}
            if (!c.contains(key) || c[key].is_null()) return -1;
            const json& v = c[key].is_object() && c[key].contains("content") ? c[key]["content"] : c[key];
            if (!v.is_string()) throw Error(where + ": " + key + " must be a string");
            const int32_t id = piece_to_id(v.get<std::string>());
            if (id < 0) throw Error(where + ": " + key + " \"" + v.get<std::string>() + "\" is not in the vocabulary");
            return id;
        };
        m.bos = token("bos_token");
        m.eos = token("eos_token");
        if (c.contains("add_bos_token") && c["add_bos_token"].is_boolean()) {  // as transformers: it overrides
            if (!c["add_bos_token"].get<bool>())
                m.prefix.clear();
            else if (m.prefix.empty() && m.bos >= 0)
                m.prefix = {m.bos};
        }
    }
    if (m.bos < 0 && m.prefix.size() == 1) m.bos = m.prefix[0];
}

BpeTokenizer::BpeTokenizer(const GgufVocab& v, const std::string& source) : impl_(std::make_unique<Impl>()) {
    Impl& m = *impl_;
    m.source = source;
    m.pieces = v.tokens;
    std::vector<bool> in_vocab(v.tokens.size(), false);
    for (size_t id = 0; id < v.tokens.size(); ++id) {
        const SpecialToken t{int32_t(id), v.tokens[id]};
        if (v.types[id] == kTokControl || v.types[id] == kTokUnknown) {
            m.specials.push_back(t);
            m.added_ids[t.text] = t.id;
        } else if (v.types[id] == kTokUserDefined) {
            m.matched.push_back(t);
            m.added_ids[t.text] = t.id;
        } else {
            in_vocab[id] = true;
        }
    }
    m.index(in_vocab, source + ": tokenizer.ggml.tokens");
    m.merges.reserve(v.merges.size());
    for (size_t r = 0; r < v.merges.size(); ++r) {
        const std::string& line = v.merges[r];
        const size_t sp = line.find(' ');
        const std::string at = source + ": tokenizer.ggml.merges[" + std::to_string(r) + "]";
        if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
            throw Error(at + " must be two tokens separated by a space");
        m.add_merge(int32_t(r), std::string_view(line).substr(0, sp), std::string_view(line).substr(sp + 1), at);
    }
    m.ignore_merges = true;  // as llama.cpp's llama-bpe and Llama 3's tokenizer.json
    SplitStep step;
    step.pattern = kLlama3Pattern;
    step.regex = std::make_unique<Regex>(step.pattern, source);
    m.splits.push_back(std::move(step));
    m.bos = int32_t(v.bos);
    m.eos = int32_t(v.eos);
    if (v.add_bos && v.bos >= 0) m.prefix = {m.bos};
}

GgufVocab BpeTokenizer::gguf_vocab() const {
    const Impl& m = *impl_;
    if (m.splits.size() != 1 || m.splits[0].pattern != kLlama3Pattern || !m.ignore_merges)
        throw Error(m.source +
                    ": a GGUF stores byte-level BPE vocabularies with Llama 3's pre-tokenizer only "
                    "(tokenizer.ggml.pre llama-bpe); this one has another");
    if (m.prefix.size() > 1 || (m.prefix.size() == 1 && m.prefix[0] != m.bos))
        throw Error(m.source + ": the post-processor adds tokens other than BOS; a GGUF cannot say so");
    GgufVocab v;
    v.model = "gpt2";
    v.pre = "llama-bpe";
    v.tokens = m.pieces;
    v.types.assign(m.pieces.size(), kTokNormal);
    for (size_t id = 0; id < m.pieces.size(); ++id)
        if (m.pieces[id].empty())
            throw Error(m.source + ": id " + std::to_string(id) + " has no token; a GGUF needs every id");
    for (const SpecialToken& t : m.specials) v.types[size_t(t.id)] = kTokControl;
    for (const SpecialToken& t : m.matched) v.types[size_t(t.id)] = kTokUserDefined;
    std::vector<std::pair<int32_t, uint64_t>> ranked;
    for (const auto& [key, merge] : m.merges) ranked.push_back({merge.rank, key});
    std::sort(ranked.begin(), ranked.end());
    for (const auto& [rank, key] : ranked)
        v.merges.push_back(m.pieces[size_t(key >> 32)] + " " + m.pieces[size_t(uint32_t(key))]);
    v.bos = m.bos;
    v.eos = m.eos;
    v.add_bos = !m.prefix.empty();
    v.add_space_prefix = false;
    return v;
}

BpeTokenizer::~BpeTokenizer() = default;

int32_t BpeTokenizer::Impl::lookup(const std::string& piece) const {
    if (const auto it = added_ids.find(piece); it != added_ids.end()) return it->second;
    const auto it = ids.find(std::string_view(piece));
    return it == ids.end() ? -1 : it->second;
}

void BpeTokenizer::Impl::bpe(std::string_view word, std::vector<int32_t>* out) const {
    if (ignore_merges) {
        std::string mapped;
        for (unsigned char b : word) append_utf8(mapped, alphabet().cp[b]);
        const auto it = ids.find(mapped);
        if (it != ids.end()) return out->push_back(it->second);
    }
    // Symbols in a linked list; the pair of lowest rank merges first (the leftmost among equal ranks), as HF does.
    struct Sym {
        int32_t id;
        int prev, next;
    };
    const int n = int(word.size());
    std::vector<Sym> s(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) s[size_t(i)] = {byte_id[static_cast<unsigned char>(word[size_t(i)])], i - 1, i + 1};
    struct Cand {
        int32_t rank;
        int pos;
        int32_t left, right;
        bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
    auto consider = [&](int i) {
        const int j = s[size_t(i)].next;
        if (i < 0 || j >= n) return;
        const auto it = merges.find(pair_key(s[size_t(i)].id, s[size_t(j)].id));
        if (it != merges.end()) queue.push({it->second.rank, i, s[size_t(i)].id, s[size_t(j)].id});
    };
    for (int i = 0; i + 1 < n; ++i) consider(i);
    while (!queue.empty()) {
        const Cand c = queue.top();
        queue.pop();
        Sym& a = s[size_t(c.pos)];
        if (a.id != c.left || a.next >= n || s[size_t(a.next)].id != c.right) continue;  // stale
        const int j = a.next;
        a.id = merges.at(pair_key(c.left, c.right)).id;
        a.next = s[size_t(j)].next;
        if (a.next < n) s[size_t(a.next)].prev = c.pos;
        s[size_t(j)].id = -1;  // gone
        if (a.prev >= 0) consider(a.prev);
        consider(c.pos);
    }
    for (int i = 0; i < n; i = s[size_t(i)].next) out->push_back(s[size_t(i)].id);
}

void BpeTokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>* out,
                                     std::unordered_map<std::string_view, std::vector<int32_t>>* cache) const {
    // Pre-tokens as [begin, end) of text, through each Split step in turn.
    std::vector<std::pair<size_t, size_t>> pieces_now = {{0, text.size()}}, next;
    const std::unique_ptr<OnigRegion, void (*)(OnigRegion*)> owned(onig_region_new(),
                                                                   [](OnigRegion* r) { onig_region_free(r, 1); });
    OnigRegion* region = owned.get();
    for (const SplitStep& step : splits) {
        next.clear();
        for (const auto& [b, e] : pieces_now) {
            // The matches as Oniguruma's find-iterator gives them (an empty match right where the previous match ended
            // is skipped; the search goes on a character later), each a piece, as is the text between: an empty
            // match cuts the text without a piece of its own.
            const std::string_view part = text.substr(b, e - b);
            size_t start = 0, from = 0, mb = 0, me = 0, last_end = std::string::npos;
            while (from <= part.size()) {
                if (step.regex) {
                    if (!step.regex->search(part, from, &mb, &me, region)) break;
                } else {
                    mb = part.find(step.literal, from);
                    if (mb == std::string::npos) break;
                    me = mb + step.literal.size();
                }
                from = me;
                if (me == mb) {  // the next search starts a character later
                    ++from;
                    while (from < part.size() && (static_cast<unsigned char>(part[from]) & 0xC0) == 0x80) ++from;
                    if (me == last_end) continue;
                }
                last_end = me;
                if (mb > start) next.push_back({b + start, b + mb});
                if (me > mb) next.push_back({b + mb, b + me});
                start = me;
            }
            if (start < part.size()) next.push_back({b + start, e});
        }
        pieces_now.swap(next);
    }
    for (const auto& [b, e] : pieces_now) {
        if (e == b) continue;
        const std::string_view word = text.substr(b, e - b);
        if (word.size() > 256) {  // rare and long: not worth a cache entry
            bpe(word, out);
            continue;
        }
        auto it = cache->find(word);
        if (it == cache->end()) {
            std::vector<int32_t> ids_of_word;
            bpe(word, &ids_of_word);
            it = cache->emplace(word, std::move(ids_of_word)).first;
        }
        out->insert(out->end(), it->second.begin(), it->second.end());
    }
}

std::vector<int32_t> BpeTokenizer::encode(const std::string& text, bool add_bos) const {
    const Impl& m = *impl_;
    const size_t bad = invalid_utf8_at(text);
    if (bad != std::string::npos)
        throw Error("tokenizer: the text is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
    std::vector<int32_t> out;
    if (add_bos) {
        if (!m.prefix.empty())
            out = m.prefix;
        else if (m.bos >= 0)
            out.push_back(m.bos);
    }
    std::unordered_map<std::string_view, std::vector<int32_t>> cache;  // views of text
    // Non-special added tokens are whole tokens wherever they occur in the text (the leftmost, then the longest);
    // the text between them is BPE'd. next[i]: where m.matched[i] next occurs at or after pos.
    size_t pos = 0;
    std::vector<size_t> next(m.matched.size(), 0);
    for (size_t i = 0; i < next.size(); ++i) next[i] = text.find(m.matched[i].text);
    while (!m.matched.empty()) {
        size_t best = std::string::npos;
        const SpecialToken* hit = nullptr;
        for (size_t i = 0; i < next.size(); ++i) {
            if (next[i] != std::string::npos && next[i] < pos) next[i] = text.find(m.matched[i].text, pos);
            if (next[i] < best) best = next[i], hit = &m.matched[i];  // (longest first on a tie: sorted so)
        }
        if (!hit) break;
        m.encode_text(std::string_view(text).substr(pos, best - pos), &out, &cache);
        out.push_back(hit->id);
        pos = best + hit->text.size();
    }
    m.encode_text(std::string_view(text).substr(pos), &out, &cache);
    return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string out;
    for (int32_t id : ids) {
        if (id < 0 || id >= vocab_size())
            throw Error("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                        std::to_string(vocab_size()) + ")");
        out += impl_->bytes[size_t(id)];
    }
    return utf8_lossy(out);
}

std::string BpeTokenizer::piece(int32_t id) const {
    return id >= 0 && id < vocab_size() ? impl_->pieces[size_t(id)] : "";
}
std::string BpeTokenizer::token_bytes(int32_t id) const {
    return id >= 0 && id < vocab_size() ? impl_->bytes[size_t(id)] : "";
}
int32_t BpeTokenizer::piece_to_id(const std::string& piece) const { return impl_->lookup(piece); }
int32_t BpeTokenizer::vocab_size() const { return int32_t(impl_->pieces.size()); }
int32_t BpeTokenizer::bos_id() const { return impl_->bos; }
int32_t BpeTokenizer::eos_id() const { return impl_->eos; }
bool BpeTokenizer::add_bos() const { return !impl_->prefix.empty(); }
std::vector<SpecialToken> BpeTokenizer::special_tokens() const { return impl_->specials; }

}  // namespace plainllama
