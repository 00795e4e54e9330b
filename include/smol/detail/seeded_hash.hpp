// Seeded hashing for open-addressing tables whose keys come from outside the
// program (a GGUF file's vocabulary, a caller's text).
//
// Why: with a public hash, whoever writes the keys can pick keys that share
// one slot, and linear probing then scans the whole pile on every insert: a
// vocabulary of valid merges that all collide makes loading quadratic (tens of
// seconds). A secret drawn once per process and mixed into every hash makes
// the layout unpredictable, so collisions cannot be computed in advance; the
// probe bound below turns what luck remains into a checked worst case.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string_view>

#include "abi.hpp"
#include "fnv.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {

// MurmurHash3's 64-bit finalizer: a bijection in which every input bit flips
// every output bit with probability close to 1/2, so the low bits a table
// indexes with depend on all of the key.
constexpr uint64_t mix64(uint64_t x) noexcept {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb3fe1a85ec53ull;
    return x ^ (x >> 33);
}

inline uint64_t random_device_bits() noexcept {
#if SMOL_HAS_EXCEPTIONS
    try {
        std::random_device device;
        return uint64_t(device()) << 32 ^ uint64_t(device());
    } catch (...) {
        return 0;  // no entropy source: the address and clock below still differ per run
    }
#else
    std::random_device device;
    return uint64_t(device()) << 32 ^ uint64_t(device());
#endif
}

// The secret of this process, drawn on first use (a thread-safe static).
// std::random_device is deterministic on some platforms (older MinGW), so a
// stack address (randomized by ASLR) and the steady clock are mixed in too.
inline uint64_t process_hash_seed() noexcept {
    static const uint64_t seed = [] {
        int on_stack = 0;
        uint64_t s = random_device_bits();
        s = mix64(s ^ uint64_t(reinterpret_cast<uintptr_t>(&on_stack)));
        s = mix64(s ^ uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()));
        return s;
    }();
    return seed;
}

// The seed of a table's attempt-th build: a table that comes out badly shaped
// under one seed is rebuilt under the next, still secret, one.
inline uint64_t table_hash_seed(unsigned attempt) noexcept {
    return mix64(process_hash_seed() + 0x9e3779b97f4a7c15ull * (uint64_t(attempt) + 1));
}

// Seeds to try before a table is declared hostile. A random layout exceeds
// kMaxProbeSlots rarely (about 1e-7 per seed at 2^24 slots, extrapolating the
// exponential tail of the simulations below; far less at real sizes), so
// failing all of them means keys that collide whatever the seed.
constexpr unsigned kHashSeedAttempts = 4;

// The most slots one lookup, hit or miss, may read in a table checked with
// longest_probe(): the longest run of occupied slots plus the empty slot that
// ends it. It also caps each insert, so building n keys costs at most
// n * kMaxProbeSlots probes per seed. Chosen from simulations of random
// layouts (linear probing, power-of-two tables of 2^16..2^24 slots): the
// longest run is at most ~70 slots at load 0.5 and ~120 at load 0.6 (median
// ~100 at 2^24 slots, growing by ~7 per doubling), the most the tables using
// it allow; at load 0.75 it reaches ~300, which is why none fills that far.
// The SmolLM3 / Llama-3 vocabulary (128k tokens at load 0.49, 280k merges at
// 0.53) measured 29..70 and 39..75 slots over 200 seeds.
constexpr size_t kMaxProbeSlots = 256;

// Slots read by the longest possible lookup in a linear-probing table of
// `capacity` slots (a power of two with at least one empty slot), where
// occupied(i) tells whether slot i holds a key. Runs wrap around the end.
template <class Occupied>
size_t longest_probe(size_t capacity, Occupied occupied) {
    size_t start = 0;
    while (start < capacity && occupied(start)) ++start;
    if (start == capacity) return capacity;  // full: a miss would never end
    size_t longest = 0, run = 0;
    for (size_t k = 1; k <= capacity; ++k) {
        // Branch-free: occupancy is a coin flip per slot, so a branch mispredicts
        // half the time and the scan would cost more than the build it checks.
        run = (run + 1) * size_t(occupied((start + k) & (capacity - 1)));
        longest = std::max(longest, run);
    }
    return longest + 1;
}

// FNV-1a from a seeded state, in parts so that the hash of a concatenation a
// + b can be continued from a's state, finished with mix64: FNV's low bits
// alone are a poor slot index, and the seed in both places means neither a
// collision of the FNV states nor one of the finished values can be found
// without it.
class SeededTextHash {
public:
    explicit SeededTextHash(uint64_t seed = 0) noexcept : seed_(seed) {}
    uint64_t start() const noexcept { return kFnv1aOffset ^ seed_; }
    static uint64_t extend(uint64_t state, std::string_view s) noexcept {
        return fnv1a(s.data(), s.size(), state);
    }
    uint64_t finish(uint64_t state) const noexcept { return mix64(state ^ seed_); }
    uint64_t operator()(std::string_view s) const noexcept { return finish(extend(start(), s)); }
    uint64_t seed() const noexcept { return seed_; }

private:
    uint64_t seed_;
};

}  // namespace detail
SMOL_NAMESPACE_END
