// UTF-8: the one encoder (utf8_length, encode_utf8, append_utf8) and validation: the one decoder of
// Unicode's well-formed byte sequences (Table 3-7, the strict RFC 3629 form: no overlongs, no
// surrogates, nothing past U+10FFFF), scan_utf8, and the checks built on it for text that enters
// the generator (prompts, chat messages, stop strings), which report the byte
// offset of the first bad sequence so the error message can point at it. The
// tokenizer's codec and the detokenizer's repair (text/unicode.hpp) use the
// same scan_utf8.
#pragma once

#include "abi.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "../error.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {

// Bytes of a scalar value's encoding (cp <= U+10FFFF, no surrogates).
inline size_t utf8_length(char32_t cp) noexcept {
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}
// Writes the encoding of cp (utf8_length(cp) bytes) to out; returns its length.
inline size_t encode_utf8(char32_t cp, uint8_t* out) noexcept {
    const size_t n = utf8_length(cp);
    static constexpr uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (size_t i = n - 1; i > 0; --i) {
        out[i] = uint8_t(0x80 | (cp & 0x3F));
        cp >>= 6;
    }
    out[0] = uint8_t(n == 1 ? cp : (kLead[n] | cp));
    return n;
}
inline void append_utf8(std::string& out, char32_t cp) {
    uint8_t bytes[4];
    const size_t n = encode_utf8(cp, bytes);
    out.append(reinterpret_cast<const char*>(bytes), n);
}

// What the bytes at a position hold.
enum class Utf8Status : uint8_t {
    complete,    // a whole character of `length` bytes, `codepoint` set
    incomplete,  // a valid start of `length` bytes that the text ends inside
    invalid,     // an ill-formed maximal subpart of `length` (>= 1) bytes
};
struct Utf8Scan {
    Utf8Status status = Utf8Status::invalid;
    uint32_t length = 0;
    char32_t codepoint = 0;
};

// Classifies the character starting at text[0] (available > 0 bytes).
inline Utf8Scan scan_utf8(const char* text, size_t available) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(text);
    const unsigned char lead = p[0];
    if (lead < 0x80) return {Utf8Status::complete, 1, lead};
    uint32_t length;
    unsigned char second_lo = 0x80, second_hi = 0xBF;  // allowed range of the second byte
    char32_t cp;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
        cp = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        cp = lead & 0x0F;
        if (lead == 0xE0) second_lo = 0xA0;  // no overlongs
        if (lead == 0xED) second_hi = 0x9F;  // no surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        cp = lead & 0x07;
        if (lead == 0xF0) second_lo = 0x90;  // no overlongs
        if (lead == 0xF4) second_hi = 0x8F;  // nothing past U+10FFFF
    } else {
        return {Utf8Status::invalid, 1, lead};  // 80..C1 (continuation, overlong lead), F5..FF
    }
    for (uint32_t i = 1; i < length; ++i) {
        if (i >= available) return {Utf8Status::incomplete, i, 0};
        const unsigned char lo = (i == 1) ? second_lo : 0x80, hi = (i == 1) ? second_hi : 0xBF;
        if (p[i] < lo || p[i] > hi) return {Utf8Status::invalid, i, 0};
        cp = cp << 6 | (p[i] & 0x3F);
    }
    return {Utf8Status::complete, length, cp};
}

// Offset of the first byte that does not start a complete, valid UTF-8
// sequence, or std::string_view::npos when the whole text is valid.
inline size_t find_invalid_utf8(std::string_view text) noexcept {
    size_t i = 0;
    while (i < text.size()) {
        if (static_cast<unsigned char>(text[i]) < 0x80) {  // ASCII, most of any text: no call
            ++i;
            continue;
        }
        const Utf8Scan scan = scan_utf8(text.data() + i, text.size() - i);
        if (scan.status != Utf8Status::complete) return i;
        i += scan.length;
    }
    return std::string_view::npos;
}

// The invalid_argument error naming `what` and the offset when text is not
// valid UTF-8, as a value (the no-exceptions paths report it without fail()).
inline std::optional<ErrorInfo> utf8_error(std::string_view text, const std::string& what) {
    const size_t bad = find_invalid_utf8(text);
    if (bad == std::string_view::npos) return std::nullopt;
    static const char* hex = "0123456789abcdef";
    const auto byte = static_cast<unsigned char>(text[bad]);
    std::string shown = "0x";
    shown += hex[byte >> 4];
    shown += hex[byte & 15];
    return ErrorInfo{ErrorKind::invalid_argument, what + " is not valid UTF-8: bad byte " + shown +
                                                      " at byte offset " + std::to_string(bad)};
}

// smol::Error(invalid_argument) naming `what` and the offset when text is not
// valid UTF-8.
inline void require_utf8(std::string_view text, const std::string& what) {
    if (auto error = utf8_error(text, what)) fail(error->kind, error->message);
}

}  // namespace detail
SMOL_NAMESPACE_END
