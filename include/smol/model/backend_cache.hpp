// smol::BackendCache: the per-sequence KV cache behind the backend seam
// (model/backend.hpp), its element types (KVType) and its portable serialized
// form. The CPU's KVCache (model/kv_cache.hpp) and the CUDA backend's cache
// derive from it.
//
// BackendCache is the per-sequence KV cache behind one interface: size()
// (leading positions that hold valid entries), n_ctx(), truncate(), clear() are
// plain fields (no virtual call on the decode path); serialize(), restore() and
// clone() are virtual. The serialized form is portable between backends of the
// same model (a session saved on the GPU restores on the CPU and back):
//   offset 0  u32 magic "SMKV", u32 version 1, u32 element type (0 F32, 1 F16,
//             2 Q8_0), u32 n_layers, u32 n_kv_heads, u32 head_dim, u64 size (positions)
//   offset 32 for each layer, for K then V, for each kv head: size rows of
//             kv_row_bytes(type, head_dim) bytes (head_dim elements, or head_dim / 32
//             Q8_0 blocks; keys after RoPE), little-endian
// (the CPU KVCache's format, byte for byte; detail::try_parse_kv_image below is its
// one reader). restore() takes an element type it can store and converts if the
// cache stores another one (the CPU cache adopts the saved type instead; the GPU
// cache refuses Q8_0 as ErrorKind::unsupported).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../detail/bytes.hpp"
#include "../detail/checked.hpp"
#include "../error.hpp"
#include "device.hpp"

SMOL_NAMESPACE_BEGIN

// Element type of a KV cache. q8_0: each row of head_dim values is stored as
// GGUF Q8_0 blocks (32 values: an fp16 scale and 32 int8, 34 bytes), so
// head_dim must be a multiple of 32; 34/64 of F16's bytes.
enum class KVType : uint32_t { f32 = 0, f16 = 1, q8_0 = 2 };

inline const char* kv_type_name(KVType type) noexcept {
    switch (type) {
        case KVType::f32:
            return "f32";
        case KVType::f16:
            return "f16";
        case KVType::q8_0:
            return "q8_0";
    }
    return "unknown";
}

// "f32", "f16" or "q8_0" (what --kv-type takes in the tools); nullopt otherwise.
inline std::optional<KVType> parse_kv_type(std::string_view name) noexcept {
    for (const KVType t : {KVType::f32, KVType::f16, KVType::q8_0})
        if (name == kv_type_name(t)) return t;
    return std::nullopt;
}

// Bytes of one cached row of head_dim values of `type` (head_dim a multiple of
// 32 for q8_0); 0 for a type that is none of the above.
constexpr size_t kv_row_bytes(KVType type, size_t head_dim) noexcept {
    return type == KVType::f32    ? head_dim * 4
           : type == KVType::f16  ? head_dim * 2
           : type == KVType::q8_0 ? head_dim / 32 * 34
                                  : 0;
}

// The two halves of a cache entry (keys are stored after RoPE).
enum class KVPart : int { keys = 0, values = 1 };

class Backend;

// A cache's memory as its session sees it: bytes of the blocks it holds alone,
// and of the blocks it shares with other caches (a CPU cache's fork()):
// `shared` bytes are counted by each sharer, held once.
struct CacheMemory {
    uint64_t owned = 0;
    uint64_t shared = 0;
};

class BackendCache {
public:
    // The one "default size" marker: n_ctx kDefaultSize wherever a cache is
    // made picks min(kDefaultContext, the model's context length); 0 is
    // Error(invalid_argument) everywhere (detail::resolve_n_ctx).
    static constexpr size_t kDefaultSize = ~size_t(0);
    static constexpr size_t kDefaultContext = 4096;

    virtual ~BackendCache() = default;

    size_t size() const noexcept { return size_; }
    size_t n_ctx() const noexcept { return n_ctx_; }
    size_t n_layers() const noexcept { return n_layers_; }
    size_t n_kv_heads() const noexcept { return n_kv_heads_; }
    size_t head_dim() const noexcept { return head_dim_; }
    Device device() const noexcept { return device_; }

