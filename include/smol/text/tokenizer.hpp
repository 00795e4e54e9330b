// Tokenizer: the GGUF byte-level BPE vocabulary (tokenizer.ggml.model = gpt2)
// of SmolLM3 / Llama 3: text -> token ids and back.
//
// Encoding, step by step:
//   1. special tokens (parse_special): control, user-defined and unknown
//      tokens written in the text become single ids. Longer tokens win: as in
//      llama.cpp, each special token, longest first, claims its non-overlapping
//      occurrences (left to right) in the text not yet claimed;
//   2. the Llama-3 pre-tokenizer split (unicode.hpp) cuts each remaining run
//      of text into pre-tokens;
//   3. byte-level BPE: each byte of a pre-token starts as its byte token (GPT-2's
//      bytes_to_unicode maps the 256 bytes to printable code points; token
//      texts in the file are spelled in those code points), then the adjacent
//      pair with the lowest merge rank is merged, repeatedly (a heap over the
//      pairs of a linked list: O(n log n) per pre-token, not quadratic).
//      Pre type `llama-bpe` / `llama3` first looks the whole pre-token up in
//      the vocabulary and takes it as one id when present (llama.cpp's
//      "ignore_merges"); `smaug-bpe` always merges.
// Invalid UTF-8 never throws: each invalid byte is a pre-token of its own and
// encodes to its byte token (see unicode.hpp), so decode(encode(x)) == x for
// any bytes x.
//
// Decoding maps normal tokens' code points back to bytes; control,
// user-defined and unknown tokens decode to their text as written.
//
// Loading (text/detail/tokenizer_load.hpp) keeps views into the GGUF file
// (held by shared_ptr) and builds two open-addressing hash tables: token text
// -> id (detail/token_index.hpp), and (left id, right id) -> (merge rank,
// merged id) (detail/bpe.hpp, with the merge loop), plus a radix tree of the
// special texts (detail/special_tokens.hpp). A const Tokenizer is safe to use
// from many threads.
//
// Hostile files: every structure is at most a small constant times the file
// bytes it indexes (counts were checked against the file by the GGUF parser),
// the hash tables are seeded with a per-process secret, and a table in which
// some lookup would read more than detail::kMaxProbeSlots slots is rebuilt
// under another seed, then refused (ErrorKind::format). So no file can make
// loading or a lookup slower than that bound allows, or the special matcher
// larger than O(number of specials).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../detail/seeded_hash.hpp"
#include "../error.hpp"
#include "../gguf/gguf.hpp"
#include "detail/bpe.hpp"
#include "detail/byte_level.hpp"
#include "detail/special_tokens.hpp"
#include "detail/token_index.hpp"
#include "prompt_text.hpp"
#include "unicode.hpp"

SMOL_NAMESPACE_BEGIN

// tokenizer.ggml.token_type values.
enum class TokenType : uint8_t {
    undefined = 0,
    normal = 1,
    unknown = 2,
    control = 3,
    user_defined = 4,
    unused = 5,
    byte = 6,
};

namespace detail {

// The shape of a Tokenizer's load-time tables (Tokenizer::detail_table_stats),
// for tests and tools that check the bounds of the hostile-input rules.
struct TokenizerTableStats {
    size_t token_index_max_probe = 0;  // most slots one text -> id lookup reads
    size_t merge_index_max_probe = 0;  // most slots one pair -> merge lookup reads
    size_t special_count = 0;
    size_t special_matcher_nodes = 0;
    size_t special_matcher_bytes = 0;
    size_t heap_bytes = 0;  // all the tokenizer holds besides the file
};

}  // namespace detail

class Tokenizer {
public:
    // Reads the vocabulary of a GGUF file; the Tokenizer keeps the file alive.
    // Errors name the key at fault: missing (no tokens / merges / pre type),
    // unsupported (model other than gpt2, unknown pre type), format (counts
    // that disagree, a malformed merge, a special id out of range, token texts
    // or merges that collide under every hash seed). try_from_gguf returns
    // them as a value; from_gguf and the constructor throw them.
    static Expected<Tokenizer> try_from_gguf(std::shared_ptr<const gguf::File> file) {
        if (!file) return ErrorInfo{ErrorKind::invalid_argument, "tokenizer: null GGUF file"};
        Tokenizer tokenizer;
        tokenizer.file_ = std::move(file);
        SMOL_TRY(tokenizer.load());
        return tokenizer;
    }
    static Tokenizer from_gguf(std::shared_ptr<const gguf::File> file) {
        return smol::detail::value_or_fail(try_from_gguf(std::move(file)));
    }

    explicit Tokenizer(std::shared_ptr<const gguf::File> file)
        : Tokenizer(smol::detail::value_or_fail(try_from_gguf(std::move(file)))) {}

