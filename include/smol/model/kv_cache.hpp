// smol::KVCache: the keys and values of every position a session has run,
// kept apart from the model so many sessions share one set of weights.
//
// Preallocated for n_ctx positions (KVCache::kDefaultSize picks min(4096, the
// model's context length); 0 or more than the context length is an error); memory is reserved up front but pages are only touched as
// positions fill. Elements are F16 by default (half the memory and bandwidth
// of F32; the reference engine the goldens come from also keeps F16) or F32.
//
// Layout, one block per (layer, K or V, kv head), each [n_ctx][head_dim]:
//   block(layer, kind, head) starts at ((layer * 2 + kind) * n_kv_heads + head) * n_ctx * head_dim
// so attention for one head walks contiguous positions. Keys are stored after
// RoPE (for NoPE layers, as projected).
//
// size() is the number of leading positions that hold valid entries; forward()
// writes positions [start, start + n) and then sets size() = start + n.
// Copying (fork) copies only the valid prefix; truncate() drops positions
// (prompt-prefix reuse); serialize()/deserialize() save the valid prefix with a
// small header (magic "SMKV", version, geometry, element type, size).
#pragma once

#include "../detail/abi.hpp"

#include "../detail/bytes.hpp"
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "../core/fp16.hpp"
#include "../detail/checked.hpp"
#include "../error.hpp"
#include "config.hpp"

SMOL_NAMESPACE_BEGIN

enum class KVType : uint32_t { f32 = 0, f16 = 1 };

class KVCache {
public:
    static constexpr size_t kDefaultContext = 4096;
    static constexpr size_t kDefaultSize = ~size_t(0);  // "min(4096, context length)"

    // n_ctx kDefaultSize picks min(4096, config.context_length); 0 or more than
    // context_length is ErrorKind::invalid_argument. The cache's bytes are
    // checked against `memory_budget` (0: the machine's physical memory; see
    // LoadOptions::memory_budget) before anything is allocated: a geometry
    // whose size overflows or exceeds it is ErrorKind::resource.
    explicit KVCache(const Config& config, size_t n_ctx = kDefaultSize, KVType type = KVType::f16,
                     uint64_t memory_budget = 0)
        : n_layers_(config.n_layers), n_kv_heads_(config.n_kv_heads), head_dim_(config.head_dim),
          type_(type) {
        if (n_ctx == kDefaultSize) n_ctx = std::min(kDefaultContext, config.context_length);
        if (n_ctx == 0) detail::fail(ErrorKind::invalid_argument, "KVCache: n_ctx must be positive");
        if (n_ctx > config.context_length)
            detail::fail(ErrorKind::invalid_argument,
                         "KVCache: n_ctx " + std::to_string(n_ctx) +
                             " exceeds the model's context length " +
                             std::to_string(config.context_length));
        if (type != KVType::f16 && type != KVType::f32)
            detail::fail(ErrorKind::invalid_argument, "KVCache: unknown element type");
        if (n_layers_ == 0 || n_kv_heads_ == 0 || head_dim_ == 0)
            detail::fail(ErrorKind::invalid_argument, "KVCache: empty model geometry");
        n_ctx_ = n_ctx;
        // The geometry comes from a file: each factor is bounded, their product is not.
        const size_t total = detail::checked_product(
            "KVCache", {uint64_t(n_ctx_), head_dim_, 2, n_layers_, n_kv_heads_, element_bytes()});
        detail::check_budget("KVCache of " + std::to_string(n_ctx_) + " positions", total, memory_budget);
        allocate();
    }

