// Grammar: a context-free grammar in a GBNF-like text syntax, compiled to a
// byte-level form that the matcher (constrain/matcher.hpp) runs.
//
// Syntax (llama.cpp's GBNF, with rules free to span lines):
//   root   ::= "{" ws pair ("," ws pair)* "}"     # the start rule is `root`
//   pair   ::= key ws ":" ws [0-9]{1,3}
//   key    ::= "\"" [a-z_]+ "\""
//   ws     ::= [ \t\n]{0,4}
//   - a rule is `name ::= alternatives`; names are [a-zA-Z0-9_-]+; a rule ends
//     where the next `name ::=` starts; `#` starts a comment to the end of line;
//   - "literal" and [class] / [^negated class] (ranges a-z) in code points, with
//     escapes \n \r \t \\ \" \' \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH; `.` is any
//     code point; ( grouping ), alternatives |, postfix * + ? {n} {n,} {n,m}
//     {,m}; a rule may refer to any rule, itself included, except on the left:
//     a rule that can reach itself before consuming a byte (left recursion) is
//     an error, so matching always terminates.
//
// Why bytes: tokens are byte strings that may end inside a UTF-8 character.
// Compiling every literal and class to UTF-8 byte sequences makes a token that
// splits a character an ordinary prefix, and masks need no UTF-8 special case.
// Repetition becomes right recursion (x* is r ::= x r | empty), which the
// matcher runs as a tail call, so a long repetition never deepens its stack.
//
// Checks at compile time (smol::Error(invalid_argument) naming the line and
// column, or the rule): syntax, undefined rules, a missing root, left
// recursion, and a grammar that can match no complete text. Alternatives that
// can never complete are removed, so a matcher never walks into a dead end
// that only max_tokens could end.
//
// Alternatives that start alike are left-factored into a trie (a | ab | ac
// becomes a (empty | b | c)), so an alternation of many literals (a 50,000
// value enum) keeps one parse per shared prefix instead of one per literal:
// the matcher's ambiguity bound (MatcherLimits::max_tops) counts parses.
//
// Bounds (GrammarLimits, each error naming its limit): the grammar as
// written has at most max_positions elements (ErrorKind::resource past it:
// literal bytes, rule references, one end per alternative and 4 per optional
// repetition count, so x{0,m} costs 4m plus x once: counts nested inside
// counts add, they never multiply), and the compiled one at most twice that
// (the factoring below copies at most as many again); groups nest at most max_nesting deep and
// every count is at most max_repeat (invalid_argument at the line and column). Compiling takes time
// O(text + positions * log(positions)) and memory O(text + positions) whatever the nesting, width
// or counts: every pass (factoring, pruning, the nullable and left-recursion checks) is a worklist
// or a sort, never a fixpoint iterated per rule.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../detail/utf8.hpp"
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

namespace detail {

// A code point range, inclusive.
struct CodeRange {
    uint32_t lo, hi;
};

// Byte ranges, one per byte of an encoded character: a run of UTF-8 sequences.
using Utf8Sequence = std::vector<std::pair<uint8_t, uint8_t>>;

// Splits [lo, hi] (no surrogates inside) into ranges whose UTF-8 encodings
// differ only in a suffix of full continuation ranges, so each is exactly one
// sequence of byte ranges. Recursion depth is bounded by the 4 byte lengths.
inline void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
    if (lo > hi) return;
    static constexpr uint32_t length_ends[3] = {0x7F, 0x7FF, 0xFFFF};
    for (uint32_t end : length_ends) {
        if (lo <= end && hi > end) {
            utf8_sequences(lo, end, out);
            utf8_sequences(end + 1, hi, out);
            return;
        }
    }
    const size_t n = utf8_length(lo);
    for (size_t i = 1; i < n; ++i) {
        const uint32_t mask = (uint32_t(1) << (6 * i)) - 1;
        if ((lo & ~mask) != (hi & ~mask)) {
            if ((lo & mask) != 0) {
                utf8_sequences(lo, lo | mask, out);
                utf8_sequences((lo | mask) + 1, hi, out);
                return;
            }
            if ((hi & mask) != mask) {
                utf8_sequences(lo, (hi & ~mask) - 1, out);
                utf8_sequences(hi & ~mask, hi, out);
                return;
            }
        }
    }
    uint8_t a[4], b[4];
    encode_utf8(lo, a);
    encode_utf8(hi, b);
    Utf8Sequence seq;
    for (size_t i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
    out.push_back(std::move(seq));
}

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