    // Drops positions >= n (n <= size()), e.g. to reuse a prompt prefix.
    void truncate(size_t n) {
        if (n > size_)
            detail::fail(ErrorKind::invalid_argument, "KV cache: cannot truncate to " +
                                                          std::to_string(n) + " positions, only " +
                                                          std::to_string(size_) + " are filled");
        size_ = n;
        drop_after(n);
    }
    void clear() noexcept {
        size_ = 0;
        drop_after(0);
    }

    // The bytes this cache holds alone and those it shares with other caches
    // (a CPU cache's fork(); a device cache shares nothing).
    virtual CacheMemory memory() const noexcept = 0;

    // The valid prefix in the portable format (top of this file).
    virtual std::vector<uint8_t> serialize() const = 0;
    // Replaces the contents with serialize()d bytes of a cache of the same
    // geometry (n_ctx stays). Malformed bytes: Error(format); another geometry:
    // Error(shape); more positions than n_ctx: Error(out_of_range); another
    // version: Error(unsupported). On error the cache is unchanged (a device
    // copy that fails half way leaves it empty).
    virtual void restore(const void* data, size_t bytes) = 0;
    // As restore(), with those errors as a value. This default checks the
    // bytes first, so restore() then meets only failures of the device; the
    // CPU cache overrides it to report its memory budget as a value too.
    virtual Status try_restore(const void* data, size_t bytes);
    // An independent copy of the valid prefix, same n_ctx (a forked session).
    virtual std::unique_ptr<BackendCache> clone() const = 0;

protected:
    // Called after the positions >= n left (truncate, clear, erase): a cache
    // whose memory is in blocks may let go of those past n.
    virtual void drop_after(size_t /*n*/) noexcept {}

    BackendCache() = default;
    BackendCache(Device device, const void* owner, size_t n_layers, size_t n_kv_heads,
                 size_t head_dim, size_t n_ctx) noexcept
        : device_(device),
          owner_(owner),
          n_layers_(n_layers),
          n_kv_heads_(n_kv_heads),
          head_dim_(head_dim),
          n_ctx_(n_ctx) {}
    BackendCache(const BackendCache&) = default;
    BackendCache& operator=(const BackendCache&) = default;
    // A moved-from cache is empty (size 0, n_ctx 0), so truncate/clear on it are harmless.
    BackendCache(BackendCache&& other) noexcept { take(other); }
    BackendCache& operator=(BackendCache&& other) noexcept {
        if (this != &other) take(other);
        return *this;
    }

    Device device_ = Device::cpu;
    const void* owner_ = nullptr;  // which backend may run this cache (see Backend::cache_owner_)
    size_t n_layers_ = 0, n_kv_heads_ = 0, head_dim_ = 0;
    size_t n_ctx_ = 0;
    size_t size_ = 0;

private:
    friend class Backend;
    void take(BackendCache& other) noexcept {
        device_ = other.device_;
        owner_ = other.owner_;
        n_layers_ = other.n_layers_;
        n_kv_heads_ = other.n_kv_heads_;
        head_dim_ = other.head_dim_;
        n_ctx_ = other.n_ctx_;
        size_ = other.size_;
        other.n_ctx_ = 0;
        other.size_ = 0;
    }
};

