// UTF-8 validation for text that enters the generator (prompts, chat messages,
// stop strings): strict RFC 3629 (no overlong forms, no surrogates, nothing
// past U+10FFFF), reporting the byte offset of the first bad sequence so the
// error message can point at it.
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

// Offset of the first byte that does not start a valid UTF-8 sequence, or
// std::string_view::npos when the whole text is valid.
inline size_t find_invalid_utf8(std::string_view text) noexcept {
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    const size_t size = text.size();
    size_t i = 0;
    while (i < size) {
        const unsigned char lead = bytes[i];
        if (lead < 0x80) {
            ++i;
            continue;
        }
        size_t length = 0;
        unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
        if (lead >= 0xC2 && lead <= 0xDF) {
            length = 2;
        } else if (lead >= 0xE0 && lead <= 0xEF) {
            length = 3;
            if (lead == 0xE0) low = 0xA0;        // overlong
            else if (lead == 0xED) high = 0x9F;  // surrogates
        } else if (lead >= 0xF0 && lead <= 0xF4) {
            length = 4;
            if (lead == 0xF0) low = 0x90;        // overlong
            else if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
        } else {
            return i;  // continuation byte, C0/C1, or F5..FF
        }
        if (size - i < length) return i;
        if (bytes[i + 1] < low || bytes[i + 1] > high) return i;
        for (size_t k = 2; k < length; ++k)
            if ((bytes[i + k] & 0xC0) != 0x80) return i;
        i += length;
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
