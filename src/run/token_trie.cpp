// The vocabulary's prefix tree (token_trie.h): the tokens sorted by their bytes are the tree in depth-first order,
// so it is built in one pass over them.
#include "plainllama/run/token_trie.h"

#include <algorithm>
#include <numeric>

#include "plainllama/sys/error.h"

namespace plainllama {

TokenTrie::TokenTrie(const Tokenizer& tok, int32_t n_vocab) : n_vocab_(n_vocab), bytes_(size_t(std::max(n_vocab, 0))) {
    const int32_t n_tok = std::min(n_vocab, tok.vocab_size());
    std::vector<int32_t> order;
    for (int32_t id = 0; id < n_tok; ++id) {
        bytes_[size_t(id)] = tok.token_bytes(id);
        if (bytes_[size_t(id)].size() > 65535)
            throw Error("token " + std::to_string(id) + " has " + std::to_string(bytes_[size_t(id)].size()) +
                        " bytes: at most 65535 are supported");
        if (!bytes_[size_t(id)].empty()) order.push_back(id);
    }
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        const std::string &x = bytes_[size_t(a)], &y = bytes_[size_t(b)];
        return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end(), [](char p, char q) {
            return static_cast<uint8_t>(p) < static_cast<uint8_t>(q);
        });
    });
    nodes_.push_back({0, 0, 0, 0, 0});
    std::vector<uint32_t> path = {0};  // the nodes from the root to the last token's end
    const std::string* prev = nullptr;
    for (int32_t id : order) {
        const std::string& s = bytes_[size_t(id)];
        size_t common = 0;
        if (prev)
            while (common < prev->size() && common < s.size() && (*prev)[common] == s[common]) ++common;
        // Nodes deeper than the common prefix are finished: their subtrees end here.
        while (path.size() > common + 1) {
            nodes_[path.back()].skip = uint32_t(nodes_.size());
            path.pop_back();
        }
        for (size_t d = common; d < s.size(); ++d) {
            path.push_back(uint32_t(nodes_.size()));
            nodes_.push_back({0, uint32_t(tokens_.size()), uint16_t(d + 1), static_cast<uint8_t>(s[d]), 0});
        }
        // It ends at path.back(): the node just made, or the last token's (the same bytes).
        Node& end = nodes_[path.back()];
        if (end.n_tokens == 255) throw Error("more than 255 tokens have the bytes of token " + std::to_string(id));
        ++end.n_tokens;
        tokens_.push_back(id);
        prev = &s;
    }
    while (!path.empty()) {
        nodes_[path.back()].skip = uint32_t(nodes_.size());
        path.pop_back();
    }
}

}  // namespace plainllama
