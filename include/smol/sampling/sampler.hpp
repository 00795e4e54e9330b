// Sampler: picks the next token from a row of logits.
//
// The pipeline, in this order (llama.cpp's default chain, minus the exotic
// stages):
//   1. penalties over the last penalty_last_n tokens of the history (prompt
//      included): repeat_penalty divides a positive logit and multiplies a
//      negative one (once per distinct token); then each token loses
//      frequency_penalty * count + presence_penalty;
//   1b. DRY (dry_multiplier 0: off) over the last dry_penalty_last_n tokens:
//      each token that would extend a repeat of at least dry_allowed_length
//      tokens loses dry_multiplier * dry_base^(length - dry_allowed_length);
//      sequence breakers cut repeats (sampling/dry.hpp has the definition);
//   2. logit_bias: logits[id] += bias;
//   3. logits_hook(logits, n_vocab): the caller's last word;
//   3b. the generator's constraint (GenerateParams::grammar / json_schema):
//      forbidden tokens become -inf;
//   -- temperature <= 0: greedy argmax here (ties -> lowest id), no draw --
//   4. top_k (<= 0 off): keep the k highest logits (ties -> lower ids);
//   5. top_p (>= 1 off): keep the shortest prefix, by descending probability,
//      whose mass reaches top_p (probabilities renormalized after top-k);
//   6. min_p (<= 0 off): keep tokens with p >= min_p * p_max;
//   6b. XTC ("exclude top choices"; xtc_probability <= 0 or xtc_threshold >
//      0.5: off): with probability xtc_probability (one draw from the stream
//      below, made only when 0 < xtc_probability < 1 and two or more tokens
//      survive), the tokens whose probability (temperature 1, renormalized
//      over the survivors) is >= xtc_threshold are removed except the least
//      probable of them (the last in the filters' order); with fewer than two
//      such tokens nothing is removed;
//   7. temperature: p ~ exp(logit / temperature) over the survivors;
//   8. one draw from our own xoshiro256** stream (see rng.hpp).
// DRY and XTC follow llama.cpp's definitions and defaults; llama.cpp's chain
// runs them at the same places (penalties, dry, top_k, top_p, min_p, xtc,
// temperature). Greedy (temperature <= 0) skips XTC: it makes no draw and
// takes the top token, as before.
// Steps 1-3 modify the caller's logits in place. Top-p and min-p commute when
// top-p normalizes over the post-top-k set (min-p is a ratio to the maximum,
// both keep a prefix of the sorted order), so both cuts are found on the
// post-top-k set and applied in one pass. Nothing sorts the vocabulary: top-k
// is a k-heap pass, top-p a quickselect on mass, so a 128k vocabulary costs a
// few linear passes.
//
// Filters cut in the (logit descending, id ascending) order, a strict total
// order, and the draw walks the survivors by ascending id, so the result for
// a seed does not depend on the standard library's selection algorithms.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "dry.hpp"
#include "rng.hpp"

SMOL_NAMESPACE_BEGIN

struct SamplingParams {
    float temperature = 0.8f;     // <= 0: greedy
    int top_k = 40;               // <= 0: off
    float top_p = 0.95f;          // >= 1: off
    float min_p = 0.05f;          // <= 0: off
    float repeat_penalty = 1.0f;  // 1: off; must be > 0
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    int penalty_last_n = 64;  // 0: no penalties; < 0: the whole history
    // DRY (step 1b). The breakers need token text: the Generator maps them
    // through its vocabulary; a Sampler used alone knows them only through
    // Sampler::set_dry_breakers. At most DryBreakers::kMaxBreakers breakers,
    // each cut to its first DryBreakers::kMaxBreakerBytes bytes.
    float dry_multiplier = 0.0f;  // 0: off; must be >= 0
    float dry_base = 1.75f;       // < 1: off
    int dry_allowed_length = 2;   // repeats this long go unpenalized; must be >= 1
    int dry_penalty_last_n = -1;  // 0: off; -1: the whole history (at most the context)
    std::vector<std::string> dry_sequence_breakers = {"\n", ":", "\"", "*"};
    // XTC (step 6b).
    float xtc_probability = 0.0f;  // 0: off; in [0, 1]
    float xtc_threshold = 0.1f;    // > 0.5: off; must be >= 0
    uint64_t seed = 0;
    std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added to its logit)
    std::function<void(float* logits, size_t n_vocab)> logits_hook;
};

