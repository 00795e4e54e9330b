// The second half of GrammarCompiler (constrain/grammar_compiler.hpp): the
// passes over the parsed rules, each a worklist or a sort (never a fixpoint
// iterated per rule): dropping alternatives that can never complete, left
// factoring alternatives that start alike into a trie, the left-recursion
// check, and flattening the rules into the Grammar's arrays (with the
// repetition families that Grammar::saturated_position uses).
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../grammar_compiler.hpp"

SMOL_NAMESPACE_BEGIN

// ---- checks ----

// The least set of rules with an alternative whose elements all pass:
// bytes elements by `bytes_ok`, rule elements by being in the set. A
// worklist over each alternative's count of unmet elements, so it costs
// the grammar's size once (iterating "until nothing changes" costs a pass
// per link of a rule chain: quadratic in a chain of 100,000 rules).
template <class BytesOk>
std::vector<char> GrammarCompiler::closed_set(BytesOk&& bytes_ok) const {
    std::vector<char> in(rules_.size(), 0);
    std::vector<uint32_t> ready;
    std::vector<uint32_t> unmet;                              // [alternative]
    std::vector<uint32_t> owner;                              // [alternative]: its rule
    std::vector<std::vector<uint32_t>> users(rules_.size());  // [rule]: alternatives using it
    for (uint32_t r = 0; r < rules_.size(); ++r) {
        for (const Sequence& alt : rules_[r].alternatives) {
            const auto a = uint32_t(unmet.size());
            uint32_t n = 0;
            bool possible = true;
            for (const Element& e : alt) {
                if (e.kind == Grammar::Kind::bytes) {
                    possible = possible && bytes_ok(e);
                } else {
                    users[e.arg].push_back(a);
                    ++n;
                }
            }
            unmet.push_back(possible ? n : UINT32_MAX);
            owner.push_back(r);
            if (possible && n == 0 && !in[r]) {
                in[r] = 1;
                ready.push_back(r);
            }
        }
    }
    while (!ready.empty()) {
        const uint32_t s = ready.back();
        ready.pop_back();
        for (uint32_t a : users[s]) {
            if (unmet[a] == UINT32_MAX || --unmet[a] != 0 || in[owner[a]]) continue;
            in[owner[a]] = 1;
            ready.push_back(owner[a]);
        }
    }
    return in;
}

// Drops alternatives that can never complete (they use a rule with no
// finite derivation, or an empty byte set); fails if root is one.
inline Status GrammarCompiler::remove_unproductive(uint32_t root) {
    const std::vector<char> productive =
        closed_set([&](const Element& e) { return !byte_sets_[e.arg].empty(); });
    auto element_ok = [&](const Element& e) {
        return e.kind == Grammar::Kind::bytes ? !byte_sets_[e.arg].empty() : productive[e.arg] != 0;
    };
    if (!productive[root])
        return Status(ErrorKind::invalid_argument, "grammar: `root` can match no complete text");
    for (Rule& rule : rules_) {
        auto& alts = rule.alternatives;
        alts.erase(std::remove_if(alts.begin(), alts.end(),
                                  [&](const Sequence& alt) {
                                      return !std::all_of(alt.begin(), alt.end(), element_ok);
                                  }),
                   alts.end());
    }
    return {};
}

// ---- left factoring ----

inline uint64_t GrammarCompiler::element_key(const Element& e) noexcept {
    return (uint64_t(e.kind) << 32) | e.arg;
}
inline bool GrammarCompiler::less(const Sequence& a, const Sequence& b) noexcept {
    return std::lexicographical_compare(
        a.begin(), a.end(), b.begin(), b.end(),
        [](const Element& x, const Element& y) { return element_key(x) < element_key(y); });
}
inline bool GrammarCompiler::same(const Sequence& a, const Sequence& b) noexcept {
    return std::equal(
        a.begin(), a.end(), b.begin(), b.end(),
        [](const Element& x, const Element& y) { return element_key(x) == element_key(y); });
}

// A wide alternation of rules (an anyOf of objects: each branch its own
// rule, all starting with "{") shares nothing until the branches' bodies
// are in it: a leading reference to a one-alternative rule is replaced by
// that body, a few levels deep, while the copies stay within a budget of
// their own, max_positions (past it the grammar stays as written: still
// correct, and the matcher's limits judge it).
// Narrow rules and repetition families are left alone, so the families
// keep the shape Grammar::saturated_position relies on.
inline void GrammarCompiler::inline_leading_rules(uint32_t r) {
    for (Sequence& alt : rules_[r].alternatives) {
        for (int level = 0; level < 4; ++level) {
            if (alt.empty() || alt[0].kind != Grammar::Kind::rule || alt[0].arg == r) break;
            const std::vector<Sequence>& target = rules_[alt[0].arg].alternatives;
            if (target.size() != 1) break;
            if (inlined_ + target[0].size() > limits_.max_positions) return;
            inlined_ += target[0].size();
            Sequence body = target[0];
            body.insert(body.end(), alt.begin() + 1, alt.end());
            alt = std::move(body);
        }
    }
}

