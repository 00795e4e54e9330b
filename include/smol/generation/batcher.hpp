// smol::Batcher: several generators on one model decode in shared forward
// passes ("many NPCs at the speed of one").
//
// Why: decoding one token is bound by reading the weights (1.9 GB per step for
// the 3B Q4_K_M file), and a forward pass over N tokens from N conversations
// reads them once (model/backend.hpp: several Segments per step; the CPU
// backend runs a step as one batched pass). So N generators that share steps
// each run at nearly the speed of one, up to the machine's compute rate.
//
// Use: one Batcher per model, handed to the generators that should share
// steps (GeneratorOptions::batcher). Everything else stays per generator and
// unchanged: sampling, stop strings, streaming, cancel, sessions, and the
// async API (generate_async / chat_async + poll()), which is how a game runs
// several NPCs at once.
//
//   auto batcher = std::make_shared<smol::Batcher>(model);
//   smol::GeneratorOptions options;  options.batcher = batcher;
//   smol::Generator a(model, options), b(model, options);   // a and b share steps
//
// How (no thread of its own): a generator is a *member* of its batcher while
// it runs a generation (Generator::generate etc. join and leave). A member
// that needs a forward pass queues a request (its tokens, position, cache) and
// waits. A step starts when every member has a request queued (or max_batch
// are), or a short wait after the oldest request arrived (gather_ms, or a
// quarter of a step's time if longer), whichever is first: a
// member between two steps (sampling its token) is waited for briefly instead
// of being left to the next step, which would make busy members take turns.
// The waiting thread that finds the step due runs it for everyone it takes
// (oldest first), then wakes them. A generator alone runs at once.
//   - Prefill is split across steps: while other requests wait, a prompt
//     contributes a share of tokens per step sized so that the step costs at
//     most max_step_slowdown x a step without prompt tokens (from the measured
//     cost per row; at most prefill_shared; and where a multiple of the
//     backend's batch_rows() is in reach, ending on it, since one row past it
//     starts another pass of the tiles), so a new long prompt delays the others'
//     tokens by a bounded amount; alone, it runs in chunks of prefill_alone tokens.
//   - Fairness: requests are served oldest first and a generator has at most one
//     request queued, so none starves; a generator that is not generating has no
//     request and costs nothing.
//   - Cancellation: a request whose cancel flag is set is dropped when a step
//     would take it (Error(cancelled)); a step running only that request also
//     sees the flag between layers. Shared steps run without a flag, so one
//     member's cancel never disturbs the others.
//   - Errors: if a shared step fails, each of its members is run again alone, so
//     an error belongs to the request that caused it.
// Lookup decoding (GenerateParams::lookup) runs through a batcher unchanged:
// a verify step is a segment of k + 1 tokens with every row's logits, like a
// prompt's share. While the step costs are still unknown (the first shared
// steps) it may be split across two steps, and its steps count as steps with
// prompt tokens in the cost averages (learn_step_cost).
// Results: a token's logits do not depend on how many rows share its step.
// The multi-column tiles do the same float operations per column as the
// one-column decode tiles (kernels/detail/x86_tiles.inc), and
// tests/test_lookup.cpp checks it bit for bit at every x86 level (scalar,
// avx2, avxvnni, avx512, amx) and KV type. What can differ is the prompt: a
// prompt split into shares of fewer than the weight table's
// convert_min_tokens tokens reads exact rows where an unbatched prefill of
// that length reads converted ones (kernels/matmul_plan.hpp, rule 1), so its
// logits, and the tokens after it, may part in the last bits (the goldens'
// float-rounding rule).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "../error.hpp"
#include "../model/backend.hpp"
#include "../model/model.hpp"

SMOL_NAMESPACE_BEGIN

struct BatcherOptions {
    size_t max_batch = 8;  // requests (sequences) per step
    // Prompt tokens per step of one request while others wait: at most this
    // many, fewer when the measured cost of a row says more would make the
    // step slower than max_step_slowdown x a step without prompt tokens.
    size_t prefill_shared = 64;
    double max_step_slowdown = 1.8;
    size_t prefill_alone = ForwardOptions::kDefaultChunk;  // prompt tokens per step when alone
    // How long a step waits for members that are between two steps (sampling,
    // streaming) before it starts without them: gather_ms, or gather_fraction
    // of a step's measured time if that is longer (a member's turn between
    // steps competes for the same cores as the step).
    double gather_ms = 5.0;
    double gather_fraction = 0.25;
};

namespace detail {

// The prompt tokens one request adds to a step beside `others` rows when the
// step has room for `budget_rows` rows in all: at least 1, at most `cap`, and
// where a multiple of `group` (Backend::batch_rows; 0: none) is in reach,
// ending on it, since a row past the multiple starts another pass of the tiles.
inline size_t prefill_share(double budget_rows, size_t others, size_t cap, size_t group) noexcept {
    if (!(budget_rows - double(others) >= 1)) return 1;
    size_t share = size_t(std::min(double(cap), budget_rows - double(others)));
    if (group > 0 && others + share > group) {
        const size_t whole = (others + share) / group * group;
        if (whole > others) share = whole - others;
    }
    return std::max<size_t>(1, share);
}

}  // namespace detail

