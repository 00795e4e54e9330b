// The strict JSON reader: try_parse reads RFC 8259 exactly (no comments, no
// trailing commas, no NaN, no leading zeros, one value and nothing but
// whitespace around it) into a Value (detail/json_value.hpp). A string must be
// valid UTF-8; \u escapes are decoded, surrogate pairs joined, and a lone
// surrogate is an error (it has no UTF-8 form). Nesting is bounded by
// ParseLimits::max_depth, so hostile input can not exhaust the stack.
#pragma once

#include "abi.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "../error.hpp"
#include "json_value.hpp"
#include "utf8.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {
namespace json {

struct ParseLimits {
    size_t max_depth = 64;  // arrays and objects nested deeper are an error
};

namespace parse_detail {

inline bool is_ws(char c) noexcept {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
inline bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}
inline int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

class Parser {
public:
    Parser(std::string_view text, ParseLimits limits) : text_(text), limits_(limits) {}

    Expected<Value> document() {
        skip_ws();
        Value value;
        SMOL_TRY(parse_value(value, 0));
        skip_ws();
        if (pos_ != text_.size()) return fail("unexpected text after the value");
        return value;
    }

private:
    std::string_view text_;
    ParseLimits limits_;
    size_t pos_ = 0;

    ErrorInfo fail(const std::string& what) const {
        return ErrorInfo{ErrorKind::invalid_argument,
                         "json: " + what + " at byte " + std::to_string(pos_)};
    }
    bool at_end() const noexcept { return pos_ >= text_.size(); }
    char peek() const noexcept { return at_end() ? '\0' : text_[pos_]; }
    void skip_ws() noexcept {
        while (!at_end() && is_ws(text_[pos_])) ++pos_;
    }
    bool consume_word(std::string_view word) noexcept {
        if (text_.substr(pos_, word.size()) != word) return false;
        pos_ += word.size();
        return true;
    }

    Status parse_value(Value& out, size_t depth) {
        if (at_end()) return fail("unexpected end of text");
        const char c = peek();
        if (c == '{' || c == '[') {
            if (depth >= limits_.max_depth)
                return fail("nesting deeper than " + std::to_string(limits_.max_depth));
            return c == '{' ? parse_object(out, depth + 1) : parse_array(out, depth + 1);
        }
        if (c == '"') {
            out.type = Type::string;
            return parse_string(out.text);
        }
        if (c == '-' || is_digit(c)) return parse_number(out);
        if (consume_word("true")) {
            out.type = Type::boolean;
            out.boolean = true;
            return {};
        }
        if (consume_word("false")) {
            out.type = Type::boolean;
            return {};
        }
        if (consume_word("null")) return {};
        return fail("unexpected character");
    }

    Status parse_object(Value& out, size_t depth) {
        out.type = Type::object;
        ++pos_;  // '{'
        skip_ws();
        if (peek() == '}') {
            ++pos_;
            return {};
        }
        for (;;) {
            skip_ws();
            if (peek() != '"') return fail("expected a member name");
            std::string key;
            SMOL_TRY(parse_string(key));
            skip_ws();
            if (peek() != ':') return fail("expected ':'");
            ++pos_;
            skip_ws();
            out.members.emplace_back(std::move(key), Value{});
            SMOL_TRY(parse_value(out.members.back().second, depth));
            skip_ws();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() == '}') {
                ++pos_;
                return {};
            }
            return fail("expected ',' or '}'");
        }
    }