// Rewrites each rule whose alternatives share a first element as a trie
// of them: the sorted alternatives, split where they differ, each shared
// run a new rule of the tails. Work is one sort of each rule's
// alternatives plus one look at each element per trie branch above it,
// and the trie has no more elements than the alternatives had.
inline Status GrammarCompiler::factor_common_prefixes() {
    const auto n_rules = uint32_t(rules_.size());
    std::vector<char> in_family(n_rules, 0);
    for (const Family& f : families_)
        for (uint32_t rule : f.rules) in_family[rule] = 1;
    for (uint32_t r = 0; r < n_rules; ++r) {
        std::vector<Sequence>& alts = rules_[r].alternatives;
        if (alts.size() < 2) continue;
        if (alts.size() >= kInlineAlternatives && !in_family[r]) inline_leading_rules(r);
        std::vector<Sequence> sorted = alts;
        std::sort(sorted.begin(), sorted.end(), less);
        // Equal alternatives add parses, never text.
        sorted.erase(std::unique(sorted.begin(), sorted.end(), same), sorted.end());
        bool shared = false;
        for (size_t i = 1; i < sorted.size() && !shared; ++i)
            shared = !sorted[i - 1].empty() &&
                     element_key(sorted[i - 1][0]) == element_key(sorted[i][0]);
        if (!shared) {
            if (sorted.size() < alts.size()) alts = std::move(sorted);
            continue;
        }
        // Tasks: (rule, [lo, hi) of sorted, depth): the alternatives in
        // the range share their first `depth` elements, and the rule
        // gets their tails.
        struct Task {
            uint32_t rule;
            size_t lo, hi, depth;
        };
        std::vector<Task> tasks{{r, 0, sorted.size(), 0}};
        while (!tasks.empty()) {
            const Task t = tasks.back();
            tasks.pop_back();
            std::vector<Sequence> out;
            for (size_t i = t.lo; i < t.hi;) {
                const Sequence& first = sorted[i];
                if (first.size() == t.depth) {  // sorts first: the prefix itself
                    out.emplace_back();
                    ++i;
                    continue;
                }
                size_t j = i + 1;
                while (j < t.hi && element_key(sorted[j][t.depth]) == element_key(first[t.depth]))
                    ++j;
                if (j == i + 1) {
                    out.emplace_back(first.begin() + std::ptrdiff_t(t.depth), first.end());
                    i = j;
                    continue;
                }
                // Sorted, so the range's common prefix is its ends'.
                const Sequence& last = sorted[j - 1];
                size_t end = t.depth + 1;
                while (end < first.size() && end < last.size() &&
                       element_key(first[end]) == element_key(last[end]))
                    ++end;
                Sequence head(first.begin() + std::ptrdiff_t(t.depth),
                              first.begin() + std::ptrdiff_t(end));
                SMOL_TRY(count(2));  // the reference to the tails, and an end
                const uint32_t tails = new_rule({});
                head.push_back({Grammar::Kind::rule, tails});
                out.push_back(std::move(head));
                tasks.push_back({tails, i, j, end});
                i = j;
            }
            rules_[t.rule].alternatives = std::move(out);
        }
    }
    return {};
}

// ---- left recursion ----

inline Status GrammarCompiler::check_left_recursion() {
    nullable_ = closed_set([](const Element&) { return false; });
    const std::vector<char>& nullable = nullable_;
    // Edges r -> s where s can start r's match; a cycle is left recursion.
    std::vector<std::vector<uint32_t>> first(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
        for (const Sequence& alt : rules_[r].alternatives) {
            for (const Element& e : alt) {
                if (e.kind != Grammar::Kind::rule) break;
                first[r].push_back(e.arg);
                if (!nullable[e.arg]) break;
            }
        }
    }
    // Iterative DFS with colors: 0 new, 1 on the path, 2 done.
    std::vector<char> color(rules_.size(), 0);
    std::vector<std::pair<uint32_t, size_t>> path;
    for (uint32_t start = 0; start < rules_.size(); ++start) {
        if (color[start]) continue;
        path.push_back({start, 0});
        color[start] = 1;
        while (!path.empty()) {
            auto& [rule, next] = path.back();
            if (next == first[rule].size()) {
                color[rule] = 2;
                path.pop_back();
                continue;
            }
            const uint32_t to = first[rule][next++];
            if (color[to] == 1)
                return Status(ErrorKind::invalid_argument,
                              "grammar: left recursion through rule `" + display_name(to) +
                                  "` (a rule reaches itself before consuming any text)");
            if (color[to] == 0) {
                color[to] = 1;
                path.push_back({to, 0});
            }
        }
    }
    return {};
}

inline std::string GrammarCompiler::display_name(uint32_t rule) const {
    return rules_[rule].name[0] == '_' ? "(a group or repetition)" : rules_[rule].name;
}

inline Grammar GrammarCompiler::flatten(uint32_t root) {
    Grammar g;
    g.root_ = root;
    g.byte_sets_ = byte_sets_;
    g.alternatives_.resize(rules_.size());
    for (uint32_t r = 0; r < rules_.size(); ++r) {
        g.names_.push_back(rules_[r].name);
        for (const Sequence& alt : rules_[r].alternatives) {
            g.alternatives_[r].push_back(uint32_t(g.positions_.size()));
            for (const Element& e : alt) g.positions_.push_back({e.kind, e.arg});
            g.positions_.push_back({Grammar::Kind::end, r});
        }
        g.rule_of_.resize(g.positions_.size(), r);
    }
    g.family_of_.assign(rules_.size(), {-1, 0});
    for (const Family& f : families_) {
        // Saturation assumes every repetition consumes a byte, and that no
        // alternative was pruned (a family of the shape repeat() made).
        const Element& unit = f.unit;
        const bool consumes = unit.kind == Grammar::Kind::bytes || !nullable_[unit.arg];
        bool intact = true;
        for (size_t k = 1; k < f.rules.size(); ++k)
            intact = intact && rules_[f.rules[k]].alternatives.size() == 2 &&
                     rules_[f.rules[k]].alternatives[0].size() == 2;
        if (!consumes || !intact) continue;
        const int32_t id = int32_t(g.families_.size());
        for (size_t k = 0; k < f.rules.size(); ++k) g.family_of_[f.rules[k]] = {id, uint32_t(k)};
        g.families_.push_back(f.rules);
    }
    return g;
}

SMOL_NAMESPACE_END
