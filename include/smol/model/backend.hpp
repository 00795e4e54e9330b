// smol::Backend and smol::BackendCache: the one narrow seam between the
// generator and whatever runs the network (the CPU SmolLM3 in model/smollm3.hpp,
// the CUDA backend in cuda/backend.hpp). Plain C++17 with no CUDA headers, so both
// sides (and nvcc) include it.
//
// Data flow (Generator -> Backend -> device):
//   Generator holds a std::unique_ptr<BackendCache> made by backend.make_cache()
//   and, per prefill or decode step, calls
//     backend.forward(segments, n_segments, options)
//   Segment s: tokens [s.n_tokens] at positions s.start .. s.start + n_tokens - 1
//   of the sequence whose keys and values live in *s.cache; the backend appends
//   their K/V to that cache and writes s.logits: [vocab] for the last position,
//   or [n_tokens][vocab] with s.all_logits.
//
// Backend::forward (here, not virtual) is the single copy of what every backend
// needs around the network: the argument checks (null pointers, n == 0, token
// ids against the vocabulary, start <= cache size, start + n <= n_ctx, a cache
// of this backend and geometry, no cache twice), truncating each cache to its
// start, the prefill chunking (options.chunk_size, capped by the backend's
// max_chunk()), cancellation between chunks, the caches' sizes after each chunk,
// and std::bad_alloc as Error(resource). Between those, it calls the backend's
// one virtual, forward_step(), once per *step*: a list of already-checked chunks,
// at most one per segment, each of at most max_chunk() tokens:
//   step k = { chunk k of segment 0, chunk k of segment 1, ... } (segments that
//   have run out of tokens drop out), logits pointed at the right rows (or null
//   for a chunk whose logits nobody asked for).
// So a decode step of one sequence costs one indirect call, and no allocation
// here. Batched decoding ("many NPCs", several sequences per forward) passes one
// segment per sequence (each 1 token, its own cache and position): a backend
// that batches runs the whole step as one pass (one read of the weights for all
// of them). The CPU backend does (model/smollm3.hpp: every chunk's rows through
// each matrix together, each row with its own position and cache), and so does
// the CUDA backend (src/cuda/backend.cpp: the chunks' tokens in one pass, each
// with its own position and cache). Neither the interface nor the generator
// changes when a backend starts batching.
//
// Erase. Backend::erase(cache, first, count) removes positions from a cache
// (ContextPolicy::shift, Generator::erase): the later ones move down and their
// stored keys are re-rotated by the backend, which knows the RoPE rule
// (model/rope.hpp); like forward, the checks live here and each backend
// implements one virtual, do_erase.
//
// Caches. BackendCache (model/backend_cache.hpp) is the per-sequence KV cache
// behind one interface, with its element types (KVType) and a serialized form
// portable between backends of the same model. Device is model/device.hpp's.
//
// Errors: each fallible call has a try_* form that returns the error as a
// Status / Expected (error.hpp) and a plain form that throws it as
// smol::Error. A check that fails changes nothing.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../detail/checked.hpp"
#include "../error.hpp"
#include "backend_cache.hpp"
#include "device.hpp"

SMOL_NAMESPACE_BEGIN

struct ForwardOptions {
    bool all_logits = false;  // Model::forward / SmolLM3::forward only: [n][vocab]
                              // (a Segment carries its own all_logits)
    size_t chunk_size = 0;    // tokens per prefill pass; 0 = the backend's default
    const std::atomic<bool>* cancel = nullptr;  // set -> Error(cancelled) at the next chunk (the
                                                // CPU also looks between layers)

    static constexpr size_t kDefaultChunk = 256;
};

// One sequence's share of a forward pass.
struct Segment {
    const int32_t* tokens = nullptr;  // [n_tokens]
    size_t n_tokens = 0;
    size_t start = 0;               // position of tokens[0]: <= cache->size()
    BackendCache* cache = nullptr;  // this sequence's keys and values
    float* logits = nullptr;        // [vocab], or [n_tokens][vocab] with all_logits; null: no
                                    // logits wanted (the step only extends the cache)
    bool all_logits = false;
};

class Backend {
public:
    virtual ~Backend() = default;

