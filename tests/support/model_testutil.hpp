// Helpers for test_model.cpp (and test_cuda.cpp): loading the fixture goldens, the comparisons
// that define "matches the reference" (fixtures README, Tolerances):
//   per-position top-8: each reference top-8 logit within 2% of our logit range;
//   last position: cosine >= 0.999 and max abs error <= 2% of our range;
//   greedy: same ids until the first difference, which must be at a step where
//   the reference's top-1/top-2 gap was < 0.25;
// and small generated models (the model maker's) with the loader's error cases.
#pragma once

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <map>

#include <smol/gguf/writer.hpp>

#include "../../tools/model_maker.hpp"
#include "fixtures.hpp"

namespace smol_test {

using TopList = std::vector<std::pair<int32_t, float>>;  // [id, logit], best first

struct GoldenPrompt {
    std::string prompt;
    std::vector<int32_t> ids;
    std::vector<TopList> prompt_top;  // one per prompt position
    std::vector<int32_t> greedy_ids;  // 24 steps
    std::vector<TopList> greedy_top;  // top-8 after feeding greedy_ids[i]
    std::string logits_path;          // full last-position logits (f32)
};

inline TopList parse_top(const nlohmann::json& j) {
    TopList out;
    for (const auto& e : j) out.emplace_back(e[0].get<int32_t>(), e[1].get<float>());
    return out;
}

// The goldens in file `path` (the fixtures' golden format; the full logits of
// prompt i in `path`.<i>.logits.f32).
inline std::vector<GoldenPrompt> load_golden_file(const std::string& path) {
    std::ifstream in(path);
    REQUIRE_MESSAGE(in.good(), "cannot open " << path);
    const nlohmann::json doc = nlohmann::json::parse(in);
    std::vector<GoldenPrompt> out;
    for (size_t i = 0; i < doc.size(); ++i) {
        const auto& p = doc[i];
        GoldenPrompt g;
        g.prompt = p["prompt"].get<std::string>();
        g.ids = p["prompt_ids"].get<std::vector<int32_t>>();
        for (const auto& t : p["prompt_logits_top"]) g.prompt_top.push_back(parse_top(t));
        for (const auto& s : p["greedy"]) {
            g.greedy_ids.push_back(s["id"].get<int32_t>());
            g.greedy_top.push_back(parse_top(s["top"]));
        }
        g.logits_path = path + "." + std::to_string(i) + ".logits.f32";
        out.push_back(std::move(g));
    }
    return out;
}

// The goldens of fixture model `model` (e.g. "tiny-q4km.gguf"), or nullopt (skip).
inline std::optional<std::vector<GoldenPrompt>> load_golden(const std::string& model) {
    const auto path = fixture("golden/" + model + ".json");
    if (!path) return std::nullopt;
    return load_golden_file(*path);
}

inline std::pair<float, float> min_max(const float* v, size_t n) {
    const auto mm = std::minmax_element(v, v + n);
    return {*mm.first, *mm.second};
}

inline int32_t argmax(const float* v, size_t n) {
    return int32_t(std::max_element(v, v + n) - v);  // first of equal maxima
}

// Every reference top-8 logit within 2% of our range. Returns false (and reports) on failure.
inline bool top8_matches(const float* ours, size_t vocab, const TopList& ref,
                         const std::string& where, float fraction = 0.02f) {
    const auto [lo, hi] = min_max(ours, vocab);
    const float tolerance = fraction * (hi - lo);
    bool ok = hi > lo;
    for (const auto& [id, logit] : ref) {
        const float diff = std::fabs(ours[id] - logit);
        if (!(diff <= tolerance)) {
            ok = false;
            MESSAGE(where << ": token " << id << " ours " << ours[id] << " reference " << logit
                          << " (tolerance " << tolerance << ")");
        }
    }
    return ok;
}

struct LogitsComparison {
    double cosine = 0;
    float max_abs_error = 0;
    float range = 0;
};

inline LogitsComparison compare_logits(const float* ours, const float* ref, size_t vocab) {
    double dot = 0, na = 0, nb = 0;
    float max_err = 0;
    for (size_t i = 0; i < vocab; ++i) {
        dot += double(ours[i]) * ref[i];
        na += double(ours[i]) * ours[i];
        nb += double(ref[i]) * ref[i];
        max_err = std::max(max_err, std::fabs(ours[i] - ref[i]));
    }
    const auto [lo, hi] = min_max(ours, vocab);
    return {dot / std::sqrt(na * nb), max_err, hi - lo};
}

// Greedy decoding against the golden continuation. `first_logits` are our logits
// after the prompt; `step(id)` feeds one token and returns our next logits
// (vocab floats). Returns the number of identical steps. `fraction`: the top-8
// tolerance (of our logit range); `ambiguous_gap`: the reference's top-1/top-2
// gap below which a step may differ (the fixtures README's 0.25).
inline size_t check_greedy(const GoldenPrompt& g, const float* first_logits, size_t vocab,
                           const std::function<const float*(int32_t)>& step,
                           const std::string& where, float fraction = 0.02f,
                           float ambiguous_gap = 0.25f) {
    const float* logits = first_logits;
    for (size_t s = 0; s < g.greedy_ids.size(); ++s) {
        const int32_t ours = argmax(logits, vocab);
        if (ours != g.greedy_ids[s]) {
            // The reference's choice at step s came from the prompt's last logits (s = 0)
            // or from the top-8 after step s - 1.
            const TopList& ref = s == 0 ? g.prompt_top.back() : g.greedy_top[s - 1];
            const float gap = ref[0].second - ref[1].second;
            // The fixtures README's rule: a divergence is allowed only where the reference
            // was ambiguous (its top-1/top-2 gap < 0.25); after it, paths may diverge.
            const float our_gap = logits[ours] - logits[g.greedy_ids[s]];
            MESSAGE(where << ": greedy step " << s << " chose " << ours << ", reference "
                          << g.greedy_ids[s] << " (reference gap " << gap << ", our gap " << our_gap
                          << ")");
            CHECK_MESSAGE(gap < ambiguous_gap,
                          where << ": greedy diverged at an unambiguous step " << s);
            return s;
        }
        logits = step(ours);
        CHECK_MESSAGE(top8_matches(logits, vocab, g.greedy_top[s],
                                   where + " greedy step " + std::to_string(s), fraction),
                      where << ": greedy step " << s << " top-8");
    }
    return g.greedy_ids.size();
}

// check_greedy over a model's one-token forward steps from position `pos`
// (after the prompt, in `kv`); reports and returns the identical steps.
template <class ModelPtr, class Cache>
inline size_t check_greedy_steps(const GoldenPrompt& g, const float* first_logits, size_t vocab,
                                 const ModelPtr& model, Cache& kv, size_t pos,
                                 const std::string& where) {
    std::vector<float> step_logits(vocab);
    const size_t same = check_greedy(
        g, first_logits, vocab,
        [&](int32_t id) {
            model->forward(&id, 1, pos++, kv, step_logits.data());
            return step_logits.data();
        },
        where);
    MESSAGE(where << ": greedy identical for " << same << " of " << g.greedy_ids.size()
                  << " steps");
    return same;
}

// ---------------------------------------------------------------------------
// Generated models (tools/model_maker.hpp, the model maker behind
// smol-make-model): every machine can test the forward pass without the
// fixtures.

// The forward-pass tests' model: 256 wide, 4 layers, 4/1 heads of 64, ffn 512,
// 512 tokens, context 512, every matrix Q4_K and the embedding Q6_K, no
// tokenizer. Change a field for another mix.
inline smol_tools::MakeOptions small_model() {
    smol_tools::MakeOptions options;
    options.shape = smol_tools::preset_shape("tiny");
    options.shape.layers = 4;
    options.shape.kv_heads = 1;
    options.shape.vocab = 512;
    options.tokenizer = false;
    options.matrix_type = smol::GGMLType::Q4_K;
    options.embedding_type = smol::GGMLType::Q6_K;
    options.effort =
        smol_tools::MakeOptions::Effort::fast;  // the tests need shapes, not the best scales
    return options;
}

// What the model maker will not write, for the loader's error tests: a copy of
// a GGUF file with a key or a tensor left out, a tensor's last dimension split
// in two ([256, 64] -> [256, 32, 2], [256] -> [128, 2]) or u32 keys replaced.
struct Breakage {
    std::string drop_key;
    std::string drop_tensor;
    std::string reshape_tensor;
    std::map<std::string, uint32_t> u32_keys;
};

inline std::vector<uint8_t> broken(const std::vector<uint8_t>& bytes, const Breakage& breakage) {
    const auto original = smol::gguf::File::from_bytes(bytes, "made-model");
    smol::gguf::Writer w;
    for (const auto& kv : original->metadata()) {
        if (kv.key == breakage.drop_key) continue;
        const auto replaced = breakage.u32_keys.find(kv.key);
        if (replaced != breakage.u32_keys.end())
            w.set_u32(kv.key, replaced->second);
        else
            w.copy_value(kv.key, kv.value);
    }
    for (const auto& t : original->tensors()) {
        if (t.name == breakage.drop_tensor) continue;
        std::vector<uint64_t> dims = t.dims;
        if (t.name == breakage.reshape_tensor) {
            dims.back() /= 2;
            dims.push_back(2);
        }
        w.add_tensor(t.name, t.type, dims, t.data, t.n_bytes);
    }
    return w.to_bytes();
}

}  // namespace smol_test
