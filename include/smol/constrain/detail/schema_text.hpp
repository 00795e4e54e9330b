// Grammar text for the JSON Schema converter: GBNF literals, repetitions,
// groups, and decimal ranges ([lo, hi] as digit classes), with the limits the
// converter works within.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

SMOL_NAMESPACE_BEGIN

namespace detail {
namespace schema_detail {

constexpr size_t kMaxGrammarBytes = size_t(4) << 20;
constexpr size_t kMaxSchemaDepth = 256;
constexpr uint64_t kMaxRepeat = 10000;            // Grammar's repetition limit
constexpr int64_t kBeyond = 1000000000000000000;  // 10^18: past every bounded integer

// A GBNF string literal matching exactly the UTF-8 text.
inline std::string literal(std::string_view utf8) {
    static const char* hex = "0123456789ABCDEF";
    std::string out = "\"";
    for (const char c : utf8) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (byte < 0x20 || byte == 0x7F) {
            out += "\\x";
            out += hex[byte >> 4];
            out += hex[byte & 15];
        } else {
            out += c;
        }
    }
    return out + "\"";
}

// Postfix repetition of an element: {lo,hi}, hi < 0 meaning unbounded.
inline std::string repeat(int64_t lo, int64_t hi) {
    if (hi < 0) {
        if (lo == 0) return "*";
        if (lo == 1) return "+";
        return "{" + std::to_string(lo) + ",}";
    }
    if (lo == 0 && hi == 1) return "?";
    if (lo == hi) return "{" + std::to_string(lo) + "}";
    return "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

inline std::string group(const std::vector<std::string>& alternatives) {
    if (alternatives.size() == 1) return alternatives[0];
    std::string out = "(";
    for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : " ") + alternatives[i];
    return out + " )";
}

inline std::string digit_class(char lo, char hi) {
    if (lo == hi) return std::string("\"") + lo + "\"";
    return std::string("[") + lo + "-" + hi + "]";
}

inline std::string any_digits(size_t n) {
    if (n == 0) return "";
    return " [0-9]" + (n == 1 ? std::string() : "{" + std::to_string(n) + "}");
}

// Digit strings of one length in [lo, hi] (same length, lo <= hi).
inline std::string same_length_range(const std::string& lo, const std::string& hi) {
    if (lo.empty()) return "";
    if (lo == hi) return literal(lo);
    const size_t rest = lo.size() - 1;
    if (lo[0] == hi[0])
        return digit_class(lo[0], lo[0]) + " " + same_length_range(lo.substr(1), hi.substr(1));
    const bool lo_full = lo.find_first_not_of('0', 1) == std::string::npos;
    const bool hi_full = hi.find_first_not_of('9', 1) == std::string::npos;
    std::vector<std::string> alternatives;
    char first = lo[0], last = hi[0];
    if (!lo_full) {
        alternatives.push_back(digit_class(lo[0], lo[0]) + " " +
                               group({same_length_range(lo.substr(1), std::string(rest, '9'))}));
        ++first;
    }
    std::string tail;
    if (!hi_full) {
        tail = digit_class(hi[0], hi[0]) + " " +
               group({same_length_range(std::string(rest, '0'), hi.substr(1))});
        --last;
    }
    if (first <= last) alternatives.push_back(digit_class(first, last) + any_digits(rest));
    if (!tail.empty()) alternatives.push_back(tail);
    return group(alternatives);
}

inline uint64_t power10(size_t n) {
    uint64_t p = 1;
    while (n--) p *= 10;
    return p;
}

// Decimal integers in [lo, hi] (lo <= hi < 10^18), without leading zeros.
inline std::string integer_range(uint64_t lo, uint64_t hi) {
    std::vector<std::string> alternatives;
    const size_t lo_len = std::to_string(lo).size(), hi_len = std::to_string(hi).size();
    for (size_t len = lo_len; len <= hi_len; ++len) {
        const uint64_t first = std::max(lo, len == 1 ? 0 : power10(len - 1));
        const uint64_t last = std::min(hi, power10(len) - 1);
        alternatives.push_back(same_length_range(std::to_string(first), std::to_string(last)));
    }
    return group(alternatives);
}

}  // namespace schema_detail
}  // namespace detail

SMOL_NAMESPACE_END