    // Text -> ids, appended to `out`. No BOS is added (see add_bos()).
    // parse_special: control / unknown tokens written in the text become
    // single ids; otherwise they are encoded as plain text. User-defined tokens
    // (added vocabulary that is not a control token) are matched either way,
    // as the reference engine does. Errors: a text of 4 GiB or more
    // (invalid_argument: the pre-tokenizer's offsets are 32-bit), and a byte of
    // the text that has no byte token in the vocabulary (format). try_encode
    // returns them (out then holds a partial encoding), encode throws them.
    Status try_encode(std::string_view text, bool parse_special, std::vector<int32_t>& out) const {
        if (text.size() >= (size_t(1) << 32))  // split_llama3's limit, checked here as a value
            return Status(ErrorKind::invalid_argument,
                          "tokenizer: text of " + std::to_string(text.size()) +
                              " bytes is too large to encode at once (limit 4 GiB)");
        Scratch scratch;
        scratch.use_cache = text.size() >= kCacheFromTextBytes;
        if (specials_.empty() || (!parse_special && !has_user_defined_)) {
            encode_plain(text, scratch, out);
            return missing_byte_error(scratch);
        }
        auto eligible = [&](int32_t id) {
            return parse_special || types_[size_t(id)] == uint8_t(TokenType::user_defined);
        };
        size_t done = 0;
        for (const auto& [start, id] : specials_.find(text, eligible)) {
            encode_plain(text.substr(done, start - done), scratch, out);
            out.push_back(id);
            done = start + texts_[size_t(id)].size();
        }
        encode_plain(text.substr(done), scratch, out);
        return missing_byte_error(scratch);
    }
    void encode(std::string_view text, bool parse_special, std::vector<int32_t>& out) const {
        smol::detail::ok_or_fail(try_encode(text, parse_special, out));
    }

    // A prompt whose special tokens count only where its writer put them
    // (text/prompt_text.hpp): inside prompt.markup, as try_encode with
    // parse_special matches them; everywhere else every byte is ordinary text
    // (user-defined tokens too, unlike parse_special = false), so contents
    // from outside never become control tokens. The text between the chosen
    // specials is split and merged as one run, exactly as try_encode does:
    // when no special's text lies in or across the non-markup bytes, the ids
    // are those of try_encode(prompt.text, true). Errors: try_encode's, and
    // markup ranges out of order or past the text (invalid_argument).
    Status try_encode_prompt(const PromptText& prompt, std::vector<int32_t>& out) const {
        const std::string_view text = prompt.text;
        if (text.size() >= (size_t(1) << 32))
            return Status(ErrorKind::invalid_argument,
                          "tokenizer: text of " + std::to_string(text.size()) +
                              " bytes is too large to encode at once (limit 4 GiB)");
        size_t previous_end = 0;
        for (const TextRange& range : prompt.markup) {
            if (range.begin < previous_end || range.end < range.begin || range.end > text.size())
                return Status(ErrorKind::invalid_argument,
                              "tokenizer: prompt markup ranges out of order or past the text");
            previous_end = range.end;
        }
        Scratch scratch;
        scratch.use_cache = text.size() >= kCacheFromTextBytes;
        size_t done = 0;
        if (!specials_.empty()) {
            const auto any_special = [](int32_t) { return true; };
            for (const TextRange& range : prompt.markup) {
                const std::string_view markup = text.substr(range.begin, range.end - range.begin);
                for (const auto& [start, id] : specials_.find(markup, any_special)) {
                    const size_t at = range.begin + start;
                    encode_plain(text.substr(done, at - done), scratch, out);
                    out.push_back(id);
                    done = at + texts_[size_t(id)].size();
                }
            }
        }
        encode_plain(text.substr(done), scratch, out);
        return missing_byte_error(scratch);
    }
    void encode_prompt(const PromptText& prompt, std::vector<int32_t>& out) const {
        smol::detail::ok_or_fail(try_encode_prompt(prompt, out));
    }
    std::vector<int32_t> encode_prompt(const PromptText& prompt) const {
        std::vector<int32_t> out;
        out.reserve(prompt.text.size() / 3 + 4);
        encode_prompt(prompt, out);
        return out;
    }
    std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const {
        std::vector<int32_t> out;
        out.reserve(text.size() / 3 + 4);
        encode(text, parse_special, out);
        return out;
    }

    // Ids -> bytes (not necessarily valid UTF-8: a sequence may stop inside a
    // character; see StreamDecoder for streaming). Special tokens (control,
    // user-defined, unknown) appear as their text, or not at all when
    // render_special is false. Throws invalid_argument on an id outside
    // [0, vocab_size()).
    std::string decode(const std::vector<int32_t>& ids, bool render_special = true) const {
        std::string out;
        out.reserve(ids.size() * 4);
        for (int32_t id : ids) {
            if (!render_special && is_special(id)) continue;
            append_piece(id, out);
        }
        return out;
    }

