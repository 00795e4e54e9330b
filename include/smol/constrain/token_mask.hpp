// Token masks: which tokens of the vocabulary a grammar state allows next.
//
//   TokenVocabulary: every text token's bytes in two tries, the short tokens
//     (at most kShortToken bytes: 99 % of a Llama-3 vocabulary) and the long
//     ones (built once per tokenizer; special tokens are not text and never
//     match a grammar).
//   TokenMasker: a GrammarMatcher plus caches of masks.
//
// A mask is a depth-first walk of a trie from the state: a subtree is skipped
// as soon as its prefix is dead, and each step is a cached matcher transition
// (an array read once warm). A token that ends inside a UTF-8 character or
// spans several grammar terminals needs no special case: the grammar is over
// bytes. End-of-generation tokens are not in the mask: whether they are
// allowed is can_end(state), which the caller applies (constrain/constraint.hpp).
//
// Why two tries: a string bounded to 64 characters is 64 grammar states
// ("63 left", "62 left", ...), and walking the whole trie (~275k nodes,
// ~1.2 ms) for each would make every new position inside it a full walk. A
// token of at most 16 bytes cannot tell "63 left" from "17 left", so the
// short tokens' part of a mask is computed from the *saturated* state (every
// count left above 16 lowered to 17: GrammarMatcher::saturated) and cached
// under it, shared by all those states; only the long tokens (~1.3k) are
// walked per state. The union is cached per state.
//
// Bounds: a mask costs one pass over each trie plus one matcher step's work
// budget (MatcherLimits::max_step_work) for the transitions it has not seen;
// at most max_cached_masks masks of each kind are kept (vocabulary / 8 bytes
// each). A limit reached on the way is reported by the caller as
// smol::Error(resource) (constrain/constraint.hpp), and recover() makes the
// masker usable for the next generation.
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
    // Tokens of at most this many bytes share masks across saturated states.
    static constexpr size_t kShortToken = 16;

    // A trie in pre-order: a node's subtree is [index, subtree_end), so a walk
    // that finds a prefix dead skips the subtree by one jump, and memory is
    // read front to back. Node 0 is the root (the empty prefix).
    struct TrieNode {
        uint32_t depth;        // bytes of the prefix; the root is depth 0
        uint32_t subtree_end;  // first index after this node's descendants
        int32_t token;         // a token whose bytes end here, or -1 (more: same_bytes_next)
        uint8_t byte;          // the prefix's last byte
    };
    struct Trie {
        std::vector<TrieNode> nodes;
        size_t max_depth = 0;
    };

    explicit TokenVocabulary(const Tokenizer& tokenizer) {
        n_vocab_ = size_t(tokenizer.vocab_size());
        offsets_.assign(n_vocab_ + 1, 0);
        std::vector<int32_t> short_ids, long_ids;
        for (int32_t id = 0; id < int32_t(n_vocab_); ++id) {
            offsets_[size_t(id)] = uint32_t(bytes_.size());
            if (tokenizer.is_special(id)) continue;
            const size_t before = bytes_.size();
            tokenizer.append_piece(id, bytes_);
            const size_t length = bytes_.size() - before;
            if (length > 0) (length <= kShortToken ? short_ids : long_ids).push_back(id);
        }
        offsets_[n_vocab_] = uint32_t(bytes_.size());
        is_text_.assign(n_vocab_, 0);
        for (int32_t id : short_ids) is_text_[size_t(id)] = 1;
        for (int32_t id : long_ids) is_text_[size_t(id)] = 1;
        end_of_generation_ = tokenizer.end_of_generation_ids();
        same_bytes_next_.assign(n_vocab_, -1);
        short_ = build_trie(std::move(short_ids));
        long_ = build_trie(std::move(long_ids));
    }

    size_t n_vocab() const noexcept { return n_vocab_; }
    std::string_view piece(int32_t id) const {
        return std::string_view(bytes_).substr(offsets_[size_t(id)],
                                               offsets_[size_t(id) + 1] - offsets_[size_t(id)]);
    }
    // A token with bytes that are not a special token's text.
    bool is_text(int32_t id) const { return is_text_[size_t(id)] != 0; }
    const std::vector<int32_t>& end_of_generation() const noexcept { return end_of_generation_; }
    const Trie& short_tokens() const noexcept { return short_; }
    const Trie& long_tokens() const noexcept { return long_; }
    int32_t same_bytes_next(int32_t id) const { return same_bytes_next_[size_t(id)]; }

