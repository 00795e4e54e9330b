// ContextPolicy::shift's rule, as pure functions over token ids (the
// Generator applies them: generation/generator.hpp, "Long conversations";
// the tokenizer is read only to find where chat turns start).
//
// A prompt P is cut into three parts: a head P[0, keep) that is never
// dropped (n_keep tokens; chat(): also the system turn), a droppable middle,
// and a protected tail P[protect, end) (chat(): the current turn; text: the
// last token). A shift leaves out a gap P[keep, g) of the middle, where g is
// a cut: any index for text, a turn start for chat() (so no message is ever
// cut in two). The model then sees P' = P[0, keep) + P[g, end).
//
// Reuse through one gap: the cache holds the head and, after it, a span of
// tokens that an earlier call kept. If that span equals P[g0, g0 + L) for
// some cut g0 (g0 = keep: a plain prefix), the L tokens stay cached: the
// prompt is fitted from g0 on and only what follows them is prefilled. When
// the head differs from the cache's, or no cut lines up with the cached span,
// nothing after the common prefix is reusable and P' is prefilled from there
// (a changed system message, a caller who edited an old turn).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../text/tokenizer.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

// Where a token sequence may be cut for a shift.
struct ShiftShape {
    size_t keep = 0;     // [0, keep) is never dropped
    size_t protect = 0;  // [protect, end) is never dropped (keep <= protect)
    // Allowed gap ends in (keep, protect], ascending (chat: turn starts).
    // Empty with any_cut: every index in (keep, protect] is one.
    std::vector<size_t> cuts;
    bool any_cut = true;

    // The allowed cuts c with lo <= c <= protect (and c > keep), ascending.
    template <class F>
    void each_cut(size_t lo, F&& f) const {
        lo = std::max(lo, keep + 1);
        if (any_cut) {
            for (size_t c = lo; c <= protect; ++c)
                if (!f(c)) return;
            return;
        }
        for (const size_t c : cuts)
            if (c >= lo && c <= protect && !f(c)) return;
    }
    // The smallest cut c >= lo with length(c) <= target, else the largest cut
    // >= lo, else lo itself (nothing can be dropped past lo). length(c) = the
    // tokens left when [keep, c) goes: total - (c - keep).
    size_t cut_for(size_t lo, size_t total, size_t target) const {
        size_t best = lo;
        each_cut(lo, [&](size_t c) {
            best = c;
            return total - (c - keep) > target;
        });
        return best;
    }
    // The same shape after [keep, keep + n) is removed from its sequence.
    void drop(size_t n) {
        protect -= n;
        std::vector<size_t> kept;
        for (const size_t c : cuts)
            if (c > keep + n) kept.push_back(c - n);  // keep + n becomes the head's end
        cuts = std::move(kept);
    }
};

// How a prompt that does not fit is fitted (plan_prompt_shift).
struct PromptShift {
    size_t gap_end = 0;      // the model sees P[0, keep) + P[gap_end, end)
    size_t cached_span = 0;  // L: cached tokens after the head that stay (before erasing)
    size_t erase = 0;        // then cache positions [keep, keep + erase) are erased
    bool fits = true;        // false: even the largest shift leaves more than n_ctx tokens
};

inline size_t common_length(const int32_t* a, size_t na, const int32_t* b, size_t nb) noexcept {
    size_t n = 0;
    const size_t limit = std::min(na, nb);
    while (n < limit && a[n] == b[n]) ++n;
    return n;
}

// The prompt P against the cache's history H (its first `cached` tokens are
// in the cache), for a context of n_ctx positions that must leave `room`
// positions for the answer. Called when P (or the gapped P of the cache) is
// longer than n_ctx - room: the shift gets it down to `target` tokens where
// the cuts allow (about half the context, so that shifts stay rare).
inline PromptShift plan_prompt_shift(const std::vector<int32_t>& prompt,
                                     const std::vector<int32_t>& history, size_t cached,
                                     const ShiftShape& shape, size_t n_ctx, size_t room,
                                     size_t target) {
    const size_t keep = shape.keep;
    cached = std::min(cached, history.size());
    PromptShift plan;
    size_t g0 = keep;
    // Where the cached span after the head lines up with the prompt: the cut
    // (or the plain prefix) that keeps the most of it.
    if (cached > keep && prompt.size() >= keep &&
        std::equal(prompt.begin(), prompt.begin() + long(keep), history.begin())) {
        const int32_t* span = history.data() + keep;
        const size_t span_size = cached - keep;
        plan.cached_span =
            common_length(span, span_size, prompt.data() + keep, prompt.size() - keep);
        shape.each_cut(keep + 1, [&](size_t g) {
            if (plan.cached_span == span_size) return false;  // nothing better to find
            const size_t n = common_length(span, span_size, prompt.data() + g, prompt.size() - g);
            if (n > plan.cached_span) {
                plan.cached_span = n;
                g0 = g;
            }
            return true;
        });
    }
    const size_t total = prompt.size();
    auto seen = [&](size_t g) { return total - (g - keep); };
    size_t g = g0;
    if (seen(g0) + room > n_ctx) g = shape.cut_for(g0, total, target);
    plan.gap_end = g;
    plan.erase = std::min(g - g0, plan.cached_span);
    plan.fits = seen(g) <= n_ctx;
    return plan;
}

// Mid-run: the cache is full. The positions to erase after the head so that
// generation goes on (text: the oldest half of what follows the head; chat:
// the oldest whole turns, down to about half the context), or 0 when nothing
// may go.
inline size_t plan_running_shift(const ShiftShape& shape, size_t cached, size_t n_ctx) {
    if (cached <= shape.keep) return 0;
    if (shape.any_cut) return std::min((cached - shape.keep) / 2, shape.protect - shape.keep);
    const size_t c = shape.cut_for(shape.keep, cached, n_ctx / 2);
    return c > shape.keep ? c - shape.keep : 0;
}

// Where `prompt` (not empty) may be cut: chat() turns start at
// <|im_start|>; the system turn and the current turn (the last message, and
// the generation prompt after it) stay. Text: anywhere after n_keep, the last
// token stays.
inline ShiftShape prompt_shift_shape(const std::vector<int32_t>& prompt, const Tokenizer& tokenizer,
                                     size_t n_keep, bool chat, bool generation_prompt) {
    ShiftShape shape;
    const size_t last = prompt.size() - 1;  // run_inputs_status: not empty
    shape.keep = std::min(n_keep, last);
    shape.protect = last;
    const std::optional<int32_t> start = tokenizer.token_id("<|im_start|>");
    if (!chat || !start) return shape;
    std::vector<size_t> turns;
    for (size_t i = 0; i < prompt.size(); ++i)
        if (prompt[i] == *start) turns.push_back(i);
    if (turns.empty()) return shape;
    size_t keep = shape.keep;
    const size_t role_end = std::min(prompt.size(), turns[0] + 3);
    const std::string role = tokenizer.decode(
        std::vector<int32_t>(prompt.begin() + long(turns[0]) + 1, prompt.begin() + long(role_end)),
        /*render_special=*/false);
    if (turns.size() > 1 && role.rfind("system", 0) == 0) keep = std::max(keep, turns[1]);
    size_t protect = turns.back();
    if (generation_prompt && turns.size() > 1) protect = turns[turns.size() - 2];
    shape.keep = std::min(keep, protect);
    shape.protect = protect;
    shape.any_cut = false;
    for (const size_t t : turns)
        if (t > shape.keep && t <= protect) shape.cuts.push_back(t);
    return shape;
}

}  // namespace detail

SMOL_NAMESPACE_END
