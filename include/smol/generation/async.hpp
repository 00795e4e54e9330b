// AsyncGeneration: the handle of a generation running on a generator's worker
// thread (Generator::generate_async / chat_async), for loops that must not
// block, such as a game's frame loop. Also what an async run's body does
// with an error (detail::result_or_caught): nothing on the worker thread
// could catch it, so it becomes the result.
#pragma once

#include "../detail/abi.hpp"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "../detail/text_queue.hpp"
#include "../error.hpp"
#include "params.hpp"

SMOL_NAMESPACE_BEGIN

class Generator;

// poll() each frame for new text. No decode step ever runs on the thread that
// calls these methods. Destroying the handle cancels the run (the generator
// finishes it in the background and its next call waits for that).
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
    // hit is rethrown here (without exceptions: StopReason::error). An empty
    // handle is smol::Error(invalid_argument) (without exceptions: a result
    // with StopReason::error).
    GenerateResult wait() {
        if (!shared_) {
            GenerateResult empty;
            empty.stop_reason = StopReason::error;
            empty.error_kind = ErrorKind::invalid_argument;
            empty.error = "AsyncGeneration::wait on an empty handle";
            return raise_if_error(std::move(empty));
        }
        if (!done()) {
            std::unique_lock<std::mutex> lock(shared_->mutex);
            shared_->finished.wait(lock,
                                   [&] { return shared_->done.load(std::memory_order_acquire); });
        }
        // Written once before `done` was released, never after: no lock needed.
        return raise_if_error(shared_->result);
    }

    // Asks the run to stop (also during prefill); returns at once.
    void cancel() noexcept {
        if (shared_) shared_->cancel->store(true, std::memory_order_relaxed);
    }

private:
    friend class Generator;
    // What the generator's worker and this handle share.
    struct Shared {
        std::mutex mutex;  // only for wait()'s sleep
        std::condition_variable finished;
        detail::TextQueue text;  // worker -> poll()
        GenerateResult result;   // written by the worker before `done`, then immutable
        std::atomic<bool> done{false};
        std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
    };
    explicit AsyncGeneration(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

    // With exceptions an error result is thrown; without, returned as it is.
    static GenerateResult raise_if_error(GenerateResult result) {
#if SMOL_HAS_EXCEPTIONS
        if (result.stop_reason == StopReason::error) detail::fail(result.error_kind, result.error);
#endif
        return result;
    }

    std::shared_ptr<Shared> shared_;
};

namespace detail {

// run() (a run returning GenerateResult), with every exception it throws
// turned into a StopReason::error result. (The caller's callback or logits
// hook may throw anything.) Without exceptions, run() already reports
// errors as results.
template <class Run>
GenerateResult result_or_caught(Run&& run) {
#if SMOL_HAS_EXCEPTIONS
    GenerateResult result;
    result.stop_reason = StopReason::error;
    result.error_kind = ErrorKind::internal;
    try {
        return run();
    } catch (const Error& e) {
        result.error = e.what();
        result.error_kind = e.kind();
    } catch (const std::exception& e) {
        result.error = e.what();
    } catch (...) {
        result.error = "unknown exception in an async generation";
    }
    return result;
#else
    return run();
#endif
}

}  // namespace detail

SMOL_NAMESPACE_END
