// Helpers for test_model.cpp: loading the fixture goldens and the comparisons
// that define "matches the reference" (fixtures README, Tolerances):
//   per-position top-8: each reference top-8 logit within 2% of our logit range;
//   last position: cosine >= 0.999 and max abs error <= 2% of our range;
//   greedy: same ids until the first difference, which must be at a step where
//   the reference's top-1/top-2 gap was < 0.25.
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
#include <random>

#include <smol/gguf/writer.hpp>
#include <smol/quant/reference.hpp>

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

// The goldens of fixture model `model` (e.g. "tiny-q4km.gguf"), or nullopt (skip).
inline std::optional<std::vector<GoldenPrompt>> load_golden(const std::string& model) {
    const auto path = fixture("golden/" + model + ".json");
    if (!path) return std::nullopt;
    std::ifstream in(*path);
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
        g.logits_path = *path + "." + std::to_string(i) + ".logits.f32";
        out.push_back(std::move(g));
    }
    return out;
}

inline std::pair<float, float> min_max(const float* v, size_t n) {
    const auto mm = std::minmax_element(v, v + n);
    return {*mm.first, *mm.second};
}

inline int32_t argmax(const float* v, size_t n) {
    return int32_t(std::max_element(v, v + n) - v);  // first of equal maxima
}

// Every reference top-8 logit within 2% of our range. Returns false (and reports) on failure.
inline bool top8_matches(const float* ours, size_t vocab, const TopList& ref, const std::string& where,
                         float fraction = 0.02f) {
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
                           const std::string& where, float fraction = 0.02f, float ambiguous_gap = 0.25f) {
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
                          << g.greedy_ids[s] << " (reference gap " << gap << ", our gap " << our_gap << ")");
            CHECK_MESSAGE(gap < ambiguous_gap, where << ": greedy diverged at an unambiguous step " << s);
            return s;
        }
        logits = step(ours);
        CHECK_MESSAGE(top8_matches(logits, vocab, g.greedy_top[s], where + " greedy step " + std::to_string(s), fraction),
                      where << ": greedy step " << s << " top-8");
    }
    return g.greedy_ids.size();
}

// ---------------------------------------------------------------------------
// Small generated SmolLM3 files (no tokenizer): every machine can test the
// forward pass without the fixtures. Weights follow the fixtures' recipe:
// embeddings N(0, 0.02^2), projections N(0, 1/fan_in), norms 1 + N(0, 0.1^2),
// output_norm 25 * (1 + N(0, 0.1^2)).
struct ModelSpec {
    std::string architecture = "smollm3";
    size_t hidden = 256, layers = 4, heads = 4, kv_heads = 1, head_dim = 64, ffn = 512;
    size_t vocab = 512, context = 512;
    smol::GGMLType matrix_type = smol::GGMLType::Q4_K;  // attention and MLP matrices
    smol::GGMLType embedding_type = smol::GGMLType::Q6_K;
    bool tied = true;            // no output.weight
    uint64_t seed = 1;
    bool write_key_length = false;
    // Sabotage for the error tests.
    std::string skip_tensor;                      // leave this tensor out
    std::string reshape_tensor;                   // write this tensor with its dims swapped/changed
    std::map<std::string, smol::GGMLType> tensor_types;  // per-tensor type overrides
    std::string skip_key;                         // leave this metadata key out
};