    // The bytes one token stands for.
    std::string token_to_piece(int32_t id) const {
        std::string out;
        append_piece(id, out);
        return out;
    }
    void append_piece(int32_t id, std::string& out) const {
        check_id(id);
        const std::string_view text = texts_[size_t(id)];
        if (renders_as_written(types_[size_t(id)])) {
            out += text;
            return;
        }
        const auto& map = detail::ByteLevelMap::get();
        for (size_t pos = 0; pos < text.size();) {
            const unicode::Utf8Char ch = unicode::decode_utf8(text.data() + pos, text.size() - pos);
            const int byte = (ch.valid && ch.codepoint < map.codepoint_to_byte.size())
                                 ? map.codepoint_to_byte[ch.codepoint]
                                 : -1;
            // A code point outside the byte-level alphabet (a hand-made vocabulary)
            // is passed through as its own UTF-8 rather than dropped.
            if (byte >= 0)
                out += char(byte);
            else
                out.append(text.data() + pos, ch.length);
            pos += ch.length;
        }
    }

    int32_t vocab_size() const noexcept { return int32_t(texts_.size()); }
    std::optional<int32_t> bos_id() const noexcept { return bos_; }
    std::optional<int32_t> eos_id() const noexcept { return eos_; }
    std::optional<int32_t> eot_id() const noexcept { return eot_; }
    std::optional<int32_t> pad_id() const noexcept { return pad_; }
    // tokenizer.ggml.add_bos_token (false when absent): whether callers should
    // put bos_id() in front of a prompt.
    bool add_bos() const noexcept { return add_bos_; }
    // tokenizer.ggml.pre as written in the file ("smaug-bpe", "llama-bpe", ...).
    std::string_view pre_type() const noexcept { return pre_type_; }

    // Ids that end generation: eos, eot, and whichever of <|im_end|>,
    // <|end_of_text|>, <|eot_id|>, <|endoftext|> the vocabulary has; no repeats.
    std::vector<int32_t> end_of_generation_ids() const { return end_ids_; }
    bool is_end_of_generation(int32_t id) const noexcept {
        return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
    }

    // The id whose stored text is exactly `text`. Special tokens are stored as
    // written ("<|im_end|>"); normal tokens in their byte-level spelling
    // (" Hello" is stored as "\u0120Hello").
    std::optional<int32_t> token_id(std::string_view text) const noexcept {
        const int32_t id = index_.find(text);
        if (id < 0) return std::nullopt;
        return id;
    }
    // The stored text of a token (byte-level spelling for normal tokens).
    std::string_view token_text(int32_t id) const {
        check_id(id);
        return texts_[size_t(id)];
    }
    TokenType token_type(int32_t id) const {
        check_id(id);
        return TokenType(types_[size_t(id)]);
    }
    bool is_control(int32_t id) const { return token_type(id) == TokenType::control; }
    // Control, user-defined or unknown: the tokens parse_special matches.
    bool is_special(int32_t id) const { return is_special_type(types_[size_t(check_id(id))]); }

    const gguf::File& file() const noexcept { return *file_; }

    // For tests and tools, not a stable API: the probe lengths and sizes that
    // the hostile-input rules bound (see the top of this file).
    detail::TokenizerTableStats detail_table_stats() const noexcept {
        detail::TokenizerTableStats stats;
        stats.token_index_max_probe = index_.max_probe();
        stats.merge_index_max_probe = merges_.max_probe();
        stats.special_count = specials_.size();
        stats.special_matcher_nodes = specials_.matcher_nodes();
        stats.special_matcher_bytes = specials_.matcher_bytes();
        stats.heap_bytes = texts_.capacity() * sizeof(std::string_view) + types_.capacity() +
                           index_.memory_bytes() + merges_.memory_bytes() +
                           specials_.memory_bytes() + end_ids_.capacity() * sizeof(int32_t) +
                           pre_type_.capacity();
        return stats;
    }

private:
    Tokenizer() = default;

    // Per-call buffers (so concurrent encodes on one Tokenizer share nothing).
    struct Scratch {
        unicode::SplitScratch split;
        detail::BpeScratch bpe;
        std::string spelled;    // a pre-token in byte-level spelling
        int missing_byte = -1;  // a byte of the text the vocabulary has no token for

        // Long texts repeat their words: remember each short pre-token's ids
        // (a span of cached_ids) for the rest of this call. Per call, so
        // concurrent encodes share nothing and need no lock.
        bool use_cache = false;
        detail::PieceCache cache;
    };
    static constexpr size_t kCacheFromTextBytes = 4096;  // shorter texts: not worth the map
    static constexpr size_t kCacheMaxPieceBytes = 64;
    static constexpr size_t kCacheMaxEntries = size_t(1) << 16;

