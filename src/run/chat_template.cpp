#include "plainllama/run/chat_template.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "plainllama/io/file.h"
#include "plainllama/io/gguf.h"
#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

// Python's str.isspace() for one code point.
bool is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The code point of the UTF-8 sequence starting at s[i] (valid UTF-8), and its length.
uint32_t code_point_at(const std::string& s, size_t i, size_t* len) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    *len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = *len == 1 ? c : *len == 2 ? (c & 0x1F) : *len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < *len && i + k < s.size(); ++k) cp = cp << 6 | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    return cp;
}

// Python's str.strip(), as Jinja's trim (Unicode whitespace too).
std::string strip(const std::string& s) {
    size_t b = 0, e = s.size(), len;
    while (b < e && is_space(code_point_at(s, b, &len))) b += len;
    while (e > b) {
        size_t start = e - 1;
        while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        if (!is_space(code_point_at(s, start, &len))) break;
        e = start;
    }
    return s.substr(b, e - b);
}

bool contains(const std::string& s, const char* sub) { return s.find(sub) != std::string::npos; }

// A token field of tokenizer_config.json: "<s>" or {"content": "<s>", ...}; none when absent or null.
std::optional<std::string> token_field(const nlohmann::json& j, const char* key) {
    if (!j.contains(key)) return std::nullopt;
    const auto& v = j[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return std::nullopt;
}

}  // namespace

const char* role_name(Role r) { return r == Role::user ? "user" : "assistant"; }

void check_roles(const std::vector<ChatMessage>& messages, const std::string& what) {
    for (size_t i = 0; i < messages.size(); ++i) {
        const Role want = i % 2 == 0 ? Role::user : Role::assistant;
        if (messages[i].role != want)
            throw Error(what + ": message " + std::to_string(i + 1) + ": role is \"" + role_name(messages[i].role) +
                        "\", expected \"" + role_name(want) + "\" (roles alternate user, assistant, ...)");
    }
}

const char* template_name(TemplateKind k) {
    switch (k) {
        case TemplateKind::raw:
            return "raw";
        case TemplateKind::llama2:
            return "llama2";
        case TemplateKind::zephyr:
            return "zephyr";
        case TemplateKind::chatml:
            return "chatml";
        case TemplateKind::llama3:
            return "llama3";
    }
    return "?";
}

TemplateKind parse_template_name(const std::string& name, const std::string& what) {
    for (TemplateKind k :
         {TemplateKind::raw, TemplateKind::llama2, TemplateKind::zephyr, TemplateKind::chatml, TemplateKind::llama3})
        if (name == template_name(k)) return k;
    throw Error(what + ": unknown chat template '" + name + "' (expected raw, llama2, zephyr, chatml or llama3)");
}

namespace {

// tokenizer_config.json's chat_template: a string, or a list of {name, template} whose "default" or first entry is
// used; empty when none.
std::string template_of(const nlohmann::json& j) {
    std::string tmpl;
    if (j.contains("chat_template")) {
        const auto& t = j["chat_template"];
        if (t.is_string()) {
            tmpl = t.get<std::string>();
        } else if (t.is_array()) {  // [{"name": "default", "template": "..."}, ...]
            for (const auto& e : t)
                if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
                    e["template"].is_string())
                    tmpl = e["template"].get<std::string>();
            if (tmpl.empty() && !t.empty() && t[0].is_object() && t[0].contains("template") &&
                t[0]["template"].is_string())
                tmpl = t[0]["template"].get<std::string>();
        }
    }
    return tmpl;
}

// c with the kind of template `tmpl` (read from `file`'s `key`; empty: none) and why.
TemplateChoice recognise(TemplateChoice c, const std::string& tmpl, const std::string& file, const std::string& key) {
    if (tmpl.empty()) {
        c.reason = file + " has no " + key + ": raw continuation";
        return c;
    }
    if (contains(tmpl, "<|start_header_id|>")) {
        c.kind = TemplateKind::llama3;
    } else if (contains(tmpl, "<|im_start|>")) {
        c.kind = TemplateKind::chatml;
    } else if (contains(tmpl, "<|user|>") && !contains(tmpl, "<|end|>")) {
        c.kind = TemplateKind::zephyr;
    } else if (contains(tmpl, "[INST]")) {
        c.kind = TemplateKind::llama2;
    } else {
        c.reason = file + ": " + key + " not recognised: raw continuation";
        c.warning = file + ": its " + key +
                    " is not one of llama2, zephyr, chatml, llama3; using raw (choose one with --template)";
        return c;
    }
    c.reason = file + ": " + key + " is " + template_name(c.kind);
    return c;
}

}  // namespace

