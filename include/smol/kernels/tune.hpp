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
//       one candidate as measured: time per MiB of weights, the mean of its
//       faster half of samples (interference only slows a sample down).
//   struct TuneReport { bool tuned; std::string skipped; KernelParams chosen;
//                       std::vector<TuneTiming> timings; double seconds; std::string text() }
//   struct TuneOptions { double budget_seconds = 0.3; int rounds = 6; double keep_margin = 0.02;
//                        uint64_t window_bytes = 0; }
//   TuneReport tune_kernels(const KernelSet& base, const std::vector<std::vector<WeightMatrix>>&
//   layers,
//                           ThreadPool& pool, const TuneOptions& options = {})
//       measures on `layers` (each one layer's matrices, as the model's decode
//       reads them) one token at a time on `pool`, setting by setting
//       (coordinate descent from base.params): the one-token interleaved tile's
//       pacing, then its prefetch distance (when some matrix is interleaved and
//       the level has those tiles: avx512, amx), the stored rows' prefetch
//       distance (when some matrix it applies to is stored: tunes_stored_prefetch),
//       whether the codebook tiles gather their grid rows (avx512 / amx, when
//       some matrix is of a codebook type), the decode chunks per
//       thread (every level). A setting keeps its current value
//       unless a candidate's time is lower by more than keep_margin.
//
//       Where the time goes: decode reads every weight byte from memory once
//       per token, so the samples must too, not from a cache the previous
//       sample filled, and not through first-touch page faults of the mapped
//       file. So the tuner reads a window of the first layers of at least
//       window_bytes (0: 1.25 x the last-level cache, at least 128 MiB, at
//       most 768 MiB, at most all layers) once untimed (faulting their pages
//       in: the first token would do it otherwise), then each sample is the
//       next ~32 MiB of the window's layers, in turn, cycling; the candidates
//       of a setting alternate within a round, in a rotated order each round.
//       Rounds stop once the setting's share of budget_seconds is spent (at
//       least two rounds). Timings are per MiB of weights read.
//
//   Remembering a choice (LoadOptions::tune_file):
//   std::string tune_key(CpuLevel level, int threads)
//       "<level> <threads> <CPU model name>" (Linux: /proc/cpuinfo's "model name").
//   TuneFileRead read_tune_file(const std::string& path, const std::string& key)
//       the settings remembered for key, if any; malformed: a file that exists but
//       is not all lines of "smol-tune 2 PACE IPREFETCH SPREFETCH CHUNKS GATHERS KEY"
//       (or of version 1, "smol-tune 1 PACE IPREFETCH SPREFETCH CHUNKS KEY") with
//       candidate values (a missing file is not malformed: nothing remembered).
//   bool write_tune_file(const std::string& path, const std::string& key, const KernelParams&)
//       the file with key's line set (other keys' lines kept when the file was
//       well formed), written whole to path + ".tmp" and renamed; false if it could not be.
//   constexpr uint64_t kTuneMinWeightBytes   256 MiB: smaller models (the test
//       fixtures) are not tuned under TuneMode::automatic.
#pragma once

#include "../detail/abi.hpp"
#include "../detail/unit_vector.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <unistd.h>
#endif

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
    const char* setting = "";  // which setting it varied: "pace", "interleaved prefetch", ...
    double ns_per_mib = 0;     // the mean of its faster half of samples
    int samples = 0;
    std::vector<double> runs;  // each sample's ns per MiB, in the order taken
};

struct TuneReport {
    bool tuned = false;
    std::string skipped;  // why the defaults were kept without measuring (empty when tuned)
    KernelParams chosen;
    std::vector<TuneTiming> timings;
    double seconds = 0;  // the tuning's wall time

    // "pace 0, ... (tuned in 180 ms)" or "pace 60, ... (not tuned: <skipped>)".
    std::string text() const {
        if (tuned)
            return kernel_params_text(chosen) + " (tuned in " +
                   std::to_string(int(seconds * 1000 + 0.5)) + " ms)";
        return kernel_params_text(chosen) + " (not tuned: " + skipped + ")";
    }
};

