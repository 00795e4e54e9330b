// Compact JSON text: quote (a JSON string literal for UTF-8 text) and dump
// (a Value with no whitespace, numbers as their source text).
#pragma once

#include "abi.hpp"

#include <cstddef>
#include <string>
#include <string_view>

#include "json_value.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {
namespace json {

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

}  // namespace json
}  // namespace detail
SMOL_NAMESPACE_END
