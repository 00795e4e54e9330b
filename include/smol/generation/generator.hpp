// smol::Generator: prompt or conversation in, text out. The top layer of the
// library; everything an application needs to talk to a loaded model.
//
// Owns, per generator (a "session"): a KV cache, the token history whose keys
// and values the cache holds, the chat format, and the run state (cancel flag,
// async worker). The weights belong to the smol::Model, which any number of
// generators share. The generator reaches the network only through the
// model's backend (model/backend.hpp: Backend::try_forward over one Segment, a
// BackendCache made by Backend::make_cache), so everything here (sampling,
// stop strings, chat, prefix reuse, sessions, async, fork, cancel) runs the
// same on the CPU or on CUDA (LoadOptions::device), and a saved session moves
// between the two.
//
// The parts, one concept per header: what a session owns and the operations
// on it (generation/session_state.hpp); the decode step, forward, mask,
// sample, emit (generation/decode_step.hpp), with what proposes tokens
// around it (generation/decode_strategy.hpp; lookup drafts:
// generation/lookup.hpp; the tokens a constraint forces:
// generation/jump_forward.hpp); the constraint and DRY state kept between runs
// (generation/sampling_state.hpp); ContextPolicy::shift's rule
// (generation/context_shift.hpp). This file is the API and the order of a
// run: prompt ids, prefix reuse, prefill, decode, result.
//
//   auto model = smol::Model::load("SmolLM3-3B-Q4_K_M.gguf");
//   smol::Generator gen(model);                       // n_ctx: min(4096, model max)
//   smol::GenerateParams p;  p.max_tokens = 128;  p.stop = {"\nUser:"};
//   auto r = gen.generate("Once upon a time", p,
//                         [](std::string_view piece) { std::cout << piece; return true; });
//   auto c = gen.chat({{"system", "You are a blacksmith."}, {"user", "Hi!"}}, p);
//
// Every call takes the *whole* context (the prompt, or the whole conversation)
// and reuses the longest prefix it shares with the session's history: only the
// new tokens are prefilled (GenerateResult::n_reused_tokens says how many were
// not). Generated ids, including a final end-of-generation token such as
// <|im_end|>, stay in the history, so the next chat turn, which re-renders the
// conversation, usually reuses everything up to the new user message.
//
// Long conversations (GeneratorOptions::context_policy). With stop (the
// default), a prompt longer than n_ctx is Error(out_of_range) and a full
// context ends a run with StopReason::context_full. With shift the generator
// keeps going, and a caller keeps passing the whole conversation (or the
// whole text) as before:
//   - A prompt that does not fit (prompt + room for the answer: max_tokens
//     when set, at most half the context, else a quarter of it) is shown to
//     the model without its oldest tokens after the head: n_keep tokens, and
//     for chat() the system turn too; chat() leaves out whole turns only,
//     never the current one (the last message and the generation prompt).
//     Enough goes to bring it to about half the context, so shifts stay rare.
//   - The cache follows with erase(), not a new prefill: when it holds the
//     head and, after it, a span that lines up with the prompt at a cut (one
//     gap: generation/context_shift.hpp has the rule), that span stays cached
//     and only what follows is prefilled, so a turn after a shift costs about
//     what a turn before it did. When nothing lines up (another system
//     message, an edited old turn), everything after the common prefix is
//     prefilled.
//   - Mid-run, a full cache erases the oldest half after n_keep (generate())
//     or the oldest whole turns after the system turn (chat()), and goes on;
//     when nothing may go, the run stops with context_full as with stop.
//   - GenerateResult::n_discarded_tokens counts what a call left out or
//     erased; n_prefilled_tokens() stays the prompt tokens actually run. The
//     log (log_info) says when and how much was shifted.
// erase(first, count) is the same operation for the caller: it removes
// history() tokens and their cache entries, re-rotating the moved keys
// (model/backend.hpp, Backend::erase).
//
// Stopping and input errors: see StopReason in generation/params.hpp.
//
// Thread-safety contract:
//   - smol::Model is immutable after load: share one (std::shared_ptr) between
//     any number of generators on any threads. Their forward passes share the
//     model's thread pool (LoadOptions::n_threads), which runs one job at a
//     time (calls queue), so busy generators split the machine rather than
//     oversubscribe it. (A 1-thread pool runs each job on its caller's thread.)
//   - A Generator is used by one thread at a time. The exceptions: cancel()
//     may be called from any thread at any moment (also during a prefill), and
//     an AsyncGeneration's methods may be called from any one thread while its
//     worker runs. Two overlapping runs on one generator (e.g. generate() from
//     two threads) are detected and rejected with smol::Error(invalid_argument);
//     a run started while an async run is still going first waits for it.
//   - fork() and save_session() need a generator that is not running.
//   - Async runs execute on one persistent worker thread per generator
//     (started by the first generate_async / chat_async; on_worker_start runs
//     there first). Starting a run only queues it; AsyncGeneration::poll() and
//     done() are lock-free, so a game loop never waits for a decode step.
//
// Without exceptions (-fno-exceptions): generate()/chat() report failures as
// StopReason::error with GenerateResult::error; use try_load_model(),
// Generator::try_create() and try_restore_session(). Errors travel as values
// (error.hpp: Status / Expected) all the way, so nothing is abandoned.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../build_info.hpp"
#include "../error.hpp"
#include "../model/backend.hpp"
#include "../model/model.hpp"
#include "../constrain/constraint.hpp"
#include "../sampling/sampler.hpp"
#include "../text/chat_template.hpp"
#include "../text/tokenizer.hpp"
#include "async.hpp"
#include "batcher.hpp"
#include "context_shift.hpp"
#include "decode_step.hpp"
#include "inputs.hpp"
#include "jump_forward.hpp"
#include "lookup.hpp"
#include "params.hpp"
#include "sampling_state.hpp"
#include "session_format.hpp"
#include "session_state.hpp"
#include "run_gate.hpp"
#include "text_sink.hpp"

