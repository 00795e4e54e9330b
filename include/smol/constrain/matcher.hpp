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
// Bounds (MatcherLimits), whatever the grammar's nesting, width or counts:
//   - work: one call of step(), or of TokenMasker::mask() / advance(), expands
//     at most max_step_work stack items (the closure that follows a byte,
//     saturation) besides one array read per cached transition, so the time
//     of a generation step is bounded; a state is cut off as soon as its
//     closure holds more than max_tops stacks (an ambiguity bound), before
//     the rest of it is built;
//   - memory: at most hard_states states, max_nodes stack nodes and
//     max_top_entries tops (all states together), max_transitions cached
//     transitions (states x byte classes, 4 bytes each), and one step's
//     scratch in proportion to its work: about 150 MiB at the defaults, far
//     less for grammars that stay under soft_states, where compact()
//     rebuilds the tables around the states the caller still holds.
// Past any of them a transition gives kOverflow and overflowed() stays true,
// with overflow_message() naming the limit (the caller reports
// smol::Error(resource)); every transition not cached yet then gives
// kOverflow at once, until compact() rebuilds the tables. The start state
// itself can overflow (start() == kOverflow: e.g. an alternation of more
// than max_tops branches that differ in their first element). No call
// indexes a table with a negative state: kDead and kOverflow stay what they
// are.
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
    size_t soft_states = size_t(1) << 14;      // compact() rebuilds past this many states
    size_t hard_states = size_t(1) << 17;      // transitions fail (kOverflow) past this many
    size_t max_tops = 4096;                    // stacks alive at once (an ambiguity bound)
    size_t max_nodes = size_t(1) << 20;        // stack nodes, all states together
    size_t max_top_entries = size_t(1) << 22;  // tops, all states together
    size_t max_transitions = size_t(1) << 23;  // cached transitions: states x byte classes
    size_t max_step_work = size_t(1) << 20;    // stack items expanded per step (see begin_step)
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

    // The state before any text (kOverflow if that already passes a limit).
    int32_t start() const noexcept { return start_; }

    // Starts a new step's work budget (MatcherLimits::max_step_work): step()
    // calls it; TokenMasker calls it once per mask.
    void begin_step() noexcept { work_done_ = 0; }

    // The state after `byte`, kDead, or kOverflow.
    int32_t step(int32_t state, uint8_t byte) {
        begin_step();
        return step_class(state, class_of_[byte]);
    }
    // The same by byte class (class_of(byte)), for hot loops that precompute
    // classes; counts against the current step's budget.
    uint8_t class_of(uint8_t byte) const noexcept { return class_of_[byte]; }
    int32_t step_class(int32_t state, uint8_t byte_class) {
        if (state < 0) return state;
        const size_t slot = size_t(state) * n_classes_ + byte_class;
        const int32_t cached = next_[slot];
        if (cached != kUnknown) return cached;
        const int32_t next = compute_step(state, representative_[byte_class]);  // may grow next_
        next_[slot] = next;
        return next;
    }
    int32_t step(int32_t state, std::string_view bytes) {
        begin_step();
        for (char c : bytes) {
            if (state < 0) return state;
            state = step_class(state, class_of_[static_cast<uint8_t>(c)]);
        }
        return state;
    }

    // The text so far is a complete match (the root rule can end here).
    bool can_end(int32_t state) const { return state >= 0 && states_[size_t(state)].can_end; }
    // Some byte can follow.
    bool can_continue(int32_t state) const {
        return state >= 0 && states_[size_t(state)].n_tops > 0;
    }

    bool overflowed() const noexcept { return overflowed_; }
    // Which limit was passed, for the caller's error message.
    const std::string& overflow_message() const noexcept { return overflow_message_; }
    size_t n_states() const noexcept { return states_.size(); }
    size_t n_nodes() const noexcept { return nodes_.size(); }
    size_t n_byte_classes() const noexcept { return n_classes_; }
    size_t work_done() const noexcept { return work_done_; }
    bool needs_compaction() const noexcept {
        return states_.size() > limits_.soft_states || nodes_.size() > limits_.max_nodes / 2 ||
               tops_.size() > limits_.max_top_entries / 2 ||
               next_.size() > limits_.max_transitions / 2;
    }

    // The state with every repetition count left above `horizon` lowered to
    // horizon + 1 (Grammar::saturated_position): it accepts the same byte
    // strings of at most `horizon` bytes as `state`. Memoized per state.
    int32_t saturated(int32_t state, uint32_t horizon) {
        if (state < 0 || !grammar_->has_repetition_families()) return state;
        if (saturated_.size() <= size_t(state)) saturated_.resize(size_t(state) + 1, kUnknown);
        if (saturated_[size_t(state)] != kUnknown) return saturated_[size_t(state)];
        if (overflowed_) return kOverflow;
        const State st = states_[size_t(state)];
        std::vector<uint32_t> tops;
        bool changed = false;
        for (uint32_t i = 0; i < st.n_tops; ++i) {
            const std::vector<uint32_t> stack = chain(tops_[st.first_top + i]);
            if (!charge(stack.size()) || !room_for_nodes(stack.size())) return kOverflow;
            tops.push_back(intern_chain(stack, [&](uint32_t p) {
                const uint32_t q = grammar_->saturated_position(p, horizon);
                changed = changed || q != p;
                return q;
            }));
        }
        const int32_t result = changed ? intern_state(std::move(tops), st.can_end) : state;
        if (result == kOverflow) return result;
        saturated_[size_t(state)] = result;  // saturated_ only grows during the call
        return result;
    }

    // Rebuilds the tables keeping only `states` (whose ids are rewritten):
    // every other id the caller held becomes invalid, and an overflow is
    // forgotten (the tables it left are gone). A negative id stays as it is.
    void compact(std::vector<int32_t*> states) {
        std::vector<std::pair<std::vector<std::vector<uint32_t>>, bool>> kept;
        for (int32_t* s : states) {
            std::vector<std::vector<uint32_t>> chains;
            if (*s < 0) {
                kept.emplace_back(std::move(chains), false);
                continue;
            }
            const State& st = states_[size_t(*s)];
            for (uint32_t i = 0; i < st.n_tops; ++i)
                chains.push_back(chain(tops_[st.first_top + i]));
            kept.emplace_back(std::move(chains), st.can_end);
        }
        reset_tables();
        for (size_t k = 0; k < states.size(); ++k) {
            if (*states[k] < 0) continue;
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
    // Refines a partition of the 256 bytes by one set at a time: time
    // 256 x sets and no per-byte signature of every set (256 x sets bytes).
    void build_byte_classes() {
        uint16_t cls[256] = {};
        size_t n = 1;
        for (size_t s = 0; s < grammar_->n_byte_sets() && n < 256; ++s) {
            const ByteSet& set = grammar_->byte_set(uint32_t(s));
            uint16_t split[256];  // [old class]: its new id for members, or 0xFFFF
            std::fill(std::begin(split), std::end(split), uint16_t(0xFFFF));
            uint16_t next = uint16_t(n);
            for (unsigned b = 0; b < 256; ++b) {
                if (!set.test(uint8_t(b))) continue;
                uint16_t& to = split[cls[b]];
                if (to == 0xFFFF) to = next++;
                cls[b] = to;
            }
            // Renumber densely: a class wholly inside the set left a gap.
            uint16_t dense[512];
            std::fill(std::begin(dense), std::end(dense), uint16_t(0xFFFF));
            n = 0;
            for (unsigned b = 0; b < 256; ++b) {
                if (dense[cls[b]] == 0xFFFF) dense[cls[b]] = uint16_t(n++);
                cls[b] = dense[cls[b]];
            }
        }
        representative_.assign(n, 0);
        std::vector<char> seen(n, 0);
        for (unsigned b = 0; b < 256; ++b) {
            class_of_[b] = uint8_t(cls[b]);
            if (!seen[cls[b]]) {
                seen[cls[b]] = 1;
                representative_[cls[b]] = uint8_t(b);
            }
        }
        n_classes_ = n;
    }

    // Counts work against the step's budget; false (and overflowed) past it.
    // work_done() never passes the budget, so callers can check it.
    bool charge(size_t items) {
        if (items <= limits_.max_step_work - std::min(work_done_, limits_.max_step_work)) {
            work_done_ += items;
            return true;
        }
        return fail("one step expanded more than " + std::to_string(limits_.max_step_work) +
                    " grammar stack items (MatcherLimits::max_step_work)");
    }
    bool room_for_nodes(size_t more) {
        if (nodes_.size() + more <= limits_.max_nodes) return true;
        return fail("more than " + std::to_string(limits_.max_nodes) +
                    " grammar stack nodes (MatcherLimits::max_nodes)");
    }
    bool fail(std::string message) {
        if (!overflowed_) overflow_message_ = std::move(message);
        overflowed_ = true;
        return false;
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
        overflow_message_.clear();
        begin_step();
        std::vector<uint32_t> tops;
        bool can_end = false;
        for (uint32_t alt : grammar_->alternatives(grammar_->root())) {
            work_.push_back({alt, kNil});
        }
        start_ = close(tops, can_end) ? intern_state(std::move(tops), can_end) : kOverflow;
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
        if (states_.size() >= limits_.hard_states) {
            fail("more than " + std::to_string(limits_.hard_states) +
                 " grammar states (MatcherLimits::hard_states)");
            return kOverflow;
        }
        if (tops.size() > limits_.max_tops) {
            fail(too_many_tops());
            return kOverflow;
        }
        if (tops_.size() + tops.size() > limits_.max_top_entries) {
            fail("more than " + std::to_string(limits_.max_top_entries) +
                 " stack tops in all grammar states (MatcherLimits::max_top_entries)");
            return kOverflow;
        }
        if (next_.size() + n_classes_ > limits_.max_transitions) {
            fail("more than " + std::to_string(limits_.max_transitions) +
                 " cached grammar transitions (MatcherLimits::max_transitions)");
            return kOverflow;
        }
        const int32_t id = int32_t(states_.size());
        states_.push_back({uint32_t(tops_.size()), uint32_t(tops.size()), can_end});
        tops_.insert(tops_.end(), tops.begin(), tops.end());
        next_.resize(next_.size() + n_classes_, kUnknown);
        state_ids_.emplace(std::move(key), id);
        return id;
    }

    std::string too_many_tops() const {
        return "more than " + std::to_string(limits_.max_tops) +
               " parses of the text alive at once (MatcherLimits::max_tops): an ambiguous "
               "grammar, such as counted repetitions nested in counted repetitions, or an "
               "alternation of that many branches still apart after their shared prefix";
    }

    // Expands the pending (position, parent) items of work_ down to byte-set
    // tops: rules push their alternatives, ends pop to the parent. False (and
    // overflowed) as soon as a limit is passed, leaving work_ empty.
    bool close(std::vector<uint32_t>& tops, bool& can_end) {
        // clear() costs the bucket count: after one large closure, every
        // small one would pay for it again.
        if (seen_.bucket_count() > (size_t(1) << 12))
            std::unordered_set<uint64_t>().swap(seen_);
        else
            seen_.clear();
        while (!work_.empty()) {
            const auto [pos, parent] = work_.back();
            work_.pop_back();
            if (!seen_.insert((uint64_t(pos) << 32) | parent).second) continue;
            bool ok = charge(1) && room_for_nodes(1);
            if (ok && tops.size() > limits_.max_tops) ok = fail(too_many_tops());
            if (!ok) {
                work_.clear();
                return false;
            }
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
                    const std::vector<uint32_t>& alts = grammar_->alternatives(p.arg);
                    if (!charge(alts.size())) {
                        work_.clear();
                        return false;
                    }
                    for (uint32_t alt : alts) work_.push_back({alt, ret});
                    break;
                }
            }
        }
        return true;
    }

    int32_t compute_step(int32_t state, uint8_t byte) {
        if (state < 0) return state;
        if (overflowed_) return kOverflow;
        std::vector<uint32_t> tops;
        bool can_end = false;
        const State st = states_[size_t(state)];
        if (!charge(st.n_tops)) return kOverflow;
        for (uint32_t i = 0; i < st.n_tops; ++i) {
            const Node node = nodes_[tops_[st.first_top + i]];
            if (grammar_->byte_set(grammar_->position(node.pos).arg).test(byte))
                work_.push_back({node.pos + 1, node.parent});
        }
        if (!close(tops, can_end)) return kOverflow;
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
    std::string overflow_message_;
    size_t work_done_ = 0;  // this step's stack items (MatcherLimits::max_step_work)
};

SMOL_NAMESPACE_END
