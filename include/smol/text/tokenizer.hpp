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
// (merge rank, merged id), plus a radix tree of the special texts. A const
// Tokenizer is safe to use from many threads.
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
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../detail/seeded_hash.hpp"
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

inline size_t table_capacity_for(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;  // load factor <= 0.5
    return capacity;
}

// Token text -> id: open addressing with linear probing. A slot holds the
// text's place in the file (32-bit offset from the first token's bytes: the
// texts of one GGUF string array lie within it), its length and a hash tag, so
// a probe touches one slot and, on a likely match, the text itself.
// The texts come from the file, so the hash is seeded (seeded_hash.hpp) and a
// layout whose longest lookup exceeds kMaxProbeSlots is rebuilt under another
// seed.
class TokenIndex {
public:
    // False when every seed tried leaves a lookup longer than kMaxProbeSlots:
    // texts that collide whatever the seed.
    bool build(const std::vector<std::string_view>& texts) {
        base_ = texts.empty() ? nullptr : texts.front().data();
        for (const std::string_view text : texts)
            if (text.data() < base_ ||
                uint64_t(text.data() - base_) + text.size() >= (uint64_t(1) << 32))
                smol::detail::fail(ErrorKind::internal,
                                   "tokenizer: token texts do not lie in one block of the file");
        for (unsigned attempt = 0; attempt < kHashSeedAttempts; ++attempt) {
            hash_ = SeededTextHash(table_hash_seed(attempt));
            if (try_build(texts)) return true;
        }
        return false;
    }
    // The hash that find() and find_concat() take.
    const SeededTextHash& hasher() const noexcept { return hash_; }
    // The most slots one lookup can read (see longest_probe).
    size_t max_probe() const noexcept { return max_probe_; }
    size_t memory_bytes() const noexcept { return slots_.capacity() * sizeof(Slot); }

    int32_t find(std::string_view text) const noexcept { return find(text, hash_(text)); }
    // With the text's hasher()(text) already computed (see prefetch()).
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
    // False as soon as one insert probes past the bound (so a hostile set
    // costs at most n * kMaxProbeSlots probes per seed, not n^2).
    bool try_build(const std::vector<std::string_view>& texts) {
        slots_.assign(table_capacity_for(texts.size()), Slot{0, 0, 0, -1});
        mask_ = slots_.size() - 1;
        // In blocks: hash a block and prefetch its slots, then insert it, so
        // that the cache misses of a block overlap.
        constexpr size_t kBlock = 16;
        uint64_t hashes[kBlock];
        for (size_t first = 0; first < texts.size(); first += kBlock) {
            const size_t count = std::min(kBlock, texts.size() - first);
            for (size_t k = 0; k < count; ++k) {
                hashes[k] = hash_(texts[first + k]);
                prefetch(hashes[k]);
            }
            for (size_t k = 0; k < count; ++k)
                if (!insert(texts[first + k], hashes[k], int32_t(first + k))) return false;
        }
        max_probe_ = longest_probe(slots_.size(), [&](size_t i) { return slots_[i].id >= 0; });
        return max_probe_ <= kMaxProbeSlots;
    }
    bool insert(std::string_view text, uint64_t hash, int32_t id) {
        size_t i = size_t(hash) & mask_, probes = 1;
        // A repeated text maps to its last id (as llama.cpp's map does).
        while (slots_[i].id >= 0 && !matches(slots_[i], text, uint32_t(hash >> 32))) {
            i = (i + 1) & mask_;
            if (++probes > kMaxProbeSlots) return false;
        }
        slots_[i] =
            Slot{uint32_t(text.data() - base_), uint32_t(text.size()), uint32_t(hash >> 32), id};
        return true;
    }
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
    SeededTextHash hash_;
    size_t max_probe_ = 0;
};

