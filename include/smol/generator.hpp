// smol::Generator: prompt or conversation in, text out. The top layer of the
// library; everything an application needs to talk to a loaded model.
//
// Owns, per generator (a "session"): a KV cache, the token history whose keys
// and values the cache holds, the chat format, and the run state (cancel flag,
// async worker). The weights belong to the smol::Model, which any number of
// generators share. The generator reaches the network only through the
// model's backend (model/backend.hpp: Backend::forward over one Segment, a
// BackendCache made by Backend::make_cache), so everything here (sampling,
// stop strings, chat, prefix reuse, sessions, async, fork, cancel) runs the
// same on the CPU or on CUDA (LoadOptions::device), and a saved session moves
// between the two.
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
// Stopping: an end-of-generation token of the file (never emitted as text),
// a stop string (matched across token boundaries; text that might begin one is
// held back from the callback until it cannot; the stop string and anything
// after it never reach the callback or GenerateResult::text), max_tokens, the
// callback returning false or cancel() (StopReason::cancelled), or a full
// context (StopReason::context_full: reported, not thrown). A prompt longer
// than the context is smol::Error(out_of_range); a prompt, message or stop
// string that is not valid UTF-8 is smol::Error(invalid_argument) naming the
// byte offset. Streamed pieces are always whole UTF-8.
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
// Generator::try_create() and try_restore_session(); smol::try_call() wraps
// anything else (error.hpp explains the mechanism and its cost: an error that
// is not checked up front unwinds by longjmp and may leak). Cancellation is
// then checked between prefill chunks (GeneratorOptions::prefill_chunk)
// rather than between layers.
#pragma once

#include "detail/abi.hpp"

#include "detail/bytes.hpp"
#include "detail/crc32c.hpp"
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "build_info.hpp"
#include "detail/stop_strings.hpp"
#include "detail/text_queue.hpp"
#include "detail/utf8.hpp"
#include "error.hpp"
#include "model/kv_cache.hpp"
#include "model/model.hpp"
#include "sampling/sampler.hpp"
#include "text/chat_template.hpp"
#include "text/detokenizer.hpp"
#include "text/tokenizer.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {
// The session header (save_session): magic (8 bytes), u32 version, u32 CRC-32C.
constexpr size_t kSessionCrcOffset = 12;
constexpr size_t kSessionHeaderBytes = 16;

// The CRC-32C of a whole session (size >= kSessionHeaderBytes) except its own
// field: what save_session stores and restore_session checks (tools that
// rewrite a session, such as the fuzzer, reseal it with this).
inline uint32_t session_checksum(const uint8_t* data, size_t size) noexcept {
    const uint32_t head = crc32c(data, kSessionCrcOffset);
    return crc32c_update(head, data + kSessionHeaderBytes, size - kSessionHeaderBytes);
}
}  // namespace detail

// Why generation ended.
enum class StopReason {
    eos,           // the model produced an end-of-generation token
    max_tokens,    // GenerateParams::max_tokens tokens were generated
    stop_string,   // a GenerateParams::stop string appeared in the text
    cancelled,     // cancel(), AsyncGeneration::cancel(), or the callback returned false
    context_full,  // the KV cache is full (n_ctx positions)
    error,         // only without exceptions: see GenerateResult::error
};

inline const char* to_string(StopReason reason) noexcept {
    switch (reason) {
        case StopReason::eos: return "eos";
        case StopReason::max_tokens: return "max_tokens";
        case StopReason::stop_string: return "stop_string";
        case StopReason::cancelled: return "cancelled";
        case StopReason::context_full: return "context_full";
        case StopReason::error: return "error";
    }
    return "unknown";
}

// Log levels of GeneratorOptions::log (LoadOptions::log uses the same numbers:
// 0 info, 1 warning).
enum LogLevel : int { log_debug = -1, log_info = 0, log_warning = 1, log_error = 2 };

struct GeneratorOptions {
    // KV cache positions. Default (KVCache::kDefaultSize): min(4096, the model's
    // context length); 0 or more than the context length: Error(invalid_argument).
    size_t n_ctx = KVCache::kDefaultSize;
    KVType kv_type = KVType::f16;
    size_t prefill_chunk = 0;  // tokens per prefill forward call; 0 = the model's default
    // Silent by default. Called on the generating thread.
    std::function<void(int level, const std::string& message)> log;
    // Called first thing on each async worker thread (generate_async /
    // chat_async), e.g. to lower its priority or pin it so that a game's
    // main thread keeps its core.
    std::function<void()> on_worker_start;
};

// How chat() renders a conversation (see text/chat_template.hpp).
struct ChatOptions {
    bool add_generation_prompt = true;    // end with the assistant header the model completes
    std::optional<bool> enable_thinking;  // nullopt: the template's default (think)
    std::string today;                    // "Today Date" line; empty = the system clock's date
};

struct GenerateParams {
    int max_tokens = 256;  // < 0: until end-of-generation or a full context; 0: prefill only
    // Sampling (sampling/sampler.hpp has the exact order): penalties over the
    // last penalty_last_n tokens (prompt included), logit bias, logits hook,
    // top-k, top-p, min-p, temperature (<= 0: greedy), a draw from a PRNG
    // seeded with `seed` at the start of every call.
    float temperature = 0.8f;
    int top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float repeat_penalty = 1.0f;
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    int penalty_last_n = 64;
    uint64_t seed = 0;
    std::vector<std::pair<int32_t, float>> logit_bias;
    std::function<void(float* logits, size_t n_vocab)> logits_hook;
    std::vector<std::string> stop;  // stop strings (valid UTF-8; empty ones ignored)
    bool ignore_eos = false;        // keep going past end-of-generation tokens
    ChatOptions chat;               // used by chat() / chat_async()
};