SMOL_NAMESPACE_BEGIN

class Generator {
public:
    // Throws smol::Error (invalid_argument for a bad n_ctx, resource for a
    // cache past the memory budget, ...).
    explicit Generator(std::shared_ptr<const Model> model, const GeneratorOptions& options = {})
        : state_(detail::value_or_fail(State::make(std::move(model), options))) {
        log_start();
    }

    // The non-throwing way to construct (for -fno-exceptions consumers): null
    // and *error filled on failure.
    static std::unique_ptr<Generator> try_create(std::shared_ptr<const Model> model,
                                                 const GeneratorOptions& options = {},
                                                 ErrorInfo* error = nullptr) {
        Expected<std::unique_ptr<State>> state = State::make(std::move(model), options);
        if (!state) {
            if (error) *error = state.take_error();
            return nullptr;
        }
        std::unique_ptr<Generator> out(new Generator(PrivateTag{}, std::move(state).value()));
        out->log_start();
        return out;
    }

    // Moving waits for an async run of `other` to finish (the run refers to
    // the generator it was started on). A moved-from generator may only be
    // destroyed or assigned to.
    Generator(Generator&& other) noexcept {
        other.wait_async_idle();
        state_ = std::move(other.state_);
    }
    Generator& operator=(Generator&& other) noexcept {
        if (this != &other) {
            shutdown();
            other.wait_async_idle();
            state_ = std::move(other.state_);
        }
        return *this;
    }
    Generator(const Generator&) = delete;
    Generator& operator=(const Generator&) = delete;
    ~Generator() { shutdown(); }

    // --- generation ---

    // Completes `prompt`: the program's own text, in which special tokens such
    // as <|im_start|> written out are parsed as control tokens (so a program
    // can write a turn by hand). Text from a user, a tool or the network must
    // not reach it that way: it could write turns of its own. Use chat(),
    // whose contents are always text, or params.prompt_as_text. BOS is added
    // only if the file asks for it.
    GenerateResult generate(std::string_view prompt, const GenerateParams& params = {},
                            const TokenCallback& on_text = {}) {
        return run_guarded(
            [&](std::vector<int32_t>& ids) {
                return text_prompt(prompt, params.prompt_as_text, ids);
            },
            /*chat=*/false, params, on_text, make_flag());
    }

    // Completes a prompt given as token ids (no BOS added).
    GenerateResult generate_tokens(const std::vector<int32_t>& prompt,
                                   const GenerateParams& params = {},
                                   const TokenCallback& on_text = {}) {
        return run_guarded(
            [&](std::vector<int32_t>& ids) {
                ids = prompt;
                return Status();
            },
            /*chat=*/false, params, on_text, make_flag());
    }

