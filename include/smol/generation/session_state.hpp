// What one Generator (a session) owns, and the operations on it that every
// part of a run shares: running tokens through the model into the session's
// cache (forward), reusing the cached prefix of a new prompt
// (reuse_cached_prefix), erasing tokens from history and cache together
// (erase), fitting a prompt that outgrows the context (fit_prompt, for
// ContextPolicy::shift), logging through GeneratorOptions::log.
//
// Why a header of its own: the Generator (generation/generator.hpp) is the
// API and the order of a run; the decode step (generation/decode_step.hpp)
// works on the same state. Both take it from here, so the step needs no
// friend access to the Generator and the Generator holds no step's code.
//
// The invariant every function here keeps: kv->size() <= history.size(), and
// the cache holds the keys and values of history[0, kv->size()).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../model/backend.hpp"
#include "../model/model.hpp"
#include "../text/chat_template.hpp"
#include "batcher.hpp"
#include "context_shift.hpp"
#include "params.hpp"
#include "run_gate.hpp"
#include "sampling_state.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

struct SessionState {
    std::shared_ptr<const Model> model;
    GeneratorOptions options;
    std::unique_ptr<BackendCache> kv;  // made by the model's backend (model/backend.hpp)
    std::vector<int32_t> history;      // prompt + generated; the cache holds a prefix of it
    std::vector<float> logits;         // [vocab]: the last position the model ran
    ChatFormat chat_format = ChatFormat::chatml;
    // The compiled constraint and DRY's breaker table, kept warm for the
    // next run that asks for the same (generation/sampling_state.hpp).
    SamplingState sampling;

    // One run at a time, cancel, the async worker (generation/run_gate.hpp).
    // Declared last: its worker stops before the rest of the state goes.
    std::unique_ptr<RunGate> gate;

    // Everything a new generator needs, checked and allocated as values.
    static Expected<std::unique_ptr<SessionState>> make(std::shared_ptr<const Model> model,
                                                        const GeneratorOptions& options) {
        SMOL_TRY(options_status(model.get(), options));
        auto state = std::make_unique<SessionState>();
        state->model = std::move(model);
        state->options = options;
        state->gate = std::make_unique<RunGate>(options.on_worker_start);
        SMOL_TRY_ASSIGN(state->kv,
                        state->model->backend().try_make_cache(options.n_ctx, options.kv_type,
                                                               state->model->memory_budget()));
        state->logits.resize(state->model->config().vocab_size);
        SMOL_TRY_ASSIGN(const auto chat_template,
                        state->model->file().try_find<std::string>("tokenizer.chat_template"));
        state->chat_format = detect_chat_format(chat_template ? std::string_view(*chat_template)
                                                              : std::string_view());
        return state;
    }

    static Status options_status(const Model* model, const GeneratorOptions& options) {
        if (!model) return Status(ErrorKind::invalid_argument, "Generator: model is null");
        const size_t limit = model->config().context_length;
        if (options.n_ctx == 0)
            return Status(ErrorKind::invalid_argument, "Generator: n_ctx must be positive");
        if (options.n_ctx != KVCache::kDefaultSize && options.n_ctx > limit)
            return Status(ErrorKind::invalid_argument,
                          "Generator: n_ctx " + std::to_string(options.n_ctx) +
                              " exceeds the model's context length " + std::to_string(limit));
        if (options.kv_type != KVType::f16 && options.kv_type != KVType::f32 &&
            options.kv_type != KVType::q8_0)
            return Status(ErrorKind::invalid_argument, "Generator: unknown kv_type");
        if (options.context_policy != ContextPolicy::stop &&
            options.context_policy != ContextPolicy::shift)
            return Status(ErrorKind::invalid_argument, "Generator: unknown context_policy");
        if (options.batcher && &options.batcher->model() != model)
            return Status(ErrorKind::invalid_argument,
                          "Generator: the batcher belongs to another model");
        return {};
    }

    // Generator::fork(): the cache cloned (blocks shared until written), the
    // history copied, a gate of its own; the logits start at zero.
    std::unique_ptr<SessionState> fork() const {
        auto out = std::make_unique<SessionState>();
        out->model = model;
        out->options = options;
        out->gate = std::make_unique<RunGate>(options.on_worker_start);
        out->kv = kv->clone();
        out->history = history;
        out->logits.resize(logits.size());
        out->chat_format = chat_format;
        out->sampling = sampling.fork();
        return out;
    }

    const Backend& backend() const noexcept { return model->backend(); }

    void log(int level, const std::string& message) const {
        if (options.log) options.log(level, message);
    }

