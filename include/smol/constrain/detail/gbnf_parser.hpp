// The first half of GrammarCompiler (constrain/grammar_compiler.hpp): GBNF
// text -> rules of element sequences. Lexing and syntax errors with line and
// column; rules, alternatives, sequences and terms; literals and classes as
// UTF-8 byte sequences (a class of non-ASCII code points becomes a rule whose
// alternatives are the byte-range sequences of utf8_sequences); repetition
// x{n,m} as n copies and a family of right-recursive optional rules.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../detail/utf8.hpp"
#include "../../error.hpp"
#include "../grammar_compiler.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

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

// ---- errors and lexing ----

inline ErrorInfo GrammarCompiler::syntax_error(const std::string& what) const {
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
inline char GrammarCompiler::peek(size_t ahead) const noexcept {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
}
inline bool GrammarCompiler::is_name_char(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}
inline void GrammarCompiler::skip_space() noexcept {
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
inline std::string_view GrammarCompiler::read_name() noexcept {
    const size_t start = pos_;
    while (!eof() && is_name_char(peek())) ++pos_;
    return src_.substr(start, pos_ - start);
}
// True if a `name ::=` starts here: the end of the current rule.
inline bool GrammarCompiler::at_rule_start() const noexcept {
    size_t p = pos_;
    while (p < src_.size() && is_name_char(src_[p])) ++p;
    if (p == pos_) return false;
    while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t')) ++p;
    return src_.substr(p, 3) == "::=";
}

// ---- rules ----

inline Status GrammarCompiler::parse_rules() {
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

inline Status GrammarCompiler::parse_alternatives(std::vector<Sequence>& out, size_t depth) {
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

inline Status GrammarCompiler::parse_sequence(Sequence& out, size_t depth) {
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

inline Status GrammarCompiler::parse_term(Sequence& out, size_t depth) {
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
inline Expected<uint32_t> GrammarCompiler::parse_char() {
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
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
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

inline Expected<uint32_t> GrammarCompiler::parse_hex(size_t digits) {
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

inline Status GrammarCompiler::parse_literal(Sequence& out) {
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

inline Status GrammarCompiler::parse_class(Sequence& out) {
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

inline std::vector<detail::CodeRange> GrammarCompiler::normalize(
    std::vector<detail::CodeRange> ranges) {
    std::sort(ranges.begin(), ranges.end(),
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
inline std::vector<detail::CodeRange> GrammarCompiler::complement(
    std::vector<detail::CodeRange> ranges) {
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
inline Status GrammarCompiler::class_element(std::vector<detail::CodeRange> ranges, Sequence& out) {
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
        alternatives.insert(alternatives.begin(), {{Grammar::Kind::bytes, byte_set_id(single)}});
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

inline Expected<uint32_t> GrammarCompiler::parse_count() {
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

inline Status GrammarCompiler::parse_postfix(Sequence& term) {
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
inline Status GrammarCompiler::repeat(Sequence& term, uint32_t lo, uint32_t hi) {
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

SMOL_NAMESPACE_END
