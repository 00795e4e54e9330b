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
// Loading keeps views into the GGUF file (held by shared_ptr) and builds two
// open-addressing hash tables: token text -> id, and (left id, right id) ->
// (merge rank, merged id). A const Tokenizer is safe to use from many threads.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../gguf/gguf.hpp"
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

// FNV-1a, in parts so that the hash of a concatenation a + b can be formed
// from a's state; a final mix spreads the low bits for power-of-two tables.
constexpr uint64_t kFnvStart = 1469598103934665603ull;
inline uint64_t fnv_extend(uint64_t state, std::string_view s) noexcept {
    for (unsigned char c : s) state = (state ^ c) * 1099511628211ull;
    return state;
}
inline uint64_t fnv_finish(uint64_t state) noexcept { return state ^ (state >> 29); }
inline uint64_t hash_bytes(std::string_view s) noexcept {
    return fnv_finish(fnv_extend(kFnvStart, s));
}

inline uint64_t hash_u64(uint64_t k) noexcept {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb3fe1a85ec53ull;
    return k ^ (k >> 33);
}

inline size_t table_capacity_for(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;  // load factor <= 0.5
    return capacity;
}

// Token text -> id: open addressing with linear probing. A slot holds the
// text's place in the file (32-bit offset from the first token's bytes: the
// texts of one GGUF string array lie within it), its length and a hash tag, so
// a probe touches one slot and, on a likely match, the text itself.
class TokenIndex {
public:
    void build(const std::vector<std::string_view>& texts) {
        slots_.assign(table_capacity_for(texts.size()), Slot{0, 0, 0, -1});
        mask_ = slots_.size() - 1;
        base_ = texts.empty() ? nullptr : texts.front().data();
        for (size_t id = 0; id < texts.size(); ++id) {
            const std::string_view text = texts[id];
            const auto offset = uint64_t(text.data() - base_);
            if (text.data() < base_ || offset + text.size() >= (uint64_t(1) << 32))
                smol::detail::fail(ErrorKind::internal,
                                   "tokenizer: token texts do not lie in one block of the file");
            const uint64_t h = hash_bytes(text);
            size_t i = size_t(h) & mask_;
            // A repeated text maps to its last id (as llama.cpp's map does).
            while (slots_[i].id >= 0 && !matches(slots_[i], text, uint32_t(h >> 32)))
                i = (i + 1) & mask_;
            slots_[i] = Slot{uint32_t(offset), uint32_t(text.size()), uint32_t(h >> 32), int32_t(id)};
        }
    }
    int32_t find(std::string_view text) const noexcept { return find(text, hash_bytes(text)); }
    // With the text's hash_bytes() already computed (see prefetch()).
    int32_t find(std::string_view text, uint64_t hash) const noexcept {
        if (slots_.empty()) return -1;
        for (size_t i = size_t(hash) & mask_;; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.id < 0) return -1;
            if (matches(s, text, uint32_t(hash >> 32))) return s.id;
        }
    }
    // The id of the text first + second (hash: of the concatenation).
    int32_t find_concat(std::string_view first, std::string_view second,
                        uint64_t hash) const noexcept {
        if (slots_.empty()) return -1;
        const uint32_t tag = uint32_t(hash >> 32);
        for (size_t i = size_t(hash) & mask_;; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.id < 0) return -1;
            if (s.tag == tag && s.size == first.size() + second.size() &&
                equal(base_ + s.offset, first) && equal(base_ + s.offset + first.size(), second))
                return s.id;
        }
    }
    // Starts loading the first slot a lookup of this hash reads.
    void prefetch(uint64_t hash) const noexcept {
#if defined(__GNUC__) || defined(__clang__)
        if (!slots_.empty()) __builtin_prefetch(&slots_[size_t(hash) & mask_]);
#else
        (void)hash;
#endif
    }

