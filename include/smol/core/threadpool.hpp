// ThreadPool: a fixed set of worker threads that run one job at a time, with
// the calling thread taking part as thread 0.
//
// Why this shape: decode is a chain of short mat-vecs (tens of microseconds
// each), so waking threads through the OS for every one would cost more than
// the work. Workers therefore spin briefly on a generation counter after each
// job and only then block on a condition variable; the caller spins (then
// yields) until the workers it waits for have finished their part.
//
// Two kinds of job:
//   - run(job): a full barrier. job(thread, n_threads) is called once for each
//     thread in [0, n_threads) and run() returns when all calls have returned.
//     For jobs that split work statically by thread index.
//   - run_dynamic(job): for jobs that take their work from a shared counter
//     (parallel_for, matmul_batch), so that the caller's call alone finishes
//     everything. job(0, n) runs on the caller; each worker calls job(thread, n)
//     at most once, and only if it enters before the caller's call returns.
//     The caller then closes the job and waits only for the workers that
//     entered; a worker that wakes later skips it. Why: on a loaded machine a
//     descheduled worker would otherwise hold every job for a scheduler time
//     slice even though the others already did all the work.
//
// Common contract:
//   - One job at a time: concurrent callers serialize through a mutex, so
//     several generators may share one pool (their jobs simply queue).
//   - An exception thrown by any part is rethrown to the caller (the first
//     one, if several throw) after all parts that started have finished.
//   - A job must not call run() on the same pool (it would deadlock).
//   - Destroying the pool joins the workers; it must not run a job then.
// Kernels split whole rows between threads and never split a reduction, so
// their results do not depend on the thread count or on which thread ran a row.
#pragma once

#include "../detail/abi.hpp"

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