private:
    // From the sorted pieces: each piece opens nodes past its common prefix
    // with the previous one, and closes the previous piece's deeper nodes.
    Trie build_trie(std::vector<int32_t> ids) {
        std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
            const std::string_view pa = piece(a), pb = piece(b);
            return pa != pb ? pa < pb : a < b;
        });
        Trie trie;
        std::vector<TrieNode>& nodes = trie.nodes;
        nodes.push_back({0, 0, -1, 0});
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
                nodes[path.back()].subtree_end = uint32_t(nodes.size());
                path.pop_back();
            }
            for (size_t d = common; d < p.size(); ++d) {
                path.push_back(uint32_t(nodes.size()));
                nodes.push_back({uint32_t(d + 1), 0, -1, static_cast<uint8_t>(p[d])});
            }
            nodes.back().token = id;
            trie.max_depth = std::max(trie.max_depth, p.size());
            previous = p;
            previous_id = id;
        }
        while (!path.empty()) {
            nodes[path.back()].subtree_end = uint32_t(nodes.size());
            path.pop_back();
        }
        return trie;
    }

    size_t n_vocab_ = 0;
    std::string bytes_;
    std::vector<uint32_t> offsets_;
    std::vector<char> is_text_;
    std::vector<int32_t> end_of_generation_;
    Trie short_, long_;
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
                size_t max_cached_masks = 512)
        : matcher_(std::move(grammar), limits),
          vocabulary_(std::move(vocabulary)),
          max_cached_masks_(max_cached_masks) {
        // The tries' bytes as this grammar's byte classes, read by the hot loop.
        for (int t = 0; t < 2; ++t) {
            const auto& nodes = trie(t).nodes;
            node_class_[t].resize(nodes.size());
            for (size_t i = 0; i < nodes.size(); ++i)
                node_class_[t][i] = matcher_.class_of(nodes[i].byte);
        }
    }

    GrammarMatcher& matcher() noexcept { return matcher_; }
    const TokenVocabulary& vocabulary() const noexcept { return *vocabulary_; }
    int32_t start() const noexcept { return matcher_.start(); }

    // The state after token `id`'s bytes (kDead if the grammar forbids them,
    // kOverflow past a MatcherLimits bound). One matcher step's work budget.
    int32_t advance(int32_t state, int32_t id) {
        if (!vocabulary_->is_text(id)) return GrammarMatcher::kDead;
        return matcher_.step(state, vocabulary_->piece(id));
    }

    // The cached mask of `state` (computed on first use). The reference stays
    // valid until the next mask() or maybe_compact(). Its cost: one matcher
    // step's work budget (MatcherLimits::max_step_work) plus one pass over
    // each trie. A limit reached on the way (matcher().overflowed()) leaves
    // the mask incomplete, and uncached: the caller reports it, then
    // recover() makes the masker usable again.
    const TokenMask& mask(int32_t state) {
        if (state < 0) {  // kOverflow from the start state or a step: nothing allowed
            clear(empty_);
            return empty_;
        }
        auto it = masks_.find(state);
        if (it != masks_.end()) return it->second;
        if (masks_.size() >= max_cached_masks_) masks_.clear();
        matcher_.begin_step();
        int32_t shared = matcher_.saturated(state, uint32_t(TokenVocabulary::kShortToken));
        if (shared < 0) shared = state;  // overflowed: the caller sees it
        auto short_it = short_masks_.find(shared);
        if (short_it == short_masks_.end()) {
            if (short_masks_.size() >= max_cached_masks_) short_masks_.clear();
            short_it = short_masks_.emplace(shared, TokenMask{}).first;
            clear(short_it->second);
            walk(0, shared, short_it->second);
        }
        TokenMask& m = masks_[state];
        m = short_it->second;
        walk(1, state, m);
        if (matcher_.overflowed()) {
            empty_ = std::move(m);
            masks_.erase(state);
            short_masks_.erase(shared);
            return empty_;
        }
        return m;
    }

    // After an overflow: forgets the tables and masks, so the next
    // generation starts afresh (the start state never overflows here when
    // it did not at construction: its closure is the same).
    void recover() {
        if (!matcher_.overflowed()) return;
        masks_.clear();
        short_masks_.clear();
        matcher_.compact({});
    }

    // Between tokens: keeps the tables bounded (GrammarMatcher::compact),
    // rewriting the caller's live state ids.
    void maybe_compact(std::vector<int32_t*> live) {
        if (!matcher_.needs_compaction()) return;
        masks_.clear();
        short_masks_.clear();
        matcher_.compact(std::move(live));
    }

    size_t n_cached_masks() const noexcept { return masks_.size(); }
    size_t n_short_masks() const noexcept { return short_masks_.size(); }

private:
    const TokenVocabulary::Trie& trie(int t) const {
        return t == 0 ? vocabulary_->short_tokens() : vocabulary_->long_tokens();
    }
    void clear(TokenMask& m) const {
        m.bits.assign((vocabulary_->n_vocab() + 63) / 64, 0);
        m.count = 0;
    }

    // Adds the tokens of trie t that `state` allows to m: one pass over the
    // pre-order nodes, at_[d] the state after the current node's first d bytes.
    void walk(int t, int32_t state, TokenMask& m) {
        const TokenVocabulary::Trie& tr = trie(t);
        const TokenVocabulary::TrieNode* nodes = tr.nodes.data();
        const uint8_t* classes = node_class_[t].data();
        uint64_t* bits = m.bits.data();
        at_.assign(tr.max_depth + 1, GrammarMatcher::kDead);
        at_[0] = state;
        size_t count = 0;
        for (size_t i = 1, n_nodes = tr.nodes.size(); i < n_nodes;) {
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
        m.count += count;
    }

    GrammarMatcher matcher_;
    std::shared_ptr<const TokenVocabulary> vocabulary_;
    size_t max_cached_masks_;
    std::unordered_map<int32_t, TokenMask> masks_;        // by state: short | long tokens
    std::unordered_map<int32_t, TokenMask> short_masks_;  // by saturated state: short tokens
    std::vector<int32_t> at_;
    std::vector<uint8_t> node_class_[2];  // [trie][node]
    TokenMask empty_;                     // what mask() returns for no state or a cut-off walk
};

SMOL_NAMESPACE_END
