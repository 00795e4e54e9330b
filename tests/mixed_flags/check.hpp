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

// The first golden prompt of tiny-q4km and its last-position logits, as plain
// pointers: main.cpp owns the storage, so the avx2 module creates no
// std::vector<float> or <int32_t> of its own. (A std template over a plain type
// is not covered by smol's ABI tag: built in both units, its out-of-line copy
// is one weak symbol, and in the avx2-first link order the baseline unit's
// calls land in the -mavx2 copy. This test's own std::vector<float> once
// crashed the Nehalem run that way.)
struct Golden {
    const char* model_path;
    const int32_t* ids;
    size_t n_ids;
    const float* logits;  // [vocab]
    size_t vocab;
    float* scratch;  // [vocab]: this unit's logits
};

// 0: matches; 1: mismatch or error.
int check_against_golden(const char* unit, const Golden& golden) {
    const float* expected = golden.logits;
    float* logits = golden.scratch;
    try {
        auto model = smol::Model::load(golden.model_path);
        smol::KVCache kv = model->make_cache(256);
        if (size_t(model->config().vocab_size) != golden.vocab) return 1;
        model->forward(golden.ids, golden.n_ids, 0, kv, logits);
        double dot = 0, norm_a = 0, norm_b = 0, max_error = 0;
        float lo = expected[0], hi = expected[0];
        for (size_t i = 0; i < golden.vocab; ++i) {
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