struct GenerateResult {
    std::string text;       // everything emitted (never a matched stop string)
    std::string reasoning;  // the <think>...</think> part of text, without the tags
    std::string answer;     // text without the reasoning
    std::vector<int32_t> tokens;  // generated ids, including a final end-of-generation id
    StopReason stop_reason = StopReason::max_tokens;
    std::string matched_stop;     // the stop string that ended generation, if any
    size_t n_prompt_tokens = 0;   // tokens of the prompt / rendered conversation
    size_t n_reused_tokens = 0;   // of those, already in the KV cache (not prefilled)
    double prefill_ms = 0;        // prefill of n_prompt_tokens - n_reused_tokens tokens
    double decode_ms = 0;         // sampling + decoding of the generated tokens
    std::string error;            // StopReason::error only (no-exceptions builds)
    ErrorKind error_kind = ErrorKind::internal;

    size_t n_prefilled_tokens() const noexcept { return n_prompt_tokens - n_reused_tokens; }
    double prefill_tokens_per_s() const noexcept {
        return prefill_ms > 0 ? 1000.0 * double(n_prefilled_tokens()) / prefill_ms : 0.0;
    }
    double decode_tokens_per_s() const noexcept {
        return decode_ms > 0 ? 1000.0 * double(tokens.size()) / decode_ms : 0.0;
    }
};

// Receives each new piece of text (whole UTF-8); return false to stop.
using TokenCallback = std::function<bool(std::string_view piece)>;

class Generator;

// A generation running on a worker thread (Generator::generate_async /
// chat_async), for loops that must not block: poll() each frame for new text.
// No decode step ever runs on the thread that calls these methods. Destroying
// the handle cancels the run (the generator finishes it in the background and
// its next call waits for that).
class AsyncGeneration {
public:
    AsyncGeneration() = default;
    AsyncGeneration(AsyncGeneration&&) noexcept = default;
    AsyncGeneration& operator=(AsyncGeneration&& other) noexcept {
        if (this != &other) {
            cancel();
            shared_ = std::move(other.shared_);
        }
        return *this;
    }
    AsyncGeneration(const AsyncGeneration&) = delete;
    AsyncGeneration& operator=(const AsyncGeneration&) = delete;
    ~AsyncGeneration() { cancel(); }

    // False for a default-constructed (or moved-from) handle.
    bool valid() const noexcept { return shared_ != nullptr; }

    // Text produced since the last poll (whole UTF-8; empty if none). Lock-free:
    // never waits for the worker. Once done() is true, one more poll() returns
    // all the rest.
    std::string poll() { return shared_ ? shared_->text.pop_all() : std::string(); }

    // True once the run has finished (the result is ready; poll() may still
    // hold the last text).
    bool done() const noexcept { return !shared_ || shared_->done.load(std::memory_order_acquire); }

    // Blocks until the run finishes and returns its result. An error the run
    // hit is rethrown here (without exceptions: StopReason::error).
    GenerateResult wait() {
        if (!shared_) detail::fail(ErrorKind::invalid_argument, "AsyncGeneration::wait on an empty handle");
        if (!done()) {
            std::unique_lock<std::mutex> lock(shared_->mutex);
            shared_->finished.wait(lock, [&] { return shared_->done.load(std::memory_order_acquire); });
        }
        // Written once before `done` was released, never after: no lock needed.
        GenerateResult result = shared_->result;
#if SMOL_HAS_EXCEPTIONS
        if (result.stop_reason == StopReason::error) detail::fail(result.error_kind, result.error);
#endif
        return result;
    }

    // Asks the run to stop (also during prefill); returns at once.
    void cancel() noexcept {
        if (shared_) shared_->cancel->store(true, std::memory_order_relaxed);
    }

private:
    friend class Generator;
    struct Shared {
        std::mutex mutex;  // only for wait()'s sleep
        std::condition_variable finished;
        detail::TextQueue text;  // worker -> poll()
        GenerateResult result;   // written by the worker before `done`, then immutable
        std::atomic<bool> done{false};
        std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
    };
    explicit AsyncGeneration(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
    std::shared_ptr<Shared> shared_;
};

class Generator {
public:
    // Throws smol::Error (invalid_argument for a bad n_ctx, ...).
    explicit Generator(std::shared_ptr<const Model> model, const GeneratorOptions& options = {})
        : state_(std::make_unique<State>()) {
        if (auto invalid = options_error(model.get(), options)) detail::fail(invalid->kind, invalid->message);
        state_->model = std::move(model);
        state_->options = options;
        state_->kv = state_->model->backend().make_cache(options.n_ctx, options.kv_type,
                                                         state_->model->memory_budget());
        state_->logits.resize(state_->model->config().vocab_size);
        const auto chat_template = state_->model->file().find<std::string>("tokenizer.chat_template");
        state_->chat_format = detect_chat_format(chat_template ? std::string_view(*chat_template)
                                                               : std::string_view());
        const CpuLevel level = state_->model->cpu_level();
        log(log_info, build_info_string() + ", backend " + backend().name() + ", n_ctx " +
                          std::to_string(n_ctx()) + ", chat format " +
                          (state_->chat_format == ChatFormat::smollm3 ? "smollm3" : "chatml"));
        if (backend().device() == Device::cpu && level == CpuLevel::scalar)
            log(log_warning,
                "smol runs the scalar reference kernels (forced by SMOL_CPU / LoadOptions::cpu, or a CPU "
                "without AVX2/NEON): decoding is several times slower");
    }

