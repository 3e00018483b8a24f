// The vocabulary as a prefix tree of the tokens' bytes (Tokenizer::token_bytes), built once per vocabulary and
// shared: a walk over it tries every token's bytes against a grammar state, sharing the work of common prefixes and
// skipping every token under a prefix the grammar refuses.
//
// The nodes are stored in depth-first order (children by byte value), each with the index just past its subtree:
// a walk is one pass over an array that jumps ahead to skip a subtree.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plainllama/tokenizer/tokenizer.h"

namespace plainllama {

class TokenTrie {
   public:
    struct Node {
        uint32_t skip;         // the index just past this node's subtree
        uint32_t first_token;  // its tokens (those whose bytes end here) are tokens()[first_token, + n_tokens)
        uint16_t depth;        // bytes from the root (the root is 0)
        uint8_t byte;          // the byte on the edge from its parent
        uint8_t n_tokens;
    };

    // The tokens [0, n_vocab) of the tokenizer; ids at or past its vocabulary (a padded embedding), and tokens
    // without bytes (control, special), are not in the tree. Error for a token longer than 65535 bytes, or more
    // than 255 tokens with the same bytes.
    TokenTrie(const Tokenizer& tok, int32_t n_vocab);

    int32_t n_vocab() const { return n_vocab_; }
    const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }  // [n_vocab]
    const std::vector<Node>& nodes() const { return nodes_; }                  // [0] is the root
    const std::vector<int32_t>& tokens() const { return tokens_; }

   private:
    int32_t n_vocab_;
    std::vector<std::string> bytes_;
    std::vector<Node> nodes_;
    std::vector<int32_t> tokens_;
};

}  // namespace plainllama