std::string chat_template_text(const std::filesystem::path& model_dir) {
    if (std::filesystem::path gguf; is_gguf_model(model_dir, &gguf))
        return GgufFile(gguf).string("tokenizer.chat_template", false);
    const std::filesystem::path file = model_dir / "tokenizer_config.json";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) return "";
    const nlohmann::json j = nlohmann::json::parse(read_file(file), nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw Error(file.string() + ": not a JSON object");
    return template_of(j);
}

TemplateChoice detect_template(const std::filesystem::path& model_dir) {
    TemplateChoice c;
    // A GGUF's tokenizer.chat_template; its BOS, EOS and add_bos are the tokenizer's own (gguf_vocab.h).
    if (std::filesystem::path gguf; is_gguf_model(model_dir, &gguf))
        return recognise(c, GgufFile(gguf).string("tokenizer.chat_template", false), gguf.string(),
                         "tokenizer.chat_template");
    const std::filesystem::path file = model_dir / "tokenizer_config.json";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) {
        c.reason = "no tokenizer_config.json: raw continuation";
        return c;
    }
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(read_file(file));
    } catch (const nlohmann::json::exception& e) {
        throw Error(file.string() + ": not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw Error(file.string() + ": expected a JSON object");
    c.bos_token = token_field(j, "bos_token");
    c.eos_token = token_field(j, "eos_token");
    if (j.contains("add_bos_token") && j["add_bos_token"].is_boolean()) c.add_bos = j["add_bos_token"].get<bool>();

    return recognise(c, template_of(j), file.string(), "chat_template");
}

ChatTemplate::ChatTemplate(TemplateKind kind, const Tokenizer& tok, const TemplateChoice& tokens)
    : kind_(kind),
      tok_(tok),
      bos_(tokens.bos_token.value_or(tok.bos_id() >= 0 ? tok.piece(tok.bos_id()) : "")),
      eos_(tokens.eos_token.value_or(tok.eos_id() >= 0 ? tok.piece(tok.eos_id()) : "")),
      add_bos_(tokens.add_bos.value_or(tok.add_bos()) && !bos_.empty()) {
    std::vector<std::string> specials;
    if (kind_ == TemplateKind::llama2 || kind_ == TemplateKind::zephyr) specials.push_back(eos_);
    if (kind_ == TemplateKind::llama2 || add_bos_) specials.insert(specials.begin(), bos_);
    if (kind_ == TemplateKind::chatml) {
        specials.push_back("<|im_start|>");
        specials.push_back("<|im_end|>");
    }
    if (kind_ == TemplateKind::llama3) {
        if (!add_bos_) specials.insert(specials.begin(), bos_);  // llama3 writes BOS itself
        for (const char* s : {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}) specials.push_back(s);
    }
    for (const std::string& s : specials)
        if (!s.empty() && tok_.piece_to_id(s) < 0)
            warnings_.push_back(std::string("chat template ") + template_name(kind_) + ": '" + s +
                                "' is not in the vocabulary; it is tokenized as text");
}

ChatTemplate::Part ChatTemplate::special(const std::string& piece) const {
    return Part{Part::special_token, piece, tok_.piece_to_id(piece), nullptr};
}

std::vector<int32_t> ChatTemplate::end_of_turn_ids() const {
    std::vector<int32_t> ids;
    int32_t id = -1;
    if (kind_ == TemplateKind::llama2 || kind_ == TemplateKind::zephyr) id = tok_.piece_to_id(eos_);
    if (kind_ == TemplateKind::chatml) id = tok_.piece_to_id("<|im_end|>");
    if (kind_ == TemplateKind::llama3) id = tok_.piece_to_id("<|eot_id|>");
    if (id >= 0) ids.push_back(id);
    return ids;
}

std::vector<ChatTemplate::Part> ChatTemplate::parts(const std::string& system, const std::vector<ChatMessage>& messages,
                                                    bool add_generation_prompt, std::vector<size_t>* first) const {
    check_roles(messages, "chat");
    if (first) first->clear();
    auto text = [](std::string s) { return Part{Part::literal, std::move(s), -1, nullptr}; };
    auto reply = [](std::string s, const ChatMessage& m) { return Part{Part::reply, std::move(s), -1, &m}; };
    const Part brk{Part::boundary, "", -1, nullptr};
    std::vector<Part> p;
    switch (kind_) {
        case TemplateKind::llama2:
            for (size_t i = 0; i < messages.size(); ++i) {
                const ChatMessage& m = messages[i];
                if (first) first->push_back(p.size());
                if (m.role == Role::user) {
                    const std::string content =
                        i == 0 && !system.empty() ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + m.content : m.content;
                    p.push_back(special(bos_));
                    p.push_back(text("[INST] " + strip(content) + " [/INST]"));
                } else {
                    p.push_back(reply(" " + strip(m.content) + " ", m));
                    p.push_back(special(eos_));
                }
            }
            break;
        case TemplateKind::zephyr:
            if (add_bos_) p.push_back(special(bos_));
            if (!system.empty()) {
                p.push_back(text("<|system|>\n" + system));
                p.push_back(special(eos_));
                p.push_back(text("\n"));
            }
            for (const ChatMessage& m : messages) {
                if (first) first->push_back(p.size());
                if (m.role == Role::user) {
                    p.push_back(text("<|user|>\n" + m.content));
                } else {
                    p.push_back(text("<|assistant|>\n"));
                    p.push_back(reply(m.content, m));
                }
                p.push_back(special(eos_));
                p.push_back(text("\n"));
            }
            if (add_generation_prompt) p.push_back(text("<|assistant|>\n"));
            break;
        case TemplateKind::chatml:
            if (add_bos_) p.push_back(special(bos_));
            if (!system.empty()) {
                p.push_back(special("<|im_start|>"));
                p.push_back(text("system\n" + system));
                p.push_back(special("<|im_end|>"));
                p.push_back(text("\n"));
            }
            for (const ChatMessage& m : messages) {
                if (first) first->push_back(p.size());
                p.push_back(special("<|im_start|>"));
                if (m.role == Role::user) {
                    p.push_back(text("user\n" + m.content));
                } else {
                    p.push_back(text("assistant\n"));
                    p.push_back(reply(m.content, m));
                }
                p.push_back(special("<|im_end|>"));
                p.push_back(text("\n"));
            }
            if (add_generation_prompt) {
                p.push_back(special("<|im_start|>"));
                p.push_back(text("assistant\n"));
            }
            break;
        case TemplateKind::llama3: {
            auto header = [&](const char* role) {
                p.push_back(special("<|start_header_id|>"));
                p.push_back(text(role));
                p.push_back(special("<|end_header_id|>"));
            };
            p.push_back(special(bos_));
            if (!system.empty()) {
                header("system");
                p.push_back(text("\n\n" + strip(system)));
                p.push_back(special("<|eot_id|>"));
            }
            for (const ChatMessage& m : messages) {
                if (first) first->push_back(p.size());
                header(role_name(m.role));
                if (m.role == Role::user) {
                    p.push_back(text("\n\n" + strip(m.content)));
                } else {
                    p.push_back(text("\n\n"));
                    p.push_back(reply(strip(m.content), m));
                }
                p.push_back(special("<|eot_id|>"));
            }
            if (add_generation_prompt) {
                header("assistant");
                p.push_back(text("\n\n"));
            }
            break;
        }
        case TemplateKind::raw:
            if (add_bos_) p.push_back(special(bos_));
            if (!system.empty()) p.push_back(text(system));
            for (const ChatMessage& m : messages) {
                if (first) first->push_back(p.size());
                if (m.role == Role::user) {
                    p.push_back(brk);
                    p.push_back(text(m.content));
                } else {
                    p.push_back(reply(m.content, m));
                }
            }
            break;
    }
    return p;
}

std::string ChatTemplate::render_text(const std::string& system, const std::vector<ChatMessage>& messages,
                                      bool add_generation_prompt) const {
    std::string out;
    bool any_text = false;
    for (const Part& p : parts(system, messages, add_generation_prompt)) {
        if (p.kind == Part::boundary) {
            if (any_text) out += ' ';
            continue;
        }
        out += p.text;
        if (p.kind != Part::special_token) any_text = any_text || !p.text.empty();
    }
    return out;
}

std::vector<int32_t> ChatTemplate::render(const std::string& system, const std::vector<ChatMessage>& messages,
                                          bool add_generation_prompt, std::vector<size_t>* starts) const {
    std::vector<size_t> first;  // each message's first part
    const std::vector<Part> all = parts(system, messages, add_generation_prompt, starts ? &first : nullptr);
    if (starts) starts->clear();
    std::vector<int32_t> ids;
    std::string segment;  // text since the last special token, generated reply or segment break
    auto flush = [&] {
        if (segment.empty()) return;
        const std::vector<int32_t> e = tok_.encode(segment, false);
        ids.insert(ids.end(), e.begin(), e.end());
        segment.clear();
    };
    for (size_t j = 0; j < all.size(); ++j) {
        const Part& p = all[j];
        if (starts && starts->size() < first.size() && first[starts->size()] == j) starts->push_back(ids.size());
        switch (p.kind) {
            case Part::literal:
                segment += p.text;
                break;
            case Part::special_token:
                if (p.id < 0) {
                    segment += p.text;
                } else {
                    flush();
                    ids.push_back(p.id);
                }
                break;
            case Part::reply:
                if (p.msg->generated) {
                    flush();
                    ids.insert(ids.end(), p.msg->ids.begin(), p.msg->ids.end());
                } else {
                    segment += p.text;
                }
                break;
            case Part::boundary:
                flush();
                break;
        }
    }
    flush();
    return ids;
}

}  // namespace plainllama
