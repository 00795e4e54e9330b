// smol::KVCache: the keys and values of every position a session has run,
// kept apart from the model so many sessions share one set of weights.
//
// Reserved for n_ctx positions (KVCache::kDefaultSize picks min(4096, the
// model's context length); 0 or more than the context length is an error);
// memory is reserved up front but pages are only touched as positions fill.
// Elements are F16 by default (half the memory and bandwidth of F32; the
// reference engine the goldens come from also keeps F16), F32, or Q8_0 (each
// row is head_dim / 32 GGUF Q8_0 blocks, 34 bytes per 32 values: 53 % of F16's
// bytes; a row is quantized once, when its position is written, so the values
// attention reads are rounded once more than F16's).
//
// Layout: blocks of 64 positions (model/kv_blocks.hpp), each
//   [stream = (layer * 2 + part) * n_kv_heads + kv_head][64 positions][row_bytes()]
// (part: KVPart::keys, KVPart::values), so attention for one head walks 64
// contiguous rows at a time. Keys are stored after RoPE (for NoPE layers, as
// projected).
//
// A copy (fork(), clone()) shares the blocks of the valid prefix with the
// original until one of them writes a block, which it then copies (copy on
// write): forks of one long prompt hold that prompt once. memory() says how
// many bytes a cache holds alone and how many it shares.
//
// size() is the number of leading positions that hold valid entries; forward()
// makes the positions it writes private (prepare_write), writes [start, start +
// n) and then sets size() = start + n. truncate() drops positions (prompt-prefix
// reuse); serialize()/deserialize() save the valid prefix with a small header
// (magic "SMKV", version, geometry, element type, size): the portable format of
// model/backend.hpp, which every backend's cache reads.
//
// KVCache is the CPU backend's BackendCache (model/backend.hpp): size, n_ctx,
// truncate and clear live in that base; clone() and restore() are the
// interface's forms of copying and deserialize().
#pragma once

#include "../detail/abi.hpp"

#include "../detail/bytes.hpp"
#include "../detail/unit_vector.hpp"
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "../core/fp16.hpp"
#include "../detail/aligned.hpp"
#include "../detail/checked.hpp"
#include "../detail/fma.hpp"
#include "../error.hpp"
#include "../quant/blocks.hpp"
#include "../quant/dequantize.hpp"
#include "../quant/quantize.hpp"
#include "backend.hpp"
#include "config.hpp"
#include "kv_blocks.hpp"
#include "rope.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {
// The owner tag of every CPU cache (BackendCache::owner_): any CPU backend of
// the same geometry may run any KVCache.
inline constexpr char kCpuCacheOwner = 0;
}  // namespace detail

class KVCache final : public BackendCache {
public:
    // Positions per block of the layout (top of this file).
    static constexpr size_t kBlockPositions = detail::KVBlockTable::kPositions;

    // n_ctx kDefaultSize picks min(4096, config.context_length); 0 or more than
    // context_length is ErrorKind::invalid_argument. The cache's bytes are
    // checked against `memory_budget` (0: the machine's physical memory; see
    // LoadOptions::memory_budget) before anything is allocated: a geometry
    // whose size overflows or exceeds it is ErrorKind::resource. try_create
    // returns these errors (and a failed allocation) as a value.
    // KVType::q8_0 needs head_dim a multiple of 32 (ErrorKind::unsupported otherwise).
    explicit KVCache(const Config& config, size_t n_ctx = kDefaultSize, KVType type = KVType::f16,
                     uint64_t memory_budget = 0)
        : KVCache(detail::value_or_fail(try_create(config, n_ctx, type, memory_budget))) {}
    static Expected<KVCache> try_create(const Config& config, size_t n_ctx = kDefaultSize,
                                        KVType type = KVType::f16, uint64_t memory_budget = 0) {
        SMOL_TRY_ASSIGN(n_ctx, resolve_n_ctx(config, n_ctx));
        if (type != KVType::f16 && type != KVType::f32 && type != KVType::q8_0)
            return ErrorInfo{ErrorKind::invalid_argument, "KVCache: unknown element type"};
        if (config.n_layers == 0 || config.n_kv_heads == 0 || config.head_dim == 0)
            return ErrorInfo{ErrorKind::invalid_argument, "KVCache: empty model geometry"};
        if (type == KVType::q8_0 && config.head_dim % QK8_0 != 0)
            return ErrorInfo{
                ErrorKind::unsupported,
                "KVCache: a q8_0 cache needs head_dim a multiple of 32, the model has " +
                    std::to_string(config.head_dim)};
        KVCache cache(config.n_layers, config.n_kv_heads, config.head_dim, n_ctx, type,
                      memory_budget);
        SMOL_TRY(cache.check_size());
        SMOL_TRY_ASSIGN(cache.blocks_,
                        detail::KVBlockTable::create(n_ctx, cache.n_streams(), cache.row_bytes()));
        return cache;
    }