    KVCache(const KVCache& other)
        : n_layers_(other.n_layers_), n_kv_heads_(other.n_kv_heads_), head_dim_(other.head_dim_),
          n_ctx_(other.n_ctx_), type_(other.type_) {
        allocate();
        copy_prefix_from(other, other.size_);
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

    // An independent copy of the valid prefix (what a branching session needs).
    KVCache fork() const { return KVCache(*this); }

    size_t n_ctx() const noexcept { return n_ctx_; }
    size_t size() const noexcept { return size_; }
    size_t n_layers() const noexcept { return n_layers_; }
    size_t n_kv_heads() const noexcept { return n_kv_heads_; }
    size_t head_dim() const noexcept { return head_dim_; }
    KVType type() const noexcept { return type_; }
    size_t element_bytes() const noexcept { return type_ == KVType::f16 ? 2 : 4; }
    size_t bytes() const noexcept { return block_elements() * 2 * n_layers_ * n_kv_heads_ * element_bytes(); }

    // True when the geometry matches `config` (same layers, kv heads, head dim).
    bool compatible(const Config& config) const noexcept {
        return config.n_layers == n_layers_ && config.n_kv_heads == n_kv_heads_ &&
               config.head_dim == head_dim_;
    }

    // Drops positions >= n (n <= size()).
    void truncate(size_t n) {
        if (n > size_)
            detail::fail(ErrorKind::invalid_argument,
                         "KVCache: cannot truncate to " + std::to_string(n) + " positions, only " +
                             std::to_string(size_) + " are filled");
        size_ = n;
    }
    void clear() noexcept { size_ = 0; }

    // Marks positions [0, n) valid; forward() calls this after writing them.
    void set_size(size_t n) {
        if (n > n_ctx_)
            detail::fail(ErrorKind::out_of_range, "KVCache: size " + std::to_string(n) +
                                                      " exceeds n_ctx " + std::to_string(n_ctx_));
        size_ = n;
    }

    // Start of the [n_ctx][head_dim] block of keys (kind 0) or values (kind 1).
    void* block(size_t layer, int kind, size_t kv_head) noexcept {
        return data_.get() + block_offset(layer, kind, kv_head) * element_bytes();
    }
    const void* block(size_t layer, int kind, size_t kv_head) const noexcept {
        return data_.get() + block_offset(layer, kind, kv_head) * element_bytes();
    }
    void* keys(size_t layer, size_t kv_head) noexcept { return block(layer, 0, kv_head); }
    void* values(size_t layer, size_t kv_head) noexcept { return block(layer, 1, kv_head); }
    const void* keys(size_t layer, size_t kv_head) const noexcept { return block(layer, 0, kv_head); }
    const void* values(size_t layer, size_t kv_head) const noexcept { return block(layer, 1, kv_head); }

    // Writes the keys and values of one position: k and v are [n_kv_heads][head_dim].
    void store(size_t layer, size_t pos, const float* k, const float* v) noexcept {
        for (size_t h = 0; h < n_kv_heads_; ++h) {
            store_row(block(layer, 0, h), pos, k + h * head_dim_);
            store_row(block(layer, 1, h), pos, v + h * head_dim_);
        }
    }

    // Reads one stored row back as float (tests, the reference).
    void load_row(size_t layer, int kind, size_t kv_head, size_t pos, float* out) const noexcept {
        const uint8_t* base = static_cast<const uint8_t*>(block(layer, kind, kv_head)) +
                              pos * head_dim_ * element_bytes();
        if (type_ == KVType::f32) {
            std::memcpy(out, base, head_dim_ * 4);
        } else {
            const uint16_t* h = reinterpret_cast<const uint16_t*>(base);
            for (size_t d = 0; d < head_dim_; ++d) out[d] = fp16_to_fp32(h[d]);
        }
    }

    // --- serialization of the valid prefix ---
    std::vector<uint8_t> serialize() const {
        std::vector<uint8_t> out;
        const size_t row = head_dim_ * element_bytes();
        out.reserve(kHeaderBytes + 2 * n_layers_ * n_kv_heads_ * size_ * row);
        smol::detail::append_le<uint32_t>(out, kMagic);
        smol::detail::append_le<uint32_t>(out, kVersion);
        smol::detail::append_le<uint32_t>(out, uint32_t(type_));
        smol::detail::append_le<uint32_t>(out, uint32_t(n_layers_));
        smol::detail::append_le<uint32_t>(out, uint32_t(n_kv_heads_));
        smol::detail::append_le<uint32_t>(out, uint32_t(head_dim_));
        smol::detail::append_le<uint64_t>(out, uint64_t(size_));
        for (size_t l = 0; l < n_layers_; ++l)
            for (int kind = 0; kind < 2; ++kind)
                for (size_t h = 0; h < n_kv_heads_; ++h) {
                    const uint8_t* p = static_cast<const uint8_t*>(block(l, kind, h));
                    out.insert(out.end(), p, p + size_ * row);
                }
        return out;
    }

    // Restores a cache written by serialize() for a model of `config`'s geometry,
    // into a cache of n_ctx positions (kDefaultSize: the default). Malformed or truncated
    // bytes are ErrorKind::format, another geometry ErrorKind::shape, more
    // positions than n_ctx ErrorKind::out_of_range.
    static KVCache deserialize(const Config& config, const void* data, size_t bytes,
                               size_t n_ctx = kDefaultSize) {
        const uint8_t* p = static_cast<const uint8_t*>(data);
        if (!p || bytes < kHeaderBytes)
            detail::fail(ErrorKind::format, "KVCache: serialized cache is truncated (header)");
        if (smol::detail::read_le<uint32_t>(p, 0) != kMagic)
            detail::fail(ErrorKind::format, "KVCache: not a serialized cache (bad magic)");
        if (smol::detail::read_le<uint32_t>(p, 4) != kVersion)
            detail::fail(ErrorKind::unsupported, "KVCache: unsupported serialization version " +
                                                     std::to_string(smol::detail::read_le<uint32_t>(p, 4)));
        const uint32_t type = smol::detail::read_le<uint32_t>(p, 8);
        if (type != uint32_t(KVType::f16) && type != uint32_t(KVType::f32))
            detail::fail(ErrorKind::format, "KVCache: unknown element type " + std::to_string(type));
        const size_t layers = smol::detail::read_le<uint32_t>(p, 12), heads = smol::detail::read_le<uint32_t>(p, 16),
                     dim = smol::detail::read_le<uint32_t>(p, 20);
        const uint64_t size = smol::detail::read_le<uint64_t>(p, 24);
        if (layers != config.n_layers || heads != config.n_kv_heads || dim != config.head_dim)
            detail::fail(ErrorKind::shape,
                         "KVCache: serialized cache has " + std::to_string(layers) + " layers x " +
                             std::to_string(heads) + " kv heads x " + std::to_string(dim) +
                             " dims, the model has " + std::to_string(config.n_layers) + " x " +
                             std::to_string(config.n_kv_heads) + " x " +
                             std::to_string(config.head_dim));
        KVCache cache(config, n_ctx, KVType(type));
        if (size > cache.n_ctx_)
            detail::fail(ErrorKind::out_of_range, "KVCache: serialized cache holds " +
                                                      std::to_string(size) +
                                                      " positions, more than n_ctx " +
                                                      std::to_string(cache.n_ctx_));
        const size_t row = dim * cache.element_bytes();
        // size comes from the bytes: a product that wrapped could match a short
        // buffer and send the copy below past its end.
        size_t payload = 2;
        for (const size_t factor : {layers, heads, size_t(size), row}) {
            if (factor != 0 && payload > SIZE_MAX / factor)
                detail::fail(ErrorKind::format, "KVCache: serialized cache size overflows");
            payload *= factor;
        }
        if (bytes - kHeaderBytes != payload)
            detail::fail(ErrorKind::format, "KVCache: serialized cache has " +
                                                std::to_string(bytes - kHeaderBytes) +
                                                " payload bytes, expected " + std::to_string(payload));
        const uint8_t* src = p + kHeaderBytes;
        for (size_t l = 0; l < layers; ++l)
            for (int kind = 0; kind < 2; ++kind)
                for (size_t h = 0; h < heads; ++h) {
                    std::memcpy(cache.block(l, kind, h), src, size_t(size) * row);
                    src += size_t(size) * row;
                }
        cache.size_ = size_t(size);
        return cache;
    }

private:
    static constexpr uint32_t kMagic = 0x564b4d53u;  // "SMKV" little-endian
    static constexpr uint32_t kVersion = 1;
    static constexpr size_t kHeaderBytes = 32;

    struct AlignedDelete {
        void operator()(uint8_t* p) const noexcept { ::operator delete(p, std::align_val_t(64)); }
    };

    size_t block_elements() const noexcept { return n_ctx_ * head_dim_; }
    size_t block_offset(size_t layer, int kind, size_t kv_head) const noexcept {
        return ((layer * 2 + size_t(kind)) * n_kv_heads_ + kv_head) * block_elements();
    }

    // Uninitialized on purpose: pages are touched only as positions fill.
    // The size was checked in the constructor (a copy has the same geometry).
    void allocate() {
        const size_t total = bytes();
        data_.reset(detail::translate_bad_alloc("KVCache", [total] {
            return static_cast<uint8_t*>(::operator new(total, std::align_val_t(64)));
        }));
    }

    void copy_prefix_from(const KVCache& other, size_t n) {
        const size_t row = head_dim_ * element_bytes();
        for (size_t l = 0; l < n_layers_; ++l)
            for (int kind = 0; kind < 2; ++kind)
                for (size_t h = 0; h < n_kv_heads_; ++h)
                    std::memcpy(block(l, kind, h), other.block(l, kind, h), n * row);
        size_ = n;
    }

    void store_row(void* base, size_t pos, const float* src) noexcept {
        if (type_ == KVType::f32) {
            std::memcpy(static_cast<float*>(base) + pos * head_dim_, src, head_dim_ * 4);
        } else {
            uint16_t* dst = static_cast<uint16_t*>(base) + pos * head_dim_;
            for (size_t d = 0; d < head_dim_; ++d) dst[d] = fp32_to_fp16(src[d]);
        }
    }

    size_t n_layers_ = 0;
    size_t n_kv_heads_ = 0;
    size_t head_dim_ = 0;
    size_t n_ctx_ = 0;
    KVType type_ = KVType::f16;
    size_t size_ = 0;
    std::unique_ptr<uint8_t[], AlignedDelete> data_;
};

SMOL_NAMESPACE_END