    // ---- errors and lexing ----

    ErrorInfo syntax_error(const std::string& what) const {
        size_t line = 1, column = 1;
        for (size_t i = 0; i < pos_ && i < src_.size(); ++i) {
            if (src_[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        return ErrorInfo{ErrorKind::invalid_argument, "grammar: " + what + " at line " +
                                                          std::to_string(line) + ", column " +
                                                          std::to_string(column)};
    }
    bool eof() const noexcept { return pos_ >= src_.size(); }
    char peek(size_t ahead = 0) const noexcept {
        return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
    }
    static bool is_name_char(char c) noexcept {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
    }
    void skip_space() noexcept {
        while (!eof()) {
            const char c = peek();
            if (c == '#') {
                while (!eof() && peek() != '\n') ++pos_;
            } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                ++pos_;
            } else {
                break;
            }
        }
    }
    std::string_view read_name() noexcept {
        const size_t start = pos_;
        while (!eof() && is_name_char(peek())) ++pos_;
        return src_.substr(start, pos_ - start);
    }
    // True if a `name ::=` starts here: the end of the current rule.
    bool at_rule_start() const noexcept {
        size_t p = pos_;
        while (p < src_.size() && is_name_char(src_[p])) ++p;
        if (p == pos_) return false;
        while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t')) ++p;
        return src_.substr(p, 3) == "::=";
    }

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

    // ---- rules ----

    Status parse_rules() {
        skip_space();
        while (!eof()) {
            const std::string_view name = read_name();
            if (name.empty()) return syntax_error("expected a rule name");
            skip_space();
            if (src_.substr(pos_, 3) != "::=") return syntax_error("expected `::=`");
            pos_ += 3;
            const uint32_t id = rule_id(name);
            if (rules_[id].defined)
                return syntax_error("rule `" + std::string(name) + "` defined twice");
            std::vector<Sequence> alternatives;
            SMOL_TRY(parse_alternatives(alternatives, 0));
            rules_[id].alternatives = std::move(alternatives);
            rules_[id].defined = true;
            skip_space();
        }
        return {};
    }

    Status parse_alternatives(std::vector<Sequence>& out, size_t depth) {
        if (depth > limits_.max_nesting)
            return syntax_error("groups nested more than " + std::to_string(limits_.max_nesting) +
                                " deep (GrammarLimits::max_nesting)");
        while (true) {
            Sequence sequence;
            SMOL_TRY(count(1));  // its end position
            SMOL_TRY(parse_sequence(sequence, depth));
            out.push_back(std::move(sequence));
            skip_space();
            if (peek() != '|') return {};
            ++pos_;
        }
    }

    Status parse_sequence(Sequence& out, size_t depth) {
        while (true) {
            skip_space();
            if (eof() || peek() == '|' || peek() == ')') return {};
            if (depth == 0 && at_rule_start()) return {};
            Sequence term;
            SMOL_TRY(parse_term(term, depth));
            SMOL_TRY(parse_postfix(term));
            SMOL_TRY(count(term.size()));
            out.insert(out.end(), term.begin(), term.end());
        }
    }

    Status parse_term(Sequence& out, size_t depth) {
        const char c = peek();
        if (c == '"') return parse_literal(out);
        if (c == '[') return parse_class(out);
        if (c == '.') {
            ++pos_;
            return class_element({{0, 0x10FFFF}}, out);
        }
        if (c == '(') {
            ++pos_;
            std::vector<Sequence> alternatives;
            SMOL_TRY(parse_alternatives(alternatives, depth + 1));
            skip_space();
            if (peek() != ')') return syntax_error("expected `)`");
            ++pos_;
            if (alternatives.size() == 1) {
                out = std::move(alternatives[0]);
            } else {
                out.push_back({Grammar::Kind::rule, new_rule(std::move(alternatives))});
            }
            return {};
        }
        if (is_name_char(c)) {
            out.push_back({Grammar::Kind::rule, rule_id(read_name())});
            return {};
        }
        return syntax_error(std::string("unexpected character `") + c + "`");
    }

    // One escaped or plain code point of a literal or class.
    Expected<uint32_t> parse_char() {
        if (eof()) return syntax_error("unterminated literal or class");
        const unsigned char c = static_cast<unsigned char>(peek());
        if (c == '\\') {
            ++pos_;
            const char e = peek();
            ++pos_;
            switch (e) {
                case 'n':
                    return uint32_t('\n');
                case 'r':
                    return uint32_t('\r');
                case 't':
                    return uint32_t('\t');
                case '\\':
                case '"':
                case '\'':
                case '[':
                case ']':
                case '-':
                case '^':
                    return uint32_t(e);
                case 'x':
                    return parse_hex(2);
                case 'u':
                    return parse_hex(4);
                case 'U':
                    return parse_hex(8);
                default:
                    --pos_;
                    return syntax_error("unknown escape");
            }
        }
        // A UTF-8 character of the grammar text itself.
        const size_t n = c < 0x80         ? 1
                         : (c >> 5) == 6  ? 2
                         : (c >> 4) == 14 ? 3
                         : (c >> 3) == 30 ? 4
                                          : 0;
        if (n == 0 || pos_ + n > src_.size()) return syntax_error("invalid UTF-8");
        uint32_t cp = n == 1 ? c : c & (0x7F >> n);
        for (size_t i = 1; i < n; ++i) {
            const unsigned char k = static_cast<unsigned char>(src_[pos_ + i]);
            if ((k & 0xC0) != 0x80) return syntax_error("invalid UTF-8");
            cp = (cp << 6) | (k & 0x3F);
        }
        if (detail::utf8_length(cp) != n || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
            return syntax_error("invalid UTF-8");
        pos_ += n;
        return cp;
    }

    Expected<uint32_t> parse_hex(size_t digits) {
        uint32_t value = 0;
        for (size_t i = 0; i < digits; ++i) {
            const char h = peek();
            int v = (h >= '0' && h <= '9')   ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
            if (v < 0) return syntax_error("expected a hex digit");
            value = value * 16 + uint32_t(v);
            ++pos_;
        }
        if (value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF))
            return syntax_error("escape is not a Unicode scalar value");
        return value;
    }

    Status parse_literal(Sequence& out) {
        ++pos_;  // opening quote
        while (true) {
            if (eof()) return syntax_error("unterminated literal");
            if (peek() == '"') {
                ++pos_;
                return {};
            }
            SMOL_TRY_ASSIGN(const uint32_t cp, parse_char());
            uint8_t bytes[4];
            const size_t n = detail::encode_utf8(cp, bytes);
            for (size_t i = 0; i < n; ++i) {
                ByteSet set;
                set.set(bytes[i]);
                out.push_back({Grammar::Kind::bytes, byte_set_id(set)});
            }
        }
    }

    Status parse_class(Sequence& out) {
        ++pos_;  // [
        bool negated = false;
        if (peek() == '^') {
            negated = true;
            ++pos_;
        }
        std::vector<detail::CodeRange> ranges;
        while (true) {
            if (eof()) return syntax_error("unterminated class");
            if (peek() == ']') {
                ++pos_;
                break;
            }
            SMOL_TRY_ASSIGN(const uint32_t lo, parse_char());
            uint32_t hi = lo;
            if (peek() == '-' && peek(1) != ']') {
                ++pos_;
                SMOL_TRY_ASSIGN(hi, parse_char());
                if (hi < lo) return syntax_error("class range out of order");
            }
            ranges.push_back({lo, hi});
        }
        if (negated) ranges = complement(std::move(ranges));
        return class_element(std::move(ranges), out);
    }

    static std::vector<detail::CodeRange> normalize(std::vector<detail::CodeRange> ranges) {
        std::sort(
            ranges.begin(), ranges.end(),
            [](const detail::CodeRange& a, const detail::CodeRange& b) { return a.lo < b.lo; });
        std::vector<detail::CodeRange> merged;
        for (const auto& r : ranges) {
            if (!merged.empty() && r.lo <= merged.back().hi + 1)
                merged.back().hi = std::max(merged.back().hi, r.hi);
            else
                merged.push_back(r);
        }
        return merged;
    }
    static std::vector<detail::CodeRange> complement(std::vector<detail::CodeRange> ranges) {
        std::vector<detail::CodeRange> out;
        uint32_t next = 0;
        for (const auto& r : normalize(std::move(ranges))) {
            if (r.lo > next) out.push_back({next, r.lo - 1});
            next = r.hi + 1;
        }
        if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
        return out;
    }

    // A set of code points as grammar elements: one byte set when every code
    // point is ASCII, else a rule whose alternatives are the UTF-8 sequences
    // (one alternative for all the one-byte ones). Rules are shared per set.
    Status class_element(std::vector<detail::CodeRange> ranges, Sequence& out) {
        std::vector<detail::Utf8Sequence> sequences;
        for (const auto& r : normalize(std::move(ranges))) {
            // Surrogates are not scalar values and have no UTF-8 form.
            if (r.lo < 0xD800 && r.hi >= 0xD800) {
                detail::utf8_sequences(r.lo, 0xD7FF, sequences);
                if (r.hi > 0xDFFF) detail::utf8_sequences(0xE000, r.hi, sequences);
            } else if (r.lo >= 0xD800 && r.lo <= 0xDFFF) {
                if (r.hi > 0xDFFF) detail::utf8_sequences(0xE000, r.hi, sequences);
            } else {
                detail::utf8_sequences(r.lo, r.hi, sequences);
            }
        }
        ByteSet single;
        std::vector<Sequence> alternatives;
        for (const auto& seq : sequences) {
            if (seq.size() == 1) {
                single.set_range(seq[0].first, seq[0].second);
                continue;
            }
            Sequence alt;
            for (const auto& [lo, hi] : seq) {
                ByteSet set;
                set.set_range(lo, hi);
                alt.push_back({Grammar::Kind::bytes, byte_set_id(set)});
            }
            alternatives.push_back(std::move(alt));
        }
        if (alternatives.empty()) {
            // Possibly empty (e.g. [^\x00-\U0010FFFF]): an element nothing matches.
            out.push_back({Grammar::Kind::bytes, byte_set_id(single)});
            return {};
        }
        if (!single.empty())
            alternatives.insert(alternatives.begin(),
                                {{Grammar::Kind::bytes, byte_set_id(single)}});
        std::string key;
        for (const auto& alt : alternatives) {
            for (const Element& e : alt) key += std::to_string(e.arg) + ",";
            key += "|";
        }
        auto it = class_rules_.find(key);
        if (it == class_rules_.end()) {
            size_t n = 0;
            for (const auto& alt : alternatives) n += alt.size() + 1;
            SMOL_TRY(count(n));
            it = class_rules_.emplace(key, new_rule(std::move(alternatives))).first;
        }
        out.push_back({Grammar::Kind::rule, it->second});
        return {};
    }

    // ---- repetition ----

    Expected<uint32_t> parse_count() {
        uint64_t value = 0;
        if (!(peek() >= '0' && peek() <= '9')) return syntax_error("expected a number");
        while (peek() >= '0' && peek() <= '9') {
            value = value * 10 + uint64_t(peek() - '0');
            if (value > limits_.max_repeat)
                return syntax_error("repetition count above " + std::to_string(limits_.max_repeat) +
                                    " (GrammarLimits::max_repeat)");
            ++pos_;
        }
        return uint32_t(value);
    }

    Status parse_postfix(Sequence& term) {
        while (true) {
            const char c = peek();
            if (c == '*') {
                ++pos_;
                SMOL_TRY(repeat(term, 0, UINT32_MAX));
            } else if (c == '+') {
                ++pos_;
                SMOL_TRY(repeat(term, 1, UINT32_MAX));
            } else if (c == '?') {
                ++pos_;
                SMOL_TRY(repeat(term, 0, 1));
            } else if (c == '{') {
                ++pos_;
                skip_space();
                uint32_t lo = 0, hi = 0;
                if (peek() != ',') {
                    SMOL_TRY_ASSIGN(lo, parse_count());
                }
                skip_space();
                if (peek() == ',') {
                    ++pos_;
                    skip_space();
                    hi = peek() == '}' ? UINT32_MAX : 0;
                    if (hi == 0) {
                        SMOL_TRY_ASSIGN(hi, parse_count());
                    }
                } else {
                    hi = lo;
                }
                skip_space();
                if (peek() != '}') return syntax_error("expected `}`");
                ++pos_;
                if (hi < lo) return syntax_error("repetition {n,m} with m < n");
                SMOL_TRY(repeat(term, lo, hi));
            } else {
                return {};
            }
        }
    }

    // term{lo,hi} (hi == UINT32_MAX: unbounded) as lo copies followed by
    // right-recursive optional rules. Everything stays right recursive, which
    // the matcher runs at constant stack depth.
    Status repeat(Sequence& term, uint32_t lo, uint32_t hi) {
        if (term.empty()) return {};                        // ""* is the empty string
        if (term.size() > 1) SMOL_TRY(count(term.size()));  // the unit rule's own copy
        Element unit = term.size() == 1 ? term[0] : Element{Grammar::Kind::rule, new_rule({term})};
        Sequence out;
        SMOL_TRY(count(size_t(lo)));
        out.assign(lo, unit);
        if (hi == UINT32_MAX) {
            // star ::= unit star | (empty)
            const uint32_t star = new_rule({});
            rules_[star].alternatives = {{unit, {Grammar::Kind::rule, star}}, {}};
            SMOL_TRY(count(4));
            out.push_back({Grammar::Kind::rule, star});
        } else if (hi > lo) {
            // opt_k ::= unit opt_(k-1) | (empty), down to opt_0 ::= (empty): a
            // family whose members differ only in the count left (see
            // Grammar::saturated_position).
            std::vector<uint32_t> family{new_rule({{}})};
            for (uint32_t k = 1; k <= hi - lo; ++k) {
                family.push_back(new_rule({{unit, {Grammar::Kind::rule, family.back()}}, {}}));
            }
            SMOL_TRY(count(size_t(hi - lo) * 4 + 1));
            out.push_back({Grammar::Kind::rule, family.back()});
            families_.push_back({std::move(family), unit});
        }
        term = std::move(out);
        return {};
    }

    // ---- checks ----

    // The least set of rules with an alternative whose elements all pass:
    // bytes elements by `bytes_ok`, rule elements by being in the set. A
    // worklist over each alternative's count of unmet elements, so it costs
    // the grammar's size once (iterating "until nothing changes" costs a pass
    // per link of a rule chain: quadratic in a chain of 100,000 rules).
    template <class BytesOk>
    std::vector<char> closed_set(BytesOk&& bytes_ok) const {
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
    Status remove_unproductive(uint32_t root) {
        const std::vector<char> productive =
            closed_set([&](const Element& e) { return !byte_sets_[e.arg].empty(); });
        auto element_ok = [&](const Element& e) {
            return e.kind == Grammar::Kind::bytes ? !byte_sets_[e.arg].empty()
                                                  : productive[e.arg] != 0;
        };
        if (!productive[root])
            return Status(ErrorKind::invalid_argument,
                          "grammar: `root` can match no complete text");
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

    static uint64_t element_key(const Element& e) noexcept {
        return (uint64_t(e.kind) << 32) | e.arg;
    }
    static bool less(const Sequence& a, const Sequence& b) noexcept {
        return std::lexicographical_compare(
            a.begin(), a.end(), b.begin(), b.end(),
            [](const Element& x, const Element& y) { return element_key(x) < element_key(y); });
    }
    static bool same(const Sequence& a, const Sequence& b) noexcept {
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
    static constexpr size_t kInlineAlternatives = 16;
    void inline_leading_rules(uint32_t r) {
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
    Status factor_common_prefixes() {
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
                    while (j < t.hi &&
                           element_key(sorted[j][t.depth]) == element_key(first[t.depth]))
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

    Status check_left_recursion() {
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

    std::string display_name(uint32_t rule) const {
        return rules_[rule].name[0] == '_' ? "(a group or repetition)" : rules_[rule].name;
    }

    Grammar flatten(uint32_t root) {
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
            for (size_t k = 0; k < f.rules.size(); ++k)
                g.family_of_[f.rules[k]] = {id, uint32_t(k)};
            g.families_.push_back(f.rules);
        }
        return g;
    }

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

inline Expected<Grammar> Grammar::try_parse(std::string_view text, const GrammarLimits& limits) {
    return GrammarCompiler(text, limits).run();
}

SMOL_NAMESPACE_END