    // A copy shares the valid prefix's blocks (top of this file).
    KVCache(const KVCache& other)
        : BackendCache(other), type_(other.type_), memory_budget_(other.memory_budget_) {
        blocks_ = detail::value_or_fail(other.blocks_.share(blocks_for(other.size_)));
    }
    KVCache& operator=(const KVCache& other) {
        if (this != &other) {
            KVCache copy(other);
            *this = std::move(copy);
        }
        return *this;
    }
    KVCache(KVCache&&) noexcept = default;
    KVCache& operator=(KVCache&&) noexcept = default;

    // A copy of the valid prefix (what a branching session needs), sharing its blocks.
    KVCache fork() const { return KVCache(*this); }
    std::unique_ptr<BackendCache> clone() const override {
        return detail::translate_bad_alloc(
            "KVCache", [&] { return std::unique_ptr<BackendCache>(new KVCache(*this)); });
    }
    CacheMemory memory() const noexcept override { return blocks_.memory(blocks_for(size_)); }

    KVType type() const noexcept { return type_; }
    // Bytes of one cached row (head_dim values): kv_row_bytes(type(), head_dim).
    size_t row_bytes() const noexcept { return kv_row_bytes(type_, head_dim_); }
    // Bytes reserved for n_ctx positions (whole blocks).
    size_t bytes() const noexcept { return blocks_.n_blocks() * blocks_.block_bytes(); }

    // True when the geometry matches `config` (same layers, kv heads, head dim).
    bool compatible(const Config& config) const noexcept {
        return config.n_layers == n_layers_ && config.n_kv_heads == n_kv_heads_ &&
               config.head_dim == head_dim_;
    }

    // Marks positions [0, n) valid (tests; forward() keeps the size itself).
    // Rows never written read as whatever the memory held.
    void set_size(size_t n) {
        if (n > n_ctx_)
            detail::fail(ErrorKind::out_of_range, "KVCache: size " + std::to_string(n) +
                                                      " exceeds n_ctx " + std::to_string(n_ctx_));
        detail::ok_or_fail(prepare_write(0, n));
        size_ = n;
    }

    // Makes the blocks of positions [first, first + count) this cache's alone,
    // so store() may write them (forward() calls it before a pass). Fails only
    // when a block this cache shared out must be written again and no memory
    // is left for its copy: Error(resource), nothing written.
    Status prepare_write(size_t first, size_t count) {
        if (count == 0) return {};
        for (size_t b = first >> kShift; b <= (first + count - 1) >> kShift; ++b)
            SMOL_TRY(blocks_.make_writable(b, size_));
        return {};
    }

    // The attention kernels' view (kernels::AttentionHead): each block's first
    // byte, the shift from a position to its block, and where one stream's
    // rows start inside a block.
    const uint8_t* const* block_table() const noexcept { return blocks_.data(); }
    static constexpr unsigned block_shift() noexcept { return kShift; }
    size_t stream_offset(size_t layer, KVPart part, size_t kv_head) const noexcept {
        return stream(layer, part, kv_head) * kBlockPositions * row_bytes();
    }

    // The stored row of one position (pos < size(), or prepared for writing).
    const uint8_t* row(size_t layer, KVPart part, size_t kv_head, size_t pos) const noexcept {
        return blocks_.block(pos >> kShift) + stream_offset(layer, part, kv_head) +
               (pos & kMask) * row_bytes();
    }

    // Writes the keys and values of one position (prepared by prepare_write):
    // k and v are [n_kv_heads][head_dim].
    void store(size_t layer, size_t pos, const float* k, const float* v) noexcept {
        for (size_t h = 0; h < n_kv_heads_; ++h) {
            store_row(mutable_row(layer, KVPart::keys, h, pos), k + h * head_dim_);
            store_row(mutable_row(layer, KVPart::values, h, pos), v + h * head_dim_);
        }
    }

