// GPT-2's byte-level alphabet: the printable code point that stands for each
// byte in the token texts of a byte-level BPE vocabulary (Tokenizer,
// text/tokenizer.hpp), and back.
#pragma once

#include "../../detail/abi.hpp"

#include <array>
#include <cstdint>
#include <string>

#include "../unicode.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {

// GPT-2's bytes_to_unicode: printable bytes ('!'..'~', U+00A1..U+00AC,
// U+00AE..U+00FF) stand for themselves; the other 68 bytes take U+0100,
// U+0101, ... in byte order. So every byte has a visible, non-space spelling.
struct ByteLevelMap {
    std::array<char32_t, 256> byte_to_codepoint{};
    std::array<int16_t, 324> codepoint_to_byte{};  // -1 where no byte maps there
    std::array<std::string, 256> byte_to_utf8;     // the spelling, UTF-8 encoded

    ByteLevelMap() {
        codepoint_to_byte.fill(-1);
        char32_t next_extra = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            const char32_t cp = printable ? char32_t(b) : next_extra++;
            byte_to_codepoint[size_t(b)] = cp;
            codepoint_to_byte[cp] = int16_t(b);
            unicode::append_utf8(byte_to_utf8[size_t(b)], cp);
        }
    }
    static const ByteLevelMap& get() {
        static const ByteLevelMap map;
        return map;
    }
};

}  // namespace detail
SMOL_NAMESPACE_END
