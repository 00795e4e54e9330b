// Jump-forward decoding: under a grammar or a JSON Schema, where the
// constraint leaves exactly one token (an object's next key, the quote and
// colon after it, a fixed tool-call frame), that token is proposed, and so
// are the ones it forces in turn, so that a run of forced tokens costs one
// forward instead of one each. The decode step's strategy
// (generation/decode_strategy.hpp) whenever a run has a constraint and no
// lookup decoding; it has no switch because it changes nothing a caller sees
// but the step count.
//
// Output: plain decoding's, token for token and for any sampler settings.
// Each forced token's row is still computed, masked and sampled, as plain
// decoding samples it: the sampler draws from the random stream as it would
// (so seeded runs stay identical), the logits hook sees every row, and with
// one token allowed the draw is that token, which the step then accepts
// (generation/decode_step.hpp). A k + 1 token chunk gives every row the
// one-token forward's bits (tests/test_lookup.cpp), which bounds kMaxForced.
//
// Cost: the masks of the forced states (constraint.hpp: forced_tokens) are
// the ones the next rows apply, computed a step early; per step one scan of
// the mask of the current state (vocabulary / 64 words). The step's row
// buffer ([kMaxForced + 1][vocab] floats, 4 MiB for a 128k vocabulary) is
// allocated once per constrained run.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../constrain/constraint.hpp"
#include "decode_strategy.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

class JumpForward final : public DecodeStrategy {
public:
    // Forced tokens per step: the step runs at most kMaxForced + 1 rows.
    static constexpr size_t kMaxForced = 7;

    explicit JumpForward(TokenConstraint& constraint) : constraint_(constraint) {}

    size_t max_proposals() const noexcept override { return kMaxForced; }
    // The constraint's state is the one after history.back() (the step
    // accepted it into the constraint when it emitted it).
    void propose(const std::vector<int32_t>&, size_t room,
                 std::vector<int32_t>& proposed) override {
        constraint_.forced_tokens(std::min(room, kMaxForced), proposed);
    }
    void record(size_t, size_t) noexcept override {}

private:
    TokenConstraint& constraint_;
};

}  // namespace detail

SMOL_NAMESPACE_END