    // Runs `tokens` at positions [start, start + n) through the model, through
    // the batcher when the generator has one; false if cancelled (the backend
    // checks the flag between layers). The backend extends the cache chunk by
    // chunk, so after a cancel it holds [0, start + the chunks that
    // completed): still valid, and kept. The logits go to `logits` (the last
    // position's) or, given `rows`, to rows ([n][vocab], every position's).
    Expected<bool> forward(const int32_t* tokens, size_t n, size_t start,
                           const std::atomic<bool>& cancel_flag, float* rows = nullptr) {
        if (cancel_flag.load(std::memory_order_relaxed)) return false;
        const bool all_logits = rows != nullptr;
        const Segment segment{tokens,    n, start, kv.get(), all_logits ? rows : logits.data(),
                              all_logits};
        Status status;
        if (options.batcher) {
            status = options.batcher->run(segment, &cancel_flag);
        } else {
            ForwardOptions forward_options;
            if (options.prefill_chunk) forward_options.chunk_size = options.prefill_chunk;
            forward_options.cancel = &cancel_flag;
            status = backend().try_forward(segment, forward_options);
        }
        if (status) return true;
        if (status.error().kind == ErrorKind::cancelled) return false;
        return status.take_error();
    }

    // Keeps the longest prefix of `prompt` (not empty) the cache already
    // holds, but always leaves at least the last prompt token to run: its
    // logits pick the first token. The history becomes the prompt. Returns
    // the tokens kept.
    size_t reuse_cached_prefix(const std::vector<int32_t>& prompt) {
        size_t reuse = 0;
        const size_t limit = std::min(kv->size(), prompt.size() - 1);
        while (reuse < limit && history[reuse] == prompt[reuse]) ++reuse;
        kv->truncate(reuse);
        history = prompt;
        log(log_debug, "prompt " + std::to_string(prompt.size()) + " tokens, " +
                           std::to_string(reuse) + " reused from the cache");
        return reuse;
    }

    // Removes history[first, first + count) and, where the cache holds them,
    // their cache entries (the later keys re-rotated: Backend::erase).
    Status erase(size_t first, size_t count) {
        if (first > history.size() || count > history.size() - first)
            return Status(ErrorKind::out_of_range,
                          "erase: tokens " + std::to_string(first) + " + " + std::to_string(count) +
                              " are past the history of " + std::to_string(history.size()));
        if (count == 0) return {};
        if (first < kv->size())
            SMOL_TRY(backend().try_erase(*kv, first, std::min(count, kv->size() - first)));
        history.erase(history.begin() + long(first), history.begin() + long(first + count));
        return {};
    }

    // ContextPolicy::shift before the prefix reuse: when the prompt (or the
    // gapped prompt the cache holds) leaves no room for the answer, the gap
    // goes in (generation/context_shift.hpp), the cache is erased to match and
    // `prompt` becomes what the model sees; `shape` follows it; `result` counts
    // what was left out.
    Status fit_prompt(std::vector<int32_t>& prompt, detail::ShiftShape& shape,
                      const GenerateParams& params, GenerateResult& result) {
        const size_t ctx = kv->n_ctx();
        const size_t room =
            params.max_tokens >= 0 ? std::min(size_t(params.max_tokens), ctx / 2) : ctx / 4;
        if (prompt.size() + room <= ctx) return {};
        const size_t keep = shape.keep;
        const detail::PromptShift plan =
            detail::plan_prompt_shift(prompt, history, kv->size(), shape, ctx, room, ctx / 2);
        if (!plan.fits)
            return Status(ErrorKind::out_of_range,
                          "prompt: after leaving out every earlier turn it may, " +
                              std::to_string(prompt.size() - (plan.gap_end - keep)) +
                              " tokens remain, more than the context of " + std::to_string(ctx) +
                              " (GeneratorOptions::n_ctx; the head kept is " +
                              std::to_string(keep) + " tokens)");
        // The cache: the head and the span that stays, less what the new gap takes.
        if (plan.cached_span > 0) {
            SMOL_TRY(erase(keep + plan.cached_span, history.size() - (keep + plan.cached_span)));
            SMOL_TRY(erase(keep, plan.erase));
        }
        const size_t gap = plan.gap_end - keep;
        prompt.erase(prompt.begin() + long(keep), prompt.begin() + long(plan.gap_end));
        shape.drop(gap);
        result.n_prompt_discarded_tokens = gap;
        result.n_discarded_tokens += gap;
        if (gap > 0)
            log(log_info, "context shift: the prompt leaves out " + std::to_string(gap) +
                              " tokens after the first " + std::to_string(keep) + " (" +
                              std::to_string(prompt.size()) + " of " +
                              std::to_string(result.n_prompt_tokens) + " seen, " +
                              std::to_string(plan.cached_span - plan.erase) +
                              " of them still cached after the head)");
        return {};
    }
};

}  // namespace detail

SMOL_NAMESPACE_END
