// Token masks: which tokens of the vocabulary a grammar state allows next.
//
//   TokenVocabulary: every text token's bytes in a trie (built once per
//     tokenizer; special tokens are not text and never match a grammar).
//   TokenMasker: a GrammarMatcher plus a cache of masks by state.
//
// A mask is one depth-first walk of the trie from the state: a subtree is
// skipped as soon as its prefix is dead, and each step is a cached matcher
// transition (an array read once warm). A token that ends inside a UTF-8
// character or spans several grammar terminals needs no special case: the
// grammar is over bytes. Masks are cached per state, so a state met again
// (the same place in a schema, in this or a later generation) costs a lookup.
// End-of-generation tokens are not in the mask: whether they are allowed is
// can_end(state), which the caller applies (constrain/constraint.hpp).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../text/tokenizer.hpp"
#include "matcher.hpp"

SMOL_NAMESPACE_BEGIN

class TokenVocabulary {
public:
    // The trie in pre-order: a node's subtree is [index, subtree_end), so a
    // walk that finds a prefix dead skips the subtree by one jump, and memory
    // is read front to back.
    struct TrieNode {
        uint32_t depth;        // bytes of the prefix; the root is depth 0
        uint32_t subtree_end;  // first index after this node's descendants
        int32_t token;         // a token whose bytes end here, or -1 (more: same_bytes_next)
        uint8_t byte;          // the prefix's last byte
    };

    explicit TokenVocabulary(const Tokenizer& tokenizer) {
        n_vocab_ = size_t(tokenizer.vocab_size());
        offsets_.assign(n_vocab_ + 1, 0);
        std::vector<int32_t> text_ids;
        for (int32_t id = 0; id < int32_t(n_vocab_); ++id) {
            offsets_[size_t(id)] = uint32_t(bytes_.size());
            if (tokenizer.is_special(id)) continue;
            const size_t before = bytes_.size();
            tokenizer.append_piece(id, bytes_);
            if (bytes_.size() > before) text_ids.push_back(id);
        }
        offsets_[n_vocab_] = uint32_t(bytes_.size());
        is_text_.assign(n_vocab_, 0);
        for (int32_t id : text_ids) is_text_[size_t(id)] = 1;
        end_of_generation_ = tokenizer.end_of_generation_ids();
        build_trie(std::move(text_ids));
    }

    size_t n_vocab() const noexcept { return n_vocab_; }
    std::string_view piece(int32_t id) const {
        return std::string_view(bytes_).substr(offsets_[size_t(id)],
                                               offsets_[size_t(id) + 1] - offsets_[size_t(id)]);
    }
    // A token with bytes that are not a special token's text.
    bool is_text(int32_t id) const { return is_text_[size_t(id)] != 0; }
    const std::vector<int32_t>& end_of_generation() const noexcept { return end_of_generation_; }
    const std::vector<TrieNode>& trie() const noexcept { return trie_; }
    size_t max_depth() const noexcept { return max_depth_; }
    int32_t same_bytes_next(int32_t id) const { return same_bytes_next_[size_t(id)]; }

private:
    // From the sorted pieces: each piece opens nodes past its common prefix
    // with the previous one, and closes the previous piece's deeper nodes.
    void build_trie(std::vector<int32_t> ids) {
        std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
            const std::string_view pa = piece(a), pb = piece(b);
            return pa != pb ? pa < pb : a < b;
        });
        same_bytes_next_.assign(n_vocab_, -1);
        trie_.push_back({0, 0, -1, 0});
        std::vector<uint32_t> path{0};  // open nodes, path[d] at depth d
        std::string_view previous;
        int32_t previous_id = -1;
        for (int32_t id : ids) {
            const std::string_view p = piece(id);
            size_t common = 0;
            while (common < p.size() && common < previous.size() && p[common] == previous[common])
                ++common;
            if (common == p.size() && previous_id >= 0) {  // same bytes as the previous piece
                same_bytes_next_[size_t(previous_id)] = id;
                previous_id = id;
                continue;
            }
            while (path.size() > common + 1) {
                trie_[path.back()].subtree_end = uint32_t(trie_.size());
                path.pop_back();
            }
            for (size_t d = common; d < p.size(); ++d) {
                path.push_back(uint32_t(trie_.size()));
                trie_.push_back({uint32_t(d + 1), 0, -1, static_cast<uint8_t>(p[d])});
            }
            trie_.back().token = id;
            max_depth_ = std::max(max_depth_, p.size());
            previous = p;
            previous_id = id;
        }
        while (!path.empty()) {
            trie_[path.back()].subtree_end = uint32_t(trie_.size());
            path.pop_back();
        }
    }

    size_t n_vocab_ = 0;
    size_t max_depth_ = 0;
    std::string bytes_;
    std::vector<uint32_t> offsets_;
    std::vector<char> is_text_;
    std::vector<int32_t> end_of_generation_;
    std::vector<TrieNode> trie_;
    std::vector<int32_t> same_bytes_next_;
};