    // The non-throwing way to construct (for -fno-exceptions consumers): null
    // and *error filled on failure.
    static std::unique_ptr<Generator> try_create(std::shared_ptr<const Model> model,
                                                 const GeneratorOptions& options = {},
                                                 ErrorInfo* error = nullptr) {
        std::unique_ptr<Generator> out;
        // Checked here as values: a failure inside the constructor would, without
        // exceptions, abandon a half-built generator (and its model reference).
        if (auto invalid = options_error(model.get(), options)) {
            if (error) *error = std::move(*invalid);
            return out;
        }
        try_call([&] { out = std::make_unique<Generator>(std::move(model), options); }, error);
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

    // Completes `prompt` (raw text; special tokens such as <|im_start|> are
    // parsed; BOS is added only if the file asks for it).
    GenerateResult generate(std::string_view prompt, const GenerateParams& params = {},
                            const TokenCallback& on_text = {}) {
        return run_guarded([&](std::vector<int32_t>& ids) { return text_prompt(prompt, ids); }, params,
                           on_text, make_flag());
    }

    // Completes a prompt given as token ids (no BOS added).
    GenerateResult generate_tokens(const std::vector<int32_t>& prompt, const GenerateParams& params = {},
                                   const TokenCallback& on_text = {}) {
        return run_guarded(
            [&](std::vector<int32_t>& ids) {
                ids = prompt;
                return std::optional<ErrorInfo>();
            },
            params, on_text, make_flag());
    }

    // Renders the whole conversation with the file's chat format (SmolLM3's
    // template when the file carries it, else ChatML) and params.chat, then
    // generates the assistant's reply. GenerateResult::reasoning / answer hold
    // the <think> part and the rest.
    GenerateResult chat(const std::vector<ChatMessage>& messages, const GenerateParams& params = {},
                        const TokenCallback& on_text = {}) {
        return run_guarded(
            [&](std::vector<int32_t>& ids) { return chat_prompt(messages, params.chat, ids); }, params,
            on_text, make_flag());
    }

    // As generate() / chat(), on a worker thread; the arguments are copied.
    AsyncGeneration generate_async(std::string prompt, GenerateParams params = {}) {
        return start_async(
            [this, prompt = std::move(prompt)](std::vector<int32_t>& ids) { return text_prompt(prompt, ids); },
            std::move(params));
    }
    AsyncGeneration chat_async(std::vector<ChatMessage> messages, GenerateParams params = {}) {
        ChatOptions chat_options = params.chat;
        return start_async(
            [this, messages = std::move(messages), chat_options](std::vector<int32_t>& ids) {
                return chat_prompt(messages, chat_options, ids);
            },
            std::move(params));
    }

    // Runs the prompt (or conversation) into the KV cache without generating,
    // e.g. a shared system prompt before fork(). Returns the tokens prefilled.
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
        if (!state_) return;
        std::lock_guard<std::mutex> lock(state_->run_mutex);
        if (state_->current_cancel) state_->current_cancel->store(true, std::memory_order_relaxed);
    }

    // --- session state ---

    // Forgets the history and empties the KV cache.
    void reset() {
        ExclusiveScope scope(*this, "reset");
        state_->history.clear();
        state_->kv->clear();
    }

    // An independent generator with a copy of this one's KV cache and history
    // (nothing mutable shared): e.g. many NPCs branching from one prefilled
    // system prompt.
    Generator fork() {
        ExclusiveScope scope(*this, "fork");
        return Generator(PrivateTag{}, *state_);
    }

    // The session (history + KV cache) as bytes, tagged with the model's
    // identity; restore_session() on a generator of the same model brings it
    // back. Layout (little-endian), version 2:
    //   offset 0   "SMOLSESS"
    //   offset 8   u32 version (2)
    //   offset 12  u32 CRC-32C of every other byte: [0, 12) then [16, end)
    //   offset 16  u64 identity length + identity bytes,
    //              u64 n_history + n_history i32 ids,
    //              u64 kv length + BackendCache::serialize() bytes (to the end):
    //              the portable cache format (model/backend.hpp), so a session
    //              saved on one backend restores on another of the same model
    // The checksum is why version 1 (a reserved zero word where the CRC now
    // is, nothing covered) is no longer read: a corrupted v1 session could
    // restore a history that disagrees with its cache.
    std::vector<uint8_t> save_session() {
        ExclusiveScope scope(*this, "save_session");
        // Constructed from the magic (not inserted into an empty vector): g++ 12
        // warns falsely (-Wstringop-overflow) on the latter at -O2.
        std::vector<uint8_t> out(kSessionMagic, kSessionMagic + 8);
        smol::detail::append_le<uint32_t>(out, kSessionVersion);
        smol::detail::append_le<uint32_t>(out, 0);  // the CRC, filled in last
        const std::string identity = state_->model->identity();
        smol::detail::append_le<uint64_t>(out, identity.size());
        out.insert(out.end(), identity.begin(), identity.end());
        smol::detail::append_le<uint64_t>(out, state_->history.size());
        for (int32_t id : state_->history) smol::detail::append_le<int32_t>(out, id);
        const std::vector<uint8_t> kv = state_->kv->serialize();
        smol::detail::append_le<uint64_t>(out, kv.size());
        out.insert(out.end(), kv.begin(), kv.end());
        const uint32_t crc = session_crc(out.data(), out.size());
        std::memcpy(out.data() + kSessionCrcOffset, &crc, 4);
        return out;
    }