// One surviving token and its final probability (after temperature).
struct TokenProbability {
    int32_t id;
    double probability;
};

// Step 1 on its own: penalties from the last penalty_last_n tokens of history.
// Ids outside [0, n_vocab) in the history are ignored.
inline void apply_penalties(float* logits, size_t n_vocab, const std::vector<int32_t>& history,
                            const SamplingParams& params) {
    const bool active = params.repeat_penalty != 1.0f || params.presence_penalty != 0.0f ||
                        params.frequency_penalty != 0.0f;
    if (!active || params.penalty_last_n == 0 || history.empty()) return;
    const size_t window =
        params.penalty_last_n < 0
            ? history.size()
            : std::min(history.size(), static_cast<size_t>(params.penalty_last_n));
    std::vector<int32_t> recent;
    recent.reserve(window);
    for (size_t i = history.size() - window; i < history.size(); ++i) {
        const int32_t id = history[i];
        if (id >= 0 && static_cast<size_t>(id) < n_vocab) recent.push_back(id);
    }
    std::sort(recent.begin(), recent.end());
    for (size_t run = 0; run < recent.size();) {
        const int32_t id = recent[run];
        size_t end = run;
        while (end < recent.size() && recent[end] == id) ++end;
        const float count = static_cast<float>(end - run);
        float& logit = logits[id];
        if (params.repeat_penalty != 1.0f) {
            logit = logit > 0.0f ? logit / params.repeat_penalty : logit * params.repeat_penalty;
        }
        logit -= count * params.frequency_penalty + params.presence_penalty;
        run = end;
    }
}

// The logit_bias ids against the vocabulary: Error(invalid_argument) for an
// id outside [0, n_vocab).
inline Status check_logit_bias(const SamplingParams& params, size_t n_vocab) {
    for (const auto& entry : params.logit_bias) {
        const int32_t id = entry.first;
        if (id < 0 || static_cast<size_t>(id) >= n_vocab)
            return Status(ErrorKind::invalid_argument,
                          "SamplingParams::logit_bias: token id " + std::to_string(id) +
                              " is outside the vocabulary of " + std::to_string(n_vocab));
    }
    return {};
}

// Step 1b on its own: DRY from the history's last dry_penalty_last_n tokens,
// with the breakers of `breakers` (null: none; see DryBreakers::build).
inline void apply_dry(float* logits, size_t n_vocab, const std::vector<int32_t>& history,
                      const SamplingParams& params, const DryBreakers* breakers = nullptr) {
    detail::DryScratch scratch;
    detail::apply_dry(logits, n_vocab, history.data(), history.size(), params.dry_multiplier,
                      params.dry_base, params.dry_allowed_length, params.dry_penalty_last_n,
                      breakers, scratch);
}

// Step 2 on its own (check_logit_bias's error is thrown; nothing is changed then).
inline void apply_logit_bias(float* logits, size_t n_vocab, const SamplingParams& params) {
    detail::ok_or_fail(check_logit_bias(params, n_vocab));
    for (const auto& [id, bias] : params.logit_bias) logits[id] += bias;
}

// Argmax with ties going to the lowest id; NaN never wins. An error
// (invalid_argument) when no logit is a number above -inf (nothing can be
// chosen): a value from try_greedy_token, thrown by greedy_token.
inline Expected<int32_t> try_greedy_token(const float* logits, size_t n_vocab) {
    int32_t best = -1;
    float best_logit = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < n_vocab; ++i) {
        if (logits[i] > best_logit) {  // false for NaN; strict, so ties keep the lower id
            best_logit = logits[i];
            best = static_cast<int32_t>(i);
        }
    }
    if (best < 0)
        return ErrorInfo{ErrorKind::invalid_argument,
                         "Sampler: every logit is -inf or NaN, no token can be chosen"};
    return best;
}
inline int32_t greedy_token(const float* logits, size_t n_vocab) {
    return detail::value_or_fail(try_greedy_token(logits, n_vocab));
}

