// A small strict JSON reader and writer for the parts of smol that take JSON
// from a caller: JSON Schemas (constrain/json_schema.hpp) and tool-call
// arguments (text/tool_calls.hpp). smol must not depend on a JSON library, and
// these callers need little: a tree of values, exact number text (a schema's
// "maximum": 1e400 or a 30-digit id must not be rounded on the way through),
// and two ways to print a value back.
//
// Owns:
//   - try_parse: RFC 8259 exactly (no comments, no trailing commas, no NaN,
//     no leading zeros, one value and nothing but whitespace around it). A
//     string must be valid UTF-8; \u escapes are decoded, surrogate pairs
//     joined, and a lone surrogate is an error (it has no UTF-8 form). Nesting
//     is bounded by ParseLimits::max_depth, so hostile input can not exhaust
//     the stack. Object members keep source order and duplicates (find()
//     returns the last, as most JSON readers do).
//   - quote / dump: compact JSON text.
//   - python_repr: what Python 3 prints for str(json.loads(text)), which chat
//     templates show to a model when they print a tool's arguments or schema
//     (Jinja's `{{ value }}` of a dict). Floats are printed with Python's
//     repr rules (shortest round-trip digits). Approximation: Python escapes
//     every code point that is not "printable" (categories C*, Z* except
//     space, unassigned ones included); without Unicode tables this escapes
//     the ASCII and Latin-1 controls and a fixed list of separators and format
//     characters, and copies other non-ASCII code points, so an unassigned or
//     private-use code point prints raw where Python would write \uXXXX.
#pragma once

#include "abi.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "utf8.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {
namespace json {

enum class Type { null, boolean, number, string, array, object };

struct Value {
    Type type = Type::null;
    bool boolean = false;
    std::string text;          // number: its exact source text; string: the decoded UTF-8
    std::vector<Value> items;  // array
    std::vector<std::pair<std::string, Value>>
        members;  // object, in source order (duplicates kept)

    // The last member with that key, or nullptr (also for a non-object).
    const Value* find(std::string_view key) const noexcept {
        for (size_t i = members.size(); i > 0; --i)
            if (members[i - 1].first == key) return &members[i - 1].second;
        return nullptr;
    }
    bool is_null() const noexcept { return type == Type::null; }
    bool is_bool() const noexcept { return type == Type::boolean; }
    bool is_number() const noexcept { return type == Type::number; }
    bool is_string() const noexcept { return type == Type::string; }
    bool is_array() const noexcept { return type == Type::array; }
    bool is_object() const noexcept { return type == Type::object; }
};

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

// A JSON string literal for UTF-8 text: " and \ escaped, control characters
// as \n \t \r \b \f or \u00XX; everything else (non-ASCII included) copied.
inline std::string quote(std::string_view utf8) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    out.reserve(utf8.size() + 2);
    out += '"';
    for (const char c : utf8) {
        const auto byte = static_cast<unsigned char>(c);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (byte < 0x20) {
                    out += "\\u00";
                    out += hex[byte >> 4];
                    out += hex[byte & 15];
                } else {
                    out += c;
                }
        }
    }
    out += '"';
    return out;
}

inline void dump_to(std::string& out, const Value& v) {
    switch (v.type) {
        case Type::null:
            out += "null";
            return;
        case Type::boolean:
            out += v.boolean ? "true" : "false";
            return;
        case Type::number:
            out += v.text;
            return;
        case Type::string:
            out += quote(v.text);
            return;
        case Type::array:
            out += '[';
            for (size_t i = 0; i < v.items.size(); ++i) {
                if (i) out += ',';
                dump_to(out, v.items[i]);
            }
            out += ']';
            return;
        case Type::object:
            out += '{';
            for (size_t i = 0; i < v.members.size(); ++i) {
                if (i) out += ',';
                out += quote(v.members[i].first);
                out += ':';
                dump_to(out, v.members[i].second);
            }
            out += '}';
            return;
    }
}

// Compact JSON: no whitespace, numbers as their source text.
inline std::string dump(const Value& v) {
    std::string out;
    dump_to(out, v);
    return out;
}

namespace repr_detail {

// A number literal is a Python float when it has a fraction or an exponent.
inline bool is_float_literal(std::string_view text) noexcept {
    return text.find_first_of(".eE") != std::string_view::npos;
}

// Decimal digits (no leading zeros, at least one) and the exponent of the
// first digit: value = 0.d1d2d3... * 10^(exponent + 1), i.e. d1.d2d3e<exponent>.
struct Decimal {
    std::string digits;
    long exponent = 0;
};

// The exact decimal of a JSON number literal, without its sign. The exponent
// saturates, so a huge one still parses (to inf or 0) instead of overflowing.
inline Decimal literal_decimal(std::string_view text) {
    Decimal d;
    long point = 0;  // digits before the decimal point
    bool seen_point = false;
    size_t i = (!text.empty() && text[0] == '-') ? 1 : 0;
    for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
        if (text[i] == '.') {
            seen_point = true;
            continue;
        }
        if (d.digits.empty() && text[i] == '0') {
            if (seen_point) --point;  // a leading zero after the point shifts the value
            continue;
        }
        d.digits += text[i];
        if (!seen_point) ++point;
    }
    long exp = 0;
    if (i < text.size()) {
        ++i;
        bool negative = false;
        if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
        for (; i < text.size(); ++i) exp = std::min(exp * 10 + (text[i] - '0'), 100000000L);
        if (negative) exp = -exp;
    }
    d.exponent = point + exp - 1;
    return d;
}