    // Restores a session from save_session(). Another model's session is
    // smol::Error(invalid_argument); malformed or corrupted bytes (checksum
    // mismatch) are ErrorKind::format; another session version (1 included) is
    // ErrorKind::unsupported; a session longer than this generator's n_ctx is
    // ErrorKind::out_of_range.
    // On error the generator keeps its previous state.
    void restore_session(const std::vector<uint8_t>& bytes) { restore_session(bytes.data(), bytes.size()); }
    void restore_session(const uint8_t* data, size_t size) {
        ErrorInfo error;
        if (!try_restore_session(data, size, &error)) detail::fail(error.kind, error.message);
    }
    // The non-throwing variant: false (and *error) on failure.
    bool try_restore_session(const uint8_t* data, size_t size, ErrorInfo* error = nullptr) {
        begin_exclusive("restore_session");
        const bool ok = try_call([&] { restore_unlocked(data, size); }, error);
        end_exclusive();
        return ok;
    }

    // --- inspection ---
    const Model& model() const noexcept { return *state_->model; }
    std::shared_ptr<const Model> model_ptr() const noexcept { return state_->model; }
    size_t n_ctx() const noexcept { return state_->kv->n_ctx(); }
    // Tokens whose keys/values the cache holds (a prefix of history()).
    size_t n_cached() const noexcept { return state_->kv->size(); }
    // Prompt + generated ids of the last run (the cache holds all but possibly the last).
    const std::vector<int32_t>& history() const noexcept { return state_->history; }
    ChatFormat chat_format() const noexcept { return state_->chat_format; }
    // [vocab] logits of the last position the model ran. After a prefill-only
    // call (max_tokens 0) they are the raw logits of the last prompt token;
    // sampling rewrites them in place (penalties, bias, hook).
    const std::vector<float>& logits() const noexcept { return state_->logits; }

    // The token ids generate() would use for `prompt` (special tokens parsed,
    // BOS when the file asks).
    std::vector<int32_t> tokenize(std::string_view prompt) const {
        const Tokenizer& tokenizer = state_->model->tokenizer();
        std::vector<int32_t> ids;
        if (tokenizer.add_bos() && tokenizer.bos_id()) ids.push_back(*tokenizer.bos_id());
        tokenizer.encode(prompt, /*parse_special=*/true, ids);
        return ids;
    }
    // The exact prompt chat() would run for `messages`.
    std::string render_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options = {}) const {
        return render_checked(messages, options);
    }

private:
    static constexpr uint8_t kSessionMagic[8] = {'S', 'M', 'O', 'L', 'S', 'E', 'S', 'S'};
    static constexpr uint32_t kSessionVersion = 2;
    static constexpr size_t kSessionCrcOffset = detail::kSessionCrcOffset;
    static constexpr size_t kSessionHeaderBytes = detail::kSessionHeaderBytes;
    static uint32_t session_crc(const uint8_t* data, size_t size) noexcept {
        return detail::session_checksum(data, size);
    }

    struct State {
        std::shared_ptr<const Model> model;
        GeneratorOptions options;
        std::unique_ptr<BackendCache> kv;  // made by the model's backend (model/backend.hpp)
        std::vector<int32_t> history;  // invariant: kv->size() <= history.size(), and the
                                       // cache holds history[0, kv->size())
        std::vector<float> logits;     // [vocab]
        ChatFormat chat_format = ChatFormat::chatml;

        // Run state, all guarded by run_mutex.
        std::mutex run_mutex;
        bool busy = false;                                   // a run (sync or async) holds the generator
        std::shared_ptr<std::atomic<bool>> current_cancel;  // the running run's flag
        // The async worker: one persistent thread per generator, started on
        // first use, so starting a run costs a notify (no thread creation or
        // join on the caller's thread).
        std::thread worker;
        std::condition_variable worker_wake;  // a job was queued, or stop
        std::condition_variable async_idle;   // an async run finished
        std::function<void()> queued_job;
        bool async_running = false;  // an async run is queued or running
        bool stop_worker = false;
    };

    static void worker_loop(State* state) {
        if (state->options.on_worker_start) state->options.on_worker_start();
        std::unique_lock<std::mutex> lock(state->run_mutex);
        while (true) {
            state->worker_wake.wait(lock, [&] { return state->queued_job || state->stop_worker; });
            if (!state->queued_job) return;  // stop requested and nothing queued
            std::function<void()> job = std::move(state->queued_job);
            state->queued_job = nullptr;
            lock.unlock();
            job();
            job = nullptr;
            lock.lock();
        }
    }

