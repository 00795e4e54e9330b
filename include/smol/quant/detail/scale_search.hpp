// The k-quant scale search: for one sub-block, the (scale, min) or scale that
// minimizes a weighted squared error, found by sweeping candidate grids and
// solving each in closed form. Internals of quantize_row_q4_k / q5_k / q6_k
// (quant/quantize.hpp, whose top comment gives the whole procedure); nothing
// here is called from outside quant/.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "rounding.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {

// Smallest magnitude we treat as a non-zero block (below it a sub-block is all zeros).
constexpr float kTinyGroupMax = 1e-15f;

// Weighted sums over one sub-block for a candidate grid, accumulated in 8 lanes
// so the compiler can vectorize them (float reductions are otherwise sequential).
struct GridSums {
    float wq = 0, wqq = 0, wqx = 0;
};

template <int N>
inline GridSums grid_sums(const float* x, const float* weights, float inverse, float origin,
                          float lowest, float highest) noexcept {
    static_assert(N % 8 == 0, "sub-blocks are multiples of 8");
    float wq[8] = {}, wqq[8] = {}, wqx[8] = {};
    for (int i = 0; i < N; i += 8) {
        for (int lane = 0; lane < 8; ++lane) {
            const float q = nearest_level_f(inverse * (x[i + lane] - origin), lowest, highest);
            const float w_q = weights[i + lane] * q;
            wq[lane] += w_q;
            wqq[lane] += w_q * q;
            wqx[lane] += w_q * x[i + lane];
        }
    }
    GridSums sums;
    for (int lane = 0; lane < 8; ++lane) {
        sums.wq += wq[lane];
        sums.wqq += wqq[lane];
        sums.wqx += wqx[lane];
    }
    return sums;
}

// Affine fit of one sub-block: x[i] ~= scale * q[i] - offset with integer q in
// [0, max_q] and offset >= 0 (the "min" of Q4_K/Q5_K, subtracted), minimizing
//   E = sum weights[i] * (scale * q[i] - offset - x[i])^2.
// For each candidate inverse scale (max_q + first_step + k * step_size) / (max - min),
// k = 0..steps, the q are rounded on that grid and (scale, offset) re-solved in
// closed form by weighted least squares on those q; the candidate with the smallest
// E wins. Plain min/max rounding is the first contender. E is expanded from the
// sums (no second pass): E = s^2 Swqq + 2 s m Swq + m^2 Sw - 2 s Swqx - 2 m Swx + Swxx,
// with m = -offset.
struct AffineFit {
    float scale = 0;
    float offset = 0;  // subtracted: x ~= scale * q - offset
};

template <int N>
inline AffineFit fit_affine(const float* x, const float* weights, int max_q, float first_step,
                            float step_size, int steps) noexcept {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < N; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
    }
    if (lo > 0) lo = 0;  // the offset only ever moves the grid down: the grid always contains 0
    AffineFit best;
    if (hi <= lo) {  // constant (<= 0) sub-block: scale 0, the offset reproduces it
        best.offset = -lo;
        return best;
    }
    float sum_w = 0, sum_wx = 0, sum_wxx = 0;
    for (int i = 0; i < N; ++i) {
        sum_w += weights[i];
        sum_wx += weights[i] * x[i];
        sum_wxx += weights[i] * x[i] * x[i];
    }
    auto error_of = [&](const GridSums& g, float scale, float min_value) {
        return scale * scale * g.wqq + 2 * scale * min_value * g.wq +
               min_value * min_value * sum_w - 2 * scale * g.wqx - 2 * min_value * sum_wx + sum_wxx;
    };
    const float range = hi - lo;
    const float top = float(max_q);
    // Contender 0: plain rounding between min and max.
    best.scale = range / top;
    best.offset = -lo;
    float best_error = error_of(grid_sums<N>(x, weights, top / range, lo, 0, top), best.scale, lo);

    for (int k = 0; k <= steps; ++k) {
        const float inverse = (top + first_step + step_size * float(k)) / range;
        const GridSums g = grid_sums<N>(x, weights, inverse, lo, 0, top);
        // Normal equations of min over (scale, m) of sum w (scale * q + m - x)^2.
        const float det = sum_w * g.wqq - g.wq * g.wq;
        if (det <= 0) continue;
        float scale = (sum_w * g.wqx - sum_wx * g.wq) / det;
        float min_value = (g.wqq * sum_wx - g.wq * g.wqx) / det;
        if (min_value > 0) {  // the format needs m <= 0: refit the scale alone with m = 0
            min_value = 0;
            scale = g.wqx / g.wqq;
        }
        if (!(scale > 0)) continue;
        const float error = error_of(g, scale, min_value);
        if (error < best_error) {
            best_error = error;
            best.scale = scale;
            best.offset = -min_value;
        }
    }
    return best;
}

