// The forward pass's timing zones: where a pass's time goes, op by op,
// measured inside the pass itself (smol-bench --ops), so the profile follows the
// forward order by construction. A thread opts in with a ForwardZoneRecorder;
// every pass it then runs (Model::forward, a step of the CPU backend) adds each
// zone's wall time, pool barriers included, and the weight bytes its matrices
// read. The forward (model/smollm3.hpp) opens one detail::ZoneTimer per step.
//
//
// A run-time switch rather than a compile-time one: a unit that compiled the
// zones in would need its own copy of every smol type (its own ABI tag,
// detail/abi.hpp, as ISA flags get) to keep one definition per name, and such a
// unit could not link the prebuilt smol::cuda library, which smol-bench needs.
// Switched off, a zone costs a test of a pointer the pass read once (about ten
// zones per layer): no clock is read, no result changes.
#pragma once

#include "../detail/abi.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>

SMOL_NAMESPACE_BEGIN

enum class ForwardZone : uint32_t {
    embed,        // token rows and the RoPE table of the pass
    rmsnorm,      // 2 per layer + the head's
    quantize,     // a matrix input into its activation format, once per format of each y = Wx
    attn_qkv,     // q, k, v as one matmul_batch
    rope,         // rotating q and k
    kv_store,     // k, v into each row's cache
    attention,    // scores, softmax, weighted values
    attn_output,  // Wo
    residual,     // x += Wo o, x += Wdown h
    ffn_gate_up,  // gate, up as one matmul_batch
    swiglu,
    ffn_down,
    lm_head,  // the head's matrix (and the copy into several chunks' logits)
};
constexpr size_t kForwardZones = size_t(ForwardZone::lm_head) + 1;

inline const char* forward_zone_name(ForwardZone zone) noexcept {
    static constexpr const char* kNames[kForwardZones] = {
        "embed",       "rmsnorm",  "quantize",    "attn_q+k+v", "rope",     "kv_store", "attention",
        "attn_output", "residual", "ffn_gate+up", "swiglu",     "ffn_down", "lm_head"};
    return size_t(zone) < kForwardZones ? kNames[size_t(zone)] : "?";
}

// Totals over the passes a ForwardZoneRecorder saw.
struct ForwardZoneTimes {
    double ms[kForwardZones] = {};            // wall time inside each zone
    double weight_bytes[kForwardZones] = {};  // bytes of the matrices each zone multiplied
    uint64_t passes = 0;
};

namespace detail {
// The totals the current thread's passes add to; null: not timed.
inline thread_local ForwardZoneTimes* forward_zone_times = nullptr;

// Adds the time from its construction to its end to zone `zone` of *times (if any).
class ZoneTimer {
public:
    ZoneTimer(ForwardZoneTimes* times, ForwardZone zone) noexcept : times_(times), zone_(zone) {
        if (times_) start_ = std::chrono::steady_clock::now();
    }
    ~ZoneTimer() {
        if (times_)
            times_->ms[size_t(zone_)] +=
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
                    .count();
    }
    ZoneTimer(const ZoneTimer&) = delete;
    ZoneTimer& operator=(const ZoneTimer&) = delete;

private:
    ForwardZoneTimes* times_;
    ForwardZone zone_;
    std::chrono::steady_clock::time_point start_{};
};
}  // namespace detail

// While it lives, the passes this thread runs add their zones to `times`
// (nested recorders: the innermost wins, the outer one resumes after it).
class ForwardZoneRecorder {
public:
    explicit ForwardZoneRecorder(ForwardZoneTimes& times) noexcept
        : previous_(detail::forward_zone_times) {
        detail::forward_zone_times = &times;
    }
    ~ForwardZoneRecorder() { detail::forward_zone_times = previous_; }
    ForwardZoneRecorder(const ForwardZoneRecorder&) = delete;
    ForwardZoneRecorder& operator=(const ForwardZoneRecorder&) = delete;

private:
    ForwardZoneTimes* previous_;
};

SMOL_NAMESPACE_END