private:
    struct Slot {
        uint32_t offset;  // of the text, from base_
        uint32_t size;
        uint32_t tag;     // high half of the hash: most mismatches fail without a compare
        int32_t id;       // -1: empty
    };
    bool matches(const Slot& s, std::string_view text, uint32_t tag) const noexcept {
        return s.tag == tag && s.size == text.size() && equal(base_ + s.offset, text);
    }
    static bool equal(const char* stored, std::string_view text) noexcept {
        for (size_t k = 0; k < text.size(); ++k)  // short texts: a loop beats a memcmp call
            if (stored[k] != text[k]) return false;
        return true;
    }
    const char* base_ = nullptr;  // into the GGUF file, which the Tokenizer keeps alive
    std::vector<Slot> slots_;
    size_t mask_ = 0;
};

// (left id, right id) -> (rank, merged id).
class MergeIndex {
public:
    struct Merge {
        uint32_t rank;
        int32_t merged;
    };
    void reserve(size_t count) {
        // Load factor up to 0.75: the table is probed ~3 times per byte encoded,
        // so it pays to keep it small enough to stay in cache (8 MiB for 280k).
        size_t capacity = 16;
        while (capacity * 3 < count * 4) capacity *= 2;
        slots_.assign(capacity, Slot{kEmpty, {0, -1}});
        mask_ = slots_.size() - 1;
    }
    // Keeps the first (lowest-rank) merge of a pair.
    void insert(int32_t left, int32_t right, Merge merge) {
        const uint64_t key = make_key(left, right);
        for (size_t i = size_t(hash_u64(key)) & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return;
            if (slots_[i].key == kEmpty) {
                slots_[i] = Slot{key, merge};
                return;
            }
        }
    }
    void prefetch(int32_t left, int32_t right) const noexcept {
#if defined(__GNUC__) || defined(__clang__)
        __builtin_prefetch(&slots_[size_t(hash_u64(make_key(left, right))) & mask_]);
#else
        (void)left;
        (void)right;
#endif
    }
    const Merge* find(int32_t left, int32_t right) const noexcept {
        const uint64_t key = make_key(left, right);
        for (size_t i = size_t(hash_u64(key)) & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return &slots_[i].merge;
            if (slots_[i].key == kEmpty) return nullptr;
        }
    }

private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);  // ids are >= 0, so no real key is all ones
    static uint64_t make_key(int32_t left, int32_t right) noexcept {
        return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
    }
    struct Slot {
        uint64_t key;
        Merge merge;
    };
    std::vector<Slot> slots_;
    size_t mask_ = 0;
};

// Pre-token -> ids for the duration of one encode call (keys are views into
// the caller's text). Open addressing; grows at load 0.5.
class PieceCache {
public:
    size_t size() const noexcept { return count_; }

    // Appends the cached ids of `piece` to out; false if it is not cached.
    bool append_if_cached(std::string_view piece, uint64_t hash, std::vector<int32_t>& out) const {
        if (slots_.empty()) return false;
        for (size_t i = size_t(hash) & mask_;; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (!s.data) return false;
            if (s.hash == hash && std::string_view(s.data, s.size) == piece) {
                out.insert(out.end(), ids_.begin() + s.ids_begin,
                           ids_.begin() + s.ids_begin + s.ids_count);
                return true;
            }
        }
    }

    void insert(std::string_view piece, uint64_t hash, const int32_t* ids, size_t count) {
        if ((count_ + 1) * 2 > slots_.size()) grow();
        size_t i = size_t(hash) & mask_;
        while (slots_[i].data) i = (i + 1) & mask_;
        slots_[i] = Slot{piece.data(), uint32_t(piece.size()), uint32_t(ids_.size()),
                         uint32_t(count), hash};
        ids_.insert(ids_.end(), ids, ids + count);
        ++count_;
    }

private:
    struct Slot {
        const char* data;  // nullptr: empty
        uint32_t size;
        uint32_t ids_begin, ids_count;
        uint64_t hash;
    };
    void grow() {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{nullptr, 0, 0, 0, 0});
        mask_ = slots_.size() - 1;
        for (const Slot& s : old) {
            if (!s.data) continue;
            size_t i = size_t(s.hash) & mask_;
            while (slots_[i].data) i = (i + 1) & mask_;
            slots_[i] = s;
        }
    }
    std::vector<Slot> slots_;
    std::vector<int32_t> ids_;
    size_t mask_ = 0;
    size_t count_ = 0;
};

}  // namespace detail

