// python_repr: what Python 3 prints for str(json.loads(text)), which chat
// templates show to a model when they print a tool's arguments or schema
// (Jinja's `{{ value }}` of a dict). Floats are printed with Python's repr
// rules (shortest round-trip digits). Approximation: Python escapes every code
// point that is not "printable" (categories C*, Z* except space, unassigned
// ones included); without Unicode tables this escapes the ASCII and Latin-1
// controls and a fixed list of separators and format characters, and copies
// other non-ASCII code points, so an unassigned or private-use code point
// prints raw where Python would write \uXXXX.
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

#include "json_value.hpp"
#include "utf8.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {
namespace json {

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