    // Backend::erase on the CPU (the range checked there, with later positions
    // to move): positions [first + count, size()) move down by count. Keys of
    // RoPE layers are rotated by -count positions (`rule`, model/rope.hpp),
    // rounded back to the element type; NoPE layers' keys ((l + 1) % 4 == 0:
    // nothing encodes their position) and all values move bit for bit. The
    // caller sets size() afterwards. A Q8_0 key is dequantized, rotated and
    // quantized again: like F16's it is rounded a second time, but to Q8_0's
    // coarser steps, with a new scale per 32 values (tests/test_context.cpp
    // bounds the drift against a fresh prefill).
    Status erase_positions(size_t first, size_t count, const Config& config, const RopeRule& rule) {
        const size_t moved = size_ - first - count;
        SMOL_TRY(prepare_write(first, moved));
        const size_t row_size = row_bytes();
        const size_t pairs = rule.pairs();
        detail::UnitVector<float> cos(pairs), sin(pairs), key(head_dim_);
        rule.shift(-int64_t(count), cos.data(), sin.data());
        for (size_t l = 0; l < n_layers_; ++l)
            for (const KVPart part : {KVPart::keys, KVPart::values})
                for (size_t h = 0; h < n_kv_heads_; ++h) {
                    if (part == KVPart::values || !config.layer_uses_rope(l)) {
                        // Runs that stay inside one block at both ends; a run
                        // may overlap itself (same block), never an earlier run.
                        for (size_t p = first, end = first + moved; p < end;) {
                            const size_t to_block_end =
                                std::min(kBlockPositions - (p & kMask),
                                         kBlockPositions - ((p + count) & kMask));
                            const size_t run = std::min(end - p, to_block_end);
                            std::memmove(mutable_row(l, part, h, p), row(l, part, h, p + count),
                                         run * row_size);
                            p += run;
                        }
                        continue;
                    }
                    for (size_t p = first; p < first + moved; ++p) {
                        load_row(l, part, h, p + count, key.data());
                        for (size_t i = 0; i < pairs; ++i) {  // kernels/scalar.hpp's rope
                            const float x0 = key[2 * i], x1 = key[2 * i + 1];
                            key[2 * i] = smol::detail::fma(x0, cos[i], -(x1 * sin[i]));
                            key[2 * i + 1] = smol::detail::fma(x1, cos[i], x0 * sin[i]);
                        }
                        store_row(mutable_row(l, part, h, p), key.data());
                    }
                }
        return {};
    }

    // Reads one stored row back as float (tests, the reference).
    void load_row(size_t layer, KVPart part, size_t kv_head, size_t pos,
                  float* out) const noexcept {
        const uint8_t* base = row(layer, part, kv_head, pos);
        if (type_ == KVType::f32) {
            std::memcpy(out, base, head_dim_ * 4);
        } else if (type_ == KVType::q8_0) {
            dequantize_row_q8_0(reinterpret_cast<const BlockQ8_0*>(base), out, head_dim_);
        } else {
            const uint16_t* h = reinterpret_cast<const uint16_t*>(base);
            for (size_t d = 0; d < head_dim_; ++d) out[d] = fp16_to_fp32(h[d]);
        }
    }

    // --- serialization of the valid prefix (the portable format, model/backend.hpp) ---
    std::vector<uint8_t> serialize() const override {
        std::vector<uint8_t> out;
        const size_t row = row_bytes();
        out.reserve(detail::kKVHeaderBytes + 2 * n_layers_ * n_kv_heads_ * size_ * row);
        detail::append_kv_header(out, type_, n_layers_, n_kv_heads_, head_dim_, size_);
        for_each_run(size_, [&](size_t l, KVPart part, size_t h, size_t p, size_t run) {
            const uint8_t* from = this->row(l, part, h, p);
            out.insert(out.end(), from, from + run * row);
        });
        return out;
    }

    // Restores a cache written by serialize() (by any backend) for a model of
    // `config`'s geometry, into a cache of n_ctx positions (kDefaultSize: the
    // default) and the saved element type. Malformed or truncated bytes are
    // ErrorKind::format, another geometry ErrorKind::shape, more positions than
    // n_ctx ErrorKind::out_of_range.
    static KVCache deserialize(const Config& config, const void* data, size_t bytes,
                               size_t n_ctx = kDefaultSize) {
        return detail::value_or_fail(try_deserialize(config, data, bytes, n_ctx));
    }
    static Expected<KVCache> try_deserialize(const Config& config, const void* data, size_t bytes,
                                             size_t n_ctx = kDefaultSize) {
        SMOL_TRY_ASSIGN(n_ctx, resolve_n_ctx(config, n_ctx));
        SMOL_TRY_ASSIGN(const detail::KVImage image,
                        detail::try_parse_kv_image(data, bytes, config.n_layers, config.n_kv_heads,
                                                   config.head_dim, n_ctx));
        SMOL_TRY_ASSIGN(KVCache cache, try_create(config, n_ctx, image.type));
        SMOL_TRY(cache.fill_from(image));
        return cache;
    }