class Tokenizer {
public:
    // Reads the vocabulary of a GGUF file; the Tokenizer keeps the file alive.
    // Throws smol::Error naming the key at fault: missing (no tokens / merges /
    // pre type), unsupported (model other than gpt2, unknown pre type), format
    // (counts that disagree, a malformed merge, a special id out of range).
    static Tokenizer from_gguf(std::shared_ptr<const gguf::File> file) {
        return Tokenizer(std::move(file));
    }

    explicit Tokenizer(std::shared_ptr<const gguf::File> file) : file_(std::move(file)) {
        if (!file_) smol::detail::fail(ErrorKind::invalid_argument, "tokenizer: null GGUF file");
        load();
    }

    // Text -> ids, appended to `out`. No BOS is added (see add_bos()).
    // parse_special: control / unknown tokens written in the text become
    // single ids; otherwise they are encoded as plain text. User-defined tokens
    // (added vocabulary that is not a control token) are matched either way,
    // as the reference engine does.
    void encode(std::string_view text, bool parse_special, std::vector<int32_t>& out) const {
        Scratch scratch;
        scratch.use_cache = text.size() >= kCacheFromTextBytes;
        if (specials_.empty() || (!parse_special && !has_user_defined_)) {
            encode_plain(text, scratch, out);
            return;
        }
        size_t done = 0;
        for (const auto& [start, id] : find_specials(text, parse_special)) {
            encode_plain(text.substr(done, start - done), scratch, out);
            out.push_back(id);
            done = start + texts_[size_t(id)].size();
        }
        encode_plain(text.substr(done), scratch, out);
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
            if (byte >= 0) out += char(byte);
            else out.append(text.data() + pos, ch.length);
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

private:
    // Per-call buffers (so concurrent encodes on one Tokenizer share nothing).
    struct Symbol {
        int32_t id;    // -1 once merged into its left neighbour
        int32_t prev;  // index of the previous live symbol, -1 at the start
        int32_t next;  // index of the next live symbol, -1 at the end
    };
    struct Candidate {
        uint32_t rank;
        int32_t left;  // symbol index of the pair's left side
        int32_t left_id, right_id, merged;
    };
    struct Scratch {
        unicode::SplitScratch split;
        std::vector<Symbol> symbols;
        std::vector<Candidate> heap;
        std::string spelled;  // a pre-token in byte-level spelling
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

    // ---- loading ------------------------------------------------------------

    void load() {
        const gguf::File& f = *file_;
        const std::string where = "tokenizer: " + f.source() + ": ";

        const auto model = f.find<std::string>("tokenizer.ggml.model");
        if (!model)
            smol::detail::fail(ErrorKind::missing, where + "missing key 'tokenizer.ggml.model'");
        if (*model != "gpt2")
            smol::detail::fail(ErrorKind::unsupported,
                               where + "tokenizer.ggml.model '" + *model +
                                   "' is not supported (smol reads byte-level BPE, 'gpt2')");
        const auto pre = f.find<std::string>("tokenizer.ggml.pre");
        if (!pre) smol::detail::fail(ErrorKind::missing, where + "missing key 'tokenizer.ggml.pre'");
        pre_type_ = *pre;
        if (pre_type_ == "smaug-bpe") {
            whole_word_first_ = false;
        } else if (pre_type_ == "llama-bpe" || pre_type_ == "llama3" || pre_type_ == "llama-v3") {
            whole_word_first_ = true;
        } else {
            smol::detail::fail(ErrorKind::unsupported,
                               where + "tokenizer.ggml.pre '" + pre_type_ +
                                   "' is not supported (smol implements smaug-bpe, llama-bpe, "
                                   "llama3)");
        }

        texts_ = f.get<std::vector<std::string_view>>("tokenizer.ggml.tokens");
        if (texts_.empty())
            smol::detail::fail(ErrorKind::format, where + "tokenizer.ggml.tokens is empty");
        if (texts_.size() >= size_t(INT32_MAX))
            smol::detail::fail(ErrorKind::format, where + "tokenizer.ggml.tokens is too large");
        const size_t n = texts_.size();

        if (const gguf::Value* v = f.find_value("tokenizer.ggml.token_type")) {
            if (v->type() != gguf::ValueType::array)
                smol::detail::fail(ErrorKind::type,
                                   where + "tokenizer.ggml.token_type is not an array");
            if (v->as_array().size() != n)
                smol::detail::fail(ErrorKind::format,
                                   where + "tokenizer.ggml.token_type has " +
                                       std::to_string(v->as_array().size()) +
                                       " entries but tokenizer.ggml.tokens has " +
                                       std::to_string(n));
            const auto raw = f.get<std::vector<int32_t>>("tokenizer.ggml.token_type");
            types_.resize(n);
            for (size_t i = 0; i < n; ++i) {
                if (raw[i] < 0 || raw[i] > 6)
                    smol::detail::fail(ErrorKind::format,
                                       where + "tokenizer.ggml.token_type[" + std::to_string(i) +
                                           "] = " + std::to_string(raw[i]) + " (expected 0..6)");
                types_[i] = uint8_t(raw[i]);
            }
        } else {
            types_.assign(n, uint8_t(TokenType::normal));
        }

        index_.build(texts_);

        // Byte tokens: the starting symbols of BPE.
        const auto& map = detail::ByteLevelMap::get();
        for (int b = 0; b < 256; ++b) byte_tokens_[size_t(b)] = index_.find(map.byte_to_utf8[size_t(b)]);

        load_merges(where);

        auto special_id = [&](const char* key) -> std::optional<int32_t> {
            const auto id = f.find<int64_t>(key);
            if (!id) return std::nullopt;
            if (*id < 0 || *id >= int64_t(n))
                smol::detail::fail(ErrorKind::format, where + key + " = " + std::to_string(*id) +
                                                          " is outside the vocabulary of " +
                                                          std::to_string(n) + " tokens");
            return int32_t(*id);
        };
        bos_ = special_id("tokenizer.ggml.bos_token_id");
        eos_ = special_id("tokenizer.ggml.eos_token_id");
        eot_ = special_id("tokenizer.ggml.eot_token_id");
        pad_ = special_id("tokenizer.ggml.padding_token_id");
        add_bos_ = f.find<bool>("tokenizer.ggml.add_bos_token").value_or(false);

        end_ids_.clear();
        auto add_end = [&](std::optional<int32_t> id) {
            if (id && !is_end_of_generation(*id)) end_ids_.push_back(*id);
        };
        add_end(eos_);
        add_end(eot_);
        for (const char* text : {"<|im_end|>", "<|end_of_text|>", "<|eot_id|>", "<|endoftext|>"})
            add_end(token_id(text));

        // Special tokens, longest first (ties by id), for step 1 of encode.
        specials_.clear();
        special_first_byte_.fill(false);
        has_user_defined_ = false;
        for (size_t id = 0; id < n; ++id) {
            if (!is_special_type(types_[id]) || texts_[id].empty()) continue;
            has_user_defined_ |= types_[id] == uint8_t(TokenType::user_defined);
            specials_.push_back(int32_t(id));
            special_first_byte_[static_cast<unsigned char>(texts_[id][0])] = true;
        }
        std::stable_sort(specials_.begin(), specials_.end(), [&](int32_t a, int32_t b) {
            return texts_[size_t(a)].size() > texts_[size_t(b)].size();
        });
        // A byte trie of the special texts finds every occurrence at a
        // position in one walk.
        special_trie_.assign(1, TrieNode{});
        for (size_t order = 0; order < specials_.size(); ++order) {
            int32_t node = 0;
            for (unsigned char c : texts_[size_t(specials_[order])]) {
                int32_t child = trie_child(node, c);
                if (child < 0) {
                    child = int32_t(special_trie_.size());
                    special_trie_[size_t(node)].children.push_back({c, child});
                    special_trie_.push_back(TrieNode{});
                }
                node = child;
            }
            // A text listed twice (two ids) keeps its first, longest-first order.
            if (special_trie_[size_t(node)].order < 0) special_trie_[size_t(node)].order = int32_t(order);
        }
    }

    void load_merges(const std::string& where) {
        const gguf::Value* v = file_->find_value("tokenizer.ggml.merges");
        if (!v) smol::detail::fail(ErrorKind::missing, where + "missing key 'tokenizer.ggml.merges'");
        const auto merges = file_->get<std::vector<std::string_view>>("tokenizer.ggml.merges");
        merges_.reserve(merges.size());
        // Three table lookups per merge, 280k merges: memory-bound. Work in
        // blocks: split and hash a block, prefetch its slots, then resolve it,
        // so the cache misses of a block overlap instead of queueing.
        struct Parsed {
            std::string_view left, right;
            uint64_t left_hash, right_hash, joined_hash;
            int32_t left_id, right_id, merged;
        };
        constexpr size_t kBlock = 32;
        Parsed block[kBlock];
        for (size_t first = 0; first < merges.size(); first += kBlock) {
            const size_t count = std::min(kBlock, merges.size() - first);
            for (size_t k = 0; k < count; ++k) {
                const size_t rank = first + k;
                const std::string_view m = merges[rank];
                // "left right": byte-level spellings never contain a space (0x20
                // is spelled U+0120), so the one space separates the two sides.
                const size_t space = m.find(' ');
                if (space == std::string_view::npos || space == 0 || space + 1 == m.size() ||
                    m.find(' ', space + 1) != std::string_view::npos)
                    smol::detail::fail(ErrorKind::format,
                                       where + "tokenizer.ggml.merges[" + std::to_string(rank) +
                                           "] = '" + std::string(m.substr(0, 64)) +
                                           "' is not of the form 'left right'");
                Parsed& p = block[k];
                p.left = m.substr(0, space);
                p.right = m.substr(space + 1);
                const uint64_t left_state = detail::fnv_extend(detail::kFnvStart, p.left);
                p.left_hash = detail::fnv_finish(left_state);
                p.right_hash = detail::hash_bytes(p.right);
                p.joined_hash = detail::fnv_finish(detail::fnv_extend(left_state, p.right));
                index_.prefetch(p.left_hash);
                index_.prefetch(p.right_hash);
                index_.prefetch(p.joined_hash);
            }
            for (size_t k = 0; k < count; ++k) {
                Parsed& p = block[k];
                p.left_id = index_.find(p.left, p.left_hash);
                p.right_id = index_.find(p.right, p.right_hash);
                p.merged = index_.find_concat(p.left, p.right, p.joined_hash);
                if (p.left_id >= 0 && p.right_id >= 0) merges_.prefetch(p.left_id, p.right_id);
            }
            for (size_t k = 0; k < count; ++k) {
                const Parsed& p = block[k];
                // A merge whose sides or result are not tokens can never apply to
                // token symbols: skip it (real vocabularies have none).
                if (p.left_id < 0 || p.right_id < 0 || p.merged < 0) continue;
                merges_.insert(p.left_id, p.right_id, {uint32_t(first + k), p.merged});
            }
        }
    }

    // ---- encoding -------------------------------------------------------------

    // The special tokens in `text` as (byte offset, id), in text order, chosen
    // as llama.cpp does: each token, longest first, claims its leftmost
    // non-overlapping occurrences within the text no longer token has claimed.
    // Without parse_special only user-defined tokens are candidates.
    std::vector<std::pair<size_t, int32_t>> find_specials(std::string_view text,
                                                          bool parse_special) const {
        struct Occurrence {
            int32_t order;  // index in specials_ (longest first)
            size_t start;
        };
        std::vector<Occurrence> found;
        for (size_t pos = 0; pos < text.size(); ++pos) {
            if (!special_first_byte_[static_cast<unsigned char>(text[pos])]) continue;
            int32_t node = 0;
            for (size_t k = pos; k < text.size(); ++k) {
                node = trie_child(node, static_cast<unsigned char>(text[k]));
                if (node < 0) break;
                const int32_t order = special_trie_[size_t(node)].order;
                if (order >= 0 &&
                    (parse_special || types_[size_t(specials_[size_t(order)])] ==
                                          uint8_t(TokenType::user_defined)))
                    found.push_back({order, pos});
            }
        }
        std::vector<std::pair<size_t, int32_t>> chosen;  // (start, id) in text order
        if (found.empty()) return chosen;
        auto length_of = [&](int32_t order) { return texts_[size_t(specials_[size_t(order)])].size(); };
        // Found in text order. Usually no two occurrences overlap, and then
        // every one of them is claimed whatever the order of claiming.
        bool overlap = false;
        for (size_t i = 1; i < found.size() && !overlap; ++i)
            overlap = found[i].start < found[i - 1].start + length_of(found[i - 1].order);
        if (!overlap) {
            chosen.reserve(found.size());
            for (const Occurrence& o : found) chosen.push_back({o.start, specials_[size_t(o.order)]});
            return chosen;
        }
        std::sort(found.begin(), found.end(), [](const Occurrence& a, const Occurrence& b) {
            return a.order != b.order ? a.order < b.order : a.start < b.start;
        });
        std::map<size_t, std::pair<size_t, int32_t>> claimed;  // start -> (end, id)
        int32_t current = -1;
        size_t current_end = 0;  // end of the last occurrence this token claimed
        for (const Occurrence& o : found) {
            if (o.order != current) current = o.order, current_end = 0;
            const size_t end = o.start + length_of(o.order);
            if (o.start < current_end) continue;
            // Free if it overlaps neither neighbour among the claimed spans.
            auto next = claimed.lower_bound(o.start);
            if (next != claimed.end() && next->first < end) continue;
            if (next != claimed.begin() && std::prev(next)->second.first > o.start) continue;
            claimed.emplace_hint(next, o.start, std::make_pair(end, specials_[size_t(o.order)]));
            current_end = end;
        }
        chosen.reserve(claimed.size());
        for (const auto& [start, span] : claimed) chosen.push_back({start, span.second});
        return chosen;
    }

    void encode_plain(std::string_view text, Scratch& scratch, std::vector<int32_t>& out) const {
        if (text.empty()) return;
        unicode::split_llama3(text, scratch.split,
                              [&](std::string_view piece) { encode_piece(piece, scratch, out); });
    }

    int32_t byte_token(unsigned char byte) const {
        const int32_t id = byte_tokens_[byte];
        if (id < 0)
            smol::detail::fail(ErrorKind::format,
                               "tokenizer: " + file_->source() +
                                   ": the vocabulary has no token for byte " + std::to_string(byte) +
                                   " (a byte-level BPE vocabulary needs all 256)");
        return id;
    }

    // BPE over one pre-token.
    void encode_piece(std::string_view piece, Scratch& scratch, std::vector<int32_t>& out) const {
        if (piece.size() == 1) {
            out.push_back(byte_token(static_cast<unsigned char>(piece[0])));
            return;
        }
        const bool cacheable = scratch.use_cache && piece.size() <= kCacheMaxPieceBytes;
        uint64_t piece_hash = 0;
        if (cacheable) {
            piece_hash = detail::hash_bytes(piece);
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
        if (whole >= 0) out.push_back(whole);
        else merge_pairs(piece, scratch, out);
        if (cacheable && scratch.cache.size() < kCacheMaxEntries)
            scratch.cache.insert(piece, piece_hash, out.data() + out_start, out.size() - out_start);
    }

    // The BPE merge loop proper.
    void merge_pairs(std::string_view piece, Scratch& scratch, std::vector<int32_t>& out) const {
        auto& symbols = scratch.symbols;
        auto& heap = scratch.heap;
        symbols.resize(piece.size());
        heap.clear();
        const int32_t count = int32_t(piece.size());
        for (int32_t i = 0; i < count; ++i)
            symbols[size_t(i)] = {byte_token(static_cast<unsigned char>(piece[size_t(i)])), i - 1,
                                  i + 1 < count ? i + 1 : -1};

        // Min-heap on (rank, left position): the lowest rank merges first, the
        // leftmost of equal ranks first (as BPE applies a merge left to right).
        auto later = [](const Candidate& a, const Candidate& b) {
            return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
        };
        auto consider = [&](int32_t left) {
            if (left < 0) return;
            const int32_t right = symbols[size_t(left)].next;
            if (right < 0) return;
            const int32_t left_id = symbols[size_t(left)].id, right_id = symbols[size_t(right)].id;
            if (const auto* m = merges_.find(left_id, right_id)) {
                heap.push_back({m->rank, left, left_id, right_id, m->merged});
                std::push_heap(heap.begin(), heap.end(), later);
            }
        };
        for (int32_t i = 0; i + 1 < count; ++i) consider(i);

        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), later);
            const Candidate c = heap.back();
            heap.pop_back();
            Symbol& left = symbols[size_t(c.left)];
            // Stale if either side has changed since the pair was queued. A
            // symbol's id only ever grows into a longer token, so equal ids at
            // the same positions mean the same pair.
            if (left.id != c.left_id || left.next < 0) continue;
            Symbol& right = symbols[size_t(left.next)];
            if (right.id != c.right_id) continue;
            left.id = c.merged;
            right.id = -1;
            left.next = right.next;
            if (right.next >= 0) symbols[size_t(right.next)].prev = c.left;
            consider(left.prev);
            consider(c.left);
        }
        for (int32_t i = 0; i >= 0; i = symbols[size_t(i)].next) out.push_back(symbols[size_t(i)].id);
    }