// The text tokens a state allows, one bit per vocabulary id.
struct TokenMask {
    std::vector<uint64_t> bits;
    size_t count = 0;
    bool allows(int32_t id) const { return (bits[size_t(id) >> 6] >> (id & 63)) & 1u; }
};

class TokenMasker {
public:
    TokenMasker(std::shared_ptr<const Grammar> grammar,
                std::shared_ptr<const TokenVocabulary> vocabulary, MatcherLimits limits = {},
                size_t max_cached_masks = 1024)
        : matcher_(std::move(grammar), limits),
          vocabulary_(std::move(vocabulary)),
          max_cached_masks_(max_cached_masks) {
        // The trie's bytes as this grammar's byte classes, read by the hot loop.
        const auto& trie = vocabulary_->trie();
        node_class_.resize(trie.size());
        for (size_t i = 0; i < trie.size(); ++i) node_class_[i] = matcher_.class_of(trie[i].byte);
    }

    GrammarMatcher& matcher() noexcept { return matcher_; }
    const TokenVocabulary& vocabulary() const noexcept { return *vocabulary_; }
    int32_t start() const noexcept { return matcher_.start(); }

    // The state after token `id`'s bytes (kDead if the grammar forbids them).
    int32_t advance(int32_t state, int32_t id) {
        if (!vocabulary_->is_text(id)) return GrammarMatcher::kDead;
        return matcher_.step(state, vocabulary_->piece(id));
    }

    // The cached mask of `state` (computed on first use). The reference stays
    // valid until the next mask() or compact().
    const TokenMask& mask(int32_t state) {
        auto it = masks_.find(state);
        if (it != masks_.end()) return it->second;
        if (masks_.size() >= max_cached_masks_) masks_.clear();
        TokenMask& m = masks_[state];
        compute(state, m);
        return m;
    }

    // Between tokens: keeps the tables bounded (GrammarMatcher::compact),
    // rewriting the caller's live state ids.
    void maybe_compact(std::vector<int32_t*> live) {
        if (!matcher_.needs_compaction()) return;
        masks_.clear();
        matcher_.compact(std::move(live));
    }

    size_t n_cached_masks() const noexcept { return masks_.size(); }

private:
    // One pass over the pre-order trie: at[d] is the state after the current
    // node's first d bytes.
    void compute(int32_t state, TokenMask& m) {
        const std::vector<TokenVocabulary::TrieNode>& trie = vocabulary_->trie();
        m.bits.assign((vocabulary_->n_vocab() + 63) / 64, 0);
        m.count = 0;
        at_.assign(vocabulary_->max_depth() + 1, GrammarMatcher::kDead);
        at_[0] = state;
        const TokenVocabulary::TrieNode* nodes = trie.data();
        const uint8_t* classes = node_class_.data();
        uint64_t* bits = m.bits.data();
        size_t count = 0;
        for (size_t i = 1, n_nodes = trie.size(); i < n_nodes;) {
            const TokenVocabulary::TrieNode& n = nodes[i];
            const int32_t next = matcher_.step_class(at_[n.depth - 1], classes[i]);
            if (next < 0) {
                i = n.subtree_end;
                continue;
            }
            at_[n.depth] = next;
            for (int32_t id = n.token; id >= 0; id = vocabulary_->same_bytes_next(id)) {
                bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
                ++count;
            }
            ++i;
        }
        m.count = count;
    }

    GrammarMatcher matcher_;
    std::shared_ptr<const TokenVocabulary> vocabulary_;
    size_t max_cached_masks_;
    std::unordered_map<int32_t, TokenMask> masks_;
    std::vector<int32_t> at_;
    std::vector<uint8_t> node_class_;  // [trie node]
};

SMOL_NAMESPACE_END