    struct PrivateTag {};
    struct ExclusiveScope {
        ExclusiveScope(Generator& generator, const char* what) : generator_(generator) {
            generator_.begin_exclusive(what);
        }
        ~ExclusiveScope() { generator_.end_exclusive(); }
        ExclusiveScope(const ExclusiveScope&) = delete;
        ExclusiveScope& operator=(const ExclusiveScope&) = delete;
        Generator& generator_;
    };
    Generator(PrivateTag, const State& from) : state_(std::make_unique<State>()) {
        state_->model = from.model;
        state_->options = from.options;
        state_->kv = from.kv->clone();
        state_->history = from.history;
        state_->logits.resize(from.logits.size());
        state_->chat_format = from.chat_format;
    }

    static std::optional<ErrorInfo> options_error(const Model* model, const GeneratorOptions& options) {
        if (!model) return ErrorInfo{ErrorKind::invalid_argument, "Generator: model is null"};
        const size_t limit = model->config().context_length;
        if (options.n_ctx == 0)
            return ErrorInfo{ErrorKind::invalid_argument, "Generator: n_ctx must be positive"};
        if (options.n_ctx != KVCache::kDefaultSize && options.n_ctx > limit)
            return ErrorInfo{ErrorKind::invalid_argument,
                             "Generator: n_ctx " + std::to_string(options.n_ctx) +
                                 " exceeds the model's context length " + std::to_string(limit)};
        if (options.kv_type != KVType::f16 && options.kv_type != KVType::f32)
            return ErrorInfo{ErrorKind::invalid_argument, "Generator: unknown kv_type"};
        return std::nullopt;
    }

    void log(int level, const std::string& message) const {
        if (state_->options.log) state_->options.log(level, message);
    }

    static std::shared_ptr<std::atomic<bool>> make_flag() {
        return std::make_shared<std::atomic<bool>>(false);
    }

    // Input errors are returned as values, not failed, so that without
    // exceptions they take no longjmp (which would leak; see error.hpp).
    std::optional<ErrorInfo> text_prompt(std::string_view prompt, std::vector<int32_t>& ids) const {
        if (auto error = detail::utf8_error(prompt, "prompt")) return error;
        ids = tokenize(prompt);
        return std::nullopt;
    }
    static std::optional<ErrorInfo> messages_error(const std::vector<ChatMessage>& messages) {
        for (size_t i = 0; i < messages.size(); ++i) {
            if (auto error = detail::utf8_error(messages[i].role, "chat message " + std::to_string(i) + " role"))
                return error;
            if (auto error = detail::utf8_error(messages[i].content, "chat message " + std::to_string(i) +
                                                                         " (" + messages[i].role + ")"))
                return error;
        }
        return std::nullopt;
    }
    std::optional<ErrorInfo> chat_prompt(const std::vector<ChatMessage>& messages, const ChatOptions& options,
                                         std::vector<int32_t>& ids) const {
        if (auto error = messages_error(messages)) return error;
        ids = tokenize(render_unchecked(messages, options));
        return std::nullopt;
    }
    std::string render_checked(const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
        if (auto error = messages_error(messages)) detail::fail(error->kind, error->message);
        return render_unchecked(messages, options);
    }
    std::string render_unchecked(const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
        ChatTemplateOptions template_options;
        template_options.add_generation_prompt = options.add_generation_prompt;
        template_options.enable_thinking = options.enable_thinking;
        template_options.today = options.today;
        return smol::render_chat(state_->chat_format, messages, template_options);
    }

    bool on_worker_thread() const noexcept {
        return state_->worker.joinable() && state_->worker.get_id() == std::this_thread::get_id();
    }

    // Waits for an async run in flight, then marks the generator busy (or
    // fails if a synchronous run on another thread holds it).
    void begin_exclusive(const char* what) {
        bool already_busy = false;
        {
            std::unique_lock<std::mutex> lock(state_->run_mutex);
            if (!on_worker_thread()) state_->async_idle.wait(lock, [&] { return !state_->async_running; });
            already_busy = state_->busy;
            if (!already_busy) state_->busy = true;
        }
        if (already_busy)  // failed outside the lock (without exceptions fail() may longjmp)
            detail::fail(ErrorKind::invalid_argument,
                         std::string("Generator::") + what +
                             " while another call is running on this generator (a Generator is "
                             "used by one thread at a time; fork() one per thread)");
    }
    void end_exclusive() noexcept {
        std::lock_guard<std::mutex> lock(state_->run_mutex);
        state_->busy = false;
        state_->current_cancel.reset();
    }
    // Waits until no async run is queued or running.
    void wait_async_idle() noexcept {
        if (!state_) return;
        std::unique_lock<std::mutex> lock(state_->run_mutex);
        if (on_worker_thread()) return;
        state_->async_idle.wait(lock, [&] { return !state_->async_running; });
    }
    // Cancels what runs and stops the worker thread.
    void shutdown() noexcept {
        if (!state_) return;
        cancel();
        std::thread worker;
        {
            std::lock_guard<std::mutex> lock(state_->run_mutex);
            state_->stop_worker = true;
            worker = std::move(state_->worker);
        }
        state_->worker_wake.notify_all();
        if (worker.joinable()) worker.join();
    }