// (left id, right id) -> (merge rank, merged id). Keys come from the file, so
// the slot is a seeded mix of the key, and a table whose longest lookup
// exceeds kMaxProbeSlots is refilled under another seed (see
// Tokenizer::load_merges).
class MergeIndex {
public:
    struct Merge {
        uint32_t rank;
        int32_t merged;
    };
    // Empties the table for `count` merges, hashed under the seed of `attempt`.
    void reset(size_t count, unsigned attempt) {
        // Load factor up to 0.6: the table is probed ~3 times per byte encoded,
        // so it pays to keep it small enough to stay in cache (8 MiB for 280k);
        // 0.75 would be smaller still but makes the longest probe of a random
        // layout ~300 slots (see kMaxProbeSlots).
        size_t capacity = 16;
        while (capacity * 3 < count * 5) capacity *= 2;
        slots_.assign(capacity, Slot{kEmpty, {0, -1}});
        mask_ = slots_.size() - 1;
        seed_ = table_hash_seed(attempt);
        max_probe_ = 0;
    }
    // Keeps the first (lowest-rank) merge of a pair. False when the insert
    // probed past kMaxProbeSlots: the caller starts over under another seed.
    bool insert(int32_t left, int32_t right, Merge merge) {
        const uint64_t key = make_key(left, right);
        size_t probes = 1;
        for (size_t i = slot_of(key);; i = (i + 1) & mask_, ++probes) {
            if (probes > kMaxProbeSlots) return false;
            if (slots_[i].key == key) return true;
            if (slots_[i].key == kEmpty) {
                slots_[i] = Slot{key, merge};
                return true;
            }
        }
    }
    // After the inserts: measures the longest lookup; false if over the bound.
    bool seal() {
        max_probe_ =
            longest_probe(slots_.size(), [&](size_t i) { return slots_[i].key != kEmpty; });
        return max_probe_ <= kMaxProbeSlots;
    }
    size_t max_probe() const noexcept { return max_probe_; }
    size_t memory_bytes() const noexcept { return slots_.capacity() * sizeof(Slot); }

    void prefetch(int32_t left, int32_t right) const noexcept {
#if defined(__GNUC__) || defined(__clang__)
        __builtin_prefetch(&slots_[slot_of(make_key(left, right))]);
#else
        (void)left;
        (void)right;
#endif
    }
    const Merge* find(int32_t left, int32_t right) const noexcept {
        const uint64_t key = make_key(left, right);
        for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return &slots_[i].merge;
            if (slots_[i].key == kEmpty) return nullptr;
        }
    }

private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);  // ids are >= 0, so no real key is all ones
    static uint64_t make_key(int32_t left, int32_t right) noexcept {
        return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
    }
    size_t slot_of(uint64_t key) const noexcept {
        return size_t(mix64(key ^ seed_)) & mask_;
    }
    struct Slot {
        uint64_t key;
        Merge merge;
    };
    std::vector<Slot> slots_;
    size_t mask_ = 0;
    uint64_t seed_ = 0;
    size_t max_probe_ = 0;
};

// Pre-token -> ids for the duration of one encode call (keys are views into
// the caller's text). Open addressing; grows at load 0.5. The caller's hash
// must be seeded and well mixed (TokenIndex::hasher): the text is the
// caller's, and the low bits pick the slot.
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

// The special-token texts, for finding which of them start at a place in a
// text. A radix tree: a byte trie whose chains of single children are merged
// into one edge labelled by a view into a token text (so into the file). Its
// size is O(number of specials) however long they are; a node per byte
// (~100 bytes of heap per byte of text) let one 16 MB special take 1.6 GB.
// A lookup at one place costs the length of the special prefix that the text
// follows there: a byte or two for real vocabularies (the Llama-3 specials
// all start with "<|"), but a text repeating a long special's prefix at many
// places costs (places x prefix length), as the byte trie did.
class SpecialMatcher {
public:
    // texts[order]: the special texts (none empty) in priority order. A text
    // listed twice answers as its first order.
    void build(const std::vector<std::string_view>& texts) {
        nodes_.assign(1, Node{nullptr, 0, -1, 0, 0});
        first_bytes_.assign(1, 0);
        shorter_.assign(texts.size(), -1);
        root_.fill(-1);
        for (const std::string_view text : texts)
            if (text.empty() || text.size() >= (size_t(1) << 32))  // label sizes are 32-bit
                smol::detail::fail(ErrorKind::internal, "tokenizer: a special text of " +
                                                            std::to_string(text.size()) + " bytes");
        // Sorted, the texts below a node are a contiguous range, so the tree
        // grows breadth first with each node's children side by side.
        std::vector<uint32_t> sorted(texts.size());
        for (size_t k = 0; k < sorted.size(); ++k) sorted[k] = uint32_t(k);
        std::sort(sorted.begin(), sorted.end(), [&](uint32_t a, uint32_t b) {
            const int c = texts[a].compare(texts[b]);
            return c != 0 ? c < 0 : a < b;
        });
        std::vector<Range> ranges{Range{0, sorted.size(), 0, -1}};
        for (size_t node = 0; node < nodes_.size(); ++node)
            add_children(node, texts, sorted, ranges);
    }