    // Renders the whole conversation with the file's chat format (SmolLM3's
    // template when the file carries it, else ChatML) and params.chat, then
    // generates the assistant's reply. GenerateResult::reasoning / answer hold
    // the <think> part and the rest. Only the template's own markup holds
    // control tokens: message contents (every role) and the tools' text are
    // ordinary text, whatever markers they spell (see
    // ChatOptions::parse_special_in_content for the trusted-content opt-in).
    GenerateResult chat(const std::vector<ChatMessage>& messages, const GenerateParams& params = {},
                        const TokenCallback& on_text = {}) {
        return run_guarded(
            [&](std::vector<int32_t>& ids) { return chat_prompt(messages, params.chat, ids); },
            /*chat=*/true, params, on_text, make_flag());
    }

    // As generate() / chat(), on a worker thread; the arguments are copied.
    AsyncGeneration generate_async(std::string prompt, GenerateParams params = {}) {
        const bool as_text = params.prompt_as_text;
        return start_async(
            [this, prompt = std::move(prompt), as_text](std::vector<int32_t>& ids) {
                return text_prompt(prompt, as_text, ids);
            },
            /*chat=*/false, std::move(params));
    }
    AsyncGeneration chat_async(std::vector<ChatMessage> messages, GenerateParams params = {}) {
        ChatOptions chat_options = params.chat;
        return start_async(
            [this, messages = std::move(messages), chat_options](std::vector<int32_t>& ids) {
                return chat_prompt(messages, chat_options, ids);
            },
            /*chat=*/true, std::move(params));
    }