// Locale-independent strtod: the mantissa is written as an integer ("123e-2",
// never "1.23"), so the locale's decimal point never matters.
inline double decimal_to_double(const Decimal& d) {
    if (d.digits.empty()) return 0.0;
    std::string text = d.digits;
    // Past ~800 digits the extra ones can not change the double; keep the text short.
    long exponent = d.exponent - static_cast<long>(d.digits.size()) + 1;
    if (text.size() > 800) {
        exponent += static_cast<long>(text.size() - 800);
        text.resize(800);
        text += '1';  // sticky digit: the tail was nonzero or not, either way rounding is right
        --exponent;
    }
    text += 'e';
    text += std::to_string(exponent);
    return std::strtod(text.c_str(), nullptr);
}

// "d.ddde+XX" (any decimal point character, the locale's) as a Decimal
// without trailing zeros.
inline Decimal scientific_decimal(std::string_view text) {
    Decimal d;
    const size_t e = text.find_first_of("eE");
    for (const char c : text.substr(0, e))
        if (c >= '0' && c <= '9') d.digits += c;
    while (d.digits.size() > 1 && d.digits.back() == '0') d.digits.pop_back();
    d.exponent = std::strtol(std::string(text.substr(e + 1)).c_str(), nullptr, 10);
    return d;
}

// The decimal one unit of its last digit (of `length` digits) above or below.
inline Decimal step_last_digit(Decimal d, size_t length, bool up) {
    d.digits.resize(length, '0');
    size_t i = length;
    while (i-- > 0) {
        char& c = d.digits[i];
        if (up ? c != '9' : c != '0') {
            c = static_cast<char>(up ? c + 1 : c - 1);
            break;
        }
        c = up ? '0' : '9';
    }
    if (up && d.digits[0] == '0') {  // 99.9 + 0.1: one more digit in front
        d.digits.insert(d.digits.begin(), '1');
        d.digits.pop_back();
        ++d.exponent;
    } else if (!up && d.digits[0] == '0') {  // 1.00 - 0.01
        d.digits.erase(d.digits.begin());
        d.digits += '9';
        --d.exponent;
    }
    return d;
}

// The shortest digits that read back as x (x finite, > 0), as Python's repr
// (David Gay's mode 0) chooses them: fewest digits, then nearest to x.
inline Decimal shortest_decimal(double x) {
    char buf[64];
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
    const auto result = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
    return scientific_decimal(std::string_view(buf, static_cast<size_t>(result.ptr - buf)));
#else
    // Without floating std::to_chars: at each length, the correctly rounded
    // digits, or else a neighbour of them (near a power of two the interval
    // of decimals that read back as x is lopsided, and the nearest decimal of
    // that length can fall outside it while the next one is inside).
    for (size_t length = 1; length < 17; ++length) {
        const int n = std::snprintf(buf, sizeof buf, "%.*e", static_cast<int>(length - 1), x);
        const Decimal nearest = scientific_decimal(std::string_view(buf, static_cast<size_t>(n)));
        if (decimal_to_double(nearest) == x) return nearest;
        for (const bool up : {true, false}) {
            Decimal neighbour = step_last_digit(nearest, length, up);
            if (decimal_to_double(neighbour) != x) continue;
            while (neighbour.digits.size() > 1 && neighbour.digits.back() == '0')
                neighbour.digits.pop_back();
            return neighbour;
        }
    }
    const int n = std::snprintf(buf, sizeof buf, "%.16e", x);  // 17 digits always read back
    return scientific_decimal(std::string_view(buf, static_cast<size_t>(n)));
#endif
}