SMOL_NAMESPACE_BEGIN

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

    static constexpr int kMaxThreads = 1024;

    // Error(invalid_argument) for a thread count the constructor refuses (more
    // than kMaxThreads), as a value: a caller can check before constructing.
    static Status check_size(int n_threads) {
        if (n_threads > kMaxThreads)
            return Status(ErrorKind::invalid_argument,
                          "ThreadPool: " + std::to_string(n_threads) + " threads is too many");
        return {};
    }

    // n_threads counts the caller: ThreadPool(1) starts no workers and runs
    // jobs inline. n_threads <= 0 means std::thread::hardware_concurrency().
    // A thread that cannot be started throws std::system_error; without
    // exceptions that ends the process (nothing can check it in advance).
    explicit ThreadPool(int n_threads = 1) {
        if (n_threads <= 0) n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
        detail::ok_or_fail(check_size(n_threads));
        size_ = n_threads;
        workers_.reserve(size_t(n_threads - 1));
        // Guarded because it must catch: a thread that fails to start must not
        // leave the started ones joinable (their std::thread destructors would
        // terminate). Without exceptions that failure ends the process anyway.
#if SMOL_HAS_EXCEPTIONS
        try {
            for (int t = 1; t < n_threads; ++t)
                workers_.emplace_back([this, t] { worker_loop(t); });
        } catch (...) {
            shutdown();
            throw;
        }
#else
        for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
#endif
    }

    ~ThreadPool() {
        shutdown();
    }

    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const noexcept {
        return size_;
    }

    // Full barrier: every thread index runs job exactly once. A job is any
    // callable with that signature; it is called through a reference (the
    // call returns when every thread is done with it), so making it a Job
    // never allocates, whatever the callable captures.
    template <class F>
    void run(F&& job) {
        run_job(Job(std::ref(job)), /*dynamic=*/false);
    }

    // Shared-counter jobs: the caller's job(0, n) must leave no work behind
    // (it keeps taking items until none are left); workers join if they are in
    // time. Thread indices of the calls are distinct, so per-thread scratch
    // indexed by `thread` stays private.
    template <class F>
    void run_dynamic(F&& job) {
        run_job(Job(std::ref(job)), /*dynamic=*/true);
    }

    // Splits [0, n) into contiguous pieces (sizes differ by at most one; up to
    // 4 per thread) handed out from a shared counter, and calls
    // f(begin, end, thread) for each piece on whichever thread took it. A
    // thread may get several pieces, or none; every index is covered once.
    template <class F>
    void parallel_for(size_t n, F&& f) {
        if (n == 0) return;
        if (size_ == 1) {
            f(size_t(0), n, 0);
            return;
        }
        const size_t pieces = std::min(n, size_t(size_) * 4);
        std::atomic<size_t> next_piece{0};
        run_dynamic([&](int thread, int) {
            for (size_t piece = next_piece.fetch_add(1, std::memory_order_relaxed); piece < pieces;
                 piece = next_piece.fetch_add(1, std::memory_order_relaxed)) {
                const size_t begin = n * piece / pieces;
                const size_t end = n * (piece + 1) / pieces;
                if (begin < end) f(begin, end, thread);
            }
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
            if (!try_enter(current)) continue;  // closed before we got here
                // Guarded because it must catch: a job's exception (a caller's job
                // may throw when exceptions are on) is carried to run()'s caller,
                // not lost on a worker. Without exceptions no job can throw.
#if SMOL_HAS_EXCEPTIONS
            try {
                (*job_)(thread, size_);
            } catch (...) {
                record_error(std::current_exception());
            }
#else
            (*job_)(thread, size_);
#endif
            finished_.fetch_add(1, std::memory_order_release);
        }
    }

    // entry_ packs the open job's ticket (its generation, low kTicketBits
    // bits), a closed flag and the number of workers that entered it, so that
    // "still open? then count me in" is one compare-and-swap.
    static constexpr unsigned kCountBits = 23;  // > 1024 workers
    static constexpr unsigned kTicketBits = 40;
    static constexpr uint64_t kCountMask = (uint64_t(1) << kCountBits) - 1;
    static constexpr uint64_t kClosed = uint64_t(1) << kCountBits;
    static constexpr uint64_t kTicketMask = (uint64_t(1) << kTicketBits) - 1;
    static uint64_t ticket_of(uint64_t generation) noexcept {
        return (generation & kTicketMask) << (kCountBits + 1);
    }

    bool try_enter(uint64_t generation) noexcept {
        const uint64_t ticket = ticket_of(generation);
        uint64_t state = entry_.load(std::memory_order_acquire);
        for (;;) {
            if ((state & ~kCountMask) != ticket) return false;  // other job, or closed
            if (entry_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
                return true;
            }
        }
    }

    void run_job(const Job& job, bool dynamic) {
        if (size_ == 1) {
            job(0, 1);
            return;
        }
        std::lock_guard<std::mutex> one_job_at_a_time(run_mutex_);
        // Every worker that entered the previous job has finished (we waited),
        // so nobody reads job_, first_error_ or finished_ now.
        job_ = &job;
        first_error_ = nullptr;
        finished_.store(0, std::memory_order_relaxed);
        const uint64_t generation = generation_.load(std::memory_order_relaxed) + 1;
        entry_.store(ticket_of(generation), std::memory_order_release);
        {
            // Publishing under the mutex pairs with the workers' wait predicate,
            // so a worker about to sleep cannot miss this generation.
            std::lock_guard<std::mutex> lock(mutex_);
            generation_.store(generation, std::memory_order_release);
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

        // Full barrier: wait for all workers (none can skip: no later job can
        // start before they finish). Dynamic: close, then wait for those in.
        const int expected =
            dynamic ? int(entry_.fetch_or(kClosed, std::memory_order_acq_rel) & kCountMask)
                    : size_ - 1;
        for (uint32_t spins = 0; finished_.load(std::memory_order_acquire) != expected; ++spins) {
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
    std::mutex run_mutex_;  // serializes callers of run()
    std::mutex mutex_;      // guards sleeping and stop_
    std::condition_variable wake_;
    bool stop_ = false;                    // read under mutex_
    std::atomic<bool> stop_flag_{false};   // read by spinning workers
    std::atomic<uint64_t> generation_{0};  // bumped once per job
    std::atomic<uint64_t> entry_{0};       // ticket | closed | entered count
    std::atomic<int> finished_{0};         // workers that finished the job
    const Job* job_ = nullptr;
    std::mutex error_mutex_;
    std::exception_ptr first_error_;
};

SMOL_NAMESPACE_END