// One sampler per generation stream: it owns the random stream and scratch
// buffers reused between calls (no allocation per token once warm). Not
// thread-safe; copies are independent and continue the same stream.
class Sampler {
public:
    // Throws what validate() reports; create() returns it as a value.
    explicit Sampler(const SamplingParams& params = SamplingParams())
        : params_(params), rng_(params.seed) {
        detail::ok_or_fail(validate(params_));
    }
    static Expected<Sampler> create(const SamplingParams& params = SamplingParams()) {
        SMOL_TRY(validate(params));
        return Sampler(params);
    }

    // Error(invalid_argument) for parameters no sampler takes: a NaN
    // temperature, top_p or min_p, a repeat_penalty that is not a positive
    // finite number, non-finite presence or frequency penalties, a negative
    // or non-finite dry_multiplier, a non-finite dry_base, a
    // dry_allowed_length below 1, a dry_penalty_last_n below -1, more than
    // DryBreakers::kMaxBreakers dry_sequence_breakers, an xtc_probability
    // outside [0, 1], a NaN or negative xtc_threshold. (logit_bias ids are
    // checked against the vocabulary when sampling: check_logit_bias.)
    static Status validate(const SamplingParams& p) {
        auto bad = [](const std::string& what) {
            return Status(ErrorKind::invalid_argument, "SamplingParams: " + what);
        };
        if (std::isnan(p.temperature)) return bad("temperature is NaN");
        if (std::isnan(p.top_p)) return bad("top_p is NaN");
        if (std::isnan(p.min_p)) return bad("min_p is NaN");
        if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty))
            return bad("repeat_penalty must be a positive finite number (1 = off), got " +
                       std::to_string(p.repeat_penalty));
        if (!std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty))
            return bad("presence_penalty and frequency_penalty must be finite");
        if (!(p.dry_multiplier >= 0.0f) || !std::isfinite(p.dry_multiplier))
            return bad("dry_multiplier must be a finite number >= 0 (0 = off), got " +
                       std::to_string(p.dry_multiplier));
        if (!std::isfinite(p.dry_base))
            return bad("dry_base must be finite (< 1 = off), got " + std::to_string(p.dry_base));
        if (p.dry_allowed_length < 1)
            return bad("dry_allowed_length must be >= 1, got " +
                       std::to_string(p.dry_allowed_length));
        if (p.dry_penalty_last_n < -1)
            return bad("dry_penalty_last_n must be >= -1 (0 = off, -1 = the whole history), got " +
                       std::to_string(p.dry_penalty_last_n));
        if (p.dry_sequence_breakers.size() > DryBreakers::kMaxBreakers)
            return bad("dry_sequence_breakers has " +
                       std::to_string(p.dry_sequence_breakers.size()) + " entries, more than " +
                       std::to_string(DryBreakers::kMaxBreakers));
        if (!(p.xtc_probability >= 0.0f && p.xtc_probability <= 1.0f))
            return bad("xtc_probability must be in [0, 1] (0 = off), got " +
                       std::to_string(p.xtc_probability));
        if (!(p.xtc_threshold >= 0.0f))
            return bad("xtc_threshold must be >= 0 (> 0.5 = off), got " +
                       std::to_string(p.xtc_threshold));
        return {};
    }

    const SamplingParams& params() const { return params_; }

    // Replaces the parameters; the random stream continues (reseed to restart
    // it). The DRY breaker table stays: set it again for new breakers.
    void set_params(const SamplingParams& params) {
        detail::ok_or_fail(validate(params));
        params_ = params;
    }

    void reseed(uint64_t seed) { rng_.reseed(seed); }

    // True when DRY can change a logit with these parameters (its breakers
    // then matter; see set_dry_breakers).
    static bool dry_active(const SamplingParams& p) {
        return p.dry_multiplier != 0.0f && p.dry_base >= 1.0f && p.dry_penalty_last_n != 0;
    }

    // The token sequences that break DRY repeats, built from
    // params().dry_sequence_breakers and the vocabulary (DryBreakers::build;
    // the Generator does it). Null, the default: no breakers.
    void set_dry_breakers(std::shared_ptr<const DryBreakers> breakers) {
        dry_breakers_ = std::move(breakers);
    }

    // Step 3b, after logits_hook: the generator's structured-output mask
    // (constrain/constraint.hpp), which sets forbidden tokens to -inf.
    using Constraint = std::function<Status(float* logits, size_t n_vocab)>;
    void set_constraint(Constraint constraint) { constraint_ = std::move(constraint); }

    // Picks the next token. logits (n_vocab floats) are modified in place by
    // the penalties, the bias and the hook; history is prompt + generated.
    // Errors (invalid_argument): no logits, more than 2^31 of them, a
    // logit_bias id outside the vocabulary, no logit a number above -inf.
    // try_sample returns them as a value, sample throws them.
    Expected<int32_t> try_sample(float* logits, size_t n_vocab,
                                 const std::vector<int32_t>& history) {
        SMOL_TRY(prepare(logits, n_vocab, history));
        if (params_.temperature <= 0.0f) return try_greedy_token(logits, n_vocab);
        SMOL_TRY(select_candidates(logits, n_vocab));
        // Cumulative walk over the survivors in id order; u in [0, total).
        const double u = rng_.next_unit() * total_weight_;
        double cumulative = 0.0;
        for (size_t i = 0; i < candidates_.size(); ++i) {
            cumulative += weights_[i];
            if (u < cumulative) return candidates_[i].id;
        }
        return candidates_.back().id;  // u rounded onto the very top of the range
    }
    int32_t sample(float* logits, size_t n_vocab, const std::vector<int32_t>& history) {
        return detail::value_or_fail(try_sample(logits, n_vocab, history));
    }

    // The distribution sample() would draw from (same steps, same in-place
    // logit changes, no token drawn), sorted by probability descending then
    // id. With XTC on, its coin is drawn as sample() would (the stream
    // advances), so the result is one of XTC's two outcomes. Greedy gives one
    // token with probability 1. Throws sample()'s errors.
    std::vector<TokenProbability> distribution(float* logits, size_t n_vocab,
                                               const std::vector<int32_t>& history) {
        detail::ok_or_fail(prepare(logits, n_vocab, history));
        if (params_.temperature <= 0.0f) return {{greedy_token(logits, n_vocab), 1.0}};
        detail::ok_or_fail(select_candidates(logits, n_vocab));
        std::vector<TokenProbability> out;
        out.reserve(candidates_.size());
        for (size_t i = 0; i < candidates_.size(); ++i) {
            out.push_back({candidates_[i].id, weights_[i] / total_weight_});
        }
        std::sort(out.begin(), out.end(), [](const TokenProbability& a, const TokenProbability& b) {
            return a.probability != b.probability ? a.probability > b.probability : a.id < b.id;
        });
        return out;
    }

