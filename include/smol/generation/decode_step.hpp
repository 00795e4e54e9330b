// The decode loop of one run: after the prefill, the step that turns a row of
// logits into an emitted token and runs it, until a stop condition.
//
// A step reads top to bottom:
//   forward  make room in the context (ContextPolicy::shift erases, else a
//            full context stops the run), take the strategy's proposals, run
//            the last emitted token and the proposals as one chunk: one row
//            of logits per token;
//   mask     the run's constraint forbids tokens, inside the sampler's chain
//            (after the logits hook, before top-k: sampling/sampler.hpp);
//   sample   the sampler picks a token from the row, given the history;
//   emit     the token goes to the history, the constraint and the text sink;
//            an end token, a stop string, the callback or max_tokens end the
//            run here.
// Row i's token is accepted as proposal i when they are equal: the next row
// is already computed, so mask, sample and emit go on with it; otherwise the
// step ends and the token runs in the next step's forward. The prefill ran
// the first step's forward: the run starts at its row.
//
// Variations (lookup drafts, jump-forward under a constraint) are
// strategies (generation/decode_strategy.hpp) that only propose; the step has
// no branch for any of them. With PlainDecoding every step is one token.
//
// Why it is exactly plain decoding whatever the strategy: every row is
// sampled with the same sampler, history and random stream as plain decoding
// would use, and a row of a k + 1 token chunk has the one-token forward's
// bits (tests/test_lookup.cpp). At the end of the run the cache and the
// history are plain decoding's too: the cache never ends past the last
// emitted token, and the session's logits are the row the run ended at.
//
// Buffers: `proposals_` [max_proposals], `chunk_` [max_proposals + 1] and
// `rows_` [max_proposals + 1][vocab], allocated when the run starts, and only
// when the strategy proposes at all; a warm step allocates nothing.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../constrain/constraint.hpp"
#include "../error.hpp"
#include "../sampling/sampler.hpp"
#include "../text/tokenizer.hpp"
#include "context_shift.hpp"
#include "decode_strategy.hpp"
#include "params.hpp"
#include "session_state.hpp"
#include "text_sink.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

class DecodeLoop {
public:
    // Why the run ends; none: it goes on.
    using Stop = std::optional<StopReason>;

    // constraint: null without one. shift: the shape of the context (where
    // it may be cut) under ContextPolicy::shift, null under stop.
    DecodeLoop(SessionState& session, Sampler& sampler, TokenConstraint* constraint,
               const GenerateParams& params, TextSink& sink, const std::atomic<bool>& cancel_flag,
               ShiftShape* shift, GenerateResult& result)
        : session_(session),
          tokenizer_(session.model->tokenizer()),
          sampler_(sampler),
          constraint_(constraint),
          params_(params),
          sink_(sink),
          cancel_flag_(cancel_flag),
          shift_(shift),
          result_(result),
          max_tokens_(params.max_tokens < 0 ? SIZE_MAX : size_t(params.max_tokens)),
          n_vocab_(session.logits.size()),
          row_(session.logits.data()) {}

    // Decodes until a stop condition; returns it. The session's cache and
    // logits are settled however the run ends (an error or an exception from
    // the callback included): see the top of this file.
    Expected<StopReason> run(DecodeStrategy& strategy) {
        const size_t max_proposals = strategy.max_proposals();
        if (max_proposals > 0) {
            proposals_.reserve(max_proposals);
            chunk_.reserve(max_proposals + 1);
            rows_.resize((max_proposals + 1) * n_vocab_);
        }
        struct Settle {
            DecodeLoop& loop;
            ~Settle() { loop.settle(); }
        } settle{*this};
        // The prefill ran the first step's forward: its row picks the first token.
        SMOL_TRY_ASSIGN(Stop stop, sample_and_emit(strategy));
        while (!stop) {
            SMOL_TRY_ASSIGN(stop, step(strategy));
        }
        return *stop;
    }

private:
    // One step: forward, then mask, sample and emit each row it gave.
    Expected<Stop> step(DecodeStrategy& strategy) {
        SMOL_TRY_ASSIGN(const Stop stop, forward(strategy));
        if (stop) return stop;
        return sample_and_emit(strategy);
    }

    // forward: room for the step, the strategy's proposals, one pass over
    // [last token, proposals...]. Leaves row_ at the first row.
    Expected<Stop> forward(DecodeStrategy& strategy) {
        SMOL_TRY_ASSIGN(const bool room, make_room());
        if (!room) {
            sink_.flush();
            return Stop(StopReason::context_full);
        }
        propose(strategy);
        ++result_.n_decode_steps;
        // One token writes the session's logits row; a chunk writes a row per token.
        bool ran = false;
        if (proposals_.empty()) {
            row_ = session_.logits.data();
            SMOL_TRY_ASSIGN(ran, session_.forward(&session_.history.back(), 1, session_.kv->size(),
                                                  cancel_flag_));
        } else {
            chunk_.assign(1, session_.history.back());
            chunk_.insert(chunk_.end(), proposals_.begin(), proposals_.end());
            result_.n_drafted_tokens += proposals_.size();
            row_ = rows_.data();
            SMOL_TRY_ASSIGN(ran, session_.forward(chunk_.data(), chunk_.size(), session_.kv->size(),
                                                  cancel_flag_, rows_.data()));
        }
        if (!ran) return Stop(StopReason::cancelled);
        return Stop();
    }

