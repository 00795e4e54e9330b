// The compiled grammar's data model: Grammar, every rule's alternatives as
// runs of byte-set and rule-reference positions in one array, each run closed
// by an `end` position, which the matcher (constrain/matcher.hpp) runs; ByteSet,
// the 256-bit set one position matches; GrammarLimits, the bounds a compile
// checks (constrain/grammar.hpp says how each is counted). Grammar::try_parse
// (constrain/grammar.hpp) makes one from GBNF text.
#pragma once

#include "../detail/abi.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../error.hpp"

SMOL_NAMESPACE_BEGIN

struct GrammarLimits {
    size_t max_positions = size_t(1) << 20;  // compiled elements, all rules together
    uint32_t max_repeat = 10000;             // n and m of {n,m}
    size_t max_nesting = 128;                // depth of ( ) groups
};

// A set of bytes, 256 bits.
struct ByteSet {
    std::array<uint64_t, 4> bits{};
    bool test(uint8_t b) const noexcept { return (bits[b >> 6] >> (b & 63)) & 1u; }
    void set(uint8_t b) noexcept { bits[b >> 6] |= uint64_t(1) << (b & 63); }
    void set_range(uint8_t lo, uint8_t hi) noexcept {
        for (unsigned b = lo; b <= hi; ++b) set(uint8_t(b));
    }
    bool empty() const noexcept { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
    bool operator<(const ByteSet& o) const noexcept { return bits < o.bits; }
    bool operator==(const ByteSet& o) const noexcept { return bits == o.bits; }
};

// The compiled grammar: every rule's alternatives laid out as runs of
// positions in one array, each run closed by an `end` position.
class Grammar {
public:
    enum class Kind : uint8_t { bytes, rule, end };
    struct Position {
        Kind kind;
        uint32_t arg;  // bytes: index into byte_sets(); rule: rule index; end: the rule
    };

    static Expected<Grammar> try_parse(std::string_view text, const GrammarLimits& limits = {});
    static Grammar parse(std::string_view text, const GrammarLimits& limits = {}) {
        return detail::value_or_fail(try_parse(text, limits));
    }

    uint32_t root() const noexcept { return root_; }
    size_t n_rules() const noexcept { return alternatives_.size(); }
    const std::vector<uint32_t>& alternatives(uint32_t rule) const { return alternatives_[rule]; }
    const Position& position(uint32_t index) const { return positions_[index]; }
    size_t n_positions() const noexcept { return positions_.size(); }
    const ByteSet& byte_set(uint32_t index) const { return byte_sets_[index]; }
    size_t n_byte_sets() const noexcept { return byte_sets_.size(); }
    const std::string& rule_name(uint32_t rule) const { return names_[rule]; }

    // Bounded repetition (x{n,m}) compiles to a family of rules
    // r_k ::= x r_(k-1) | (empty), one per count left. A stack position in
    // r_k means "k - 1 more x may follow the current one". For text of at
    // most `horizon` bytes, every k - 1 >= horizon behaves alike (each x takes
    // at least a byte), so masks for short tokens may treat r_k as
    // r_(horizon + 1): this maps a position of r_k to that rule's (or returns
    // it unchanged). Used by TokenMasker to share one trie walk between the
    // many states of a long bounded string.
    uint32_t saturated_position(uint32_t position, uint32_t horizon) const {
        const uint32_t rule = position_rule(position);
        const auto [family, k] = family_of_[rule];
        if (family < 0 || k <= horizon + 1) return position;
        const uint32_t target = families_[size_t(family)][horizon + 1];
        return alternatives_[target][0] + (position - alternatives_[rule][0]);
    }
    // The rule a position belongs to: a table, since an alternative may be a
    // literal of a million bytes and this runs for every frame of a stack.
    uint32_t position_rule(uint32_t position) const { return rule_of_[position]; }
    bool has_repetition_families() const noexcept { return !families_.empty(); }

private:
    friend class GrammarCompiler;
    std::vector<Position> positions_;
    std::vector<uint32_t> rule_of_;                    // [position]: its rule
    std::vector<std::vector<uint32_t>> alternatives_;  // rule -> first position of each
    std::vector<ByteSet> byte_sets_;
    std::vector<std::string> names_;
    uint32_t root_ = 0;
    std::vector<std::pair<int32_t, uint32_t>> family_of_;  // [rule]: (family or -1, count left)
    std::vector<std::vector<uint32_t>> families_;          // [family][count left]: rule
};

SMOL_NAMESPACE_END