    Device device() const noexcept { return device_; }
    // e.g. "cpu (avx2, 2 threads)" or "cuda (NVIDIA H100, device 0)".
    virtual std::string name() const = 0;
    size_t vocab_size() const noexcept { return vocab_size_; }
    size_t context_length() const noexcept { return context_length_; }
    // The longest chunk forward_step() takes (0: no limit) and the default chunk.
    size_t max_chunk() const noexcept { return max_chunk_; }
    size_t default_chunk() const noexcept { return default_chunk_; }
    // The rows a step computes for about the cost of one group of them (0: not
    // known): a step's cost climbs a stair past each multiple. The CPU's tiles
    // take up to 8 rows at a time, so a 9th row is a second pass over the
    // weights. A scheduler that fills steps
    // (smol::Batcher) stops at a multiple.
    size_t batch_rows() const noexcept { return batch_rows_; }

    // A cache for one sequence on this backend: n_ctx kDefaultSize picks
    // min(4096, context length); 0 or more than the context length is
    // Error(invalid_argument); a size over `memory_budget` (0: physical memory)
    // is Error(resource); a type the backend cannot store is Error(unsupported).
    // try_make_cache returns these errors as a value (and, with exceptions, a
    // failed allocation as Error(resource)); make_cache throws them.
    Expected<std::unique_ptr<BackendCache>> try_make_cache(
        size_t n_ctx = BackendCache::kDefaultSize, KVType type = KVType::f16,
        uint64_t memory_budget = 0) const {
        return detail::catch_bad_alloc("KVCache",
                                       [&] { return do_make_cache(n_ctx, type, memory_budget); });
    }
    std::unique_ptr<BackendCache> make_cache(size_t n_ctx = BackendCache::kDefaultSize,
                                             KVType type = KVType::f16,
                                             uint64_t memory_budget = 0) const {
        return detail::value_or_fail(try_make_cache(n_ctx, type, memory_budget));
    }

    // Removes positions [first, first + count) of `cache` (a cache of this
    // backend; first + count <= cache.size(), else Error(out_of_range)): the
    // later positions move down by count, so the cache then holds size() -
    // count positions. Keys are stored after RoPE: each backend re-rotates the
    // moved keys of the RoPE layers by -count positions (model/rope.hpp: the
    // same rotation for every moved row, without YaRN's magnitude scale, which
    // the stored keys already carry); NoPE layers' keys and all values move
    // bit for bit. Erasing the tail is truncate(). try_erase returns the errors
    // (and, with exceptions, a failed allocation as Error(resource)) as a value.
    Status try_erase(BackendCache& cache, size_t first, size_t count) const {
        SMOL_TRY(cache_status(cache, "erase: "));
        if (first > cache.size_ || count > cache.size_ - first)
            return Status(ErrorKind::out_of_range,
                          "erase: positions " + std::to_string(first) + " + " +
                              std::to_string(count) + " are past the " +
                              std::to_string(cache.size_) + " cached positions");
        if (count == 0) return {};
        if (first + count < cache.size_)
            SMOL_TRY(
                detail::catch_bad_alloc("erase", [&] { return do_erase(cache, first, count); }));
        cache.size_ -= count;
        cache.drop_after(cache.size_);
        return {};
    }
    void erase(BackendCache& cache, size_t first, size_t count) const {
        detail::ok_or_fail(try_erase(cache, first, count));
    }

    // Runs every segment (see the top of this file). After it returns each
    // cache's size() is its start + n_tokens. After an error (cancelled
    // included) each cache covers exactly the steps that completed: start +
    // k * chunk for some k, or the whole segment; a failed check changes nothing.
    // try_forward returns the errors (argument checks, Error(cancelled) and,
    // with exceptions, a failed allocation as Error(resource)) as a value;
    // forward throws them.
    Status try_forward(const Segment* segments, size_t n_segments,
                       const ForwardOptions& options = {}) const {
        SMOL_TRY(check_segments(segments, n_segments));
        return detail::catch_bad_alloc("forward",
                                       [&] { return run_steps(segments, n_segments, options); });
    }
    Status try_forward(const Segment& segment, const ForwardOptions& options = {}) const {
        return try_forward(&segment, 1, options);
    }
    void forward(const Segment* segments, size_t n_segments,
                 const ForwardOptions& options = {}) const {
        detail::ok_or_fail(try_forward(segments, n_segments, options));
    }
    void forward(const Segment& segment, const ForwardOptions& options = {}) const {
        forward(&segment, 1, options);
    }

protected:
    Backend() = default;
    Backend(Device device, const void* cache_owner, size_t vocab_size, size_t context_length,
            size_t n_layers, size_t n_kv_heads, size_t head_dim, size_t max_chunk,
            size_t default_chunk) noexcept
        : device_(device),
          cache_owner_(cache_owner),
          vocab_size_(vocab_size),
          context_length_(context_length),
          n_layers_(n_layers),
          n_kv_heads_(n_kv_heads),
          head_dim_(head_dim),
          max_chunk_(max_chunk),
          default_chunk_(default_chunk) {}
    Backend(const Backend&) = default;
    Backend& operator=(const Backend&) = default;
    Backend(Backend&&) = default;
    Backend& operator=(Backend&&) = default;

