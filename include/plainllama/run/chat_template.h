// Chat templates: a conversation (system prompt + alternating user/assistant messages) rendered to the
// token ids a chat model was trained on, the way Hugging Face's chat templates render it.
//
// The HF strings reproduced (what `apply_chat_template` renders from tokenizer_config.json's Jinja, with
// HF's trim_blocks/lstrip_blocks; {u}, {a} are message contents, strip() is Python's str.strip()):
//   llama2 (meta-llama/Llama-2-*-chat-hf): a system prompt goes into the first user message;
//     <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{u1} [/INST] {a1} </s><s>[INST] {u2} [/INST]
//     each user part is strip()ped whole (system block included), each reply is ' ' + strip(a) + ' ';
//     no generation prompt (the prompt already ends with " [/INST]").
//   zephyr (HuggingFaceH4/zephyr-7b-beta, TinyLlama-Chat):
//     <|system|>\n{system}</s>\n<|user|>\n{u1}</s>\n<|assistant|>\n{a1}</s>\n ... <|assistant|>\n
//   chatml (OpenHermes-2.5 and others):
//     <|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{u1}<|im_end|>\n<|im_start|>assistant\n
//   llama3 (Meta-Llama-3-*-Instruct, 3.1, 3.2): BOS once, then per message (the system prompt first)
//     <|start_header_id|>{role}<|end_header_id|>\n\n{strip(content)}<|eot_id|>
//     and the generation prompt <|start_header_id|>assistant<|end_header_id|>\n\n
//   raw (base models): no markup; see render().
// An empty system prompt means none (no system block at all).
//
// Tokenization, as HF's (legacy) LlamaTokenizer does it: special tokens (<s>, </s>, <|im_start|>,
// <|im_end|>) become their single ids; the text between two of them is one SentencePiece segment, encoded
// without BOS (SentencePiece puts its '▁' dummy prefix in front of every segment). Text in messages is never
// parsed for special tokens. A special token the vocabulary lacks is tokenized as text (see warnings()).
// BOS: llama2's template writes <s> itself (one per [INST]), llama3 <|begin_of_text|> once; for zephyr, chatml and
// raw the tokenizer adds one BOS at the start of the conversation, as HF's tokenizer does when it encodes the
// rendered prompt (tokenizer_config.json's add_bos_token, else as the tokenizer does for any text). The BOS and EOS
// tokens are tokenizer_config.json's bos_token and eos_token, else the tokenizer's.
// llama3 is the template Meta's Llama 3 folders ship; 3.1 and later also write a system block with "Cutting
// Knowledge Date: ..." and today's date, which this rendering leaves out.
//
// A reply the model generated keeps the ids it was generated as (ChatMessage::ids, the tokens in the KV
// cache) in place of its text: its region of the rendering (llama2: ' ' + strip(a) + ' ' between
// "[/INST]" and </s>, the others: {a}) is those ids, and the segments on either side are encoded
// separately. So a conversation's ids extend those of the prompt that produced each reply: turn N adds
// only its new tokens. (For llama2 the model ends its reply by sampling </s>, so the ' ' HF writes before
// </s> does not appear.)
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "plainllama/tokenizer/tokenizer.h"

namespace plainllama {

enum class TemplateKind { raw, llama2, zephyr, chatml, llama3 };

const char* template_name(TemplateKind k);
// "raw", "llama2", "zephyr", "chatml", "llama3"; throws Error naming `what` (e.g. "--template") otherwise.
TemplateKind parse_template_name(const std::string& name, const std::string& what);

// What `auto` chooses from a model folder: its tokenizer_config.json's chat_template (a string, or a list
// of {name, template} whose "default" or first entry is used), recognised by substrings:
//   "<|start_header_id|>" -> llama3; "<|im_start|>" -> chatml; "<|user|>" without "<|end|>" -> zephyr; "[INST]" ->
//   llama2;
// no file or no chat_template -> raw; an unrecognised template -> raw with a warning. A GGUF model's
// tokenizer.chat_template likewise.
// Also reads bos_token/eos_token (a string or {"content": ...}) and add_bos_token when present; what is absent comes
// from the tokenizer (its BOS and EOS, and whether it prepends BOS).
struct TemplateChoice {
    TemplateKind kind = TemplateKind::raw;
    std::string reason;   // one line: where the choice came from
    std::string warning;  // non-empty when the model's template was not recognised
    std::optional<std::string> bos_token, eos_token;
    std::optional<bool> add_bos;
};
TemplateChoice detect_template(const std::filesystem::path& model_dir);
// The model's chat template as written (tokenizer_config.json's chat_template as above, a GGUF's
// tokenizer.chat_template), empty when none.
std::string chat_template_text(const std::filesystem::path& model_dir);

enum class Role { user, assistant };
const char* role_name(Role r);  // "user", "assistant"

struct ChatMessage {
    Role role = Role::user;
    std::string content;
    bool generated = false;    // an assistant reply produced here: `ids` is its region of the rendering
    std::vector<int32_t> ids;  // the reply's token ids, without the end-of-turn token that stopped it
};

// Checks that the roles alternate user, assistant, user, ...; throws Error naming `what` and the message.
void check_roles(const std::vector<ChatMessage>& messages, const std::string& what);

class ChatTemplate {
   public:
    // Resolves the template's special tokens in `tok` (which must outlive this object).
    ChatTemplate(TemplateKind kind, const Tokenizer& tok, const TemplateChoice& tokens = {});

    TemplateKind kind() const { return kind_; }
    // The HF string (generated replies as their text), specials written as their pieces. Raw writes the
    // segment boundary of a user message as one space.
    std::string render_text(const std::string& system, const std::vector<ChatMessage>& messages,
                            bool add_generation_prompt) const;
    // Token ids. raw: BOS once, the system prompt (if any) as its own segment, every user message as its own
    // segment, every reply continuing the text before it (turn 1 is BOS + encode(u1), as `generate` on u1; as
    // each segment starts with SentencePiece's '▁', a later user message reads as joined by one space).
    // With `starts`: each message's first id (the ids before its first part; text that a template runs across the
    // boundary into one segment counts towards the message where the segment ends).
    std::vector<int32_t> render(const std::string& system, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt, std::vector<size_t>* starts = nullptr) const;
    // Ids that end the assistant's turn (llama2, zephyr: </s>; chatml: <|im_end|>; llama3: <|eot_id|>; raw: none);
    // the caller adds the model's EOS ids.
    std::vector<int32_t> end_of_turn_ids() const;
    // One line per special token that is not in the vocabulary (tokenized as text instead).
    const std::vector<std::string>& warnings() const { return warnings_; }

   private:
    // A piece of the rendering: literal text, a special token, a reply's region, or a segment boundary.
    struct Part {
        enum Kind { literal, special_token, reply, boundary } kind;
        std::string text;
        int32_t id = -1;                   // special_token: its id, -1 when not in the vocabulary
        const ChatMessage* msg = nullptr;  // reply
    };
    // first: the index of each message's first part.
    std::vector<Part> parts(const std::string& system, const std::vector<ChatMessage>& messages,
                            bool add_generation_prompt, std::vector<size_t>* first = nullptr) const;
    Part special(const std::string& piece) const;

    TemplateKind kind_;
    const Tokenizer& tok_;
    std::string bos_, eos_;
    bool add_bos_ = true;
    std::vector<std::string> warnings_;
};

}  // namespace plainllama
