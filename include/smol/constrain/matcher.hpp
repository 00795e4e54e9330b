// GrammarMatcher: runs a compiled Grammar (constrain/grammar.hpp) over bytes.
//
// A parse is a set of stacks (the grammar may be ambiguous). A stack is a
// chain of nodes, each a grammar position plus its parent node; its top is
// always a byte-set position, the rest are where to return when a rule ends.
// Nodes are interned, so equal stacks are one id, and a set of tops (plus
// "the text may end here") is interned as a *state*. A byte moves a state to
// another one, and that transition is cached per byte class (bytes that every
// byte set of the grammar treats alike), so after warm-up a state advances by
// one array read: this is what makes walking the whole token trie for a mask
// affordable (constrain/token_mask.hpp).
//
// A rule reference that ends its alternative is a tail call (the caller's
// frame is not kept), so x* and bounded repetitions run at constant depth.
// The grammar has no left recursion (checked at compile time), so computing a
// transition always terminates.
//
// Memory: the tables grow with the distinct stacks a generation reaches.
// Past MatcherLimits::soft_states, compact() rebuilds them around the states
// the caller still holds; past hard_states a transition gives kOverflow (the
// caller reports smol::Error(resource)).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grammar.hpp"

SMOL_NAMESPACE_BEGIN

struct MatcherLimits {
    size_t soft_states = size_t(1) << 14;  // compact() rebuilds past this many states
    size_t hard_states = size_t(1) << 17;  // transitions fail (kOverflow) past this many
    size_t max_tops = 4096;                // stacks alive at once (an ambiguity bound)
};

class GrammarMatcher {
public:
    static constexpr int32_t kDead = -1;      // no stack survives the byte
    static constexpr int32_t kOverflow = -3;  // a limit was reached (see overflowed())

    explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar, MatcherLimits limits = {})
        : grammar_(std::move(grammar)), limits_(limits) {
        build_byte_classes();
        reset_tables();
    }

    const Grammar& grammar() const noexcept { return *grammar_; }

    // The state before any text.
    int32_t start() const noexcept { return start_; }

    // The state after `byte`, kDead, or kOverflow.
    int32_t step(int32_t state, uint8_t byte) {
        const size_t slot = size_t(state) * n_classes_ + class_of_[byte];
        if (next_[slot] == kUnknown) {
            const int32_t next = compute_step(state, byte);  // may grow next_
            next_[slot] = next;
        }
        return next_[slot];
    }
    // The same by byte class (class_of(byte)), for hot loops that precompute classes.
    uint8_t class_of(uint8_t byte) const noexcept { return class_of_[byte]; }
    int32_t step_class(int32_t state, uint8_t byte_class) {
        const size_t slot = size_t(state) * n_classes_ + byte_class;
        const int32_t cached = next_[slot];
        if (cached != kUnknown) return cached;
        const int32_t next = compute_step(state, representative_[byte_class]);
        next_[slot] = next;
        return next;
    }
    int32_t step(int32_t state, std::string_view bytes) {
        for (char c : bytes) {
            if (state < 0) return state;
            state = step(state, static_cast<uint8_t>(c));
        }
        return state;
    }

    // The text so far is a complete match (the root rule can end here).
    bool can_end(int32_t state) const { return states_[size_t(state)].can_end; }
    // Some byte can follow.
    bool can_continue(int32_t state) const { return states_[size_t(state)].n_tops > 0; }

    bool overflowed() const noexcept { return overflowed_; }
    size_t n_states() const noexcept { return states_.size(); }
    size_t n_nodes() const noexcept { return nodes_.size(); }
    size_t n_byte_classes() const noexcept { return n_classes_; }
    bool needs_compaction() const noexcept { return states_.size() > limits_.soft_states; }

    // The state with every repetition count left above `horizon` lowered to
    // horizon + 1 (Grammar::saturated_position): it accepts the same byte
    // strings of at most `horizon` bytes as `state`. Memoized per state.
    int32_t saturated(int32_t state, uint32_t horizon) {
        if (state < 0 || !grammar_->has_repetition_families()) return state;
        if (saturated_.size() <= size_t(state)) saturated_.resize(size_t(state) + 1, kUnknown);
        if (saturated_[size_t(state)] != kUnknown) return saturated_[size_t(state)];
        const State st = states_[size_t(state)];
        std::vector<uint32_t> tops;
        bool changed = false;
        for (uint32_t i = 0; i < st.n_tops; ++i) {
            tops.push_back(intern_chain(chain(tops_[st.first_top + i]), [&](uint32_t p) {
                const uint32_t q = grammar_->saturated_position(p, horizon);
                changed = changed || q != p;
                return q;
            }));
        }
        const int32_t result = changed ? intern_state(std::move(tops), st.can_end) : state;
        saturated_[size_t(state)] = result;  // saturated_ only grows during the call
        return result;
    }

    // Rebuilds the tables keeping only `states` (whose ids are rewritten):
    // every other id the caller held becomes invalid.
    void compact(std::vector<int32_t*> states) {
        std::vector<std::pair<std::vector<std::vector<uint32_t>>, bool>> kept;
        for (int32_t* s : states) {
            std::vector<std::vector<uint32_t>> chains;
            const State& st = states_[size_t(*s)];
            for (uint32_t i = 0; i < st.n_tops; ++i)
                chains.push_back(chain(tops_[st.first_top + i]));
            kept.emplace_back(std::move(chains), st.can_end);
        }
        reset_tables();
        for (size_t k = 0; k < states.size(); ++k) {
            std::vector<uint32_t> tops;
            for (const auto& c : kept[k].first)
                tops.push_back(intern_chain(c, [](uint32_t p) { return p; }));
            *states[k] = intern_state(std::move(tops), kept[k].second);
        }
    }

