// Lookup decoding: speculative decoding whose drafts come from the context
// itself (GenerateParams::lookup; by default on where it never loses, below).
//
// Decoding one token is bound by reading the weights, and a step over a few
// rows reads them once for all, so a step that checks k guessed tokens costs
// little more than a step over one. The guess (find_lookup_drafts): the
// longest earlier occurrence of the history's last n tokens (n = max_ngram
// down to 1) proposes the tokens that followed it. Text that repeats its
// context (code, quoted names, structured output, edits) then comes out
// several tokens per step.
//
// One step (generation/decode_step.hpp, with detail::LookupDecoding below as
// its strategy: generation/decode_strategy.hpp): the last sampled token and its drafts d1..dk
// run as one chunk with every row's logits (k + 1 rows: below the weight
// table's convert_min_tokens, so the rows are read exactly as for one token;
// kernels/matmul_plan.hpp, rule 1). Row i's logits then go through the
// sampler exactly as plain decoding's would (same history, penalties, hook,
// constraint mask, random stream): while the token it picks equals d(i+1),
// that draft is accepted and the next row is already computed; the first
// token that differs is emitted too and runs in the next step. Each step
// emits between 1 and k + 1 tokens; the cache is truncated to the accepted
// ones.
//
// Backing off (detail::DraftBudget): a step with d drafts costs more than a
// plain one (on the 3B file about 1 + 0.05 d, benchmarks/RESULTS.md), so
// drafts that keep failing would make decoding slower than plain. A run
// earns its drafts: it starts with one per step, an accepted draft raises the
// count (all accepted: doubled, up to k; some: one more than were accepted),
// a step whose drafts all failed drops it to one, and a failed single draft
// is followed by plain steps, 2, 8, 32, then 64 of them between single-draft
// probes (any accepted draft starts the pauses again from 2). A run whose
// every draft fails thus drafts 5 rows in its first 128 tokens and one per
// 65 steps after: the worst case, computed from the measured step costs by
// `smol-bench --lookup K`, stays under 0.5 % of plain decoding, which is why
// LookupMode::automatic runs it by default.
//
// Results:
//   - Bits. A token's logits in a chunk of k + 1 rows are the bits of the
//     one-token step (the multi-column tiles do the same float operations per
//     column as the one-column tiles), checked by tests/test_lookup.cpp at
//     every x86 level: scalar, avx2, avxvnni, avx512, amx; KV f16, f32 and
//     q8_0; 1 and 2 threads; k = 1, 2, 4, 7. The test runs every level the
//     machine has, so on aarch64 it checks NEON, dotprod and i8mm; until it
//     has passed there, read greedy output on those levels as within the
//     goldens' greedy rule (identical until a step whose top-two logits are
//     within 0.25), not as bit-identical.
//   - Greedy: identical to plain decoding, token for token.
//   - Sampled: the standard acceptance rule for a deterministic draft: accept
//     d with probability p(d) under the sampler's final distribution p, else
//     emit a token drawn from p with d removed and renormalized. Drawing t
//     from p and accepting d exactly when t == d is that rule (P(accept) =
//     p(d); a rejected step's t has the law of p without d), so the output is
//     exact in distribution; since it spends the random stream as plain
//     decoding does and the bits agree, a seeded run also gives plain
//     decoding's very tokens (verify_draft; tested both ways).
//   - Stopping, streaming and structured output see each accepted token in
//     order, as they would see it from plain decoding: an end token, a stop
//     string, max_tokens (never exceeded: drafts are capped by what is left),
//     the callback and cancel end the step at that token. With a constraint,
//     a draft is accepted only as the token the sampler picked through the
//     constraint's mask, and the constraint then accepts it as any sampled
//     token: a draft it forbids can never be picked, so it ends the draft
//     there (the rows after it are wasted work, never output). The drafts
//     are not checked against the grammar ahead: walking the matcher on a
//     guess would spend its per-step work budget, which plain decoding does
//     not. At the end of a run the cache and history are those of plain
//     decoding (a saved session is the same bytes).
//   - Context: drafts are capped by the room left in the context; a full
//     context runs one token as plain decoding does (stop or shift).
//   - Batcher: a verify chunk is a segment of k + 1 tokens like a prompt's
//     share; it runs in shared steps as any segment does.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "../error.hpp"
#include "../sampling/sampler.hpp"
#include "decode_strategy.hpp"

SMOL_NAMESPACE_BEGIN

// When lookup decoding runs (LookupParams::mode).
//   automatic  the default: where it never loses, i.e. an unconstrained
//              generation (a constraint's forced tokens run as one chunk
//              instead: generation/jump_forward.hpp) on the CPU backend
//              (where the back-off's worst case was measured: all drafts
//              wrong costs <= 0.5 %, benchmarks/RESULTS.md) by a generator
//              without a Batcher (whose shared steps already fill the
//              weights' reads with other generators' rows)
//   on         always (with a constraint: drafts instead of forced runs)
//   off        never
enum class LookupMode : uint8_t { automatic, on, off };

inline const char* lookup_mode_name(LookupMode mode) noexcept {
    switch (mode) {
        case LookupMode::automatic:
            return "automatic";
        case LookupMode::on:
            return "on";
        case LookupMode::off:
            return "off";
    }
    return "?";
}

// "automatic" (also "auto"), "on" or "off"; std::nullopt for anything else.
inline std::optional<LookupMode> parse_lookup_mode(std::string_view text) noexcept {
    if (text == "auto") return LookupMode::automatic;
    for (LookupMode mode : {LookupMode::automatic, LookupMode::on, LookupMode::off})
        if (text == lookup_mode_name(mode)) return mode;
    return std::nullopt;
}