    Status parse_array(Value& out, size_t depth) {
        out.type = Type::array;
        ++pos_;  // '['
        skip_ws();
        if (peek() == ']') {
            ++pos_;
            return {};
        }
        for (;;) {
            skip_ws();
            out.items.emplace_back();
            SMOL_TRY(parse_value(out.items.back(), depth));
            skip_ws();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() == ']') {
                ++pos_;
                return {};
            }
            return fail("expected ',' or ']'");
        }
    }

    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    Status parse_number(Value& out) {
        const size_t start = pos_;
        if (peek() == '-') ++pos_;
        if (peek() == '0') {
            ++pos_;
        } else if (is_digit(peek())) {
            while (is_digit(peek())) ++pos_;
        } else {
            return fail("expected a digit");
        }
        if (peek() == '.') {
            ++pos_;
            if (!is_digit(peek())) return fail("expected a digit after '.'");
            while (is_digit(peek())) ++pos_;
        }
        if (peek() == 'e' || peek() == 'E') {
            ++pos_;
            if (peek() == '+' || peek() == '-') ++pos_;
            if (!is_digit(peek())) return fail("expected a digit in the exponent");
            while (is_digit(peek())) ++pos_;
        }
        out.type = Type::number;
        out.text = std::string(text_.substr(start, pos_ - start));
        return {};
    }

    Expected<char32_t> parse_hex4() {
        if (text_.size() - pos_ < 4) return fail("truncated \\u escape");
        char32_t cp = 0;
        for (int i = 0; i < 4; ++i) {
            const int h = hex_value(text_[pos_]);
            if (h < 0) return fail("bad hex digit in \\u escape");
            cp = cp << 4 | static_cast<char32_t>(h);
            ++pos_;
        }
        return cp;
    }

    // After "\u": one code point, joining a surrogate pair.
    Expected<char32_t> parse_unicode_escape() {
        const size_t start = pos_ - 2;  // the error points at the backslash
        SMOL_TRY_ASSIGN(const char32_t first, parse_hex4());
        if (first < 0xD800 || first > 0xDFFF) return first;
        const bool paired = first <= 0xDBFF && text_.substr(pos_, 2) == "\\u";
        if (paired) {
            pos_ += 2;
            SMOL_TRY_ASSIGN(const char32_t second, parse_hex4());
            if (second >= 0xDC00 && second <= 0xDFFF)
                return 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
        }
        pos_ = start;
        return fail("lone surrogate");
    }

    Status parse_escape(std::string& out) {
        ++pos_;  // '\\'
        if (at_end()) return fail("unterminated string");
        const char c = text_[pos_++];
        switch (c) {
            case '"':
            case '\\':
            case '/':
                out += c;
                return {};
            case 'b':
                out += '\b';
                return {};
            case 'f':
                out += '\f';
                return {};
            case 'n':
                out += '\n';
                return {};
            case 'r':
                out += '\r';
                return {};
            case 't':
                out += '\t';
                return {};
            case 'u': {
                SMOL_TRY_ASSIGN(const char32_t cp, parse_unicode_escape());
                append_utf8(out, cp);
                return {};
            }
            default:
                --pos_;
                return fail("bad escape");
        }
    }

    Status parse_string(std::string& out) {
        ++pos_;  // '"'
        for (;;) {
            if (at_end()) return fail("unterminated string");
            const char c = text_[pos_];
            const auto byte = static_cast<unsigned char>(c);
            if (c == '"') {
                ++pos_;
                return {};
            }
            if (c == '\\') {
                SMOL_TRY(parse_escape(out));
            } else if (byte < 0x20) {
                return fail("control character in string");
            } else if (byte < 0x80) {
                out += c;
                ++pos_;
            } else {
                const Utf8Scan scan = scan_utf8(text_.data() + pos_, text_.size() - pos_);
                if (scan.status != Utf8Status::complete) return fail("invalid UTF-8 in string");
                out.append(text_.data() + pos_, scan.length);
                pos_ += scan.length;
            }
        }
    }
};

}  // namespace parse_detail

// The value of `text`, which must be one JSON value (whitespace around it is
// fine). Errors: invalid_argument "json: <what> at byte N".
inline Expected<Value> try_parse(std::string_view text, ParseLimits limits = {}) {
    return parse_detail::Parser(text, limits).document();
}

}  // namespace json
}  // namespace detail
SMOL_NAMESPACE_END