    // mask, sample, emit: row i picks a token; when it is proposal i the
    // next row is already computed and goes on, else the step is over (the
    // token runs in the next forward).
    Expected<Stop> sample_and_emit(DecodeStrategy& strategy) {
        size_t accepted = 0;
        while (true) {
            if (const Stop stop = stop_before_sampling()) return stop;
            SMOL_TRY_ASSIGN(const int32_t token,
                            sampler_.try_sample(row_, n_vocab_, session_.history));  // mask, sample
            const bool proposed = accepted < proposals_.size() && token == proposals_[accepted];
            if (proposed) ++result_.n_accepted_drafts;
            SMOL_TRY_ASSIGN(const Stop stop, emit(token));
            if (stop) return stop;
            if (result_.tokens.size() >= max_tokens_) {
                trim_to_history_less_one();
                sink_.flush();
                return Stop(StopReason::max_tokens);
            }
            if (!proposed) break;
            ++accepted;  // the forward ran this token too: its row is next
            row_ += n_vocab_;
        }
        // The token has not run yet; the cache holds what precedes it.
        trim_to_history_less_one();
        strategy.record(proposals_.size(), accepted);
        proposals_.clear();
        return Stop();
    }

    // What ends a run before a row is sampled.
    Stop stop_before_sampling() {
        if (result_.tokens.size() >= max_tokens_) {
            sink_.flush();
            return StopReason::max_tokens;
        }
        if (cancel_flag_.load(std::memory_order_relaxed)) return StopReason::cancelled;
        // A complete match in a vocabulary without end tokens: nothing to sample.
        if (constraint_ && constraint_->finished() && tokenizer_.end_of_generation_ids().empty()) {
            sink_.flush();
            return StopReason::eos;
        }
        return std::nullopt;
    }

    // emit: the token joins the result, the history and the constraint; an
    // end token (unless ignored: a complete whole-text match overrides
    // ignore_eos), a stop string or the callback end the run.
    Expected<Stop> emit(int32_t token) {
        result_.tokens.push_back(token);
        session_.history.push_back(token);
        if (constraint_) SMOL_TRY(constraint_->accept(token));
        const bool grammar_end = constraint_ && constraint_->whole_text();
        if ((!params_.ignore_eos || grammar_end) && tokenizer_.is_end_of_generation(token)) {
            trim_to_history_less_one();
            sink_.flush();
            return Stop(StopReason::eos);
        }
        sink_.push(token);
        if (sink_.matched() || sink_.callback_stopped()) {
            trim_to_history_less_one();
            return Stop(sink_.matched() ? StopReason::stop_string : StopReason::cancelled);
        }
        return Stop();
    }

    // Before a forward: a full cache shifts (ContextPolicy::shift) or, when
    // nothing may go, the run stops (false).
    Expected<bool> make_room() {
        BackendCache& kv = *session_.kv;
        if (kv.size() < kv.n_ctx()) return true;
        if (shift_ && shift_->any_cut) shift_->protect = kv.size();  // text: all may go
        const size_t drop = shift_ ? plan_running_shift(*shift_, kv.size(), kv.n_ctx()) : 0;
        if (drop == 0) return false;
        SMOL_TRY(session_.erase(shift_->keep, drop));
        shift_->drop(drop);
        result_.n_discarded_tokens += drop;
        session_.log(log_info, "context shift: erased " + std::to_string(drop) +
                                   " tokens after the first " + std::to_string(shift_->keep) +
                                   " to keep generating");
        return true;
    }

    // The strategy's proposals for the step, at most what the run may still
    // emit after its first token and the positions left in the context after
    // it; none past an end token, after which nothing would run.
    void propose(DecodeStrategy& strategy) {
        const BackendCache& kv = *session_.kv;
        const size_t room =
            std::min(max_tokens_ - result_.tokens.size() - 1, kv.n_ctx() - kv.size() - 1);
        proposals_.clear();
        strategy.propose(session_.history, room, proposals_);
        if (params_.ignore_eos) return;
        for (size_t i = 0; i < proposals_.size(); ++i)
            if (tokenizer_.is_end_of_generation(proposals_[i])) {
                proposals_.resize(i + 1);
                break;
            }
    }

    // The cache never holds the last emitted token before it runs (nor
    // proposals after it).
    void trim_to_history_less_one() {
        const size_t n = session_.history.size() - 1;
        if (session_.kv->size() > n) session_.kv->truncate(n);
    }

    // At the end of the run: proposals after the last emitted token leave the
    // cache, and the session's logits are the row the run ended at.
    void settle() noexcept {
        if (session_.kv->size() > session_.history.size())
            session_.kv->truncate(session_.history.size());
        if (row_ != session_.logits.data())
            std::copy(row_, row_ + n_vocab_, session_.logits.begin());
    }

    SessionState& session_;
    const Tokenizer& tokenizer_;
    Sampler& sampler_;
    TokenConstraint* constraint_;
    const GenerateParams& params_;
    TextSink& sink_;
    const std::atomic<bool>& cancel_flag_;
    ShiftShape* shift_;
    GenerateResult& result_;
    const size_t max_tokens_;
    const size_t n_vocab_;
    float* row_;                      // the row the next token is sampled from
    std::vector<int32_t> proposals_;  // this step's, after the last emitted token
    std::vector<int32_t> chunk_;      // [last token, proposals...]
    std::vector<float> rows_;         // [max_proposals + 1][vocab]
};

}  // namespace detail

SMOL_NAMESPACE_END
