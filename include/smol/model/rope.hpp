// smol::RopeRule: how SmolLM3 encodes a position into its queries and keys,
// for one model's Config: plain RoPE, or RoPE with YaRN scaling.
//
// RoPE rotates the adjacent pairs (x[2i], x[2i+1]), i < rope_dims / 2, of
// each head by the angle pos * f_i, with f_i = base^(-2i / rope_dims). YaRN
// (rope.scaling.type = yarn, factor s, original context L) keeps the fast
// pairs (short wavelengths) as they are, divides the slow ones' frequency by
// s, and blends in between over a ramp of pairs: with the reference engine's
// correction dims
//   d(b) = rope_dims * ln(L / (2 pi b)) / (2 ln base),
//   low = max(0, floor(d(32))), high = min(rope_dims - 1, ceil(d(1))),
//   ramp_i = 1 - clamp((i - low) / max(0.001, high - low), 0, 1),
//   f_i' = f_i * (ramp_i + (1 - ramp_i) / s),
// and scales the rotated vectors' magnitude by
//   mscale = attn_factor * (1 + 0.1 ln s),
// so that q . k (both rotated) grows by mscale^2: YaRN's attention scaling.
// NoPE layers ((l + 1) % 4 == 0) rotate nothing and scale nothing.
//
// The angle is linear in the position, so moving an encoded key by d
// positions (Backend::erase) is a rotation by d * f_i' of the stored pairs,
// without mscale: the stored key carries it already, and applying it again
// would compound it at every shift.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "config.hpp"

SMOL_NAMESPACE_BEGIN

class RopeRule {
public:
    RopeRule() = default;
    explicit RopeRule(const Config& c) : frequency_(c.rope_dims / 2) {
        const double base = double(c.rope_freq_base), dims = double(c.rope_dims);
        for (size_t i = 0; i < frequency_.size(); ++i)
            frequency_[i] = std::pow(base, -2.0 * double(i) / dims);
        if (!c.rope_yarn || !(c.rope_scaling_factor > 1.0f)) {
            mscale_ = c.rope_yarn ? c.rope_attn_factor : 1.0f;
            return;
        }
        const double s = double(c.rope_scaling_factor);
        const double original = double(c.rope_original_context);
        constexpr double kPi = 3.14159265358979323846;
        auto correction_dim = [&](double rotations) {
            return dims * std::log(original / (rotations * 2.0 * kPi)) / (2.0 * std::log(base));
        };
        const double low = std::max(0.0, std::floor(correction_dim(32.0)));
        const double high = std::min(dims - 1.0, std::ceil(correction_dim(1.0)));
        for (size_t i = 0; i < frequency_.size(); ++i) {
            const double y = (double(i) - low) / std::max(0.001, high - low);
            const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
            frequency_[i] *= ramp + (1.0 - ramp) / s;
        }
        mscale_ = float(double(c.rope_attn_factor) * (1.0 + 0.1 * std::log(s)));
    }

    size_t pairs() const noexcept { return frequency_.size(); }
    // Radians per position of pair i (YaRN's blend included).
    double frequency(size_t i) const noexcept { return frequency_[i]; }
    // YaRN's magnitude scale of a rotated query or key (1 for plain RoPE).
    float mscale() const noexcept { return mscale_; }

    // The rotation that encodes position `pos`: cos[i], sin[i] for i < pairs(),
    // scaled by mscale().
    void encode(size_t pos, float* cos, float* sin) const noexcept {
        for (size_t i = 0; i < frequency_.size(); ++i) {
            const double theta = double(pos) * frequency_[i];
            cos[i] = float(std::cos(theta) * mscale_);
            sin[i] = float(std::sin(theta) * mscale_);
        }
    }
    // The rotation that moves an encoded key by `delta` positions (negative:
    // towards the start), unscaled.
    void shift(int64_t delta, float* cos, float* sin) const noexcept {
        for (size_t i = 0; i < frequency_.size(); ++i) {
            const double theta = double(delta) * frequency_[i];
            cos[i] = float(std::cos(theta));
            sin[i] = float(std::sin(theta));
        }
    }

private:
    std::vector<double> frequency_;  // [rope_dims / 2]
    float mscale_ = 1.0f;
};

SMOL_NAMESPACE_END