    // One run: marks the generator busy, gets the prompt ids, generates. Errors
    // leave the session consistent (history trimmed to what the cache holds)
    // and are rethrown (or, without exceptions, returned as StopReason::error).
    template <class PromptFn>
    GenerateResult run_guarded(PromptFn&& prompt_ids, const GenerateParams& params,
                               const TokenCallback& on_text, std::shared_ptr<std::atomic<bool>> cancel_flag,
                               bool exclusive_taken = false) {
        if (!exclusive_taken) begin_exclusive("generate");
        {
            std::lock_guard<std::mutex> lock(state_->run_mutex);
            state_->current_cancel = cancel_flag;
        }
        // Ends the run however it leaves (including an exception thrown by the
        // caller's callback or hook): the session stays consistent (history
        // trimmed to what the cache holds, which is only ever extended after a
        // forward pass completes) and the generator is free again.
        struct RunScope {
            Generator& generator;
            bool completed = false;
            ~RunScope() {
                State& state = *generator.state_;
                if (!completed && state.history.size() > state.kv->size()) state.history.resize(state.kv->size());
                generator.end_exclusive();
            }
        } scope{*this};
        GenerateResult result;
        ErrorInfo error;
        std::vector<int32_t> ids;
        std::optional<ErrorInfo> input_error;
        bool ok = try_call([&] { input_error = prompt_ids(ids); }, &error);
        if (ok && !input_error) input_error = validate(ids, params);
        if (ok && input_error) {
            ok = false;
            error = std::move(*input_error);
        }
        if (ok) ok = try_call([&] { result = run(std::move(ids), params, on_text, *cancel_flag); }, &error);
        scope.completed = ok;
        if (!ok) {
            log(log_error, error.message);
#if SMOL_HAS_EXCEPTIONS
            detail::fail(error.kind, error.message);
#else
            result = GenerateResult();
            result.stop_reason = StopReason::error;
            result.error = std::move(error.message);
            result.error_kind = error.kind;
#endif
        }
        return result;
    }

    template <class PromptFn>
    AsyncGeneration start_async(PromptFn prompt_ids, GenerateParams params) {
        begin_exclusive("generate_async");
        auto shared = std::make_shared<AsyncGeneration::Shared>();
        std::shared_ptr<std::atomic<bool>> flag = shared->cancel;
        {
            std::lock_guard<std::mutex> lock(state_->run_mutex);
            state_->current_cancel = flag;
        }
        auto body = [this, shared, flag, prompt_ids = std::move(prompt_ids), params = std::move(params)]() mutable {
            const TokenCallback on_text = [&shared, &flag](std::string_view piece) {
                shared->text.push(piece);
                return !flag->load(std::memory_order_relaxed);
            };
            GenerateResult result;
#if SMOL_HAS_EXCEPTIONS
            try {
                result = run_guarded(prompt_ids, params, on_text, flag, /*exclusive_taken=*/true);
            } catch (const Error& e) {
                result.stop_reason = StopReason::error;
                result.error = e.what();
                result.error_kind = e.kind();
            } catch (const std::exception& e) {
                result.stop_reason = StopReason::error;
                result.error = e.what();
                result.error_kind = ErrorKind::internal;
            } catch (...) {
                result.stop_reason = StopReason::error;
                result.error = "unknown exception in an async generation";
                result.error_kind = ErrorKind::internal;
            }
#else
            result = run_guarded(prompt_ids, params, on_text, flag, /*exclusive_taken=*/true);
#endif
            // Free the generator before reporting done, so that a caller who sees
            // done() and starts the next run never waits on this thread.
            {
                std::lock_guard<std::mutex> lock(state_->run_mutex);
                state_->async_running = false;
            }
            state_->async_idle.notify_all();
            shared->result = std::move(result);
            shared->done.store(true, std::memory_order_release);
            // Taking the mutex once between setting `done` and notifying means a
            // waiter that saw done == false under the mutex is already asleep.
            { std::lock_guard<std::mutex> lock(shared->mutex); }
            shared->finished.notify_all();
        };
        {
            std::unique_lock<std::mutex> lock(state_->run_mutex);
            state_->queued_job = std::move(body);
            state_->async_running = true;
            if (!state_->worker.joinable()) {
#if SMOL_HAS_EXCEPTIONS
                try {
                    state_->worker = std::thread(worker_loop, state_.get());
                } catch (...) {
                    state_->queued_job = nullptr;
                    state_->async_running = false;
                    lock.unlock();
                    end_exclusive();
                    throw;
                }
#else
                state_->worker = std::thread(worker_loop, state_.get());
#endif
            }
        }
        state_->worker_wake.notify_one();
        return AsyncGeneration(std::move(shared));
    }

    // Runs `tokens` at positions [start, start + n) through the model; false if
    // cancelled. The model extends the cache chunk by chunk, so after a cancel
    // it holds [0, start + the chunks that completed): still valid, and kept.
    //
    // With exceptions the model sees the cancel flag between layers (it throws
    // Error(cancelled), caught here). Without exceptions that throw would be a
    // longjmp that leaks the forward pass's buffers on every cancel, so the
    // prefill is split into chunks here and the flag checked between them.
    bool run_forward(const int32_t* tokens, size_t n, size_t start, const std::atomic<bool>& cancel_flag) {
        if (cancel_flag.load(std::memory_order_relaxed)) return false;
        ForwardOptions options;
        if (state_->options.prefill_chunk) options.chunk_size = state_->options.prefill_chunk;
#if SMOL_HAS_EXCEPTIONS
        options.cancel = &cancel_flag;
        ErrorInfo error;
        const bool ok = try_call([&] { backend().forward(segment(tokens, n, start), options); }, &error);
        if (ok) return true;
        if (error.kind != ErrorKind::cancelled) detail::fail(error.kind, error.message);
        return false;
#else
        const size_t chunk = options.chunk_size ? options.chunk_size : ForwardOptions::kDefaultChunk;
        for (size_t done = 0; done < n; done += chunk) {
            if (cancel_flag.load(std::memory_order_relaxed)) return false;
            const size_t count = std::min(chunk, n - done);
            backend().forward(segment(tokens + done, count, start + done), options);
        }
        return true;
#endif
    }

