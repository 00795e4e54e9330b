// Unicode for the tokenizer: a strict UTF-8 codec, the three code point
// classes the Llama-3 pre-tokenizer needs (letter \p{L}, number \p{N},
// whitespace \s; tables generated into unicode_tables.hpp), and the Llama-3
// pre-tokenizer split itself, written by hand over code points:
//
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Invalid UTF-8 (a byte that does not begin a well-formed sequence of
// Unicode's Table 3-7: overlongs, surrogates, > U+10FFFF, stray continuation
// bytes and truncated sequences all count) never throws: each such byte
// becomes a pre-token of its own, and the valid runs between invalid bytes
// are split as if each were a whole text. The tokenizer then maps that byte
// to its byte token, so decode(encode(x)) == x holds for any bytes.
#pragma once

#include "../detail/abi.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../detail/utf8.hpp"
#include "../error.hpp"
#include "unicode_tables.hpp"

SMOL_NAMESPACE_BEGIN
namespace unicode {

// Class flags of a code point (a code point is at most one of letter, number,
// whitespace; "other" is 0).
enum : uint8_t {
    kLetter = 1,
    kNumber = 2,
    kWhitespace = 4,
};

namespace detail {

template <size_t N>
constexpr bool in_ranges(const CodepointRange (&ranges)[N], char32_t cp) noexcept {
    size_t lo = 0, hi = N;  // first range whose last >= cp, by binary search
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (ranges[mid].last < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < N && ranges[lo].first <= cp;
}

inline uint8_t flags_by_search(char32_t cp) noexcept {
    if (in_ranges(kLetterRanges, cp)) return kLetter;
    if (in_ranges(kNumberRanges, cp)) return kNumber;
    if (in_ranges(kWhitespaceRanges, cp)) return kWhitespace;
    return 0;
}

// The Basic Multilingual Plane (where nearly all text lives) as a 64 KiB
// table, built once on first use (thread-safe static init); the planes above
// fall back to binary search.
inline const std::array<uint8_t, 0x10000>& bmp_flags() {
    static const std::array<uint8_t, 0x10000> table = [] {
        std::array<uint8_t, 0x10000> t{};
        auto paint = [&t](const CodepointRange* ranges, size_t count, uint8_t flag) {
            for (size_t i = 0; i < count; ++i)
                for (char32_t cp = ranges[i].first; cp <= ranges[i].last && cp < 0x10000; ++cp)
                    t[cp] = flag;
        };
        paint(kLetterRanges, std::size(kLetterRanges), kLetter);
        paint(kNumberRanges, std::size(kNumberRanges), kNumber);
        paint(kWhitespaceRanges, std::size(kWhitespaceRanges), kWhitespace);
        return t;
    }();
    return table;
}

}  // namespace detail

inline uint8_t codepoint_flags(char32_t cp) noexcept {
    if (cp < 0x80) {
        // ASCII fast path.
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return kLetter;
        if (cp >= '0' && cp <= '9') return kNumber;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return kWhitespace;
        return 0;
    }
    if (cp < 0x10000) return detail::bmp_flags()[cp];
    return detail::flags_by_search(cp);
}
inline bool is_letter(char32_t cp) noexcept {
    return codepoint_flags(cp) == kLetter;
}
inline bool is_number(char32_t cp) noexcept {
    return codepoint_flags(cp) == kNumber;
}
inline bool is_whitespace(char32_t cp) noexcept {
    return codepoint_flags(cp) == kWhitespace;
}

// The UTF-8 decoder is detail/utf8.hpp's scan_utf8 (Unicode's well-formed
// sequences, Table 3-7), shared with the generator's input checks; the codec
// below is built on it.
using smol::detail::scan_utf8;
using smol::detail::Utf8Scan;
using smol::detail::Utf8Status;

// One decoded UTF-8 character. `length` is the number of bytes consumed (1..4);
// when `valid` is false (ill-formed or truncated), `length` is 1 and
// `codepoint` is the raw byte.
struct Utf8Char {
    char32_t codepoint = 0;
    uint32_t length = 0;
    bool valid = false;
};

inline Utf8Char decode_utf8(const char* text, size_t available) noexcept {
    const Utf8Scan scan = scan_utf8(text, available);
    if (scan.status == Utf8Status::complete) return {scan.codepoint, scan.length, true};
    return {char32_t(static_cast<unsigned char>(text[0])), 1, false};
}

// Appends the UTF-8 encoding of a scalar value (cp <= U+10FFFF, no surrogates).
using smol::detail::append_utf8;

inline bool is_valid_utf8(std::string_view text) noexcept {
    return smol::detail::find_invalid_utf8(text) == std::string_view::npos;
}

// Appends `bytes` to `out` as valid UTF-8: each ill-formed maximal subpart
// becomes U+FFFD (the W3C / Unicode "substitution of maximal subparts"
// practice). A character cut off by the end of `bytes` is appended as U+FFFD
// too, unless `keep_incomplete_tail` is set: then it is left out and its
// length returned, so a stream can hold it back until more bytes arrive.
inline size_t append_valid_utf8(std::string& out, std::string_view bytes,
                                bool keep_incomplete_tail) {
    size_t pos = 0;
    while (pos < bytes.size()) {
        const Utf8Scan scan = scan_utf8(bytes.data() + pos, bytes.size() - pos);
        if (scan.status == Utf8Status::complete) {
            out.append(bytes.data() + pos, scan.length);
        } else if (scan.status == Utf8Status::incomplete && keep_incomplete_tail) {
            return bytes.size() - pos;  // it runs to the end of bytes
        } else {
            out += "\xEF\xBF\xBD";  // U+FFFD
        }
        pos += scan.length;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Llama-3 pre-tokenizer split.

// Reusable buffers for split_llama3 (one per thread; encode keeps one per call).
struct SplitScratch {
    // Per code point: its byte offset in the text, its class flags (plus
    // kInvalidByte), and the code point itself when ASCII (else 0x80): the
    // rules only ever test ASCII code points by value.
    struct Char {
        uint32_t offset;
        uint8_t flags;
        uint8_t ascii;
    };
    std::vector<Char> chars;
};

namespace detail {

constexpr uint8_t kInvalidByte = 0x80;  // flag: an invalid UTF-8 byte, a pre-token of its own
constexpr uint8_t kNotAscii = 0x80;

inline char ascii_lower(uint8_t c) noexcept {
    return (c >= 'A' && c <= 'Z') ? char(c + 32) : char(c);
}

// Splits the valid run chars[begin, end) per the Llama-3 pattern; each
// alternative is tried in the pattern's order, as a backtracking regex engine
// would. end_offset is the byte offset just past the run.
template <class Emit>
void split_llama3_run(std::string_view text, const std::vector<SplitScratch::Char>& chars,
                      size_t begin, size_t end, Emit& emit) {
    // Out of the run, a position reads as "no flags" and as no character.
    auto flags_at = [&](size_t i) -> uint8_t { return i < end ? chars[i].flags : 0; };
    auto ascii_at = [&](size_t i) -> int { return i < end ? chars[i].ascii : -1; };
    auto offset_at = [&](size_t i) -> size_t {
        return i < end ? chars[i].offset : (end < chars.size() ? chars[end].offset : text.size());
    };
    auto is_newline = [](int c) { return c == '\r' || c == '\n'; };

    size_t pos = begin;
    while (pos < end) {
        const size_t start = pos;
        auto take = [&](size_t stop) {
            emit(text.substr(offset_at(start), offset_at(stop) - offset_at(start)));
            pos = stop;
        };
        const int c = ascii_at(pos);
        const uint8_t f = flags_at(pos);

        // (?i:'s|'t|'re|'ve|'m|'ll|'d)
        if (c == '\'' && pos + 1 < end) {
            const char next = ascii_lower(uint8_t(ascii_at(pos + 1)));
            if (next == 's' || next == 't' || next == 'm' || next == 'd') {
                take(pos + 2);
                continue;
            }
            if (pos + 2 < end) {
                const char next2 = ascii_lower(uint8_t(ascii_at(pos + 2)));
                if ((next == 'r' && next2 == 'e') || (next == 'v' && next2 == 'e') ||
                    (next == 'l' && next2 == 'l')) {
                    take(pos + 3);
                    continue;
                }
            }
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if (!is_newline(c) && f != kNumber) {
            if (f == kLetter || flags_at(pos + 1) == kLetter) {
                size_t stop = pos + 1;
                while (flags_at(stop) == kLetter) ++stop;
                take(stop);
                continue;
            }
        }
        // \p{N}{1,3}
        if (f == kNumber) {
            size_t stop = pos;
            while (stop - pos < 3 && flags_at(stop) == kNumber) ++stop;
            take(stop);
            continue;
        }
        // ' '?[^\s\p{L}\p{N}]+[\r\n]*
        {
            const size_t first = (c == ' ') ? pos + 1 : pos;
            auto is_symbol = [&](size_t i) { return i < end && flags_at(i) == 0; };
            if (is_symbol(first)) {
                size_t stop = first + 1;
                while (is_symbol(stop)) ++stop;
                while (is_newline(ascii_at(stop))) ++stop;
                take(stop);
                continue;
            }
        }
        // Whitespace: \s*[\r\n]+ | \s+(?!\S) | \s+
        size_t spaces = 0, after_last_newline = 0;
        while (flags_at(pos + spaces) == kWhitespace) {
            if (is_newline(ascii_at(pos + spaces))) after_last_newline = pos + spaces + 1;
            ++spaces;
        }
        if (after_last_newline > 0) {
            take(after_last_newline);  // \s*[\r\n]+: through the last newline of the run
            continue;
        }
        if (spaces > 1 && pos + spaces < end) {
            take(pos + spaces - 1);  // \s+(?!\S): leave the last space to the word after it
            continue;
        }
        if (spaces > 0) {
            take(pos + spaces);
            continue;
        }
        take(pos + 1);  // unreachable for well-classified input; keeps progress guaranteed
    }
}

}  // namespace detail

// Calls emit(std::string_view piece) for each pre-token of `text`, in order;
// the pieces concatenate to `text` exactly. Texts of 4 GiB or more are
// rejected (offsets are 32-bit).
template <class Emit>
void split_llama3(std::string_view text, SplitScratch& scratch, Emit&& emit) {
    if (text.size() >= (size_t(1) << 32))
        smol::detail::fail(ErrorKind::invalid_argument,
                           "tokenizer: text of " + std::to_string(text.size()) +
                               " bytes is too large to encode at once (limit 4 GiB)");
    auto& chars = scratch.chars;
    chars.clear();
    chars.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const unsigned char byte = static_cast<unsigned char>(text[pos]);
        if (byte < 0x80) {
            chars.push_back({uint32_t(pos), codepoint_flags(byte), byte});
            ++pos;
            continue;
        }
        const Utf8Char ch = decode_utf8(text.data() + pos, text.size() - pos);
        const uint8_t flags = ch.valid ? codepoint_flags(ch.codepoint) : detail::kInvalidByte;
        chars.push_back({uint32_t(pos), flags, detail::kNotAscii});
        pos += ch.length;
    }
    size_t run_begin = 0;
    for (size_t i = 0; i <= chars.size(); ++i) {
        if (i < chars.size() && chars[i].flags != detail::kInvalidByte) continue;
        if (i > run_begin) detail::split_llama3_run(text, chars, run_begin, i, emit);
        if (i < chars.size()) emit(text.substr(chars[i].offset, 1));  // an invalid byte alone
        run_begin = i + 1;
    }
}

// Convenience form: the pre-tokens as views into `text`.
inline std::vector<std::string_view> split_llama3(std::string_view text) {
    SplitScratch scratch;
    std::vector<std::string_view> pieces;
    split_llama3(text, scratch, [&](std::string_view piece) { pieces.push_back(piece); });
    return pieces;
}

}  // namespace unicode
SMOL_NAMESPACE_END