    std::shared_ptr<const gguf::File> file_;
    std::vector<std::string_view> texts_;  // token texts, views into the file
    std::vector<uint8_t> types_;           // TokenType per token
    detail::TokenIndex index_;
    detail::MergeIndex merges_;
    std::array<int32_t, 256> byte_tokens_{};  // byte -> its token, -1 if the vocabulary lacks it
    std::vector<int32_t> specials_;           // special token ids, longest text first
    std::array<bool, 256> special_first_byte_{};
    struct TrieNode {
        std::vector<std::pair<unsigned char, int32_t>> children;  // (byte, node)
        int32_t order = -1;  // index in specials_ of the text ending here, or -1
    };
    std::vector<TrieNode> special_trie_;  // node 0 is the root
    int32_t trie_child(int32_t node, unsigned char c) const noexcept {
        for (const auto& [byte, child] : special_trie_[size_t(node)].children)
            if (byte == c) return child;
        return -1;
    }
    std::vector<int32_t> end_ids_;
    std::string pre_type_;
    bool whole_word_first_ = false;
    bool add_bos_ = false;
    bool has_user_defined_ = false;  // any user-defined token (matched even without parse_special)
    std::optional<int32_t> bos_, eos_, eot_, pad_;
};

SMOL_NAMESPACE_END
