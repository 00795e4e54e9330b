// GrammarCompiler: GBNF text -> Grammar (constrain/compiled_grammar.hpp), in
// two halves: parsing the text into rules of element sequences
// (constrain/detail/gbnf_parser.hpp: lexing, rules, literals and classes as
// UTF-8 byte sequences, repetition as right recursion), then the passes over
// those rules (constrain/detail/grammar_passes.hpp: pruning what can never
// complete, left factoring, the left-recursion check, and flattening into the
// Grammar's arrays). This header declares the class and the state both halves
// share; include constrain/grammar.hpp, which brings all three.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "compiled_grammar.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

// A code point range, inclusive.
struct CodeRange {
    uint32_t lo, hi;
};

}  // namespace detail

// Text -> Grammar. One instance per parse; see Grammar::try_parse.
class GrammarCompiler {
public:
    GrammarCompiler(std::string_view text, const GrammarLimits& limits)
        : src_(text), limits_(limits) {}

    Expected<Grammar> run() {
        SMOL_TRY(parse_rules());
        auto root = by_name_.find("root");
        if (root == by_name_.end())
            return ErrorInfo{ErrorKind::invalid_argument, "grammar: no `root` rule"};
        for (size_t r = 0; r < rules_.size(); ++r) {
            if (!rules_[r].defined)
                return ErrorInfo{ErrorKind::invalid_argument,
                                 "grammar: rule `" + rules_[r].name + "` is used but not defined"};
        }
        SMOL_TRY(remove_unproductive(root->second));
        SMOL_TRY(factor_common_prefixes());
        SMOL_TRY(check_left_recursion());
        return flatten(root->second);
    }

private:
    struct Element {
        Grammar::Kind kind;  // bytes or rule
        uint32_t arg;
    };
    using Sequence = std::vector<Element>;
    struct Rule {
        std::string name;
        std::vector<Sequence> alternatives;
        bool defined = false;
    };

    // ---- the rules as parsed: names, new rules, byte sets, the size bound ----

    uint32_t rule_id(std::string_view name) {
        auto it = by_name_.find(std::string(name));
        if (it != by_name_.end()) return it->second;
        const uint32_t id = uint32_t(rules_.size());
        rules_.push_back(Rule{std::string(name), {}, false});
        by_name_.emplace(std::string(name), id);
        return id;
    }
    uint32_t new_rule(std::vector<Sequence> alternatives) {
        const uint32_t id = uint32_t(rules_.size());
        rules_.push_back(Rule{"_" + std::to_string(id), std::move(alternatives), true});
        return id;
    }
    uint32_t byte_set_id(const ByteSet& set) {
        auto it = byte_set_ids_.find(set);
        if (it != byte_set_ids_.end()) return it->second;
        const uint32_t id = uint32_t(byte_sets_.size());
        byte_sets_.push_back(set);
        byte_set_ids_.emplace(set, id);
        return id;
    }
    Status count(size_t n) {
        size_ += n;
        if (size_ > limits_.max_positions)
            return Status(ErrorKind::resource, "grammar: more than " +
                                                   std::to_string(limits_.max_positions) +
                                                   " elements (GrammarLimits::max_positions)");
        return {};
    }

    // ---- parsing (constrain/detail/gbnf_parser.hpp) ----

    ErrorInfo syntax_error(const std::string& what) const;
    bool eof() const noexcept { return pos_ >= src_.size(); }
    char peek(size_t ahead = 0) const noexcept;
    static bool is_name_char(char c) noexcept;
    void skip_space() noexcept;
    std::string_view read_name() noexcept;
    bool at_rule_start() const noexcept;
    Status parse_rules();
    Status parse_alternatives(std::vector<Sequence>& out, size_t depth);
    Status parse_sequence(Sequence& out, size_t depth);
    Status parse_term(Sequence& out, size_t depth);
    Expected<uint32_t> parse_char();
    Expected<uint32_t> parse_hex(size_t digits);
    Status parse_literal(Sequence& out);
    Status parse_class(Sequence& out);
    static std::vector<detail::CodeRange> normalize(std::vector<detail::CodeRange> ranges);
    static std::vector<detail::CodeRange> complement(std::vector<detail::CodeRange> ranges);
    Status class_element(std::vector<detail::CodeRange> ranges, Sequence& out);
    Expected<uint32_t> parse_count();
    Status parse_postfix(Sequence& term);
    Status repeat(Sequence& term, uint32_t lo, uint32_t hi);

    // ---- passes (constrain/detail/grammar_passes.hpp) ----

    // Alternations at least this wide get their leading rules inlined before
    // factoring (inline_leading_rules).
    static constexpr size_t kInlineAlternatives = 16;
    template <class BytesOk>
    std::vector<char> closed_set(BytesOk&& bytes_ok) const;
    Status remove_unproductive(uint32_t root);
    static uint64_t element_key(const Element& e) noexcept;
    static bool less(const Sequence& a, const Sequence& b) noexcept;
    static bool same(const Sequence& a, const Sequence& b) noexcept;
    void inline_leading_rules(uint32_t r);
    Status factor_common_prefixes();
    Status check_left_recursion();
    std::string display_name(uint32_t rule) const;
    Grammar flatten(uint32_t root);

    std::string_view src_;
    size_t pos_ = 0;
    GrammarLimits limits_;
    size_t size_ = 0;     // elements as written (GrammarLimits::max_positions)
    size_t inlined_ = 0;  // elements copied by inline_leading_rules (as many again at most)
    std::vector<Rule> rules_;
    std::unordered_map<std::string, uint32_t> by_name_;
    std::vector<ByteSet> byte_sets_;
    std::map<ByteSet, uint32_t> byte_set_ids_;
    std::map<std::string, uint32_t> class_rules_;
    struct Family {
        std::vector<uint32_t> rules;  // rules[k]: k repetitions left
        Element unit;
    };
    std::vector<Family> families_;
    std::vector<char> nullable_;  // [rule]
};

SMOL_NAMESPACE_END
