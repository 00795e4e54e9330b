// Rng: the sampler's pseudo-random source. xoshiro256** (Blackman & Vigna)
// seeded through splitmix64, with our own integer-to-float conversion, so
// the same seed gives the same stream on every platform and standard library
// (std:: distributions are implementation-defined; we use none).
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>

SMOL_NAMESPACE_BEGIN

class Rng {
public:
    explicit Rng(uint64_t seed = 0) { reseed(seed); }

    // Expands one 64-bit seed into the 256-bit state with splitmix64, which
    // never yields the all-zero state xoshiro must avoid.
    void reseed(uint64_t seed) {
        uint64_t x = seed;
        for (uint64_t& word : state_) word = splitmix64(x);
    }

    // Next 64 random bits (xoshiro256**).
    uint64_t next_u64() {
        const uint64_t result = rotl(state_[1] * 5, 7) * 9;
        const uint64_t shifted = state_[1] << 17;
        state_[2] ^= state_[0];
        state_[3] ^= state_[1];
        state_[1] ^= state_[2];
        state_[0] ^= state_[3];
        state_[2] ^= shifted;
        state_[3] = rotl(state_[3], 45);
        return result;
    }

    // Uniform double in [0, 1): the top 53 bits as a multiple of 2^-53
    // (exact in double, identical everywhere).
    double next_unit() {
        return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
    }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

    static uint64_t splitmix64(uint64_t& x) {
        uint64_t z = (x += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }

    uint64_t state_[4];
};

SMOL_NAMESPACE_END