// Symmetric fit of one Q6_K sub-block: x[i] ~= scale * q[i] with integer q in
// [-half_range, half_range - 1], minimizing sum x[i]^2 * (scale * q[i] - x[i])^2
// (errors on large weights matter most). The scale's sign is chosen so that the
// largest-magnitude value lands on the longer, negative end of the range.
// Candidate inverse scales around half_range / max are tried, each solved in
// closed form; the error is sum w x^2 - Swqx^2 / Swqq, so the largest
// Swqx^2 / Swqq wins.
template <int N>
inline float fit_symmetric(const float* x, int half_range) noexcept {
    float extreme = 0, extreme_abs = 0;
    for (int i = 0; i < N; ++i) {
        const float a = std::fabs(x[i]);
        if (a > extreme_abs) {
            extreme_abs = a;
            extreme = x[i];
        }
    }
    if (extreme_abs < kTinyGroupMax) return 0;
    float weights[N];
    for (int i = 0; i < N; ++i) weights[i] = x[i] * x[i];
    const float lowest = float(-half_range), highest = float(half_range - 1);
    float best_scale = 0, best_gain = -1;
    for (int k = 0; k <= 19; ++k) {
        // k = 0 is the plain grid; then offsets -0.9 .. +0.9 around it.
        const float offset = k == 0 ? 0.0f : 0.1f * float(k - 10);
        const float inverse = -(float(half_range) + offset) / extreme;
        const GridSums g = grid_sums<N>(x, weights, inverse, 0, lowest, highest);
        if (g.wqq <= 0) continue;
        const float gain = g.wqx * g.wqx / g.wqq;
        if (gain > best_gain) {
            best_gain = gain;
            best_scale = g.wqx / g.wqq;
        }
    }
    return best_scale;
}

// Squared error of one 32-weight sub-block quantized on the grid step * q - offset.
template <int kMaxQ>
inline float k4_grid_error(const float* x, float step, float offset) noexcept {
    float error[8] = {};
    const float inverse = step > 0 ? 1 / step : 0;
    for (int i = 0; i < 32; i += 8) {
        for (int lane = 0; lane < 8; ++lane) {
            const float q = nearest_level_f((x[i + lane] + offset) * inverse, 0, float(kMaxQ));
            const float diff = step * q - offset - x[i + lane];
            error[lane] += diff * diff;
        }
    }
    float total = 0;
    for (float e : error) total += e;
    return total;
}

// Tries each 6-bit (scale, min) code pair one step around the rounded one and
// keeps the pair whose grid gives the sub-block the smallest squared error.
template <int kMaxQ>
inline void refine_k4_codes(const float* x, float d, float dmin, uint8_t& scale_code,
                            uint8_t& offset_code) noexcept {
    int best_scale = scale_code, best_offset = offset_code;
    float best_error = k4_grid_error<kMaxQ>(x, d * float(scale_code), dmin * float(offset_code));
    for (int ds = -1; ds <= 1; ++ds) {
        for (int dm = -1; dm <= 1; ++dm) {
            const int sc = scale_code + ds, m = offset_code + dm;
            if ((ds == 0 && dm == 0) || sc < 0 || sc > 63 || m < 0 || m > 63) continue;
            const float error = k4_grid_error<kMaxQ>(x, d * float(sc), dmin * float(m));
            if (error < best_error) {
                best_error = error;
                best_scale = sc;
                best_offset = m;
            }
        }
    }
    scale_code = uint8_t(best_scale);
    offset_code = uint8_t(best_offset);
}

}  // namespace detail
SMOL_NAMESPACE_END