    // Runs the prompt (or conversation) into the KV cache without generating,
    // e.g. a shared system prompt before fork(). Returns the tokens prefilled.
    // Tokenized as generate() (special tokens parsed) and chat() (contents
    // are text) do.
    size_t prefill(std::string_view prompt) {
        GenerateParams params;
        params.max_tokens = 0;
        return generate(prompt, params).n_prefilled_tokens();
    }
    size_t prefill_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options = {}) {
        GenerateParams params;
        params.max_tokens = 0;
        params.chat = options;
        return chat(messages, params).n_prefilled_tokens();
    }

    // Stops the run in progress, from any thread (checked between layers during
    // prefill and before every token). No effect when nothing runs.
    void cancel() noexcept {
        if (state_) state_->gate->cancel();
    }

    // --- session state ---

    // Forgets the history and empties the KV cache.
    void reset() {
        detail::RunGate::Scope scope(*state_->gate, "reset");
        state_->history.clear();
        state_->kv->clear();
    }

    // An independent generator with a copy of this one's KV cache and history:
    // e.g. many NPCs branching from one prefilled system prompt. On the CPU
    // the copy shares the cache's blocks of positions until either generator
    // writes one (copy on write, model/kv_blocks.hpp), so eight forks of a
    // long prompt hold it once; cache_memory() shows the split. Forks may run
    // on different threads (the shared blocks are only read).
    Generator fork() {
        detail::RunGate::Scope scope(*state_->gate, "fork");
        return Generator(PrivateTag{}, state_->fork());
    }

    // Removes tokens [first, first + count) of history() and, where the cache
    // holds them, their cache entries; the later tokens move down by count
    // positions (their keys re-rotated: model/backend.hpp, Backend::erase), so
    // the cache stays valid and nothing is prefilled again. first + count past
    // history() is Error(out_of_range); erasing while a run is going is
    // Error(invalid_argument), like fork(). logits() still hold the last
    // position's logits from before the erase. try_erase returns the error.
    void erase(size_t first, size_t count) { detail::ok_or_fail(try_erase(first, count)); }
    Status try_erase(size_t first, size_t count) {
        SMOL_TRY(begin_exclusive("erase"));
        Status status = state_->erase(first, count);
        end_exclusive();
        return status;
    }

    // The session (history + KV cache) as bytes, tagged with the model's
    // identity; restore_session() on a generator of the same model brings it
    // back. The format: generation/session_format.hpp.
    std::vector<uint8_t> save_session() {
        detail::RunGate::Scope scope(*state_->gate, "save_session");
        return detail::encode_session(state_->model->identity(), state_->history,
                                      state_->kv->serialize());
    }

    // Restores a session from save_session(). Another model's session is
    // smol::Error(invalid_argument); malformed or corrupted bytes (checksum
    // mismatch) are ErrorKind::format; another session version (1 included) is
    // ErrorKind::unsupported; a session longer than this generator's n_ctx is
    // ErrorKind::out_of_range. On error the generator keeps its previous state.
    void restore_session(const std::vector<uint8_t>& bytes) {
        restore_session(bytes.data(), bytes.size());
    }
    void restore_session(const uint8_t* data, size_t size) {
        ErrorInfo error;
        if (!try_restore_session(data, size, &error)) detail::fail(error);
    }
    // The non-throwing variant: false (and *error) on failure.
    bool try_restore_session(const uint8_t* data, size_t size, ErrorInfo* error = nullptr) {
        Status status = begin_exclusive("restore_session");
        if (status) {
            status = restore_unlocked(data, size);
            end_exclusive();
        }
        if (!status && error) *error = status.take_error();
        return status.ok();
    }

    // --- inspection ---
    const Model& model() const noexcept { return *state_->model; }
    std::shared_ptr<const Model> model_ptr() const noexcept { return state_->model; }
    size_t n_ctx() const noexcept { return state_->kv->n_ctx(); }
    // Tokens whose keys/values the cache holds (a prefix of history()).
    size_t n_cached() const noexcept { return state_->kv->size(); }
    // The KV cache's bytes held by this generator alone, and those shared with
    // its forks (counted in each of them, held once). Not while a run is going
    // on another thread (like n_cached()).
    CacheMemory cache_memory() const noexcept { return state_->kv->memory(); }
    // Prompt + generated ids of the last run (the cache holds all but possibly the last).
    const std::vector<int32_t>& history() const noexcept { return state_->history; }
    ChatFormat chat_format() const noexcept { return state_->chat_format; }
    // [vocab] logits of the last position the model ran. After a prefill-only
    // call (max_tokens 0) they are the raw logits of the last prompt token;
    // sampling rewrites them in place (penalties, bias, hook).
    const std::vector<float>& logits() const noexcept { return state_->logits; }

    // The token ids generate(prompt, params) would use: special tokens
    // written in `prompt` parsed as control tokens, unless
    // params.prompt_as_text; BOS when the file asks. Text that generate()
    // refuses is refused here with the same error (invalid UTF-8:
    // invalid_argument naming the byte offset): both go through text_prompt().
    std::vector<int32_t> tokenize(std::string_view prompt,
                                  const GenerateParams& params = {}) const {
        std::vector<int32_t> ids;
        detail::ok_or_fail(text_prompt(prompt, params.prompt_as_text, ids));
        return ids;
    }
    // The exact token ids chat() would run for `messages`: control tokens only
    // where the template wrote them, contents as text (unless
    // options.parse_special_in_content).
    std::vector<int32_t> tokenize_chat(const std::vector<ChatMessage>& messages,
                                       const ChatOptions& options = {}) const {
        std::vector<int32_t> ids;
        detail::ok_or_fail(chat_prompt(messages, options, ids));
        return ids;
    }
    // The exact text chat() would run for `messages`, for showing or logging.
    // Its ids are tokenize_chat()'s: tokenize(render_chat(...)) would parse
    // marker text in contents as control tokens.
    std::string render_chat(const std::vector<ChatMessage>& messages,
                            const ChatOptions& options = {}) const {
        detail::ok_or_fail(detail::messages_status(messages));
        return smol::render_chat(state_->chat_format, messages, options);
    }

