// The check both units of the mixed-flags program run (see main.cpp): load
// the tiny Q4_K_M fixture, run its first golden prompt, compare the last
// position's logits with the reference engine's (the fixtures README's
// tolerances: cosine >= 0.999, max error <= 2% of the logit range).
//
// Internal linkage on purpose: this test's own helper must not become the
// kind of weak symbol, compiled differently per unit, that it tests smol for.
// For the same reason only main.cpp parses JSON: nlohmann's inline functions,
// compiled by both units, would be shared weak symbols with AVX2 code in them
// (the hazard the ABI tag removes from smol, but not from other libraries).
#pragma once

#include <smol/smol.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

// The first golden prompt of tiny-q4km and its last-position logits (main.cpp reads them).
struct Golden {
    std::string model_path;
    std::vector<int32_t> ids;
    std::vector<float> logits;  // [vocab]
};

// 0: matches; 1: mismatch or error.
int check_against_golden(const char* unit, const Golden& golden) {
    const std::vector<float>& expected = golden.logits;
    const std::vector<int32_t>& ids = golden.ids;
    try {
        auto model = smol::Model::load(golden.model_path);
        smol::KVCache kv = model->make_cache(256);
        std::vector<float> logits(model->config().vocab_size);
        if (logits.size() != expected.size()) return 1;
        model->forward(ids.data(), ids.size(), 0, kv, logits.data());
        double dot = 0, norm_a = 0, norm_b = 0, max_error = 0;
        float lo = expected[0], hi = expected[0];
        for (size_t i = 0; i < logits.size(); ++i) {
            dot += double(logits[i]) * expected[i];
            norm_a += double(logits[i]) * logits[i];
            norm_b += double(expected[i]) * expected[i];
            max_error = std::max(max_error, double(std::fabs(logits[i] - expected[i])));
            lo = std::min(lo, expected[i]);
            hi = std::max(hi, expected[i]);
        }
        const double cosine = dot / std::sqrt(norm_a * norm_b),
                     relative = max_error / double(hi - lo);
        const bool ok = cosine >= 0.999 && relative <= 0.02;
        std::printf("[%s] kernels %s (best %s): cosine %.6f, max error %.3f%% of the range: %s\n",
                    unit, smol::cpu_level_name(model->cpu_level()),
                    smol::cpu_level_name(smol::best_cpu_level()), cosine, 100.0 * relative,
                    ok ? "ok" : "MISMATCH");
        return ok ? 0 : 1;
    } catch (const smol::Error& e) {
        std::printf("[%s] error: %s\n", unit, e.what());
        return 1;
    }
}

}  // namespace