// GenerateParams::lookup.
struct LookupParams {
    LookupMode mode = LookupMode::automatic;
    // Drafted tokens per step, 1 .. kMaxDrafts: the step runs k + 1 rows.
    size_t k = 4;
    // The longest suffix of the history looked up (tried from this length down
    // to 1), 1 .. kMaxNgram.
    size_t max_ngram = 3;
    // Test and benchmark use: supplies the drafts instead of the n-gram
    // lookup. Called once per step with the history (prompt + generated, its
    // last token the one the step runs) and the most drafts the step takes;
    // writes the drafts to `drafts` (cleared before the call; extra ones are
    // dropped). Lets a test force every draft accepted or rejected.
    std::function<void(const std::vector<int32_t>& history, size_t max_drafts,
                       std::vector<int32_t>& drafts)>
        draft_hook;

    static constexpr size_t kMaxDrafts = 16;
    static constexpr size_t kMaxNgram = 16;
};

// The drafts for the history's next tokens: the most recent earlier
// occurrence of its last n tokens (n from max_ngram down to 1, the first n
// that occurs) proposes the up to k tokens that followed it. Where the
// continuation runs into the history's end it goes on through the drafts
// themselves (a repeating span keeps repeating), so a match gives k drafts.
// No match (or k == 0): no drafts. Pure; O(history x max_ngram).
inline void find_lookup_drafts(const int32_t* history, size_t n_history, size_t k, size_t max_ngram,
                               std::vector<int32_t>& drafts) {
    drafts.clear();
    if (k == 0 || n_history < 2) return;
    for (size_t n = std::min(max_ngram, n_history - 1); n >= 1; --n) {
        const int32_t* suffix = history + n_history - n;
        // Occurrences starting at j, j + n <= n_history - 1 (not the suffix itself), latest first.
        for (size_t j = n_history - n; j-- > 0;) {
            if (!std::equal(suffix, suffix + n, history + j)) continue;
            // history + drafts, read from j + n on: drafts[i] is element j + n + i.
            for (size_t i = 0; i < k; ++i) {
                const size_t at = j + n + i;
                drafts.push_back(at < n_history ? history[at] : drafts[at - n_history]);
            }
            return;
        }
    }
}
inline std::vector<int32_t> find_lookup_drafts(const std::vector<int32_t>& history, size_t k,
                                               size_t max_ngram = 3) {
    std::vector<int32_t> drafts;
    find_lookup_drafts(history.data(), history.size(), k, max_ngram, drafts);
    return drafts;
}

namespace detail {

// How many drafts the next step may take (see "Backing off" above). Per run.
class DraftBudget {
public:
    static constexpr size_t kFirstPause = 2, kPauseGrowth = 4, kMaxPause = 64;

    explicit DraftBudget(size_t k) noexcept : k_(k), cap_(std::min<size_t>(k, 1)) {}
    // The most drafts the next step may run; 0: a plain step (a pause).
    size_t next() noexcept {
        if (wait_ > 0) {
            --wait_;
            return 0;
        }
        return cap_;
    }
    // How the last step with drafts went.
    void record(size_t drafted, size_t accepted) noexcept {
        if (drafted == 0) return;
        if (accepted > 0) {
            cap_ = accepted == drafted ? std::min(k_, 2 * cap_) : std::min(k_, accepted + 1);
            pause_ = kFirstPause;
        } else if (cap_ > 1) {
            cap_ = 1;
        } else {
            wait_ = pause_;
            pause_ = std::min(kMaxPause, kPauseGrowth * pause_);
        }
    }

private:
    size_t k_, cap_;
    size_t pause_ = kFirstPause, wait_ = 0;
};

// Lookup decoding as the decode step's strategy: proposes the drafts
// (find_lookup_drafts, or LookupParams::draft_hook) for the step that runs
// history.back(), as many as the budget allows. Per run.
class LookupDecoding final : public DecodeStrategy {
public:
    explicit LookupDecoding(const LookupParams& params) : params_(params), budget_(params.k) {}

    size_t max_proposals() const noexcept override { return params_.k; }
    void propose(const std::vector<int32_t>& history, size_t room,
                 std::vector<int32_t>& drafts) override {
        const size_t cap = std::min(budget_.next(), room);
        if (cap == 0) return;
        if (params_.draft_hook) {
            params_.draft_hook(history, cap, drafts);
            if (drafts.size() > cap) drafts.resize(cap);
        } else {
            find_lookup_drafts(history.data(), history.size(), cap, params_.max_ngram, drafts);
        }
    }
    void record(size_t drafted, size_t accepted) noexcept override {
        budget_.record(drafted, accepted);
    }

private:
    const LookupParams& params_;
    DraftBudget budget_;
};

}  // namespace detail

// One row of a verify step: the sampler picks a token from `logits` as plain
// decoding would (history: prompt + generated, without the draft), and the
// draft is accepted when it is that token. With a distribution p this
// accepts with probability p(draft) and otherwise returns a token drawn from
// p with the draft removed: the standard rule (see the top of this file).
// The decode step applies the same rule to each row it samples
// (generation/decode_step.hpp); this is that rule as one function.
struct DraftVerdict {
    int32_t token = -1;  // what the row emits: the draft when accepted
    bool accepted = false;
};
inline Expected<DraftVerdict> verify_draft(Sampler& sampler, float* logits, size_t n_vocab,
                                           const std::vector<int32_t>& history, int32_t draft) {
    SMOL_TRY_ASSIGN(const int32_t token, sampler.try_sample(logits, n_vocab, history));
    return DraftVerdict{token, token == draft};
}

SMOL_NAMESPACE_END
