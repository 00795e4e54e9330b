// The check both units of the mixed-flags program run (see main.cpp): load
// the tiny Q4_K_M fixture, run its first golden prompt, compare the last
// position's logits with the reference engine's (the fixtures README's
// tolerances: cosine >= 0.999, max error <= 2% of the logit range).
//
// Internal linkage on purpose: this test's own helper must not become the
// kind of weak symbol, compiled differently per unit, that it tests smol for.
#pragma once

#include <smol/smol.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

std::string fixtures_dir() {
    if (const char* env = std::getenv("SMOL_FIXTURES")) return env;
    return SMOL_FIXTURES_DEFAULT;
}

// 0: matches; 1: mismatch or error; 2: fixtures missing (a skip).
int check_against_golden(const char* unit) {
    const std::string dir = fixtures_dir();
    std::ifstream golden_file(dir + "/golden/tiny-q4km.gguf.json");
    std::ifstream logits_file(dir + "/golden/tiny-q4km.gguf.json.0.logits.f32", std::ios::binary);
    if (!golden_file || !logits_file) {
        std::printf("[%s] fixtures not found in %s\n", unit, dir.c_str());
        return 2;
    }
    const nlohmann::json golden = nlohmann::json::parse(golden_file);
    const std::vector<int32_t> ids = golden.at(0).at("prompt_ids").get<std::vector<int32_t>>();
    std::vector<float> expected(128256);
    logits_file.read(reinterpret_cast<char*>(expected.data()), std::streamsize(expected.size() * sizeof(float)));
    try {
        auto model = smol::Model::load(dir + "/tiny-q4km.gguf");
        smol::KVCache kv = model->new_cache(256);
        std::vector<float> logits(model->config().vocab_size);
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
        const double cosine = dot / std::sqrt(norm_a * norm_b), relative = max_error / double(hi - lo);
        const bool ok = cosine >= 0.999 && relative <= 0.02;
        std::printf("[%s] kernels %s (best %s): cosine %.6f, max error %.3f%% of the range: %s\n", unit,
                    smol::cpu_level_name(model->cpu_level()), smol::cpu_level_name(smol::best_cpu_level()), cosine,
                    100.0 * relative, ok ? "ok" : "MISMATCH");
        return ok ? 0 : 1;
    } catch (const smol::Error& e) {
        std::printf("[%s] error: %s\n", unit, e.what());
        return 1;
    }
}

}  // namespace
