// The seam between the decode step (generation/decode_step.hpp) and the
// variations around it: a strategy proposes tokens for the step to run after
// the last emitted one, and the step decides which of them are accepted.
//
// Why a seam: plain decoding runs one token per forward. A forward over a
// few rows costs about what one row costs (decode reads the weights once for
// all), so a strategy that can guess what comes next gets several tokens out
// of one forward: lookup decoding guesses from the context
// (generation/lookup.hpp); jump-forward decoding under a grammar proposes
// the tokens the grammar forces (generation/jump_forward.hpp). The step
// keeps the output exactly plain decoding's whatever a strategy proposes:
// row i of the forward (the last token, then proposals 0..i-1) is masked and
// sampled as plain decoding would sample it, and proposal i is accepted only
// when it is the sampled token; the first token that differs is emitted and
// runs in the next step.
// A strategy thus changes how many forwards a run takes, never what it emits.
//
// The contract, per step:
//   1. propose(history, room, proposed): `proposed` comes empty; the strategy
//      writes at most min(room, max_proposals()) tokens to run after
//      history.back() (room: what the run may still emit after the step's
//      first token, and the positions left in the context). The step cuts
//      them after an end-of-generation token (nothing would run after it)
//      unless the run ignores end tokens.
//   2. The step runs them, samples each row, emits.
//   3. record(proposed, accepted): how many the step ran and how many were
//      the sampled tokens (a prefix). Not called for a step that ended the run.
// The step writes nothing into the strategy; a strategy reads nothing of the
// session but the history it is given (the grammar strategy holds its own
// reference to the run's constraint).
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

SMOL_NAMESPACE_BEGIN

namespace detail {

class DecodeStrategy {
public:
    virtual ~DecodeStrategy() = default;
    // The most tokens propose() ever writes: sizes the step's row buffer
    // ([max_proposals() + 1][vocab], allocated once per run, only when > 0).
    virtual size_t max_proposals() const noexcept = 0;
    virtual void propose(const std::vector<int32_t>& history, size_t room,
                         std::vector<int32_t>& proposed) = 0;
    virtual void record(size_t proposed, size_t accepted) noexcept = 0;
};

// Plain decoding: nothing proposed, one token per forward.
class PlainDecoding final : public DecodeStrategy {
public:
    size_t max_proposals() const noexcept override { return 0; }
    void propose(const std::vector<int32_t>&, size_t, std::vector<int32_t>&) override {}
    void record(size_t, size_t) noexcept override {}
};

}  // namespace detail

SMOL_NAMESPACE_END