class Batcher {
public:
    explicit Batcher(std::shared_ptr<const Model> model, const BatcherOptions& options = {})
        : model_(std::move(model)), options_(options) {
        if (!model_) detail::fail(ErrorKind::invalid_argument, "Batcher: model is null");
        if (options_.max_batch == 0 || options_.prefill_shared == 0 || options_.prefill_alone == 0)
            detail::fail(ErrorKind::invalid_argument,
                         "Batcher: max_batch, prefill_shared and prefill_alone must be positive");
    }
    Batcher(const Batcher&) = delete;
    Batcher& operator=(const Batcher&) = delete;

    const Model& model() const noexcept { return *model_; }
    const BatcherOptions& options() const noexcept { return options_; }

    // Runs `segment` (its tokens at its positions, into its cache, logits as
    // Backend::try_forward writes them) in shared steps; returns when all of
    // its tokens have run. Thread-safe; blocks the calling thread.
    Status run(const Segment& segment, const std::atomic<bool>* cancel = nullptr) {
        Request request;
        request.segment = segment;
        request.cancel = cancel;
        request.queued_at = Clock::now();
        std::unique_lock<std::mutex> lock(mutex_);
        queue_.push_back(&request);
        changed_.notify_all();  // a gathering step may now be complete
        while (!request.done) {
            if (stepping_) {
                changed_.wait(lock);
            } else if (step_due()) {
                step(lock);
            } else {
                changed_.wait_until(lock, gather_deadline());
            }
        }
        return std::move(request.status);
    }

    // A generator is a member while it runs a generation: steps wait briefly
    // for members that have no request queued (see the top comment).
    void join() {
        std::lock_guard<std::mutex> lock(mutex_);
        ++members_;
    }
    void leave() noexcept {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            --members_;
        }
        changed_.notify_all();
    }
    // join() .. leave() for one generation.
    class Membership {
    public:
        explicit Membership(Batcher* batcher) : batcher_(batcher) {
            if (batcher_) batcher_->join();
        }
        ~Membership() {
            if (batcher_) batcher_->leave();
        }
        Membership(const Membership&) = delete;
        Membership& operator=(const Membership&) = delete;

    private:
        Batcher* batcher_;
    };

    // Counters since construction (for benchmarks and tests).
    struct Stats {
        uint64_t steps = 0;     // forward passes run
        uint64_t requests = 0;  // chunks run (a request's share of a step)
        uint64_t rows = 0;      // tokens run
        size_t widest = 0;      // most requests in one step
    };
    Stats stats() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return stats_;
    }

