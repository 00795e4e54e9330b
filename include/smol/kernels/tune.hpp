// The kernels' self-tuning: measures the speed-only settings of a kernel set
// (KernelParams, kernels/kernel_set.hpp) where it runs and keeps the fastest.
// Every candidate gives the same bits, so the choice changes speed only.
//
//   enum class TuneMode { automatic, on, off }   (namespace smol, like CpuLevel)
//       automatic: tune a model whose weights are at least kTuneMinWeightBytes,
//       unless SMOL_TUNE=off is set in the environment; on: tune whatever the
//       size (SMOL_TUNE=off still wins); off: the defaults.
//   TuneMode requested_tune_mode(TuneMode mode); bool tune_off_by_environment()
//       mode with SMOL_TUNE applied: "off" (or "0") turns any mode off.
// The rest in namespace smol::kernels:
//   struct TuneTiming { KernelParams params; const char* setting; double ns_per_mib; int samples; }
//       one candidate as measured: the median time of a sample over its bytes.
//   struct TuneReport { bool tuned; std::string skipped; KernelParams chosen;
//                       std::vector<TuneTiming> timings; double seconds; std::string text() }
//   struct TuneOptions { double budget_seconds = 0.25; int rounds = 5; double keep_margin = 0.01; }
//   TuneReport tune_kernels(const KernelSet& base, const std::vector<std::vector<WeightMatrix>>& layers,
//                           ThreadPool& pool, const TuneOptions& options = {})
//       measures on `layers` (each one layer's matrices, as the model's decode
//       reads them) one token at a time on `pool`, setting by setting
//       (coordinate descent from base.params): the one-token interleaved tile's
//       pacing and prefetch distance (when some matrix is interleaved and the
//       level has those tiles), the stored rows' prefetch distance (when some
//       Q6_K matrix is stored, at avx512 / amx), the decode chunks per thread.
//       Candidates alternate within a round (a rotated order each round), each
//       sample one layer's mat-vecs, the layers taken in turn so that a sample
//       reads its bytes from memory as decode does, not from the cache the
//       previous sample filled (layers bigger than the last-level cache). A
//       setting keeps its current value unless a candidate is faster by more
//       than keep_margin. Stops adding rounds once the budget is spent (at
//       least one round per setting).
//   constexpr uint64_t kTuneMinWeightBytes   256 MiB: smaller models (the test
//       fixtures) are not tuned under TuneMode::automatic.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../core/threadpool.hpp"
#include "../quant/weight_matrix.hpp"
#include "dispatch.hpp"
#include "kernel_set.hpp"
#include "kernels.hpp"

SMOL_NAMESPACE_BEGIN

enum class TuneMode : uint8_t { automatic, on, off };

// Whether SMOL_TUNE in the environment turns tuning off ("off" or "0").
inline bool tune_off_by_environment() noexcept {
    const char* env = std::getenv("SMOL_TUNE");
    return env && (std::strcmp(env, "off") == 0 || std::strcmp(env, "0") == 0);
}

inline TuneMode requested_tune_mode(TuneMode mode) noexcept {
    return tune_off_by_environment() ? TuneMode::off : mode;
}

namespace kernels {

constexpr uint64_t kTuneMinWeightBytes = uint64_t(256) << 20;

struct TuneTiming {
    KernelParams params;
    const char* setting = "";  // which setting this candidate varied
    double ns_per_mib = 0;     // median over its samples
    int samples = 0;
};

struct TuneReport {
    bool tuned = false;
    std::string skipped;  // why the defaults were kept without measuring (empty when tuned)
    KernelParams chosen;
    std::vector<TuneTiming> timings;
    double seconds = 0;  // the tuning's wall time

    // "pace 0, ... (tuned in 180 ms)" or "pace 60, ... (defaults: <skipped>)".
    std::string text() const {
        if (tuned)
            return kernel_params_text(chosen) + " (tuned in " +
                   std::to_string(int(seconds * 1000 + 0.5)) + " ms)";
        return kernel_params_text(chosen) + " (defaults: " + skipped + ")";
    }
};

struct TuneOptions {
    double budget_seconds = 0.25;
    int rounds = 5;
    double keep_margin = 0.01;
};

namespace detail {

// One candidate's set and its inputs (one per activation format and width).
struct TuneCandidate {
    const KernelSet* set = nullptr;
    KernelParams params;
    std::map<std::pair<int, size_t>, std::unique_ptr<QuantizedInput>> inputs;
    std::vector<double> ns_per_mib;
};

inline QuantizedInput& tune_input(TuneCandidate& c, GGMLType type, size_t cols) {
    const std::pair<int, size_t> key{int(activation_type_for(type)), cols};
    std::unique_ptr<QuantizedInput>& input = c.inputs[key];
    if (!input) {
        std::vector<float> x(cols);
        uint32_t state = 0x9e3779b9u ^ uint32_t(cols);
        for (float& v : x) {  // any values: the time does not depend on them
            state = state * 1664525u + 1013904223u;
            v = float(int32_t(state >> 8) - (1 << 23)) / float(1 << 23);
        }
        input.reset(new QuantizedInput(*c.set));
        input->quantize(type, x.data(), 1, cols);
    }
    return *input;
}

// One sample: every matrix of `layer` against one token, matrices that read
// the same input in one matmul_batch (as decode runs q/k/v and gate/up).
// Returns the nanoseconds per MiB of weights.
inline double tune_sample(TuneCandidate& c, const std::vector<WeightMatrix>& layer,
                          ThreadPool& pool, std::vector<float>& y) {
    struct Group {
        GGMLType type;
        size_t cols;
        std::vector<MatmulJob> jobs;
    };
    std::vector<Group> groups;
    size_t rows = 0, bytes = 0;
    for (const WeightMatrix& w : layer) rows += w.rows;
    if (y.size() < rows) y.resize(rows);
    size_t offset = 0;
    for (const WeightMatrix& w : layer) {
        bytes += w.rows * w.row_bytes;
        auto same = [&](const Group& g) {
            return activation_type_for(g.type) == activation_type_for(w.type) && g.cols == w.cols;
        };
        auto it = std::find_if(groups.begin(), groups.end(), same);
        if (it == groups.end()) it = groups.insert(groups.end(), Group{w.type, w.cols, {}});
        it->jobs.push_back(MatmulJob{w, y.data() + offset, 0});
        offset += w.rows;
    }
    std::vector<QuantizedInput*> inputs;
    for (const Group& g : groups) inputs.push_back(&tune_input(c, g.type, g.cols));
    const auto start = std::chrono::steady_clock::now();
    for (size_t g = 0; g < groups.size(); ++g)
        matmul_batch(groups[g].jobs.data(), groups[g].jobs.size(), *inputs[g], pool);
    const double ns = double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now() - start)
                                 .count());
    return ns / (double(std::max<size_t>(bytes, 1)) / double(1 << 20));
}

inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace detail

inline TuneReport tune_kernels(const KernelSet& base,
                               const std::vector<std::vector<WeightMatrix>>& layers,
                               ThreadPool& pool, const TuneOptions& options = {}) {
    TuneReport report;
    report.chosen = base.params;
    std::vector<const std::vector<WeightMatrix>*> usable;
    bool interleaved = false, stored_q6k = false;
    for (const std::vector<WeightMatrix>& layer : layers) {
        if (layer.empty()) continue;
        usable.push_back(&layer);
        for (const WeightMatrix& w : layer) {
            interleaved |= w.interleaved_rows > 0 && base.interleaves(w.type);
            stored_q6k |= w.type == GGMLType::Q6_K && w.interleaved_rows == 0;
        }
    }
    if (usable.empty()) {
        report.skipped = "no matrices to measure";
        return report;
    }
    const bool zmm = base.level == CpuLevel::avx512 || base.level == CpuLevel::amx;

    // The settings, in the order they are tuned, each as the candidates it tries.
    struct Setting {
        const char* name;
        std::vector<KernelParams> (*candidates)(const KernelParams&);
    };
    std::vector<Setting> settings;
    if (zmm && interleaved)
        settings.push_back({"interleaved tile", [](const KernelParams& p) {
                                std::vector<KernelParams> out;
                                for (int pace : kPaceCandidates)
                                    for (int ahead : kInterleavedPrefetchCandidates) {
                                        KernelParams q = p;
                                        q.pace_steps = pace;
                                        q.interleaved_prefetch = ahead;
                                        out.push_back(q);
                                    }
                                return out;
                            }});
    if (zmm && stored_q6k)
        settings.push_back({"stored prefetch", [](const KernelParams& p) {
                                std::vector<KernelParams> out;
                                for (int ahead : kStoredPrefetchCandidates) {
                                    KernelParams q = p;
                                    q.stored_prefetch = ahead;
                                    out.push_back(q);
                                }
                                return out;
                            }});
    settings.push_back({"decode chunks", [](const KernelParams& p) {
                            std::vector<KernelParams> out;
                            for (int chunks : kDecodeChunkCandidates) {
                                KernelParams q = p;
                                q.decode_chunks = chunks;
                                out.push_back(q);
                            }
                            return out;
                        }});

    size_t total_candidates = 0;
    for (const Setting& s : settings) total_candidates += s.candidates(report.chosen).size();
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    std::vector<float> y;
    size_t cursor = 0;  // the next layer a sample reads: each in turn, round after round
    double budget_used = 0;
    for (const Setting& setting : settings) {
        std::vector<detail::TuneCandidate> candidates;
        for (const KernelParams& p : setting.candidates(report.chosen)) {
            detail::TuneCandidate c;
            c.set = &kernel_set(base.level, p);
            c.params = c.set->params;
            candidates.push_back(std::move(c));
        }
        const size_t n = candidates.size();
        budget_used += options.budget_seconds * double(n) / double(total_candidates);
        // A first sample per candidate that is not counted: it builds the inputs
        // and wakes the threads.
        for (detail::TuneCandidate& c : candidates)
            detail::tune_sample(c, *usable[cursor++ % usable.size()], pool, y);
        for (int round = 0; round < std::max(1, options.rounds); ++round) {
            if (round > 0 && elapsed() > budget_used) break;
            for (size_t k = 0; k < n; ++k) {
                detail::TuneCandidate& c = candidates[(k + size_t(round)) % n];
                c.ns_per_mib.push_back(
                    detail::tune_sample(c, *usable[cursor++ % usable.size()], pool, y));
            }
        }
        size_t best = 0, current = 0;
        std::vector<double> medians(n);
        for (size_t k = 0; k < n; ++k) {
            medians[k] = detail::median(candidates[k].ns_per_mib);
            if (medians[k] < medians[best]) best = k;
            if (candidates[k].params == report.chosen) current = k;
            report.timings.push_back(TuneTiming{candidates[k].params, setting.name, medians[k],
                                                int(candidates[k].ns_per_mib.size())});
        }
        if (medians[best] * (1 + options.keep_margin) < medians[current])
            report.chosen = candidates[best].params;
    }
    report.tuned = true;
    report.seconds = elapsed();
    return report;
}

}  // namespace kernels
SMOL_NAMESPACE_END