    // The interface's deserialize: same n_ctx and memory budget, the saved
    // element type; unchanged on error.
    void restore(const void* data, size_t bytes) override {
        detail::ok_or_fail(try_restore(data, bytes));
    }
    Status try_restore(const void* data, size_t bytes) override {
        SMOL_TRY_ASSIGN(
            const detail::KVImage image,
            detail::try_parse_kv_image(data, bytes, n_layers_, n_kv_heads_, head_dim_, n_ctx_));
        KVCache cache(n_layers_, n_kv_heads_, head_dim_, n_ctx_, image.type, memory_budget_);
        SMOL_TRY(cache.check_size());
        SMOL_TRY_ASSIGN(cache.blocks_,
                        detail::KVBlockTable::create(n_ctx_, cache.n_streams(), cache.row_bytes()));
        SMOL_TRY(cache.fill_from(image));
        *this = std::move(cache);
        return {};
    }

protected:
    void drop_after(size_t n) noexcept override { blocks_.drop_from(blocks_for(n)); }

private:
    static constexpr unsigned kShift = detail::KVBlockTable::kShift;
    static constexpr size_t kMask = kBlockPositions - 1;

    static Expected<size_t> resolve_n_ctx(const Config& config, size_t n_ctx) {
        return detail::resolve_n_ctx(n_ctx, config.context_length);
    }
    static size_t blocks_for(size_t positions) noexcept {
        return detail::KVBlockTable::blocks_for(positions);
    }

    // A cache of this geometry with no blocks yet: check_size() and the table follow.
    KVCache(size_t n_layers, size_t n_kv_heads, size_t head_dim, size_t n_ctx, KVType type,
            uint64_t memory_budget)
        : BackendCache(Device::cpu, &detail::kCpuCacheOwner, n_layers, n_kv_heads, head_dim, n_ctx),
          type_(type),
          memory_budget_(memory_budget) {}

    size_t n_streams() const noexcept { return 2 * n_layers_ * n_kv_heads_; }
    size_t stream(size_t layer, KVPart part, size_t kv_head) const noexcept {
        return (layer * 2 + size_t(part)) * n_kv_heads_ + kv_head;
    }
    uint8_t* mutable_row(size_t layer, KVPart part, size_t kv_head, size_t pos) noexcept {
        return const_cast<uint8_t*>(row(layer, part, kv_head, pos));
    }

    // The geometry comes from a file: each factor is bounded, their product is
    // not. Whole blocks of positions are reserved.
    Status check_size() const {
        const uint64_t positions = uint64_t(blocks_for(n_ctx_)) * kBlockPositions;
        SMOL_TRY_ASSIGN(const size_t total,
                        detail::checked_product("KVCache", {positions, row_bytes(), n_streams()}));
        std::string what = "KVCache of " + std::to_string(n_ctx_) + " positions";
        if (positions != n_ctx_)
            what += " (" + std::to_string(positions) + " reserved: whole blocks of " +
                    std::to_string(kBlockPositions) + ")";
        return detail::check_budget(what, total, memory_budget_);
    }

    // f(layer, part, kv_head, first position, rows) over positions [0, n) of
    // every stream, in the portable format's order, one run per block.
    template <typename F>
    void for_each_run(size_t n, F&& f) const {
        for (size_t l = 0; l < n_layers_; ++l)
            for (const KVPart part : {KVPart::keys, KVPart::values})
                for (size_t h = 0; h < n_kv_heads_; ++h)
                    for (size_t p = 0; p < n; p += kBlockPositions)
                        f(l, part, h, p, std::min(kBlockPositions, n - p));
    }

    // Copies a parsed image of this cache's element type and geometry.
    Status fill_from(const detail::KVImage& image) {
        SMOL_TRY(prepare_write(0, image.size));
        const uint8_t* src = image.payload;
        for_each_run(image.size, [&](size_t l, KVPart part, size_t h, size_t p, size_t run) {
            std::memcpy(mutable_row(l, part, h, p), src, run * image.row_bytes);
            src += run * image.row_bytes;
        });
        size_ = image.size;
        return {};
    }

    void store_row(uint8_t* dst, const float* src) noexcept {
        if (type_ == KVType::f32) {
            std::memcpy(dst, src, head_dim_ * 4);
        } else if (type_ == KVType::q8_0) {  // the reference quantizer: what GGUF's Q8_0 rounds
            quantize_row_q8_0(src, reinterpret_cast<BlockQ8_0*>(dst), head_dim_);
        } else {
            uint16_t* out = reinterpret_cast<uint16_t*>(dst);
            for (size_t d = 0; d < head_dim_; ++d) out[d] = fp32_to_fp16(src[d]);
        }
    }

    KVType type_ = KVType::f16;
    uint64_t memory_budget_ = 0;
    detail::KVBlockTable blocks_;
};

SMOL_NAMESPACE_END