    // One sequence's share of a forward pass: this generator's cache, logits of the last position.
    Segment segment(const int32_t* tokens, size_t n, size_t start) const noexcept {
        return Segment{tokens, n, start, state_->kv.get(), state_->logits.data(), /*all_logits=*/false};
    }
    const Backend& backend() const noexcept { return state_->model->backend(); }

    // The prompt ids and parameters a run needs (as a value: see text_prompt).
    std::optional<ErrorInfo> validate(const std::vector<int32_t>& prompt, const GenerateParams& params) const {
        const size_t n_vocab = state_->logits.size();
        for (size_t i = 0; i < params.stop.size(); ++i)
            if (auto error = detail::utf8_error(params.stop[i], "stop string " + std::to_string(i))) return error;
        if (prompt.empty())
            return ErrorInfo{ErrorKind::invalid_argument,
                             "prompt is empty (it has no tokens, and this model adds no BOS)"};
        for (size_t i = 0; i < prompt.size(); ++i)
            if (prompt[i] < 0 || size_t(prompt[i]) >= n_vocab)
                return ErrorInfo{ErrorKind::invalid_argument,
                                 "prompt token " + std::to_string(i) + " has id " + std::to_string(prompt[i]) +
                                     ", outside the vocabulary of " + std::to_string(n_vocab)};
        if (prompt.size() > n_ctx())
            return ErrorInfo{ErrorKind::out_of_range,
                             "prompt has " + std::to_string(prompt.size()) + " tokens, more than the context of " +
                                 std::to_string(n_ctx()) + " (GeneratorOptions::n_ctx)"};
        return std::nullopt;
    }

    GenerateResult run(std::vector<int32_t> prompt, const GenerateParams& params, const TokenCallback& on_text,
                       const std::atomic<bool>& cancel_flag) {
        using Clock = std::chrono::steady_clock;
        const Tokenizer& tokenizer = state_->model->tokenizer();
        const size_t n_vocab = state_->logits.size();
        BackendCache& kv = *state_->kv;
        std::vector<int32_t>& history = state_->history;

        SamplingParams sampling;
        sampling.temperature = params.temperature;
        sampling.top_k = params.top_k;
        sampling.top_p = params.top_p;
        sampling.min_p = params.min_p;
        sampling.repeat_penalty = params.repeat_penalty;
        sampling.presence_penalty = params.presence_penalty;
        sampling.frequency_penalty = params.frequency_penalty;
        sampling.penalty_last_n = params.penalty_last_n;
        sampling.seed = params.seed;
        sampling.logit_bias = params.logit_bias;
        sampling.logits_hook = params.logits_hook;
        Sampler sampler(sampling);  // validates the parameters

        GenerateResult result;
        result.n_prompt_tokens = prompt.size();

        // Reuse the longest common prefix with what the cache holds, but always
        // run at least the last prompt token: its logits pick the first token.
        size_t reuse = 0;
        const size_t limit = std::min(kv.size(), prompt.size() - 1);
        while (reuse < limit && history[reuse] == prompt[reuse]) ++reuse;
        kv.truncate(reuse);
        history = prompt;
        result.n_reused_tokens = reuse;
        log(log_debug, "prompt " + std::to_string(prompt.size()) + " tokens, " + std::to_string(reuse) +
                           " reused from the cache");

        auto finish = [&](StopReason reason) {
            result.stop_reason = reason;
            const ReasoningSplit split = split_reasoning(result.text);
            result.reasoning = split.reasoning;
            result.answer = split.answer;
            return result;
        };
        auto cancelled = [&] { return cancel_flag.load(std::memory_order_relaxed); };

        const auto prefill_start = Clock::now();
        const bool prefilled = run_forward(prompt.data() + reuse, prompt.size() - reuse, reuse, cancel_flag);
        const auto decode_start = Clock::now();
        result.prefill_ms = std::chrono::duration<double, std::milli>(decode_start - prefill_start).count();
        if (!prefilled) {
            history.resize(kv.size());
            return finish(StopReason::cancelled);
        }

        StreamDecoder decoder(tokenizer);
        detail::StopStringMatcher matcher(params.stop);
        bool callback_stopped = false;
        // Sends text through the stop-string matcher to the result and callback.
        auto emit = [&](const std::string& piece) {
            const std::string out = matcher.push(piece);
            if (out.empty()) return;
            result.text += out;
            if (on_text && !on_text(out)) callback_stopped = true;
        };
        auto flush = [&] {
            emit(decoder.finish());
            if (!matcher.matched()) {
                const std::string rest = matcher.finish();
                if (!rest.empty()) {
                    result.text += rest;
                    if (on_text) on_text(rest);
                }
            }
        };
        auto stamp_decode = [&] {
            result.decode_ms =
                std::chrono::duration<double, std::milli>(Clock::now() - decode_start).count();
        };

        StopReason reason = StopReason::max_tokens;
        const size_t max_tokens = params.max_tokens < 0 ? SIZE_MAX : size_t(params.max_tokens);
        while (true) {
            if (result.tokens.size() >= max_tokens) {
                reason = StopReason::max_tokens;
                flush();
                break;
            }
            if (cancelled()) {
                reason = StopReason::cancelled;
                break;
            }
            const int32_t token = sampler.sample(state_->logits.data(), n_vocab, history);
            result.tokens.push_back(token);
            history.push_back(token);
            if (!params.ignore_eos && tokenizer.is_end_of_generation(token)) {
                reason = StopReason::eos;
                flush();
                break;
            }
            emit(decoder.push(token));
            if (matcher.matched()) {
                reason = StopReason::stop_string;
                result.matched_stop = matcher.matched_string();
                break;
            }
            if (callback_stopped) {
                reason = StopReason::cancelled;
                break;
            }
            if (result.tokens.size() >= max_tokens) continue;  // reported at the loop top
            if (kv.size() >= kv.n_ctx()) {
                reason = StopReason::context_full;
                flush();
                break;
            }
            if (!run_forward(&history.back(), 1, kv.size(), cancel_flag)) {
                reason = StopReason::cancelled;
                break;
            }
        }
        if (matcher.matched() && reason != StopReason::stop_string) {
            // The decoder's final flush completed a stop string.
            reason = StopReason::stop_string;
            result.matched_stop = matcher.matched_string();
        }
        stamp_decode();
        return finish(reason);
    }

