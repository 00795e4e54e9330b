// Byte-level BPE: the merge table (left id, right id) -> (rank, merged id)
// that a Tokenizer (text/tokenizer.hpp) builds from tokenizer.ggml.merges, and
// the merge loop that applies it to the byte tokens of one pre-token.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../../detail/seeded_hash.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {

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

// The merge loop's buffers, kept by the caller between pre-tokens (so a
// pre-token costs no allocation once they are warm).
struct BpeScratch {
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
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
};

// BPE over symbols[0, n), n >= 1, whose ids the caller has set (the byte
// tokens of a pre-token, in order): the adjacent pair with the lowest merge
// rank merges, repeatedly, through a heap over the pairs of a linked list
// (O(n log n), not quadratic). Appends the resulting ids to out.
inline void bpe_merge(const MergeIndex& merges, BpeScratch& scratch, size_t n,
                      std::vector<int32_t>& out) {
    using Candidate = BpeScratch::Candidate;
    auto& symbols = scratch.symbols;
    auto& heap = scratch.heap;
    heap.clear();
    const int32_t count = int32_t(n);
    for (int32_t i = 0; i < count; ++i) {
        symbols[size_t(i)].prev = i - 1;
        symbols[size_t(i)].next = i + 1 < count ? i + 1 : -1;
    }

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
        if (const auto* m = merges.find(left_id, right_id)) {
            heap.push_back({m->rank, left, left_id, right_id, m->merged});
            std::push_heap(heap.begin(), heap.end(), later);
        }
    };
    for (int32_t i = 0; i + 1 < count; ++i) consider(i);

    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), later);
        const Candidate c = heap.back();
        heap.pop_back();
        BpeScratch::Symbol& left = symbols[size_t(c.left)];
        // Stale if either side has changed since the pair was queued. A
        // symbol's id only ever grows into a longer token, so equal ids at
        // the same positions mean the same pair.
        if (left.id != c.left_id || left.next < 0) continue;
        BpeScratch::Symbol& right = symbols[size_t(left.next)];
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

}  // namespace detail
SMOL_NAMESPACE_END
