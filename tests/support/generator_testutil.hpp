// Shared by test_generator.cpp and test_session.cpp: small SmolLM3 models made
// in memory with the project's model maker (byte-level vocabulary, random
// weights), loaded once per process, and helpers that script the tokens a
// generation produces (a logits hook that forces them).
#pragma once

#include <doctest/doctest.h>

#include <smol/generator.hpp>
#include <smol/smol.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../../tools/model_maker.hpp"

namespace smol_test {

struct MadeModel {
    std::vector<uint8_t> bytes;  // must outlive the model (load_from_memory does not copy)
    std::shared_ptr<const smol::Model> model;
};

// The demo shape (hidden 256, 4 layers, 4/1 heads, ffn 768, ctx 4096), Q4_K_M,
// byte vocabulary; one per (seed, threads), made on first use.
inline std::shared_ptr<const smol::Model> made_model(uint64_t seed = 1, int n_threads = 2) {
    static std::mutex mutex;
    static std::map<uint64_t, std::shared_ptr<std::vector<uint8_t>>> files;
    static std::map<std::pair<uint64_t, int>, std::shared_ptr<const smol::Model>> models;
    std::lock_guard<std::mutex> lock(mutex);
    auto& model = models[{seed, n_threads}];
    if (model) return model;
    auto& file = files[seed];
    if (!file) {
        smol_tools::MakeOptions options;
        options.shape = smol_tools::preset_shape("demo");
        options.recipe = smol_tools::Recipe::q4_k_m;
        options.seed = seed;
        options.threads = 2;
        file = std::make_shared<std::vector<uint8_t>>(smol_tools::make_model_bytes(options));
    }
    smol::LoadOptions load;
    load.n_threads = n_threads;
    model = smol::Model::load_from_memory(file->data(), file->size(), load);
    return model;
}

// Ids of `text` without special-token parsing, chunk by chunk, so that every
// chunk boundary is a token boundary.
inline std::vector<int32_t> script_ids(const smol::Model& model,
                                       const std::vector<std::string>& chunks) {
    std::vector<int32_t> ids;
    for (const auto& chunk : chunks) {
        const auto part = model.tokenizer().encode(chunk, /*parse_special=*/true);
        ids.insert(ids.end(), part.begin(), part.end());
    }
    return ids;
}

// A logits hook that makes greedy sampling produce `ids` in order (then keeps
// repeating the last one).
inline std::function<void(float*, size_t)> force_tokens(std::vector<int32_t> ids) {
    auto next = std::make_shared<size_t>(0);
    return [ids = std::move(ids), next](float* logits, size_t n_vocab) {
        const int32_t id = ids[std::min(*next, ids.size() - 1)];
        ++*next;
        for (size_t i = 0; i < n_vocab; ++i) logits[i] = -1e30f;
        logits[id] = 0.0f;
    };
}

inline smol::GenerateParams greedy(int max_tokens) {
    smol::GenerateParams p;
    p.max_tokens = max_tokens;
    p.temperature = 0.0f;
    p.ignore_eos = true;
    return p;
}

inline size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

// Wraps p's hook so that each of n generators, at its first token, waits for
// all n to have reached theirs: on a model as small as the test's a run takes
// milliseconds, so without this one generator could finish before another
// has started, and nothing would be left to share.
inline void rendezvous(smol::GenerateParams& p, std::shared_ptr<std::atomic<size_t>> arrived,
                       size_t n) {
    auto inner = p.logits_hook;
    auto first = std::make_shared<bool>(true);
    p.logits_hook = [inner, arrived, n, first](float* logits, size_t n_vocab) {
        if (*first) {
            *first = false;
            arrived->fetch_add(1);
            const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (arrived->load() < n && std::chrono::steady_clock::now() < give_up)
                std::this_thread::yield();
        }
        if (inner) inner(logits, n_vocab);
    };
}

}  // namespace smol_test
