// detail::Worker: the one persistent thread per generator that runs its async
// generations, so that starting one costs a notify rather than a thread
// creation (and no join ever happens on the caller's thread).
#pragma once

#include "../detail/abi.hpp"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

SMOL_NAMESPACE_BEGIN

namespace detail {

class Worker {
public:
    // on_start runs first thing on the thread (e.g. to lower its priority).
    explicit Worker(std::function<void()> on_start = {}) : on_start_(std::move(on_start)) {}
    ~Worker() { stop(); }
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    // Starts the thread if it is not running. std::thread reports a failure
    // to start by throwing (without exceptions: terminating), before anything
    // is queued.
    void start() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    }
    // Queues `job` (the caller ensures one at a time; start() first).
    void post(std::function<void()> job) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            queued_ = std::move(job);
        }
        wake_.notify_one();
    }

    bool is_current_thread() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return thread_.joinable() && thread_.get_id() == std::this_thread::get_id();
    }

    // Runs what is queued, then ends the thread.
    void stop() noexcept {
        std::thread thread;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
            thread = std::move(thread_);
        }
        wake_.notify_all();
        if (thread.joinable()) thread.join();
    }

private:
    void loop() {
        if (on_start_) on_start_();
        std::unique_lock<std::mutex> lock(mutex_);
        while (true) {
            wake_.wait(lock, [&] { return queued_ || stop_; });
            if (!queued_) return;  // stop requested and nothing queued
            std::function<void()> job = std::move(queued_);
            queued_ = nullptr;
            lock.unlock();
            job();
            job = nullptr;
            lock.lock();
        }
    }

    std::function<void()> on_start_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::function<void()> queued_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace detail

SMOL_NAMESPACE_END