    // Whether some special starts with byte c: a filter before longest_at.
    bool may_start(unsigned char c) const noexcept { return root_[c] >= 0; }

    // The order of the longest special that text[pos..] starts with and that
    // eligible(order) accepts, or -1.
    template <class Eligible>
    int32_t longest_at(std::string_view text, size_t pos, Eligible eligible) const {
        int32_t best = -1;
        int32_t node = root_[static_cast<unsigned char>(text[pos])];
        for (size_t at = pos; node >= 0;) {  // at: where the node's label starts in text
            const Node& n = nodes_[size_t(node)];
            if (text.size() - at < n.label_size || !label_matches(n, text.data() + at)) break;
            at += n.label_size;
            if (n.order >= 0 && eligible(n.order)) best = n.order;
            if (at == text.size()) break;
            node = child(n, static_cast<unsigned char>(text[at]));
        }
        return best;
    }

    // The order of the longest special that is a proper prefix of special
    // `order`, or -1: the next candidate at a place where `order` matched.
    int32_t shorter(int32_t order) const noexcept { return shorter_[size_t(order)]; }

    size_t node_count() const noexcept { return nodes_.size(); }
    size_t memory_bytes() const noexcept {
        return nodes_.capacity() * sizeof(Node) + first_bytes_.capacity() +
               shorter_.capacity() * sizeof(int32_t) + sizeof(root_);
    }

private:
    struct Node {
        const char* label;  // the edge into the node: the bytes after the parent's path
        uint32_t label_size;
        int32_t order;         // the special whose text ends here, or -1
        uint32_t first_child;  // children: nodes_[first_child, + child_count), by first byte
        uint32_t child_count;
    };
    struct Range {      // of a node, while building
        size_t lo, hi;  // its texts: sorted[lo, hi)
        size_t depth;   // the length of its path
        int32_t above;  // the order ending nearest above it, or -1
    };

    void add_children(size_t node, const std::vector<std::string_view>& texts,
                      const std::vector<uint32_t>& sorted, std::vector<Range>& ranges) {
        const Range range = ranges[node];  // a copy: ranges grows below
        size_t lo = range.lo;
        int32_t above = range.above;
        if (lo < range.hi && texts[sorted[lo]].size() == range.depth) {
            // Equal texts sort by order, so the first is the one that answers.
            nodes_[node].order = int32_t(sorted[lo]);
            shorter_[sorted[lo]] = above;
            above = int32_t(sorted[lo]);
            while (lo < range.hi && texts[sorted[lo]].size() == range.depth) ++lo;
        }
        nodes_[node].first_child = uint32_t(nodes_.size());
        while (lo < range.hi) {
            const std::string_view first = texts[sorted[lo]];
            const unsigned char byte = static_cast<unsigned char>(first[range.depth]);
            const size_t end =
                size_t(std::partition_point(
                           sorted.begin() + long(lo), sorted.begin() + long(range.hi),
                           [&](uint32_t k) {
                               return static_cast<unsigned char>(texts[k][range.depth]) == byte;
                           }) -
                       sorted.begin());
            // The edge runs to the end of the group's common prefix: that of
            // its first and last text, as the group is sorted.
            const std::string_view last = texts[sorted[end - 1]];
            size_t common = range.depth + 1;
            while (common < first.size() && common < last.size() && first[common] == last[common])
                ++common;
            if (node == 0) root_[byte] = int32_t(nodes_.size());
            nodes_.push_back(
                Node{first.data() + range.depth, uint32_t(common - range.depth), -1, 0, 0});
            first_bytes_.push_back(byte);
            ranges.push_back(Range{lo, end, common, above});
            lo = end;
        }
        nodes_[node].child_count = uint32_t(nodes_.size() - nodes_[node].first_child);
    }

    static bool label_matches(const Node& n, const char* text) noexcept {
        if (n.label_size > 16) return std::memcmp(text, n.label, n.label_size) == 0;
        for (uint32_t k = 0; k < n.label_size; ++k)  // most labels are short: a loop beats a call
            if (text[k] != n.label[k]) return false;
        return true;
    }
    int32_t child(const Node& n, unsigned char c) const noexcept {
        const unsigned char* bytes = first_bytes_.data() + n.first_child;
        if (n.child_count <= 16) {
            for (uint32_t k = 0; k < n.child_count; ++k)
                if (bytes[k] == c) return int32_t(n.first_child + k);
            return -1;
        }
        const unsigned char* it = std::lower_bound(bytes, bytes + n.child_count, c);
        return it != bytes + n.child_count && *it == c
                   ? int32_t(n.first_child + uint32_t(it - bytes))
                   : -1;
    }