private:
    struct Candidate {
        float logit;
        int32_t id;
        double weight;  // exp(logit - max_logit): the unnormalized probability at temperature 1
    };

    // The strict total order every filter uses: higher logit first, then lower id.
    static bool ranks_before(const Candidate& a, const Candidate& b) {
        return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
    }
    static bool by_id(const Candidate& a, const Candidate& b) { return a.id < b.id; }

    Status prepare(float* logits, size_t n_vocab, const std::vector<int32_t>& history) {
        if (logits == nullptr || n_vocab == 0)
            return Status(ErrorKind::invalid_argument, "Sampler: empty logits");
        if (n_vocab > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
            return Status(ErrorKind::invalid_argument, "Sampler: vocabulary larger than int32");
        SMOL_TRY(check_logit_bias(params_, n_vocab));
        apply_penalties(logits, n_vocab, history, params_);
        detail::apply_dry(logits, n_vocab, history.data(), history.size(), params_.dry_multiplier,
                          params_.dry_base, params_.dry_allowed_length, params_.dry_penalty_last_n,
                          dry_breakers_.get(), dry_scratch_);
        apply_logit_bias(logits, n_vocab, params_);
        if (params_.logits_hook) params_.logits_hook(logits, n_vocab);
        if (constraint_) SMOL_TRY(constraint_(logits, n_vocab));
        return {};
    }

    // NaN and -inf have probability 0 and are never candidates; +inf becomes
    // the largest float so such tokens share the mass and differences stay finite.
    static bool excluded(float logit) {
        return std::isnan(logit) || logit == -std::numeric_limits<float>::infinity();
    }
    static float clamped(float logit) { return std::min(logit, std::numeric_limits<float>::max()); }

    // Fills candidates_ (ascending id) with the survivors of top-k, min-p and
    // top-p, weights_ with their temperature weights and total_weight_ with
    // the sum. Every filter is a cut in the ranks_before order, applied by a
    // stable removal, so the survivors stay in id order whatever the
    // selection algorithms did: the draw is canonical. Cost: O(n_vocab).
    Status select_candidates(const float* logits, size_t n_vocab) {
        candidates_.clear();
        const size_t k = params_.top_k > 0 ? static_cast<size_t>(params_.top_k) : 0;
        if (k > 0 && k < n_vocab) {
            // Top-k in one pass: a heap of the k best seen so far, its front
            // the worst of them; most tokens lose one comparison against it.
            for (size_t i = 0; i < n_vocab; ++i) {
                if (excluded(logits[i])) continue;
                const Candidate c{clamped(logits[i]), static_cast<int32_t>(i), 0.0};
                if (candidates_.size() < k) {
                    candidates_.push_back(c);
                    std::push_heap(candidates_.begin(), candidates_.end(), ranks_before);
                } else if (ranks_before(c, candidates_.front())) {
                    std::pop_heap(candidates_.begin(), candidates_.end(), ranks_before);
                    candidates_.back() = c;
                    std::push_heap(candidates_.begin(), candidates_.end(), ranks_before);
                }
            }
            std::sort(candidates_.begin(), candidates_.end(), by_id);
        } else {
            for (size_t i = 0; i < n_vocab; ++i) {
                if (!excluded(logits[i])) {
                    candidates_.push_back({clamped(logits[i]), static_cast<int32_t>(i), 0.0});
                }
            }
        }
        if (candidates_.empty())
            return Status(ErrorKind::invalid_argument,
                          "Sampler: every logit is -inf or NaN, no token can be chosen");

        double max_logit = candidates_.front().logit;
        for (const Candidate& c : candidates_) max_logit = std::max(max_logit, double(c.logit));
        // Top-p's normalizer: the mass of everything top-k kept, taken before
        // min-p (that is what makes the two filters commute).
        double mass = 0.0;
        for (Candidate& c : candidates_) {
            c.weight = std::exp(double(c.logit) - max_logit);
            mass += c.weight;
        }

        const size_t top_k_survivors = candidates_.size();
        if (params_.min_p > 0.0f) {
            // p / p_max >= min_p  <=>  logit - max >= log(min_p). Capped at 0
            // so the top token survives even a min_p above 1.
            const double min_gap = std::min(0.0, std::log(double(params_.min_p)));
            candidates_.erase(std::remove_if(candidates_.begin(), candidates_.end(),
                                             [&](const Candidate& c) {
                                                 return double(c.logit) - max_logit < min_gap;
                                             }),
                              candidates_.end());
        }

        Candidate top_p_last{};
        if (params_.top_p < 1.0f &&
            find_top_p_cut(double(params_.top_p), mass, top_k_survivors, top_p_last)) {
            candidates_.erase(
                std::remove_if(candidates_.begin(), candidates_.end(),
                               [&](const Candidate& c) { return ranks_before(top_p_last, c); }),
                candidates_.end());
        }

        apply_xtc();

        // Temperature, on the survivors only.
        const double inverse_temperature = 1.0 / double(params_.temperature);
        weights_.resize(candidates_.size());
        total_weight_ = 0.0;
        for (size_t i = 0; i < candidates_.size(); ++i) {
            weights_[i] =
                params_.temperature == 1.0f
                    ? candidates_[i].weight
                    : std::exp((double(candidates_[i].logit) - max_logit) * inverse_temperature);
            total_weight_ += weights_[i];
        }
        if (!(total_weight_ > 0.0) || !std::isfinite(total_weight_)) {
            // Only possible with an extreme temperature underflowing every
            // weight: fall back to the single best survivor.
            const Candidate best =
                *std::min_element(candidates_.begin(), candidates_.end(), ranks_before);
            candidates_.assign(1, best);
            weights_.assign(1, 1.0);
            total_weight_ = 1.0;
        }
        return {};
    }

    // Step 6b on candidates_ (weights at temperature 1 set, in id order).
    void apply_xtc() {
        const double probability = params_.xtc_probability;
        if (!(probability > 0.0) || params_.xtc_threshold > 0.5f || candidates_.size() < 2) return;
        if (probability < 1.0 && !(rng_.next_unit() < probability)) return;
        double mass = 0.0;
        for (const Candidate& c : candidates_) mass += c.weight;
        const double cut =
            double(params_.xtc_threshold) * mass;  // p >= threshold <=> weight >= cut
        const Candidate* keep = nullptr;           // the last of the tokens over the threshold
        size_t over = 0;
        for (const Candidate& c : candidates_) {
            if (c.weight < cut) continue;
            ++over;
            if (keep == nullptr || ranks_before(*keep, c)) keep = &c;
        }
        if (over < 2) return;
        const Candidate kept = *keep;
        candidates_.erase(
            std::remove_if(candidates_.begin(), candidates_.end(),
                           [&](const Candidate& c) { return c.weight >= cut && c.id != kept.id; }),
            candidates_.end());
    }

    // Top-p over the candidates left by min-p (which all rank before the
    // tokens min-p removed): the shortest prefix in ranks_before order whose
    // weight reaches top_p * mass (mass: the weight of all top_k_survivors
    // tokens), at least one token. Sets `last` to the last token kept and
    // returns true, or false when every candidate is needed.
    //
    // Two steps, both linear:
    //  - tokens lighter than tau = (1 - top_p) * mass / top_k_survivors can
    //    never be needed: together they weigh less than (1 - top_p) * mass,
    //    so the heavier ones (a prefix) already reach the target. They are
    //    left out of the search.
    //  - a quickselect on mass: split the undecided range at its median rank;
    //    if the better half reaches the target the cut is inside it, else
    //    bank its weight and look in the worse half; sort and scan the last few.
    bool find_top_p_cut(double top_p, double mass, size_t top_k_survivors, Candidate& last) {
        const double target_mass = top_p * mass;
        const double tau = top_p > 0.0 ? (1.0 - top_p) * mass / double(top_k_survivors) : 0.0;
        scratch_.clear();
        for (const Candidate& c : candidates_) {
            if (c.weight >= tau) scratch_.push_back(c);
        }
        // True when the light tokens dropped above include min-p survivors:
        // then the cut is inside scratch_ (up to rounding) and must be made.
        const bool dropped_some = scratch_.size() < candidates_.size();

        size_t low = 0, high = scratch_.size();
        double banked = 0.0;  // weight of scratch_[0, low), all ranked before [low, high)
        while (high - low > 32) {
            const size_t middle = low + (high - low) / 2;
            std::nth_element(scratch_.begin() + low, scratch_.begin() + middle,
                             scratch_.begin() + high, ranks_before);
            double half = 0.0;
            for (size_t i = low; i < middle; ++i) half += scratch_[i].weight;
            if (banked + half >= target_mass) {
                high = middle;
            } else {
                banked += half;
                low = middle;
            }
        }
        std::sort(scratch_.begin() + low, scratch_.begin() + high, ranks_before);
        for (size_t i = low; i < high; ++i) {
            banked += scratch_[i].weight;
            if (banked >= target_mass) {
                last = scratch_[i];
                return true;
            }
        }
        // Not reached. If the search range ended early, or light tokens were
        // dropped, exact arithmetic would have reached the target by the end
        // of [low, high): rounding differs between sums, cut there. Otherwise
        // min-p already cut shorter than top-p would: keep everything.
        if (high > 0 && (high < scratch_.size() || dropped_some)) {
            last = scratch_[high - 1];
            return true;
        }
        return false;
    }

    SamplingParams params_;
    Rng rng_;
    Constraint constraint_;
    std::shared_ptr<const DryBreakers> dry_breakers_;
    detail::DryScratch dry_scratch_;
    std::vector<Candidate> candidates_;  // survivors, ascending id; reused between calls
    std::vector<Candidate> scratch_;     // top-p's working copy
    std::vector<double> weights_;        // temperature weight per candidate
    double total_weight_ = 0.0;
};

SMOL_NAMESPACE_END