struct TuneOptions {
    double budget_seconds = 0.3;  // for the timed rounds (the untimed first pass aside)
    int rounds = 6;
    double keep_margin = 0.02;
    uint64_t window_bytes = 0;  // 0: from the last-level cache's size (see above)
};

namespace detail {

// One candidate's set and its inputs (one per activation format and width).
struct TuneCandidate {
    const KernelSet* set = nullptr;
    KernelParams params;
    std::map<std::pair<int, size_t>, std::unique_ptr<QuantizedInput>> inputs;
    smol::detail::UnitVector<double> ns_per_mib;
};

inline QuantizedInput& tune_input(TuneCandidate& c, GGMLType type, size_t cols) {
    const std::pair<int, size_t> key{int(activation_type_for(type)), cols};
    std::unique_ptr<QuantizedInput>& input = c.inputs[key];
    if (!input) {
        smol::detail::UnitVector<float> x(cols);
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

// One sample: every matrix of `layer` (one or more layers') against one token, matrices that read
// the same input in one matmul_batch (as decode runs q/k/v and gate/up).
// Returns the nanoseconds per MiB of weights.
inline double tune_sample(TuneCandidate& c, const std::vector<const WeightMatrix*>& layer,
                          ThreadPool& pool, smol::detail::UnitVector<float>& y) {
    struct Group {
        GGMLType type;
        size_t cols;
        std::vector<MatmulJob> jobs;
    };
    std::vector<Group> groups;
    size_t rows = 0, bytes = 0;
    for (const WeightMatrix* w : layer) rows += w->rows;
    if (y.size() < rows) y.resize(rows);
    size_t offset = 0;
    for (const WeightMatrix* m : layer) {
        const WeightMatrix& w = *m;
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

// The last-level cache's bytes where the system says, else 32 MiB.
inline uint64_t last_level_cache_bytes() noexcept {
#if defined(__linux__) && defined(_SC_LEVEL3_CACHE_SIZE)
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) return uint64_t(l3);
#endif
    return uint64_t(32) << 20;
}

// The mean of the faster half of the samples (the larger half when odd): on a
// shared machine a sample is either undisturbed or slowed down, by another
// process taking a core, never sped up, so the slow half says little about the
// kernel, while a mean over several samples still averages the layers'
// differences out.
inline double faster_half_mean(smol::detail::UnitVector<double> v) {
    if (v.empty()) return 0;
    // An insertion sort of a handful of samples, in smol's own (ISA-tagged)
    // code: std::sort over doubles is an instantiation shared with units built
    // with other -m flags (README, "run-time dispatch").
    for (size_t i = 1; i < v.size(); ++i)
        for (size_t j = i; j > 0 && v[j] < v[j - 1]; --j) {
            const double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    const size_t n = (v.size() + 1) / 2;
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += v[i];
    return sum / double(n);
}

}  // namespace detail

// Whether KernelParams::stored_prefetch changes the one-token tile of `type`
// over stored rows at `level`.
constexpr bool tunes_stored_prefetch(CpuLevel level, GGMLType type) noexcept {
    if (level == CpuLevel::avx512 || level == CpuLevel::amx) return type == GGMLType::Q6_K;
    if (level == CpuLevel::avx2 || level == CpuLevel::avxvnni)
        return type == GGMLType::Q4_K || type == GGMLType::Q5_K || type == GGMLType::Q6_K;
    return false;
}

inline TuneReport tune_kernels(const KernelSet& base,
                               const std::vector<std::vector<WeightMatrix>>& layers,
                               ThreadPool& pool, const TuneOptions& options = {}) {
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    TuneReport report;
    report.chosen = base.params;

    // The window, and its samples of ~32 MiB of whole layers each.
    const uint64_t window_bytes =
        options.window_bytes > 0
            ? options.window_bytes
            : std::min<uint64_t>(uint64_t(768) << 20,
                                 std::max<uint64_t>(uint64_t(128) << 20,
                                                    detail::last_level_cache_bytes() / 4 * 5));
    constexpr uint64_t kSampleBytes = uint64_t(32) << 20;
    std::vector<std::vector<const WeightMatrix*>> samples(1);
    uint64_t in_window = 0, in_sample = 0;
    bool interleaved = false, stored = false, codebook = false;
    for (const std::vector<WeightMatrix>& layer : layers) {
        if (in_window >= window_bytes) break;
        if (layer.empty()) continue;
        if (in_sample >= kSampleBytes) {
            samples.emplace_back();
            in_sample = 0;
        }
        for (const WeightMatrix& w : layer) {
            samples.back().push_back(&w);
            in_sample += w.rows * w.row_bytes;
            in_window += w.rows * w.row_bytes;
            interleaved |= w.interleaved_rows > 0 && base.interleaves(w.type);
            stored |= w.interleaved_rows == 0 && tunes_stored_prefetch(base.level, w.type);
            codebook |= smol::is_codebook_type(w.type);
        }
    }
    if (samples.back().empty()) samples.pop_back();
    if (samples.empty()) {
        report.skipped = "no matrices to measure";
        return report;
    }
    const bool zmm = base.level == CpuLevel::avx512 || base.level == CpuLevel::amx;

    // The settings, in the order they are tuned.
    enum class Field {
        pace,
        interleaved_prefetch,
        stored_prefetch,
        codebook_gathers,
        decode_chunks
    };
    struct Setting {
        const char* name;
        Field field;
        const int* values;
        size_t n;
    };
    std::vector<Setting> settings;
    if (zmm && interleaved) {
        settings.push_back({"pace", Field::pace, kPaceCandidates, std::size(kPaceCandidates)});
        settings.push_back({"interleaved prefetch", Field::interleaved_prefetch,
                            kInterleavedPrefetchCandidates,
                            std::size(kInterleavedPrefetchCandidates)});
    }
    if (stored)
        settings.push_back({"stored prefetch", Field::stored_prefetch, kStoredPrefetchCandidates,
                            std::size(kStoredPrefetchCandidates)});
    if (zmm && codebook)
        settings.push_back({"codebook gathers", Field::codebook_gathers, kCodebookGatherCandidates,
                            std::size(kCodebookGatherCandidates)});
    settings.push_back({"decode chunks", Field::decode_chunks, kDecodeChunkCandidates,
                        std::size(kDecodeChunkCandidates)});
    size_t total_candidates = 0;
    for (const Setting& s : settings) total_candidates += s.n;

    smol::detail::UnitVector<float> y;
    {  // the untimed first pass: pages in, threads awake
        detail::TuneCandidate warm;
        warm.set = &base;
        for (const std::vector<const WeightMatrix*>& sample : samples)
            detail::tune_sample(warm, sample, pool, y);
    }
    size_t cursor = 0;  // the next sample: each in turn, cycling through the window
    for (const Setting& setting : settings) {
        std::vector<detail::TuneCandidate> candidates;
        for (size_t v = 0; v < setting.n; ++v) {
            KernelParams p = report.chosen;
            switch (setting.field) {
                case Field::pace:
                    p.pace_steps = setting.values[v];
                    break;
                case Field::interleaved_prefetch:
                    p.interleaved_prefetch = setting.values[v];
                    break;
                case Field::stored_prefetch:
                    p.stored_prefetch = setting.values[v];
                    break;
                case Field::codebook_gathers:
                    p.codebook_gathers = setting.values[v];
                    break;
                case Field::decode_chunks:
                    p.decode_chunks = setting.values[v];
                    break;
            }
            detail::TuneCandidate c;
            c.set = &kernel_set(base.level, p);
            c.params = c.set->params;
            candidates.push_back(std::move(c));
        }
        const size_t n = candidates.size();
        // Each setting its share of the budget, whatever the ones before took.
        const double deadline =
            elapsed() + options.budget_seconds * double(n) / double(total_candidates);
        const int kMinRounds = std::min(2, std::max(1, options.rounds));
        for (int round = 0; round < std::max(1, options.rounds); ++round) {
            if (round >= kMinRounds && elapsed() > deadline) break;
            for (size_t k = 0; k < n; ++k) {
                detail::TuneCandidate& c = candidates[(k + size_t(round)) % n];
                c.ns_per_mib.push_back(
                    detail::tune_sample(c, samples[cursor++ % samples.size()], pool, y));
            }
        }
        size_t best = 0, current = 0;
        smol::detail::UnitVector<double> times(n);
        for (size_t k = 0; k < n; ++k) {
            times[k] = detail::faster_half_mean(candidates[k].ns_per_mib);
            if (times[k] < times[best]) best = k;
            if (candidates[k].params == report.chosen) current = k;
            report.timings.push_back(
                TuneTiming{candidates[k].params,
                           setting.name,
                           times[k],
                           int(candidates[k].ns_per_mib.size()),
                           {candidates[k].ns_per_mib.begin(), candidates[k].ns_per_mib.end()}});
        }
        if (times[best] * (1 + options.keep_margin) < times[current])
            report.chosen = candidates[best].params;
    }
    report.tuned = true;
    report.seconds = elapsed();
    return report;
}

// ---- remembering the choice per CPU model ------------------------------------

inline std::string tune_key(CpuLevel level, int threads) {
    std::string model = "unknown";
#if defined(__linux__)
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, 10, "model name") != 0) continue;
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        size_t begin = line.find_first_not_of(" \t", colon + 1);
        if (begin != std::string::npos) model = line.substr(begin);
        break;
    }
#endif
    return std::string(cpu_level_name(level)) + " " + std::to_string(threads) + " " + model;
}

struct TuneFileRead {
    bool found = false;  // params holds the settings remembered for the key
    bool malformed = false;
    KernelParams params;
    std::vector<std::pair<std::string, KernelParams>> entries;  // every key's, when well formed
};

namespace detail {

// One line "smol-tune 2 PACE IPREFETCH SPREFETCH CHUNKS GATHERS KEY" (or a
// version 1 line, without GATHERS: the default), or false.
inline bool parse_tune_line(const std::string& line, std::string& key, KernelParams& p) {
    std::istringstream in(line);
    std::string magic;
    int version = 0;
    if (!(in >> magic >> version) || magic != "smol-tune" || (version != 1 && version != 2))
        return false;
    if (!(in >> p.pace_steps >> p.interleaved_prefetch >> p.stored_prefetch >> p.decode_chunks))
        return false;
    if (version == 2 && !(in >> p.codebook_gathers)) return false;
    if (!valid_kernel_params(p)) return false;
    std::getline(in, key);
    const size_t begin = key.find_first_not_of(' ');
    if (begin == std::string::npos) return false;
    key = key.substr(begin);
    return true;
}

inline std::string tune_line(const std::string& key, const KernelParams& p) {
    return "smol-tune 2 " + std::to_string(p.pace_steps) + " " +
           std::to_string(p.interleaved_prefetch) + " " + std::to_string(p.stored_prefetch) + " " +
           std::to_string(p.decode_chunks) + " " + std::to_string(p.codebook_gathers) + " " + key;
}

}  // namespace detail

inline TuneFileRead read_tune_file(const std::string& path, const std::string& key) {
    TuneFileRead out;
    std::ifstream in(path, std::ios::binary);
    if (!in) return out;
    std::string line;
    size_t bytes = 0;
    while (std::getline(in, line)) {
        bytes += line.size() + 1;
        std::string line_key;
        KernelParams p;
        if (bytes > (size_t(1) << 20) || !detail::parse_tune_line(line, line_key, p)) {
            out = TuneFileRead{};
            out.malformed = true;
            return out;
        }
        out.entries.emplace_back(line_key, p);
        if (line_key == key) {
            out.found = true;
            out.params = p;
        }
    }
    return out;
}

inline bool write_tune_file(const std::string& path, const std::string& key,
                            const KernelParams& params) {
    TuneFileRead existing = read_tune_file(path, key);
    std::string text;
    for (const auto& entry : existing.entries)
        if (entry.first != key) text += detail::tune_line(entry.first, entry.second) + "\n";
    text += detail::tune_line(key, params) + "\n";
    const std::string temporary = path + ".tmp";
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        if (!out) return false;
        out << text;
        out.flush();
        if (!out) return false;
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
        std::remove(temporary.c_str());
        return false;
    }
    return true;
}

}  // namespace kernels
SMOL_NAMESPACE_END
