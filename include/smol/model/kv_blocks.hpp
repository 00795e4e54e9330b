// The CPU KV cache's storage: blocks of positions, shared between caches until
// one of them writes (copy on write). What lets eight NPCs forked from one
// world prompt hold that prompt's keys and values once.
//
// A cache's positions go in blocks of kPositions (64). A block holds, for
// every stream (layer, K or V, kv head), kPositions consecutive rows:
//   block bytes = n_streams * kPositions * row_bytes, laid out [stream][kPositions][row_bytes]
// so attention for one head walks 64 contiguous rows, then jumps to the next
// block through the table (kernels::AttentionHead::row).
//
// Storage: each cache owns one BlockStore of ceil(n_ctx / 64) slots, reserved
// up front (pages are touched only when written, as with one flat buffer), so
// a decode step never allocates. A cache's table maps block b to a slot of
// some store: its own slot b, a slot of the cache it was forked from, or, in
// one case below, a store of a single slot. Every slot counts the tables that
// point at it; a store lives while its owner or any pointer into it does.
//
// Sharing: share() gives a new table whose first blocks point at this table's
// slots (each count + 1) and whose own store is fresh. Writing block b first
// makes it private (make_writable):
//   - the slot's count is 1 (only this table): write in place;
//   - else take this table's own slot b if no table points at it, or a fresh
//     one-slot store if one does (the owner of a block it shared, writing it
//     again: the only allocation after creation), copy the block's valid rows
//     there and let go of the shared slot.
// A count is read with acquire and dropped with release, so a cache on one
// thread that sees its block's count fall to 1 sees every read the other
// cache made of it; counts only rise when a cache is shared (share()), which
// the caller never does while the same cache is being written.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "../detail/aligned.hpp"
#include "../detail/checked.hpp"
#include "../error.hpp"
#include "backend.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

// One allocation of `n_slots` blocks with a reference count per slot (see the top).
class KVBlockStore {
public:
    // A store with one user (its creator, who calls drop_user() when done), every slot free.
    static Expected<KVBlockStore*> create(size_t n_slots, size_t slot_bytes) {
        KVBlockStore* store = new (std::nothrow) KVBlockStore();
        if (store == nullptr)
            return ErrorInfo{ErrorKind::resource, "KVCache: out of memory for the block table"};
        store->slot_bytes_ = slot_bytes;
        store->data_ = static_cast<uint8_t*>(aligned_allocate_or_null(n_slots * slot_bytes));
        store->refs_ = new (std::nothrow) std::atomic<uint32_t>[n_slots];
        if (store->data_ == nullptr || store->refs_ == nullptr) {
            delete store;
            return ErrorInfo{ErrorKind::resource, "KVCache: out of memory for " +
                                                      std::to_string(n_slots * slot_bytes) +
                                                      " bytes of keys and values"};
        }
        for (size_t i = 0; i < n_slots; ++i) store->refs_[i].store(0, std::memory_order_relaxed);
        return store;
    }

    uint8_t* slot(size_t i) const noexcept { return data_ + i * slot_bytes_; }
    uint32_t refs(size_t i) const noexcept { return refs_[i].load(std::memory_order_acquire); }

    void acquire(size_t i) noexcept {
        refs_[i].fetch_add(1, std::memory_order_relaxed);
        users_.fetch_add(1, std::memory_order_relaxed);
    }
    void release(size_t i) noexcept {
        refs_[i].fetch_sub(1, std::memory_order_acq_rel);
        drop_user();
    }
    void drop_user() noexcept {
        if (users_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }

private:
    KVBlockStore() = default;
    ~KVBlockStore() {
        aligned_free(data_);
        delete[] refs_;
    }

    size_t slot_bytes_ = 0;
    uint8_t* data_ = nullptr;
    std::atomic<uint32_t>* refs_ = nullptr;  // [n_slots]: tables pointing at each slot
    std::atomic<uint32_t> users_{1};         // the owner + every pointer into the store
};

// A cache's map from blocks of positions to slots (see the top of this file).
class KVBlockTable {
public:
    static constexpr unsigned kShift = 6;
    static constexpr size_t kPositions = size_t(1) << kShift;