    std::vector<Node> nodes_;  // nodes_[0]: the root, empty label
    std::vector<unsigned char>
        first_bytes_;               // first byte of each node's label: a child scan reads one array
    std::vector<int32_t> shorter_;  // by order (see shorter())
    std::array<int32_t, 256> root_{};  // first byte -> child of the root, or -1
};

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

    // For tests and tools, not a stable API: the probe lengths and sizes that
    // the hostile-input rules bound (see the top of this file).
    detail::TokenizerTableStats detail_table_stats() const noexcept {
        detail::TokenizerTableStats stats;
        stats.token_index_max_probe = index_.max_probe();
        stats.merge_index_max_probe = merges_.max_probe();
        stats.special_count = specials_.size();
        stats.special_matcher_nodes = special_matcher_.node_count();
        stats.special_matcher_bytes = special_matcher_.memory_bytes();
        stats.heap_bytes = texts_.capacity() * sizeof(std::string_view) + types_.capacity() +
                           index_.memory_bytes() + merges_.memory_bytes() +
                           specials_.capacity() * sizeof(int32_t) + stats.special_matcher_bytes +
                           end_ids_.capacity() * sizeof(int32_t) + pre_type_.capacity();
        return stats;
    }

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

        if (!index_.build(texts_))
            smol::detail::fail(ErrorKind::format,
                               where +
                                   "tokenizer.ggml.tokens: under every hash seed tried, some "
                                   "lookup would read more than " +
                                   std::to_string(detail::kMaxProbeSlots) +
                                   " slots (token texts that collide: a crafted file?)");

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
        has_user_defined_ = false;
        for (size_t id = 0; id < n; ++id) {
            if (!is_special_type(types_[id]) || texts_[id].empty()) continue;
            has_user_defined_ |= types_[id] == uint8_t(TokenType::user_defined);
            specials_.push_back(int32_t(id));
        }
        std::stable_sort(specials_.begin(), specials_.end(), [&](int32_t a, int32_t b) {
            return texts_[size_t(a)].size() > texts_[size_t(b)].size();
        });
        std::vector<std::string_view> special_texts;
        special_texts.reserve(specials_.size());
        for (int32_t id : specials_) special_texts.push_back(texts_[size_t(id)]);
        special_matcher_.build(special_texts);
    }

    void load_merges(const std::string& where) {
        const gguf::Value* v = file_->find_value("tokenizer.ggml.merges");
        if (!v) smol::detail::fail(ErrorKind::missing, where + "missing key 'tokenizer.ggml.merges'");
        const auto merges = file_->get<std::vector<std::string_view>>("tokenizer.ggml.merges");
        for (unsigned attempt = 0; attempt < detail::kHashSeedAttempts; ++attempt) {
            merges_.reset(merges.size(), attempt);
            if (insert_merges(merges, where) && merges_.seal()) return;
        }
        smol::detail::fail(ErrorKind::format,
                           where +
                               "tokenizer.ggml.merges: under every hash seed tried, some lookup "
                               "would read more than " +
                               std::to_string(detail::kMaxProbeSlots) +
                               " slots (merge pairs that collide: a crafted file?)");
    }

    // Resolves each merge to ids and inserts it; false as soon as an insert
    // probes past the bound (load_merges then tries the next seed).
    bool insert_merges(const std::vector<std::string_view>& merges, const std::string& where) {
        // Three table lookups per merge, 280k merges: memory-bound. Work in
        // blocks: split and hash a block, prefetch its slots, then resolve it,
        // so the cache misses of a block overlap instead of queueing.
        struct Parsed {
            std::string_view left, right;
            uint64_t left_hash, right_hash, joined_hash;
            int32_t left_id, right_id, merged;
        };
        const detail::SeededTextHash& hash = index_.hasher();
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
                const uint64_t left_state = hash.extend(hash.start(), p.left);
                p.left_hash = hash.finish(left_state);
                p.right_hash = hash(p.right);
                p.joined_hash = hash.finish(hash.extend(left_state, p.right));
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
                if (!merges_.insert(p.left_id, p.right_id, {uint32_t(first + k), p.merged}))
                    return false;
            }
        }
        return true;
    }

    // ---- encoding -------------------------------------------------------------

    // The special tokens in `text` as (byte offset, id), in text order, chosen
    // as llama.cpp does: each token, longest first, claims its leftmost
    // non-overlapping occurrences within the text no longer token has claimed.
    // Without parse_special only user-defined tokens are candidates.
    std::vector<std::pair<size_t, int32_t>> find_specials(std::string_view text,
                                                          bool parse_special) const {
        auto eligible = [&](int32_t order) {
            return parse_special ||
                   types_[size_t(specials_[size_t(order)])] == uint8_t(TokenType::user_defined);
        };
        std::vector<SpecialCandidate> found = longest_specials(text, eligible);
        // Usually no two overlap, and then each claims its place: a shorter
        // candidate there lies inside it, and it overlaps nothing else.
        for (size_t i = 1; i < found.size(); ++i)
            if (found[i].start < found[i - 1].start + special_length(found[i - 1].order))
                return claim_specials(std::move(found), eligible);
        std::vector<std::pair<size_t, int32_t>> chosen;  // (start, id) in text order
        chosen.reserve(found.size());
        for (const SpecialCandidate& c : found)
            chosen.push_back({c.start, specials_[size_t(c.order)]});
        return chosen;
    }

    struct SpecialCandidate {
        int32_t order;  // index in specials_ (longest first)
        size_t start;
    };
    size_t special_length(int32_t order) const noexcept {
        return texts_[size_t(specials_[size_t(order)])].size();
    }

    // The longest eligible special at each place, in text order. Only the
    // longest is kept: the shorter ones there are its prefixes
    // (SpecialMatcher::shorter), visited only if it loses. So at most one
    // entry per byte of text, however the specials nest.
    template <class Eligible>
    std::vector<SpecialCandidate> longest_specials(std::string_view text, Eligible eligible) const {
        std::vector<SpecialCandidate> found;
        for (size_t pos = 0; pos < text.size(); ++pos) {
            if (!special_matcher_.may_start(static_cast<unsigned char>(text[pos]))) continue;
            const int32_t order = special_matcher_.longest_at(text, pos, eligible);
            if (order >= 0) found.push_back({order, pos});
        }
        return found;
    }

    // The claiming when spans overlap: every occurrence, taken in order of
    // (order, start), claims its span unless that overlaps one claimed
    // before. The occurrences at one place are visited lazily, longest first:
    // the heap holds the next one of each place, so memory stays one entry per
    // place even when specials nest ("<", "<<", "<<<", ...).
    template <class Eligible>
    std::vector<std::pair<size_t, int32_t>> claim_specials(std::vector<SpecialCandidate> heap,
                                                           Eligible eligible) const {
        auto later = [](const SpecialCandidate& a, const SpecialCandidate& b) {
            return a.order != b.order ? a.order > b.order : a.start > b.start;
        };
        std::make_heap(heap.begin(), heap.end(), later);
        std::map<size_t, std::pair<size_t, int32_t>> claimed;  // start -> (end, id)
        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), later);
            SpecialCandidate c = heap.back();
            heap.pop_back();
            auto next = claimed.lower_bound(c.start);
            // Inside a claimed span: every candidate at this place overlaps it.
            if (next != claimed.begin() && std::prev(next)->second.first > c.start) continue;
            const size_t room = next == claimed.end() ? ~size_t(0) : next->first - c.start;
            if (special_length(c.order) <= room) {
                claimed.emplace_hint(
                    next, c.start,
                    std::make_pair(c.start + special_length(c.order), specials_[size_t(c.order)]));
                continue;
            }
            // Too long for the room before the next claimed span, as is every
            // candidate here until one fits; that one waits its turn (others
            // of lower order may claim first).
            int32_t order = special_matcher_.shorter(c.order);
            while (order >= 0 && (special_length(order) > room || !eligible(order)))
                order = special_matcher_.shorter(order);
            if (order < 0) continue;
            heap.push_back({order, c.start});
            std::push_heap(heap.begin(), heap.end(), later);
        }
        std::vector<std::pair<size_t, int32_t>> chosen;
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
    detail::SpecialMatcher special_matcher_;  // over the texts of specials_, in that order
    std::vector<int32_t> end_ids_;
    std::string pre_type_;
    bool whole_word_first_ = false;
    bool add_bos_ = false;
    bool has_user_defined_ = false;  // any user-defined token (matched even without parse_special)
    std::optional<int32_t> bos_, eos_, eot_, pad_;
};

SMOL_NAMESPACE_END