    static bool is_special_type(uint8_t type) noexcept {
        return type == uint8_t(TokenType::control) || type == uint8_t(TokenType::user_defined) ||
               type == uint8_t(TokenType::unknown);
    }
    static bool renders_as_written(uint8_t type) noexcept { return is_special_type(type); }

    int32_t check_id(int32_t id) const {
        if (id < 0 || id >= int32_t(texts_.size()))
            smol::detail::fail(ErrorKind::invalid_argument,
                               "tokenizer: token id " + std::to_string(id) +
                                   " is outside the vocabulary [0, " +
                                   std::to_string(texts_.size()) + ")");
        return id;
    }

    // ---- loading (text/detail/tokenizer_load.hpp) ----

    Status load();
    Status load_types(const std::string& where);
    Status load_special_ids(const std::string& where);
    Status load_specials();
    Status load_merges(const std::string& where);
    Expected<bool> insert_merges(const std::vector<std::string_view>& merges,
                                 const std::string& where);

    // ---- encoding -------------------------------------------------------------

    void encode_plain(std::string_view text, Scratch& scratch, std::vector<int32_t>& out) const {
        if (text.empty() || scratch.missing_byte >= 0) return;
        unicode::split_llama3(text, scratch.split,
                              [&](std::string_view piece) { encode_piece(piece, scratch, out); });
    }

    // A vocabulary without all 256 byte tokens loads (a hand-made one may
    // lack some) but cannot encode a text that needs a missing one: encoding
    // stops at the first such byte and reports it here.
    Status missing_byte_error(const Scratch& scratch) const {
        if (scratch.missing_byte < 0) return {};
        return Status(ErrorKind::format, "tokenizer: " + file_->source() +
                                             ": the vocabulary has no token for byte " +
                                             std::to_string(scratch.missing_byte) +
                                             " (a byte-level BPE vocabulary needs all 256)");
    }

    // The byte token of each byte of `piece` into the BPE symbols; false (and
    // scratch.missing_byte set) at a byte the vocabulary has no token for.
    bool byte_symbols(std::string_view piece, Scratch& scratch) const {
        auto& symbols = scratch.bpe.symbols;
        symbols.resize(piece.size());
        for (size_t i = 0; i < piece.size(); ++i) {
            const unsigned char byte = static_cast<unsigned char>(piece[i]);
            symbols[i].id = byte_tokens_[byte];
            if (symbols[i].id < 0) {
                scratch.missing_byte = byte;
                return false;
            }
        }
        return true;
    }

    // BPE over one pre-token.
    void encode_piece(std::string_view piece, Scratch& scratch, std::vector<int32_t>& out) const {
        if (scratch.missing_byte >= 0) return;
        if (piece.size() == 1) {
            if (byte_symbols(piece, scratch)) out.push_back(scratch.bpe.symbols[0].id);
            return;
        }
        const bool cacheable = scratch.use_cache && piece.size() <= kCacheMaxPieceBytes;
        uint64_t piece_hash = 0;
        if (cacheable) {
            piece_hash = index_.hasher()(piece);
            if (scratch.cache.append_if_cached(piece, piece_hash, out)) return;
        }
        const size_t out_start = out.size();
        int32_t whole = -1;
        if (whole_word_first_) {
            const auto& map = detail::ByteLevelMap::get();
            scratch.spelled.clear();
            for (unsigned char c : piece) scratch.spelled += map.byte_to_utf8[c];
            whole = index_.find(scratch.spelled);
        }
        if (whole >= 0) {
            out.push_back(whole);
        } else {
            if (!byte_symbols(piece, scratch)) return;
            detail::bpe_merge(merges_, scratch.bpe, piece.size(), out);
        }
        if (cacheable && scratch.cache.size() < kCacheMaxEntries)
            scratch.cache.insert(piece, piece_hash, out.data() + out_start, out.size() - out_start);
    }

    std::shared_ptr<const gguf::File> file_;
    std::vector<std::string_view> texts_;  // token texts, views into the file
    std::vector<uint8_t> types_;           // TokenType per token
    detail::TokenIndex index_;
    detail::MergeIndex merges_;
    std::array<int32_t, 256> byte_tokens_{};  // byte -> its token, -1 if the vocabulary lacks it
    detail::SpecialTokens specials_;          // longest text first
    std::vector<int32_t> end_ids_;
    std::string pre_type_;
    bool whole_word_first_ = false;
    bool add_bos_ = false;
    bool has_user_defined_ = false;  // any user-defined token (matched even without parse_special)
    std::optional<int32_t> bos_, eos_, eot_, pad_;
};

SMOL_NAMESPACE_END

// The loading functions declared above.
#include "detail/tokenizer_load.hpp"