namespace detail {

// A cache size asked for (n_ctx, or BackendCache::kDefaultSize) as positions,
// by the one rule every backend's cache follows.
inline Expected<size_t> resolve_n_ctx(size_t n_ctx, size_t context_length,
                                      const char* who = "KVCache") {
    if (n_ctx == BackendCache::kDefaultSize)
        n_ctx = std::min(BackendCache::kDefaultContext, context_length);
    if (n_ctx == 0)
        return ErrorInfo{ErrorKind::invalid_argument,
                         std::string(who) + ": n_ctx must be positive"};
    if (n_ctx > context_length)
        return ErrorInfo{ErrorKind::invalid_argument, std::string(who) + ": n_ctx " +
                                                          std::to_string(n_ctx) +
                                                          " exceeds the model's context length " +
                                                          std::to_string(context_length)};
    return n_ctx;
}

// The header of a serialized cache (top of this file), checked against the
// geometry of the model that restores it; payload points at the rows.
struct KVImage {
    KVType type = KVType::f16;
    size_t size = 0;  // positions
    size_t row_bytes = 0;
    const uint8_t* payload = nullptr;  // [n_layers][2][n_kv_heads][size][row_bytes]
};

constexpr uint32_t kKVMagic = 0x564b4d53u;  // "SMKV" little-endian
constexpr uint32_t kKVVersion = 1;
constexpr size_t kKVHeaderBytes = 32;

inline void append_kv_header(std::vector<uint8_t>& out, KVType type, size_t n_layers,
                             size_t n_kv_heads, size_t head_dim, size_t size) {
    append_le<uint32_t>(out, kKVMagic);
    append_le<uint32_t>(out, kKVVersion);
    append_le<uint32_t>(out, uint32_t(type));
    append_le<uint32_t>(out, uint32_t(n_layers));
    append_le<uint32_t>(out, uint32_t(n_kv_heads));
    append_le<uint32_t>(out, uint32_t(head_dim));
    append_le<uint64_t>(out, uint64_t(size));
}

// Validates serialized bytes for a cache of the given geometry and n_ctx.
inline Expected<KVImage> try_parse_kv_image(const void* data, size_t bytes, size_t n_layers,
                                            size_t n_kv_heads, size_t head_dim, size_t n_ctx) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    if (!p || bytes < kKVHeaderBytes)
        return ErrorInfo{ErrorKind::format, "KVCache: serialized cache is truncated (header)"};
    if (read_le<uint32_t>(p, 0) != kKVMagic)
        return ErrorInfo{ErrorKind::format, "KVCache: not a serialized cache (bad magic)"};
    if (read_le<uint32_t>(p, 4) != kKVVersion)
        return ErrorInfo{ErrorKind::unsupported, "KVCache: unsupported serialization version " +
                                                     std::to_string(read_le<uint32_t>(p, 4))};
    const uint32_t type = read_le<uint32_t>(p, 8);
    if (type != uint32_t(KVType::f16) && type != uint32_t(KVType::f32) &&
        type != uint32_t(KVType::q8_0))
        return ErrorInfo{ErrorKind::format,
                         "KVCache: unknown element type " + std::to_string(type)};
    const size_t layers = read_le<uint32_t>(p, 12), heads = read_le<uint32_t>(p, 16),
                 dim = read_le<uint32_t>(p, 20);
    const uint64_t size = read_le<uint64_t>(p, 24);
    if (layers != n_layers || heads != n_kv_heads || dim != head_dim)
        return ErrorInfo{ErrorKind::shape,
                         "KVCache: serialized cache has " + std::to_string(layers) + " layers x " +
                             std::to_string(heads) + " kv heads x " + std::to_string(dim) +
                             " dims, the model has " + std::to_string(n_layers) + " x " +
                             std::to_string(n_kv_heads) + " x " + std::to_string(head_dim)};
    if (size > n_ctx)
        return ErrorInfo{ErrorKind::out_of_range,
                         "KVCache: serialized cache holds " + std::to_string(size) +
                             " positions, more than n_ctx " + std::to_string(n_ctx)};
    if (type == uint32_t(KVType::q8_0) && dim % 32 != 0)
        return ErrorInfo{ErrorKind::format,
                         "KVCache: a q8_0 cache needs head_dim a multiple of "
                         "32, the serialized one has " +
                             std::to_string(dim)};
    KVImage image;
    image.type = KVType(type);
    image.size = size_t(size);
    image.row_bytes = kv_row_bytes(image.type, dim);
    // size comes from the bytes: a product that wrapped could match a short
    // buffer and send a copy past its end.
    size_t payload = 2;
    for (const size_t factor : {layers, heads, size_t(size), image.row_bytes}) {
        if (factor != 0 && payload > SIZE_MAX / factor)
            return ErrorInfo{ErrorKind::format, "KVCache: serialized cache size overflows"};
        payload *= factor;
    }
    if (bytes - kKVHeaderBytes != payload)
        return ErrorInfo{ErrorKind::format,
                         "KVCache: serialized cache has " + std::to_string(bytes - kKVHeaderBytes) +
                             " payload bytes, expected " + std::to_string(payload)};
    image.payload = p + kKVHeaderBytes;
    return image;
}

}  // namespace detail

inline Status BackendCache::try_restore(const void* data, size_t bytes) {
    SMOL_TRY(detail::try_parse_kv_image(data, bytes, n_layers_, n_kv_heads_, head_dim_, n_ctx_));
    restore(data, bytes);
    return {};
}

SMOL_NAMESPACE_END