    // Validates everything before the last two lines change the generator (on
    // error it keeps its state), and the checksum before allocating anything
    // sized by counts in the bytes.
    void restore_unlocked(const uint8_t* data, size_t size) {
        if (!data && size != 0)
            detail::fail(ErrorKind::invalid_argument, "session: null data with a size");
        size_t pos = 0;
        // 64-bit counts compared against what is left, never added to pos
        // first, so a forged count can neither wrap nor truncate on 32-bit size_t.
        auto need = [&](uint64_t n, const char* what) {
            if (uint64_t(size - pos) < n)
                detail::fail(ErrorKind::format, std::string("session: truncated (") + what + ")");
        };
        need(kSessionHeaderBytes, "header");
        if (std::memcmp(data, kSessionMagic, 8) != 0)
            detail::fail(ErrorKind::format, "session: not a smol session (bad magic)");
        const uint32_t version = smol::detail::read_le<uint32_t>(data, 8);
        if (version != kSessionVersion)
            detail::fail(ErrorKind::unsupported,
                         "session: version " + std::to_string(version) +
                             (version < kSessionVersion ? " is no longer supported"
                                                        : " is newer than this build") +
                             " (this build reads version " + std::to_string(kSessionVersion) +
                             " only)");
        if (smol::detail::read_le<uint32_t>(data, kSessionCrcOffset) != session_crc(data, size))
            detail::fail(ErrorKind::format, "session: checksum mismatch (corrupted)");
        pos = kSessionHeaderBytes;
        need(8, "identity length");
        const uint64_t identity_size = smol::detail::read_le<uint64_t>(data, pos);
        pos += 8;
        need(identity_size, "identity");
        const std::string identity(reinterpret_cast<const char*>(data + pos), size_t(identity_size));
        pos += size_t(identity_size);
        const std::string expected = state_->model->identity();
        if (identity != expected)
            detail::fail(ErrorKind::invalid_argument, "session: saved for model '" + identity +
                                                          "', but this generator runs model '" + expected + "'");
        need(8, "history length");
        const uint64_t n_history = smol::detail::read_le<uint64_t>(data, pos);
        pos += 8;
        if (n_history > (size - pos) / 4) need(UINT64_MAX, "history");
        std::vector<int32_t> history(static_cast<size_t>(n_history));
        for (auto& id : history) {
            id = smol::detail::read_le<int32_t>(data, pos);
            pos += 4;
            if (id < 0 || size_t(id) >= state_->logits.size())
                detail::fail(ErrorKind::format, "session: token id " + std::to_string(id) + " outside the vocabulary");
        }
        need(8, "cache length");
        const uint64_t kv_size = smol::detail::read_le<uint64_t>(data, pos);
        pos += 8;
        need(kv_size, "cache");
        if (uint64_t(size - pos) != kv_size)
            detail::fail(ErrorKind::format, "session: trailing bytes after the cache");
        BackendCache& kv = *state_->kv;
        // Checked before the cache changes; restore() checks it all again and
        // leaves the cache as it was on error.
        const detail::KVImage image = detail::parse_kv_image(data + pos, size_t(kv_size), kv.n_layers(),
                                                             kv.n_kv_heads(), kv.head_dim(), kv.n_ctx());
        if (image.size > history.size())
            detail::fail(ErrorKind::format, "session: the cache holds more positions than the history");
        kv.restore(data + pos, size_t(kv_size));
        state_->history = std::move(history);
    }

    std::unique_ptr<State> state_;
};

// The non-throwing way to load a model (for -fno-exceptions consumers): null
// and *error filled on failure. A missing or unreadable file is checked
// before anything is built, so that common error costs nothing.
inline std::shared_ptr<const Model> try_load_model(const std::string& path, ErrorInfo* error = nullptr,
                                                   const LoadOptions& options = {}) {
    if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
        std::fclose(f);
    } else {
        if (error) *error = ErrorInfo{ErrorKind::io, "cannot open model file '" + path + "'"};
        return nullptr;
    }
    std::shared_ptr<const Model> model;
    try_call([&] { model = Model::load(path, options); }, error);
    return model;
}

SMOL_NAMESPACE_END