private:
    // What a session owns: model, options, cache, history, logits, sampling
    // state, run gate (generation/session_state.hpp).
    using State = detail::SessionState;

    struct PrivateTag {};
    Generator(PrivateTag, std::unique_ptr<State> state) : state_(std::move(state)) {}
    void log_start() const {
        log(log_info, build_info_string() + ", backend " + backend().name() + ", n_ctx " +
                          std::to_string(n_ctx()) + ", chat format " +
                          (state_->chat_format == ChatFormat::smollm3 ? "smollm3" : "chatml"));
        if (backend().device() == Device::cpu && state_->model->cpu_level() == CpuLevel::scalar)
            log(log_warning,
                "smol runs the scalar reference kernels (forced by SMOL_CPU / LoadOptions::cpu, or "
                "a CPU "
                "without AVX2/NEON): decoding is several times slower");
    }
    void log(int level, const std::string& message) const { state_->log(level, message); }

    static std::shared_ptr<std::atomic<bool>> make_flag() {
        return std::make_shared<std::atomic<bool>>(false);
    }
    const Backend& backend() const noexcept { return state_->backend(); }

    // ---- prompts: text or a conversation to ids (generation/inputs.hpp) ----

    Status text_prompt(std::string_view prompt, bool as_text, std::vector<int32_t>& ids) const {
        return detail::text_prompt_ids(state_->model->tokenizer(), prompt, as_text, ids);
    }
    Status chat_prompt(const std::vector<ChatMessage>& messages, const ChatOptions& options,
                       std::vector<int32_t>& ids) const {
        return detail::chat_prompt_ids(state_->model->tokenizer(), state_->chat_format, messages,
                                       options, ids);
    }

    // ---- exclusive use (one run at a time: detail::RunGate) ----

    Status begin_exclusive(const char* what) { return state_->gate->enter(what); }
    void end_exclusive() noexcept { state_->gate->leave(); }
    void wait_async_idle() noexcept {
        if (state_) state_->gate->wait_async_idle();
    }
    void shutdown() noexcept {
        if (state_) state_->gate->shutdown();
    }

    // ---- one run ----

    // Marks the generator busy, gets the prompt ids, generates. Errors leave
    // the session consistent (history trimmed to what the cache holds) and are
    // thrown (without exceptions: returned as StopReason::error).
    template <class PromptFn>
    GenerateResult run_guarded(PromptFn&& prompt_ids, bool chat, const GenerateParams& params,
                               const TokenCallback& on_text,
                               std::shared_ptr<std::atomic<bool>> cancel_flag,
                               bool exclusive_taken = false) {
        if (!exclusive_taken) {
            Status busy = begin_exclusive("generate");
            if (!busy) return error_result(busy.take_error());
        }
        state_->gate->set_cancel_flag(cancel_flag);
        // Ends the run however it leaves (including an exception thrown by the
        // caller's callback or hook): the session stays consistent (history
        // trimmed to what the cache holds, which is only ever extended after a
        // forward pass completes) and the generator is free again.
        struct RunScope {
            Generator& generator;
            bool completed = false;
            ~RunScope() {
                State& state = *generator.state_;
                if (!completed && state.history.size() > state.kv->size())
                    state.history.resize(state.kv->size());
                generator.end_exclusive();
            }
        } scope{*this};
        Expected<GenerateResult> result = [&]() -> Expected<GenerateResult> {
            std::vector<int32_t> ids;
            SMOL_TRY(prompt_ids(ids));
            SMOL_TRY(detail::run_inputs_status(ids, params, state_->logits.size(), n_ctx(),
                                               state_->options.context_policy));
            return run(std::move(ids), chat, params, on_text, *cancel_flag);
        }();
        scope.completed = result.ok();
        if (!result) return error_result(result.take_error());
        return std::move(result).value();
    }

    // A failed run: thrown with exceptions, a StopReason::error result without.
    GenerateResult error_result(ErrorInfo error) const {
        log(log_error, error.message);
        return detail::error_result(std::move(error));
    }

    template <class PromptFn>
    AsyncGeneration start_async(PromptFn prompt_ids, bool chat, GenerateParams params) {
        detail::ok_or_fail(begin_exclusive("generate_async"));
        auto shared = std::make_shared<AsyncGeneration::Shared>();
        std::shared_ptr<std::atomic<bool>> flag = shared->cancel;
        state_->gate->set_cancel_flag(flag);
        auto body = [this, shared, flag, chat, prompt_ids = std::move(prompt_ids),
                     params = std::move(params)]() mutable {
            const TokenCallback on_text = [&shared, &flag](std::string_view piece) {
                shared->text.push(piece);
                return !flag->load(std::memory_order_relaxed);
            };
            GenerateResult result = run_on_worker(prompt_ids, chat, params, on_text, flag);
            // Free the generator before reporting done, so that a caller who sees
            // done() and starts the next run never waits on this thread.
            state_->gate->async_finished();
            shared->result = std::move(result);
            shared->done.store(true, std::memory_order_release);
            // Taking the mutex once between setting `done` and notifying means a
            // waiter that saw done == false under the mutex is already asleep.
            { std::lock_guard<std::mutex> lock(shared->mutex); }
            shared->finished.notify_all();
        };
        state_->gate->post_async(std::move(body));
        return AsyncGeneration(std::move(shared));
    }

    // An async run's body: every error becomes the result, since nothing on
    // the worker thread could catch it. (With exceptions, the caller's
    // callback or logits hook may still throw anything.)
    template <class PromptFn>
    GenerateResult run_on_worker(PromptFn& prompt_ids, bool chat, const GenerateParams& params,
                                 const TokenCallback& on_text,
                                 const std::shared_ptr<std::atomic<bool>>& flag) {
        return detail::result_or_caught([&] {
            return run_guarded(prompt_ids, chat, params, on_text, flag, /*exclusive_taken=*/true);
        });
    }

    // The steps of a run: reuse the cached prefix, prefill the rest, decode.
    Expected<GenerateResult> run(std::vector<int32_t> prompt, bool chat,
                                 const GenerateParams& params, const TokenCallback& on_text,
                                 const std::atomic<bool>& cancel_flag) {
        using Clock = std::chrono::steady_clock;
        auto ms_since = [](Clock::time_point start) {
            return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        };
        Sampler sampler(params);  // run_inputs_status checked the parameters
        SMOL_TRY_ASSIGN(const std::unique_ptr<TokenConstraint> constraint,
                        state_->sampling.prepare(sampler, params, state_->model->tokenizer()));
        const Batcher::Membership membership(state_->options.batcher.get());
        GenerateResult result;
        result.n_prompt_tokens = prompt.size();
        detail::ShiftShape shape;
        const bool shifting = state_->options.context_policy == ContextPolicy::shift;
        if (shifting) {
            shape = detail::prompt_shift_shape(prompt, state_->model->tokenizer(),
                                               state_->options.n_keep, chat,
                                               params.chat.add_generation_prompt);
            SMOL_TRY(state_->fit_prompt(prompt, shape, params, result));
        }
        result.n_reused_tokens = state_->reuse_cached_prefix(prompt);

        const auto prefill_start = Clock::now();
        const size_t reuse = result.n_reused_tokens;
        SMOL_TRY_ASSIGN(
            const bool prefilled,
            state_->forward(prompt.data() + reuse, prompt.size() - reuse, reuse, cancel_flag));
        result.prefill_ms = ms_since(prefill_start);
        if (!prefilled) {
            state_->history.resize(state_->kv->size());
            return finish(std::move(result), StopReason::cancelled);
        }

        const auto decode_start = Clock::now();
        detail::TextSink sink(state_->model->tokenizer(), params.stop, on_text, result.text);
        // The step (generation/decode_step.hpp), and what proposes tokens
        // around it: lookup drafts when asked for (generation/lookup.hpp), else
        // under a constraint the tokens it forces (generation/jump_forward.hpp),
        // else nothing.
        detail::PlainDecoding plain;
        detail::LookupDecoding lookup(params.lookup);
        std::optional<detail::JumpForward> jump;
        detail::DecodeStrategy* strategy = &plain;
        const bool use_lookup = params.lookup.mode == LookupMode::on ||
                                (params.lookup.mode == LookupMode::automatic && !constraint &&
                                 backend().device() == Device::cpu && !state_->options.batcher);
        if (use_lookup) {
            strategy = &lookup;
        } else if (constraint) {
            strategy = &jump.emplace(*constraint);
        }
        detail::DecodeLoop decode(*state_, sampler, constraint.get(), params, sink, cancel_flag,
                                  shifting ? &shape : nullptr, result);
        SMOL_TRY_ASSIGN(StopReason reason, decode.run(*strategy));
        if (sink.matched()) {  // also when the final flush completed a stop string
            reason = StopReason::stop_string;
            result.matched_stop = sink.matched_string();
        }
        result.decode_ms = ms_since(decode_start);
        if (!params.chat.tools.empty() || !params.chat.xml_tools.empty())
            result.tool_calls = parse_tool_calls(result.text);
        return finish(std::move(result), reason);
    }

    static GenerateResult finish(GenerateResult result, StopReason reason) {
        result.stop_reason = reason;
        ReasoningSplit split = split_reasoning(result.text);
        result.reasoning = std::move(split.reasoning);
        result.answer = std::move(split.answer);
        return result;
    }

    // On error the generator keeps its state (generation/session_format.hpp checks all first).
    Status restore_unlocked(const uint8_t* data, size_t size) {
        SMOL_TRY_ASSIGN(std::vector<int32_t> history,
                        detail::restore_session(data, size, state_->model->identity(),
                                                state_->logits.size(), *state_->kv));
        state_->history = std::move(history);
        return {};
    }

    std::unique_ptr<State> state_;
};

SMOL_NAMESPACE_END