    KVBlockTable() = default;
    // Blocks for n_ctx positions of n_streams rows of row_bytes each; nothing points anywhere yet.
    static Expected<KVBlockTable> create(size_t n_ctx, size_t n_streams, size_t row_bytes) {
        KVBlockTable table;
        table.n_streams_ = n_streams;
        table.row_bytes_ = row_bytes;
        const size_t n_blocks = blocks_for(n_ctx);
        SMOL_TRY_ASSIGN(table.home_, KVBlockStore::create(n_blocks, table.block_bytes()));
        // A plain array, not a std::vector of pointers: that instantiation's
        // code would be shared with units built with other -m flags (README,
        // "run-time dispatch"), so an AVX2 unit's copy could reach a baseline CPU.
        table.data_ = new (std::nothrow) const uint8_t*[n_blocks];
        if (table.data_ == nullptr)
            return ErrorInfo{ErrorKind::resource, "KVCache: out of memory for the block table"};
        for (size_t b = 0; b < n_blocks; ++b) table.data_[b] = nullptr;
        return catch_bad_alloc("KVCache", [&]() -> Expected<KVBlockTable> {
            table.refs_.resize(n_blocks);
            return std::move(table);
        });
    }
    // A table of the same geometry, with a store of its own, whose blocks
    // [0, n_blocks) point at this table's (shared until written).
    Expected<KVBlockTable> share(size_t n_blocks) const {
        SMOL_TRY_ASSIGN(KVBlockTable copy, create_like());
        for (size_t b = 0; b < n_blocks && b < refs_.size(); ++b) {
            const Ref ref = refs_[b];
            if (ref.store == nullptr) continue;
            ref.store->acquire(ref.slot);
            copy.refs_[b] = ref;
            copy.data_[b] = data_[b];
        }
        return copy;
    }

    KVBlockTable(KVBlockTable&& other) noexcept { swap(other); }
    KVBlockTable& operator=(KVBlockTable&& other) noexcept {
        if (this != &other) {
            KVBlockTable gone(std::move(*this));
            swap(other);
        }
        return *this;
    }
    KVBlockTable(const KVBlockTable&) = delete;
    KVBlockTable& operator=(const KVBlockTable&) = delete;
    ~KVBlockTable() {
        drop_from(0);
        if (home_) home_->drop_user();
        delete[] data_;
    }

    size_t block_bytes() const noexcept { return n_streams_ * kPositions * row_bytes_; }
    static size_t blocks_for(size_t positions) noexcept {
        return (positions + kPositions - 1) >> kShift;
    }
    size_t n_blocks() const noexcept { return refs_.size(); }
    // [n_blocks]: each block's first byte, null for a block never written.
    const uint8_t* const* data() const noexcept { return data_; }
    uint8_t* block(size_t b) const noexcept { return const_cast<uint8_t*>(data_[b]); }

    // Makes block b this table's alone (see the top), keeping the rows below
    // `valid` positions of the cache (only those are copied). Cannot fail for a
    // block held alone or first written; a one-slot store that cannot be had
    // is Error(resource), the table unchanged.
    Status make_writable(size_t b, size_t valid) {
        Ref& ref = refs_[b];
        if (ref.store != nullptr && ref.store->refs(ref.slot) == 1) return {};
        Ref target{home_, uint32_t(b)};
        if (home_->refs(b) != 0) {  // this table's own slot b is shared out: a store of one
            SMOL_TRY_ASSIGN(target.store, KVBlockStore::create(1, block_bytes()));
            target.slot = 0;
            target.store->acquire(0);
            target.store->drop_user();  // the pointer below is now its only user
        } else {
            home_->acquire(b);
        }
        uint8_t* to = target.store->slot(target.slot);
        if (ref.store != nullptr) {
            const size_t first = b * kPositions;
            const size_t rows = valid > first ? std::min(valid - first, kPositions) : 0;
            const uint8_t* from = data_[b];
            for (size_t s = 0; s < n_streams_; ++s)
                std::memcpy(to + s * kPositions * row_bytes_, from + s * kPositions * row_bytes_,
                            rows * row_bytes_);
            ref.store->release(ref.slot);
        }
        ref = target;
        data_[b] = to;
        return {};
    }

    // Lets go of blocks b >= first (positions the cache no longer holds).
    void drop_from(size_t first) noexcept {
        for (size_t b = first; b < refs_.size(); ++b) {
            if (refs_[b].store == nullptr) continue;
            refs_[b].store->release(refs_[b].slot);
            refs_[b] = Ref{};
            data_[b] = nullptr;
        }
    }

    // Blocks [0, n_blocks) by whether another table points at them too.
    CacheMemory memory(size_t n_blocks) const noexcept {
        CacheMemory m;
        for (size_t b = 0; b < n_blocks && b < refs_.size(); ++b) {
            if (refs_[b].store == nullptr) continue;
            (refs_[b].store->refs(refs_[b].slot) == 1 ? m.owned : m.shared) += block_bytes();
        }
        return m;
    }

private:
    struct Ref {
        KVBlockStore* store = nullptr;
        uint32_t slot = 0;
    };

    Expected<KVBlockTable> create_like() const {
        return create(refs_.size() * kPositions, n_streams_, row_bytes_);
    }
    void swap(KVBlockTable& other) noexcept {
        std::swap(n_streams_, other.n_streams_);
        std::swap(row_bytes_, other.row_bytes_);
        std::swap(home_, other.home_);
        refs_.swap(other.refs_);
        std::swap(data_, other.data_);
    }

    size_t n_streams_ = 0, row_bytes_ = 0;
    KVBlockStore* home_ = nullptr;    // slot b: block b's place when this table writes it
    std::vector<Ref> refs_;           // [n_blocks]
    const uint8_t** data_ = nullptr;  // [n_blocks]: refs_[b]'s bytes, for attention
};

}  // namespace detail

SMOL_NAMESPACE_END