    // One step: chunks[i] (distinct caches, checked: 1 <= n_tokens <= max_chunk,
    // start == cache->size(), start + n_tokens <= n_ctx, tokens in the
    // vocabulary; logits null when not wanted, else [vocab] for the chunk's last
    // position or [n_tokens][vocab] with all_logits). Writes K/V of positions
    // [start, start + n_tokens) of each; forward() sets the sizes afterwards. May
    // return Error(cancelled) when *cancel is set (then the step's caches hold
    // no new valid positions: forward() leaves their sizes where they were).
    virtual Status forward_step(const Segment* chunks, size_t n_chunks,
                                const std::atomic<bool>* cancel) const = 0;

    // erase's work on a checked range with later positions to move (first +
    // count < cache.size()); the base sets the size afterwards.
    virtual Status do_erase(BackendCache& cache, size_t first, size_t count) const = 0;

    // make_cache's work (see there), its errors as a value: each backend's own
    // constructor behind the one public way, make_cache / try_make_cache.
    virtual Expected<std::unique_ptr<BackendCache>> do_make_cache(size_t n_ctx, KVType type,
                                                                  uint64_t memory_budget) const = 0;

    Device device_ = Device::cpu;
    // Identifies the caches this backend may run: BackendCache::owner_ must be
    // equal (the CPU: one tag for every KVCache; CUDA: its device state).
    const void* cache_owner_ = nullptr;
    size_t vocab_size_ = 0, context_length_ = 0;
    size_t n_layers_ = 0, n_kv_heads_ = 0, head_dim_ = 0;
    size_t max_chunk_ = 0, default_chunk_ = ForwardOptions::kDefaultChunk;
    size_t batch_rows_ = 0;

private:
    bool cache_matches(const BackendCache& kv) const noexcept {
        return kv.device_ == device_ && kv.owner_ == cache_owner_ && kv.n_layers_ == n_layers_ &&
               kv.n_kv_heads_ == n_kv_heads_ && kv.head_dim_ == head_dim_;
    }
    // Why `kv` is not a cache this backend may run (ok if it is).
    Status cache_status(const BackendCache& kv, const std::string& prefix) const {
        if (kv.device_ != device_ || kv.owner_ != cache_owner_)
            return Status(ErrorKind::invalid_argument,
                          prefix + "the KV cache belongs to another backend (a " +
                              std::string(device_name(kv.device_)) + " cache on the " +
                              device_name(device_) + " backend)");
        if (kv.n_layers_ != n_layers_ || kv.n_kv_heads_ != n_kv_heads_ || kv.head_dim_ != head_dim_)
            return Status(ErrorKind::invalid_argument,
                          prefix + "the KV cache was made for another model geometry");
        return {};
    }

