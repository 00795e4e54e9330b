// detail::RunGate: who may use a generator right now. One run at a time
// (synchronous or async); a second caller is refused, a caller arriving while
// an async run is in flight waits for it; cancel() reaches whichever run holds
// the gate, from any thread; the async runs execute on the gate's worker.
#pragma once

#include "../detail/abi.hpp"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "../error.hpp"
#include "worker.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

class RunGate {
public:
    explicit RunGate(std::function<void()> on_worker_start = {})
        : on_worker_start_(std::move(on_worker_start)) {}

    // Waits for an async run in flight (unless called from that run), then
    // takes the gate; refused if a synchronous run on another thread holds it.
    Status enter(const char* what) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!on_worker_thread()) async_idle_.wait(lock, [&] { return !async_running_; });
        if (busy_)
            return Status(ErrorKind::invalid_argument,
                          std::string("Generator::") + what +
                              " while another call is running on this generator (a Generator is "
                              "used by one thread at a time; fork() one per thread)");
        busy_ = true;
        return {};
    }
    void leave() noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        busy_ = false;
        cancel_flag_.reset();
    }
    // enter .. leave around a call that throws (aborts without exceptions)
    // when the gate is taken.
    class Scope {
    public:
        Scope(RunGate& gate, const char* what) : gate_(gate) {
            detail::ok_or_fail(gate_.enter(what));
        }
        ~Scope() { gate_.leave(); }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        RunGate& gate_;
    };

    // The flag cancel() sets while the current run holds the gate.
    void set_cancel_flag(std::shared_ptr<std::atomic<bool>> flag) {
        std::lock_guard<std::mutex> lock(mutex_);
        cancel_flag_ = std::move(flag);
    }
    void cancel() noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        if (cancel_flag_) cancel_flag_->store(true, std::memory_order_relaxed);
    }

    // Runs `body` on the worker (started on first use); the caller holds the
    // gate, and `body` must call async_finished() when the run is over. If the
    // worker's thread cannot start, the gate is freed before the error goes on.
    void post_async(std::function<void()> body) {
        struct LeaveUnlessPosted {
            RunGate& gate;
            bool posted = false;
            ~LeaveUnlessPosted() {
                if (!posted) gate.leave();
            }
        } guard{*this};
        if (!worker_) worker_ = std::make_unique<Worker>(on_worker_start_);
        worker_->start();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            async_running_ = true;
        }
        worker_->post(std::move(body));
        guard.posted = true;
    }
    void async_finished() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            async_running_ = false;
        }
        async_idle_.notify_all();
    }

    // Waits until no async run is queued or running.
    void wait_async_idle() noexcept {
        std::unique_lock<std::mutex> lock(mutex_);
        if (on_worker_thread()) return;
        async_idle_.wait(lock, [&] { return !async_running_; });
    }
    // Cancels what runs and stops the worker thread.
    void shutdown() noexcept {
        cancel();
        if (worker_) worker_->stop();
    }

private:
    // worker_ is only ever set by the thread that holds the gate, before the
    // worker's thread exists, so reading it here races with nothing.
    bool on_worker_thread() const { return worker_ && worker_->is_current_thread(); }

    std::function<void()> on_worker_start_;
    std::mutex mutex_;
    bool busy_ = false;                               // a run (sync or async) holds the gate
    std::shared_ptr<std::atomic<bool>> cancel_flag_;  // the running run's flag
    std::condition_variable async_idle_;              // an async run finished
    bool async_running_ = false;                      // an async run is queued or running
    std::unique_ptr<Worker> worker_;                  // declared last: stops first
};

}  // namespace detail

SMOL_NAMESPACE_END