inline std::vector<uint8_t> make_model(const ModelSpec& spec) {
    smol::gguf::Writer w;
    const std::string p = spec.architecture + ".";
    auto key_u32 = [&](const std::string& k, size_t v) {
        if (k != spec.skip_key) w.set_u32(k, uint32_t(v));
    };
    if (spec.skip_key != "general.architecture") w.set_string("general.architecture", spec.architecture);
    key_u32(p + "block_count", spec.layers);
    key_u32(p + "embedding_length", spec.hidden);
    key_u32(p + "feed_forward_length", spec.ffn);
    key_u32(p + "attention.head_count", spec.heads);
    key_u32(p + "attention.head_count_kv", spec.kv_heads);
    if (spec.write_key_length) key_u32(p + "attention.key_length", spec.head_dim);
    key_u32(p + "rope.dimension_count", spec.head_dim);
    key_u32(p + "context_length", spec.context);
    key_u32(p + "vocab_size", spec.vocab);
    if (spec.skip_key != p + "rope.freq_base") w.set_f32(p + "rope.freq_base", 10000.0f);
    if (spec.skip_key != p + "attention.layer_norm_rms_epsilon")
        w.set_f32(p + "attention.layer_norm_rms_epsilon", 1e-6f);

    std::mt19937_64 rng(spec.seed);
    auto add = [&](const std::string& name, smol::GGMLType type, size_t cols, size_t rows,
                   float mean, float sd) {
        if (name == spec.skip_tensor) return;
        auto it = spec.tensor_types.find(name);
        if (it != spec.tensor_types.end()) type = it->second;
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> values(cols * rows);
        for (float& v : values) v = mean * (1.0f + 0.1f * normal(rng)) + (mean == 0 ? sd * normal(rng) : 0.0f);
        std::vector<uint64_t> dims = rows == 1 ? std::vector<uint64_t>{cols} : std::vector<uint64_t>{cols, rows};
        if (name == spec.reshape_tensor) dims = rows == 1 ? std::vector<uint64_t>{cols / 2, 2} : std::vector<uint64_t>{cols, rows / 2, 2};
        if (!smol::can_quantize(type)) {
            // Types we cannot write (e.g. Q4_0): store zero bytes of the right size.
            const size_t bytes = smol::row_bytes(type, cols) * rows;
            std::vector<uint8_t> zeros(bytes);
            w.add_tensor(name, type, dims, zeros.data(), zeros.size());
            return;
        }
        const size_t row_bytes = smol::row_bytes(type, cols);
        std::vector<uint8_t> packed(row_bytes * rows);
        for (size_t r = 0; r < rows; ++r)
            smol::quantize_row(type, &values[r * cols], &packed[r * row_bytes], cols,
                               smol::QuantizeEffort::fast);
        w.add_tensor(name, type, dims, packed.data(), packed.size());
    };
    const size_t q_dim = spec.heads * spec.head_dim, kv_dim = spec.kv_heads * spec.head_dim;
    add("token_embd.weight", spec.embedding_type, spec.hidden, spec.vocab, 0.0f, 0.02f);
    if (!spec.tied) add("output.weight", spec.embedding_type, spec.hidden, spec.vocab, 0.0f, 0.05f);
    add("output_norm.weight", smol::GGMLType::F32, spec.hidden, 1, 25.0f, 0.0f);
    for (size_t i = 0; i < spec.layers; ++i) {
        const std::string b = "blk." + std::to_string(i) + ".";
        const smol::GGMLType t = spec.matrix_type;
        add(b + "attn_norm.weight", smol::GGMLType::F32, spec.hidden, 1, 1.0f, 0.0f);
        add(b + "attn_q.weight", t, spec.hidden, q_dim, 0.0f, 1.0f / std::sqrt(float(spec.hidden)));
        add(b + "attn_k.weight", t, spec.hidden, kv_dim, 0.0f, 1.0f / std::sqrt(float(spec.hidden)));
        add(b + "attn_v.weight", t, spec.hidden, kv_dim, 0.0f, 1.0f / std::sqrt(float(spec.hidden)));
        add(b + "attn_output.weight", t, q_dim, spec.hidden, 0.0f, 0.5f / std::sqrt(float(q_dim)));
        add(b + "ffn_norm.weight", smol::GGMLType::F32, spec.hidden, 1, 1.0f, 0.0f);
        add(b + "ffn_gate.weight", t, spec.hidden, spec.ffn, 0.0f, 1.0f / std::sqrt(float(spec.hidden)));
        add(b + "ffn_up.weight", t, spec.hidden, spec.ffn, 0.0f, 1.0f / std::sqrt(float(spec.hidden)));
        add(b + "ffn_down.weight", t, spec.ffn, spec.hidden, 0.0f, 0.5f / std::sqrt(float(spec.ffn)));
    }
    return w.to_bytes();
}

}  // namespace smol_test