    // The checks build no string unless one fails (they run on every decode step).
    Status check_segments(const Segment* segments, size_t n_segments) const {
        if (segments == nullptr || n_segments == 0)
            return Status(ErrorKind::invalid_argument, "forward: no segments");
        for (size_t s = 0; s < n_segments; ++s) {
            const Segment& seg = segments[s];
            auto refuse = [&](ErrorKind kind, const std::string& what) {
                return Status(kind,
                              (n_segments > 1 ? "forward (segment " + std::to_string(s) + "): "
                                              : "forward: ") +
                                  what);
            };
            if (seg.n_tokens == 0 || seg.tokens == nullptr)
                return refuse(ErrorKind::invalid_argument, "no tokens");
            if (seg.logits == nullptr && seg.all_logits)
                return refuse(ErrorKind::invalid_argument, "all_logits without a logits buffer");
            if (seg.cache == nullptr) return refuse(ErrorKind::invalid_argument, "no KV cache");
            const BackendCache& kv = *seg.cache;
            if (!cache_matches(kv)) {
                Status status = cache_status(kv, "");
                return refuse(status.error().kind, status.error().message);
            }
            for (size_t other = 0; other < s; ++other)
                if (segments[other].cache == seg.cache)
                    return refuse(ErrorKind::invalid_argument, "the same KV cache is in segments " +
                                                                   std::to_string(other) + " and " +
                                                                   std::to_string(s));
            if (seg.start > kv.size_)
                return refuse(ErrorKind::out_of_range,
                              "start position " + std::to_string(seg.start) + " is past the " +
                                  std::to_string(kv.size_) + " cached positions");
            if (seg.n_tokens > kv.n_ctx_ || seg.start > kv.n_ctx_ - seg.n_tokens)
                return refuse(ErrorKind::out_of_range,
                              "positions " + std::to_string(seg.start) + ".." +
                                  std::to_string(seg.start + seg.n_tokens - 1) +
                                  " exceed the context of " + std::to_string(kv.n_ctx_) +
                                  " positions");
            for (size_t i = 0; i < seg.n_tokens; ++i)
                if (seg.tokens[i] < 0 || size_t(seg.tokens[i]) >= vocab_size_)
                    return refuse(ErrorKind::invalid_argument,
                                  "token id " + std::to_string(seg.tokens[i]) + " at index " +
                                      std::to_string(i) + " is outside the vocabulary of " +
                                      std::to_string(vocab_size_));
        }
        return {};
    }

    // The chunk of `seg` that starts `done` tokens in.
    Segment chunk_of(const Segment& seg, size_t done, size_t chunk) const noexcept {
        Segment c;
        c.n_tokens = std::min(chunk, seg.n_tokens - done);
        c.tokens = seg.tokens + done;
        c.start = seg.start + done;
        c.cache = seg.cache;
        c.all_logits = seg.all_logits;
        if (seg.all_logits)
            c.logits = seg.logits + done * vocab_size_;  // checked non-null
        else if (done + c.n_tokens == seg.n_tokens)
            c.logits = seg.logits;
        return c;
    }

    Status run_steps(const Segment* segments, size_t n_segments,
                     const ForwardOptions& options) const {
        size_t chunk = options.chunk_size ? options.chunk_size : default_chunk_;
        if (max_chunk_ && chunk > max_chunk_) chunk = max_chunk_;
        size_t longest = 0;
        for (size_t s = 0; s < n_segments; ++s) {
            segments[s].cache->size_ = segments[s].start;  // positions from start on are rewritten
            longest = std::max(longest, segments[s].n_tokens);
        }
        auto cancelled = [&] {
            return options.cancel && options.cancel->load(std::memory_order_relaxed);
        };
        if (n_segments == 1) {  // the decode path: no allocation
            const Segment& seg = segments[0];
            for (size_t done = 0; done < seg.n_tokens; done += chunk) {
                if (cancelled()) return Status(ErrorKind::cancelled, "forward: cancelled");
                const Segment c = chunk_of(seg, done, chunk);
                SMOL_TRY(forward_step(&c, 1, options.cancel));
                seg.cache->size_ = c.start + c.n_tokens;
            }
            return {};
        }
        std::vector<Segment> step;
        step.reserve(n_segments);
        for (size_t done = 0; done < longest; done += chunk) {
            if (cancelled()) return Status(ErrorKind::cancelled, "forward: cancelled");
            step.clear();
            for (size_t s = 0; s < n_segments; ++s)
                if (done < segments[s].n_tokens) step.push_back(chunk_of(segments[s], done, chunk));
            SMOL_TRY(forward_step(step.data(), step.size(), options.cancel));
            for (const Segment& c : step) c.cache->size_ = c.start + c.n_tokens;
        }
        return {};
    }
};

class SmolLM3;

// How a Model gets a device backend without the model layer knowing any device
// library: a GPU backend's header hands one of these to LoadOptions::device_backend
// (cuda/backend.hpp: smol::cuda_backend(), for a program linked with
// smol::cuda). Plain function pointers, no registration: a static link keeps
// exactly what the program names, and a CPU-only program compiles no GPU code.
struct DeviceBackendFactory {
    Device device = Device::cpu;  // what the backend runs on (Device::cuda)
    // True when a device can be used; otherwise false with the reason in *why.
    bool (*available)(std::string* why) = nullptr;
    // A backend running `net` (weights copied to the device) on device index
    // `index`. What the device cannot run is Error(unsupported) naming it.
    Expected<std::unique_ptr<Backend>> (*create)(const SmolLM3& net, int index) = nullptr;

    explicit operator bool() const noexcept { return available && create; }
};

SMOL_NAMESPACE_END