private:
    static constexpr int32_t kUnknown = -2;
    static constexpr uint32_t kNil = UINT32_MAX;

    struct Node {
        uint32_t pos;     // a byte-set position (a top) or a return position
        uint32_t parent;  // kNil at the bottom
    };
    struct State {
        uint32_t first_top, n_tops;  // in tops_
        bool can_end;
    };

    // Bytes with the same membership in every byte set share transitions.
    void build_byte_classes() {
        std::unordered_map<std::string, uint8_t> ids;
        for (unsigned b = 0; b < 256; ++b) {
            std::string signature(grammar_->n_byte_sets(), '0');
            for (size_t s = 0; s < grammar_->n_byte_sets(); ++s)
                if (grammar_->byte_set(uint32_t(s)).test(uint8_t(b))) signature[s] = '1';
            auto it = ids.emplace(signature, uint8_t(ids.size())).first;
            class_of_[b] = it->second;
            if (it->second == representative_.size()) representative_.push_back(uint8_t(b));
        }
        n_classes_ = ids.size();
    }

    void reset_tables() {
        nodes_.clear();
        node_ids_.clear();
        states_.clear();
        state_ids_.clear();
        tops_.clear();
        next_.clear();
        saturated_.clear();
        overflowed_ = false;
        std::vector<uint32_t> tops;
        bool can_end = false;
        for (uint32_t alt : grammar_->alternatives(grammar_->root())) {
            work_.push_back({alt, kNil});
        }
        close(tops, can_end);
        start_ = intern_state(std::move(tops), can_end);
    }

    uint32_t intern_node(uint32_t pos, uint32_t parent) {
        const uint64_t key = (uint64_t(pos) << 32) | parent;
        auto it = node_ids_.find(key);
        if (it != node_ids_.end()) return it->second;
        const uint32_t id = uint32_t(nodes_.size());
        nodes_.push_back({pos, parent});
        node_ids_.emplace(key, id);
        return id;
    }

    int32_t intern_state(std::vector<uint32_t> tops, bool can_end) {
        std::sort(tops.begin(), tops.end());
        tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
        if (tops.empty() && !can_end) return kDead;
        std::string key(reinterpret_cast<const char*>(tops.data()), tops.size() * sizeof(uint32_t));
        key += can_end ? '1' : '0';
        auto it = state_ids_.find(key);
        if (it != state_ids_.end()) return it->second;
        if (states_.size() >= limits_.hard_states || tops.size() > limits_.max_tops) {
            overflowed_ = true;
            return kOverflow;
        }
        const int32_t id = int32_t(states_.size());
        states_.push_back({uint32_t(tops_.size()), uint32_t(tops.size()), can_end});
        tops_.insert(tops_.end(), tops.begin(), tops.end());
        next_.resize(next_.size() + n_classes_, kUnknown);
        state_ids_.emplace(std::move(key), id);
        return id;
    }

    // Expands the pending (position, parent) items of work_ down to byte-set
    // tops: rules push their alternatives, ends pop to the parent.
    void close(std::vector<uint32_t>& tops, bool& can_end) {
        seen_.clear();
        while (!work_.empty()) {
            const auto [pos, parent] = work_.back();
            work_.pop_back();
            if (!seen_.insert((uint64_t(pos) << 32) | parent).second) continue;
            const Grammar::Position& p = grammar_->position(pos);
            switch (p.kind) {
                case Grammar::Kind::bytes:
                    tops.push_back(intern_node(pos, parent));
                    break;
                case Grammar::Kind::end:
                    if (parent == kNil)
                        can_end = true;
                    else
                        work_.push_back({nodes_[parent].pos, nodes_[parent].parent});
                    break;
                case Grammar::Kind::rule: {
                    const bool tail = grammar_->position(pos + 1).kind == Grammar::Kind::end;
                    const uint32_t ret = tail ? parent : intern_node(pos + 1, parent);
                    for (uint32_t alt : grammar_->alternatives(p.arg)) work_.push_back({alt, ret});
                    break;
                }
            }
        }
    }

    int32_t compute_step(int32_t state, uint8_t byte) {
        if (state < 0) return state;
        std::vector<uint32_t> tops;
        bool can_end = false;
        const State st = states_[size_t(state)];
        for (uint32_t i = 0; i < st.n_tops; ++i) {
            const Node node = nodes_[tops_[st.first_top + i]];
            if (grammar_->byte_set(grammar_->position(node.pos).arg).test(byte))
                work_.push_back({node.pos + 1, node.parent});
        }
        close(tops, can_end);
        return intern_state(std::move(tops), can_end);
    }

    // Interns a stack from its positions (top first, as chain() gives them),
    // each mapped by `map`; returns its top node.
    template <class Map>
    uint32_t intern_chain(const std::vector<uint32_t>& top_first, Map&& map) {
        uint32_t node = kNil;
        for (auto it = top_first.rbegin(); it != top_first.rend(); ++it)
            node = intern_node(map(*it), node);
        return node;
    }

    // The positions of a stack, top first.
    std::vector<uint32_t> chain(uint32_t node) const {
        std::vector<uint32_t> out;
        for (; node != kNil; node = nodes_[node].parent) out.push_back(nodes_[node].pos);
        return out;
    }

    std::shared_ptr<const Grammar> grammar_;
    MatcherLimits limits_;
    uint8_t class_of_[256] = {};
    std::vector<uint8_t> representative_;  // a byte of each class
    size_t n_classes_ = 1;
    std::vector<Node> nodes_;
    std::unordered_map<uint64_t, uint32_t> node_ids_;
    std::vector<State> states_;
    std::vector<uint32_t> tops_;
    std::unordered_map<std::string, int32_t> state_ids_;
    std::vector<int32_t> next_;       // [state][byte class]
    std::vector<int32_t> saturated_;  // [state]: saturated(state, horizon), one horizon in use
    std::vector<std::pair<uint32_t, uint32_t>> work_;
    std::unordered_set<uint64_t> seen_;
    int32_t start_ = 0;
    bool overflowed_ = false;
};

SMOL_NAMESPACE_END
