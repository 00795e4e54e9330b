// Reading a JSON Schema's keywords: number literals as exact bounds, JSON
// pointers for error messages, and which keywords are implemented, which are
// not (an error), and which constrain a value (the rest are annotations).
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "../../detail/json.hpp"
#include "schema_text.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {
namespace schema_detail {

// A schema number, exactly enough for bounds on 18-digit integer parts:
// floor(value) clamped to +-10^18, and whether the value is an integer.
struct Num {
    int64_t floor = 0;
    bool integral = true;
    int64_t ceil() const { return integral ? floor : floor + 1; }
    Num negated() const { return Num{-ceil(), integral}; }
};

inline Num to_num(std::string_view text) {
    const bool negative = !text.empty() && text[0] == '-';
    const json::repr_detail::Decimal d = json::repr_detail::literal_decimal(text);
    if (d.digits.empty()) return Num{};
    uint64_t magnitude = 0;
    bool fraction = false;
    if (d.exponent >= 18) {
        magnitude = uint64_t(kBeyond);
    } else if (d.exponent < 0) {
        fraction = true;  // digits are nonzero from the first
    } else {
        const auto int_digits = size_t(d.exponent + 1);
        for (size_t i = 0; i < int_digits; ++i)
            magnitude = magnitude * 10 + uint64_t(i < d.digits.size() ? d.digits[i] - '0' : 0);
        for (size_t i = int_digits; i < d.digits.size(); ++i) fraction |= d.digits[i] != '0';
    }
    const auto m = int64_t(magnitude);
    if (!negative) return Num{m, !fraction};
    return Num{fraction ? -m - 1 : -m, !fraction};
}

// A lower or upper bound of a number.
struct Bound {
    bool present = false;
    bool exclusive = false;
    Num value;
    Bound negated() const { return Bound{present, exclusive, value.negated()}; }
};

// Whether a number literal is an integer (1.0 and 1e20 are; JSON Schema
// counts values, not spellings).
inline bool is_integral_literal(std::string_view text) {
    json::repr_detail::Decimal d = json::repr_detail::literal_decimal(text);
    while (!d.digits.empty() && d.digits.back() == '0') d.digits.pop_back();
    return d.digits.empty() || long(d.digits.size()) <= d.exponent + 1;
}

inline std::string pointer_append(const std::string& pointer, std::string_view key) {
    std::string out = pointer + "/";
    for (const char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

inline std::string shown_pointer(const std::string& pointer) {
    return pointer.empty() ? "/" : pointer;
}

inline bool is_one_of(std::string_view key, std::initializer_list<std::string_view> set) {
    return std::find(set.begin(), set.end(), key) != set.end();
}

// Keywords JSON Schema defines that this file does not implement.
inline bool is_unsupported_keyword(std::string_view key) {
    return is_one_of(key, {"pattern",
                           "not",
                           "if",
                           "then",
                           "else",
                           "patternProperties",
                           "propertyNames",
                           "dependentRequired",
                           "dependentSchemas",
                           "dependencies",
                           "uniqueItems",
                           "prefixItems",
                           "additionalItems",
                           "contains",
                           "minContains",
                           "maxContains",
                           "multipleOf",
                           "minProperties",
                           "maxProperties",
                           "unevaluatedProperties",
                           "unevaluatedItems",
                           "$dynamicRef",
                           "$recursiveRef"});
}

// Keywords that constrain a value and that this file implements.
inline bool is_constraint_keyword(std::string_view key) {
    return is_one_of(key, {"type",
                           "properties",
                           "required",
                           "additionalProperties",
                           "items",
                           "minItems",
                           "maxItems",
                           "minLength",
                           "maxLength",
                           "format",
                           "minimum",
                           "maximum",
                           "exclusiveMinimum",
                           "exclusiveMaximum",
                           "enum",
                           "const",
                           "anyOf",
                           "oneOf",
                           "allOf",
                           "$ref"});
}

}  // namespace schema_detail
}  // namespace detail

SMOL_NAMESPACE_END
