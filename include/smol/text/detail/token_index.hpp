// The hash tables of a Tokenizer (text/tokenizer.hpp) keyed by text: token
// text -> id (TokenIndex, built once at load) and pre-token -> ids (PieceCache,
// one per encode call). Both probe linearly from a seeded hash, because the
// texts come from a file or a caller.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../../detail/seeded_hash.hpp"
#include "../../error.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {

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
    // Indexes the token texts of the file named by `where` ("tokenizer:
    // FILE: "). ErrorKind::format when every seed tried leaves a lookup longer
    // than kMaxProbeSlots (texts that collide whatever the seed);
    // ErrorKind::internal when the texts do not lie in one 4 GiB block (the
    // 32-bit offsets of the slots; one GGUF string array always does).
    Status build(const std::vector<std::string_view>& texts, const std::string& where) {
        base_ = texts.empty() ? nullptr : texts.front().data();
        for (const std::string_view text : texts)
            if (text.data() < base_ ||
                uint64_t(text.data() - base_) + text.size() >= (uint64_t(1) << 32))
                return Status(ErrorKind::internal,
                              "tokenizer: token texts do not lie in one block of the file");
        for (unsigned attempt = 0; attempt < kHashSeedAttempts; ++attempt) {
            hash_ = SeededTextHash(table_hash_seed(attempt));
            if (try_build(texts)) return {};
        }
        return Status(ErrorKind::format,
                      where +
                          "tokenizer.ggml.tokens: under every hash seed tried, some lookup would "
                          "read more than " +
                          std::to_string(kMaxProbeSlots) +
                          " slots (token texts that collide: a crafted file?)");
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
        uint32_t tag;  // high half of the hash: most mismatches fail without a compare
        int32_t id;    // -1: empty
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

}  // namespace detail
SMOL_NAMESPACE_END