private:
    using Clock = std::chrono::steady_clock;

    struct Request {
        Segment segment;
        const std::atomic<bool>* cancel = nullptr;
        Clock::time_point queued_at;
        size_t progress = 0;  // tokens of segment already run
        Status status;
        bool done = false;
    };
    // One request's share of a step: its next `take` tokens.
    struct Share {
        Request* request;
        Segment chunk;
    };

    // Under the lock, no step running: whether the next one should start now.
    bool step_due() const {
        if (queue_.empty()) return false;
        if (queue_.size() >= options_.max_batch || queue_.size() >= members_) return true;
        return Clock::now() >= gather_deadline();
    }
    // The wait counts from when the oldest request could first have run: its
    // arrival, or the end of the step it waited behind (else requests that
    // queued during a long step would go at once, without the members of that
    // step, and busy members would split into groups that take turns).
    Clock::time_point gather_deadline() const {
        const double wait_ms =
            std::max(options_.gather_ms, options_.gather_fraction * decode_step_ms_);
        const Clock::time_point from = std::max(queue_.front()->queued_at, last_step_end_);
        return from + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double, std::milli>(wait_ms));
    }

    // Runs one step for the oldest queued requests; `lock` is held on entry
    // and exit, released while the network runs.
    void step(std::unique_lock<std::mutex>& lock) {
        stepping_ = true;
        std::vector<Share> shares = take_shares();
        lock.unlock();
        // Always re-locks and hands the step on, also if the network throws.
        struct Relock {
            Batcher& batcher;
            std::unique_lock<std::mutex>& lock;
            ~Relock() {
                if (!lock.owns_lock()) lock.lock();
                batcher.stepping_ = false;
                batcher.changed_.notify_all();
            }
        } relock{*this, lock};
        const auto started = Clock::now();
        std::vector<Status> results = run_shares(shares);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
        lock.lock();
        last_step_end_ = Clock::now();
        learn_step_cost(shares, ms);
        for (size_t i = 0; i < shares.size(); ++i) finish_share(shares[i], std::move(results[i]));
        ++stats_.steps;
        stats_.requests += shares.size();
        stats_.widest = std::max(stats_.widest, shares.size());
        for (const Share& share : shares) stats_.rows += share.chunk.n_tokens;
    }

    // Under the lock: the oldest requests that fit a step, cancelled ones
    // answered on the way.
    std::vector<Share> take_shares() {
        std::vector<Share> shares;
        const size_t waiting = queue_.size();
        for (auto it = queue_.begin(); it != queue_.end() && shares.size() < options_.max_batch;) {
            Request& request = **it;
            if (request.cancel && request.cancel->load(std::memory_order_relaxed)) {
                request.status = Status(ErrorKind::cancelled, "forward: cancelled");
                request.done = true;
                it = queue_.erase(it);
                continue;
            }
            const Segment& s = request.segment;
            const size_t remaining = s.n_tokens - request.progress;
            const size_t limit =
                waiting > 1 ? shared_prefill_tokens(waiting) : options_.prefill_alone;
            const size_t take = std::min(remaining, limit);
            const bool last = request.progress + take == s.n_tokens;
            Segment chunk = s;
            chunk.tokens = s.tokens + request.progress;
            chunk.n_tokens = take;
            chunk.start = s.start + request.progress;
            // Logits belong to the segment's last position (or, with
            // all_logits, to each position, at its own row).
            if (s.all_logits)
                chunk.logits =
                    s.logits ? s.logits + request.progress * model_->config().vocab_size : nullptr;
            else
                chunk.logits = last ? s.logits : nullptr;
            shares.push_back({&request, chunk});
            ++it;
        }
        // Requests stay queued until done; they leave in finish_share.
        return shares;
    }

    // Without the lock: one forward pass for all shares; if it fails, each
    // share alone, so that the error lands on the one that caused it.
    std::vector<Status> run_shares(const std::vector<Share>& shares) const {
        std::vector<Status> results(shares.size());
        if (shares.empty()) return results;
        const Backend& backend = model_->backend();
        ForwardOptions options;
        options.chunk_size = options_.prefill_alone;
        if (shares.size() == 1) {
            options.cancel = shares[0].request->cancel;
            results[0] = backend.try_forward(shares[0].chunk, options);
            return results;
        }
        std::vector<Segment> chunks;
        chunks.reserve(shares.size());
        for (const Share& share : shares) chunks.push_back(share.chunk);
        Status all = backend.try_forward(chunks.data(), chunks.size(), options);
        if (all) return results;
        for (size_t i = 0; i < shares.size(); ++i)
            results[i] = backend.try_forward(shares[i].chunk, options);
        return results;
    }

    // Under the lock: the prompt tokens one request may add to a step that
    // also runs `waiting` - 1 other requests. A step costs about max(the
    // weights' read, rows x the cost of a row): keep rows x row cost under
    // max_step_slowdown x the last steps without prompt tokens. Before both
    // costs are known, a small share.
    size_t shared_prefill_tokens(size_t waiting) const {
        if (decode_step_ms_ <= 0 || row_ms_ <= 0)
            return std::min<size_t>(4, options_.prefill_shared);
        return detail::prefill_share(options_.max_step_slowdown * decode_step_ms_ / row_ms_,
                                     std::min(waiting, options_.max_batch) - 1,
                                     options_.prefill_shared, model_->backend().batch_rows());
    }

    // Under the lock: running averages of a step without prompt tokens and of
    // the cost of a row in steps with prompt tokens (an overestimate while a
    // step is still bound by reading the weights, which only errs small).
    void learn_step_cost(const std::vector<Share>& shares, double ms) {
        size_t rows = 0;
        bool prompt = false;
        for (const Share& share : shares) {
            rows += share.chunk.n_tokens;
            prompt |= share.chunk.n_tokens > 1;
        }
        auto average = [](double& into, double value) {
            into = into <= 0 ? value : 0.8 * into + 0.2 * value;
        };
        if (!prompt) average(decode_step_ms_, ms);
        if (prompt && rows >= 4) average(row_ms_, ms / double(rows));
    }

    // Under the lock: records a share's outcome; a finished request leaves the queue.
    void finish_share(const Share& share, Status result) {
        Request& request = *share.request;
        const bool ok = result.ok();
        if (ok)
            request.progress += share.chunk.n_tokens;
        else
            request.status = std::move(result);
        if (!ok || request.progress == request.segment.n_tokens) {
            request.done = true;
            queue_.erase(std::find(queue_.begin(), queue_.end(), &request));
        }
    }

    std::shared_ptr<const Model> model_;
    BatcherOptions options_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;  // a step ended, a request arrived, a member left
    std::deque<Request*> queue_;       // oldest first; each owned by a thread waiting in run()
    bool stepping_ = false;
    size_t members_ = 0;         // generators running a generation (join / leave)
    double decode_step_ms_ = 0;  // running average: a step without prompt tokens
    double row_ms_ = 0;          // running average: the cost of a row in wide steps
    Clock::time_point last_step_end_;
    Stats stats_;
};

SMOL_NAMESPACE_END
