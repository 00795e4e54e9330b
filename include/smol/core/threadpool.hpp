// ThreadPool: a fixed set of worker threads that run one job at a time, with
// the calling thread taking part as thread 0.
//
// Why this shape: decode is a chain of short mat-vecs (tens of microseconds
// each), so waking threads through the OS for every one would cost more than
// the work. Workers therefore spin briefly on a generation counter after each
// job and only then block on a condition variable; the caller spins (then
// yields) until every worker has finished its part.
//
// Contract:
//   - run(job) calls job(thread, n_threads) once for each thread in
//     [0, n_threads) and returns when all calls have returned. The caller runs
//     thread 0 itself.
//   - One job at a time: concurrent callers serialize through a mutex, so
//     several generators may share one pool (their jobs simply queue).
//   - An exception thrown by any part is rethrown to the caller of run()
//     (the first one, if several throw) after all parts have finished.
//   - A job must not call run() on the same pool (it would deadlock).
//   - Destroying the pool joins the workers; it must not run a job then.
// Kernels split whole rows between threads and never split a reduction, so
// their results do not depend on the thread count.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../error.hpp"

namespace smol {

namespace detail {
// A hint to the core that we are spinning (frees pipeline resources for the
// sibling hyper-thread, saves power).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}
}  // namespace detail

class ThreadPool {
public:
    using Job = std::function<void(int thread, int n_threads)>;

    // n_threads counts the caller: ThreadPool(1) starts no workers and runs
    // jobs inline. n_threads <= 0 means std::thread::hardware_concurrency().
    explicit ThreadPool(int n_threads = 1) {
        if (n_threads <= 0) n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
        if (n_threads > 1024) {
            detail::fail(ErrorKind::invalid_argument,
                         "ThreadPool: " + std::to_string(n_threads) + " threads is too many");
        }
        size_ = n_threads;
        workers_.reserve(size_t(n_threads - 1));
#if SMOL_HAS_EXCEPTIONS
        try {
            for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
        } catch (...) {
            shutdown();
            throw;
        }
#else
        for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
#endif
    }

    ~ThreadPool() { shutdown(); }

    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const noexcept { return size_; }

    void run(const Job& job) {
        if (size_ == 1) {
            job(0, 1);
            return;
        }
        std::lock_guard<std::mutex> one_job_at_a_time(run_mutex_);
        job_ = &job;
        first_error_ = nullptr;
        pending_.store(size_ - 1, std::memory_order_relaxed);
        {
            // Publishing under the mutex pairs with the workers' wait predicate,
            // so a worker about to sleep cannot miss this generation.
            std::lock_guard<std::mutex> lock(mutex_);
            generation_.fetch_add(1, std::memory_order_release);
        }
        wake_.notify_all();

#if SMOL_HAS_EXCEPTIONS
        try {
            job(0, size_);
        } catch (...) {
            record_error(std::current_exception());
        }
#else
        job(0, size_);
#endif

        for (uint32_t spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
            if (spins < kCallerSpins) {
                detail::cpu_relax();
            } else {
                std::this_thread::yield();  // a worker was descheduled: give it the core
            }
        }
        job_ = nullptr;
#if SMOL_HAS_EXCEPTIONS
        if (first_error_) {
            std::exception_ptr error = first_error_;
            first_error_ = nullptr;
            std::rethrow_exception(error);
        }
#endif
    }

    // Splits [0, n) into one contiguous range per thread (sizes differ by at
    // most one) and calls f(begin, end, thread) for each non-empty range.
    template <class F>
    void parallel_for(size_t n, F&& f) {
        if (n == 0) return;
        run([&](int thread, int n_threads) {
            const size_t begin = n * size_t(thread) / size_t(n_threads);
            const size_t end = n * size_t(thread + 1) / size_t(n_threads);
            if (begin < end) f(begin, end, thread);
        });
    }

private:
    // About 0.1-0.5 ms of spinning before a worker sleeps: long enough to
    // bridge the gap between the mat-vecs of one decode step.
    static constexpr uint32_t kWorkerSpins = 1u << 14;
    static constexpr uint32_t kCallerSpins = 1u << 13;

    void worker_loop(int thread) {
        uint64_t seen = 0;
        for (;;) {
            uint64_t current = generation_.load(std::memory_order_acquire);
            for (uint32_t spins = 0; current == seen && spins < kWorkerSpins; ++spins) {
                detail::cpu_relax();
                current = generation_.load(std::memory_order_acquire);
            }
            if (current == seen) {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [&] {
                    return stop_ || generation_.load(std::memory_order_acquire) != seen;
                });
                current = generation_.load(std::memory_order_acquire);
            }
            if (stop_flag_.load(std::memory_order_acquire)) return;
            seen = current;
#if SMOL_HAS_EXCEPTIONS
            try {
                (*job_)(thread, size_);
            } catch (...) {
                record_error(std::current_exception());
            }
#else
            (*job_)(thread, size_);
#endif
            pending_.fetch_sub(1, std::memory_order_acq_rel);
        }
    }

    void record_error(std::exception_ptr error) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!first_error_) first_error_ = error;
    }

    void shutdown() noexcept {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
            stop_flag_.store(true, std::memory_order_release);
            generation_.fetch_add(1, std::memory_order_release);
        }
        wake_.notify_all();
        for (std::thread& worker : workers_) {
            if (worker.joinable()) worker.join();
        }
        workers_.clear();
    }

    int size_ = 1;
    std::vector<std::thread> workers_;
    std::mutex run_mutex_;                 // serializes callers of run()
    std::mutex mutex_;                     // guards sleeping and stop_
    std::condition_variable wake_;
    bool stop_ = false;                    // read under mutex_
    std::atomic<bool> stop_flag_{false};   // read by spinning workers
    std::atomic<uint64_t> generation_{0};  // bumped once per job
    std::atomic<int> pending_{0};          // workers still running the job
    const Job* job_ = nullptr;
    std::mutex error_mutex_;
    std::exception_ptr first_error_;
};

}  // namespace smol