// Python's float repr ('r' format): fixed notation for exponents -4..15,
// scientific ("1e-05", "1.5e+16") otherwise; fixed always shows a ".0".
inline std::string format_python_float(bool negative, const Decimal& d) {
    std::string out = negative ? "-" : "";
    const std::string& digits = d.digits;
    const long exp = d.exponent;
    if (exp < -4 || exp >= 16) {
        out += digits[0];
        if (digits.size() > 1) out += "." + digits.substr(1);
        out += exp < 0 ? "e-" : "e+";
        const std::string magnitude = std::to_string(exp < 0 ? -exp : exp);
        if (magnitude.size() < 2) out += '0';
        return out + magnitude;
    }
    if (exp < 0) return out + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    const auto int_digits = static_cast<size_t>(exp + 1);
    if (digits.size() <= int_digits)
        return out + digits + std::string(int_digits - digits.size(), '0') + ".0";
    return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

inline std::string python_float(std::string_view text) {
    const bool negative = !text.empty() && text[0] == '-';
    const double x = decimal_to_double(literal_decimal(text));
    if (std::isinf(x)) return negative ? "-inf" : "inf";
    if (x == 0.0) return negative ? "-0.0" : "0.0";
    return format_python_float(negative, shortest_decimal(x));
}

// Python int(literal): the text, except that -0 is 0.
inline std::string python_int(std::string_view text) {
    if (text.size() > 1 && text[0] == '-' && text.find_first_not_of('0', 1) == std::string::npos)
        return std::string(text.substr(1));
    return std::string(text);
}

// Code points str.isprintable() rejects beyond the C0/C1 controls: Zs (but
// space), Zl, Zp and the common Cf characters.
inline bool is_unprintable_non_ascii(char32_t cp) noexcept {
    if (cp <= 0xA0 || cp == 0xAD) return true;  // C1 controls, NBSP, soft hyphen
    if (cp >= 0x600 && cp <= 0x605) return true;
    if (cp == 0x61C || cp == 0x6DD || cp == 0x70F || cp == 0x1680 || cp == 0x180E) return true;
    if (cp >= 0x2000 && cp <= 0x200F) return true;
    if (cp >= 0x2028 && cp <= 0x202F) return true;
    if (cp >= 0x205F && cp <= 0x206F) return true;
    if (cp == 0x3000 || cp == 0xFEFF) return true;
    if (cp >= 0xFFF9 && cp <= 0xFFFB) return true;
    if (cp >= 0xE000 && cp <= 0xF8FF) return true;  // private use
    return cp >= 0xF0000;                           // planes 15-16: private use
}

inline void append_hex_escape(std::string& out, char32_t cp) {
    static const char* hex = "0123456789abcdef";
    int digits = 8;
    if (cp < 0x100) {
        out += "\\x";
        digits = 2;
    } else if (cp < 0x10000) {
        out += "\\u";
        digits = 4;
    } else {
        out += "\\U";
    }
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += hex[(cp >> shift) & 15];
}

inline std::string python_string(std::string_view utf8) {
    const bool has_single = utf8.find('\'') != std::string_view::npos;
    const bool has_double = utf8.find('"') != std::string_view::npos;
    const char q = (has_single && !has_double) ? '"' : '\'';
    std::string out(1, q);
    size_t i = 0;
    while (i < utf8.size()) {
        const Utf8Scan scan = scan_utf8(utf8.data() + i, utf8.size() - i);
        if (scan.status != Utf8Status::complete) {  // not from try_parse: copy the byte
            out += utf8[i++];
            continue;
        }
        const char32_t cp = scan.codepoint;
        if (cp == static_cast<char32_t>(q) || cp == '\\') {
            out += '\\';
            out += static_cast<char>(cp);
        } else if (cp == '\n') {
            out += "\\n";
        } else if (cp == '\r') {
            out += "\\r";
        } else if (cp == '\t') {
            out += "\\t";
        } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && is_unprintable_non_ascii(cp))) {
            append_hex_escape(out, cp);
        } else {
            out.append(utf8.data() + i, scan.length);
        }
        i += scan.length;
    }
    out += q;
    return out;
}

inline void python_dict_to(std::string& out, const Value& v);

inline void python_repr_to(std::string& out, const Value& v) {
    switch (v.type) {
        case Type::null:
            out += "None";
            return;
        case Type::boolean:
            out += v.boolean ? "True" : "False";
            return;
        case Type::number:
            out += is_float_literal(v.text) ? python_float(v.text) : python_int(v.text);
            return;
        case Type::string:
            out += python_string(v.text);
            return;
        case Type::array:
            out += '[';
            for (size_t i = 0; i < v.items.size(); ++i) {
                if (i) out += ", ";
                python_repr_to(out, v.items[i]);
            }
            out += ']';
            return;
        case Type::object:
            python_dict_to(out, v);
            return;
    }
}

// A Python dict keeps one entry per key: at the first occurrence's place, with
// the last occurrence's value.
inline void python_dict_to(std::string& out, const Value& v) {
    std::unordered_map<std::string_view, size_t> last;
    for (size_t i = 0; i < v.members.size(); ++i) last[v.members[i].first] = i;
    out += '{';
    bool first = true;
    for (size_t i = 0; i < v.members.size(); ++i) {
        auto it = last.find(v.members[i].first);
        if (it == last.end()) continue;  // printed already
        if (!first) out += ", ";
        first = false;
        out += python_string(v.members[i].first);
        out += ": ";
        python_repr_to(out, v.members[it->second].second);
        last.erase(it);
    }
    out += '}';
}

}  // namespace repr_detail

// What Python 3's str() prints for json.loads(dump(v)): a string at the top
// is its text as is (str of a str), inside containers its repr.
inline std::string python_repr(const Value& v) {
    if (v.is_string()) return v.text;
    std::string out;
    repr_detail::python_repr_to(out, v);
    return out;
}

}  // namespace json
}  // namespace detail
SMOL_NAMESPACE_END
