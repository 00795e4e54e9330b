// Tests for include/smol/core/threadpool.hpp: every thread runs each job once,
// the caller takes part, parallel_for covers a range exactly once, exceptions
// reach the caller, concurrent callers serialize, and the pool survives many
// short jobs (the decode pattern) and sleeping between jobs; run_dynamic /
// parallel_for lose no items, propagate exceptions, and give the same results
// for any thread count.
#include <doctest/doctest.h>

#include <smol/core/threadpool.hpp>

#include <atomic>
#include <chrono>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_threadpool {

TEST_CASE("ThreadPool: each thread runs the job once, the caller is thread 0") {
    for (int n : {1, 2, 3, 5}) {
        smol::ThreadPool pool(n);
        CHECK(pool.size() == n);
        std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
        std::atomic<int> wrong_count{0};
        std::thread::id thread0;
        pool.run([&](int thread, int n_threads) {
            if (n_threads != n) ++wrong_count;
            ++calls[size_t(thread)];
            if (thread == 0) thread0 = std::this_thread::get_id();
        });
        CHECK(wrong_count == 0);
        for (auto& c : calls) CHECK(c == 1);
        CHECK((thread0 == std::this_thread::get_id()));
    }
}

TEST_CASE("ThreadPool: parallel_for covers [0, n) exactly once with contiguous ranges") {
    smol::ThreadPool pool(3);
    for (size_t n :
         {size_t(0), size_t(1), size_t(2), size_t(3), size_t(4), size_t(100), size_t(1001)}) {
        std::vector<int> hits(n, 0);
        pool.parallel_for(n, [&](size_t begin, size_t end, int) {
            for (size_t i = begin; i < end; ++i) ++hits[i];
        });
        for (int h : hits) CHECK(h == 1);
    }
}

TEST_CASE("ThreadPool: many short jobs in a row (the decode pattern)") {
    smol::ThreadPool pool(2);
    std::atomic<long> total{0};
    for (int job = 0; job < 20000; ++job) {
        pool.run([&](int thread, int) { total += thread + 1; });
    }
    CHECK(total == 20000L * 3);
}

TEST_CASE("ThreadPool: workers that went to sleep wake up for the next job") {
    smol::ThreadPool pool(3);
    std::atomic<int> total{0};
    pool.run([&](int, int) { ++total; });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // long past the spin budget
    pool.run([&](int, int) { ++total; });
    CHECK(total == 6);
}

TEST_CASE("ThreadPool: an exception in any part reaches the caller, and the pool stays usable") {
    smol::ThreadPool pool(3);
    for (int thrower : {0, 1, 2}) {
        std::atomic<int> finished{0};
        CHECK_THROWS_AS(pool.run([&](int thread, int) {
            if (thread == thrower) throw std::runtime_error("boom");
            ++finished;
        }),
                        std::runtime_error);
        CHECK(finished == 2);  // the others still ran to completion
    }
    std::atomic<int> total{0};
    pool.run([&](int, int) { ++total; });
    CHECK(total == 3);
}

TEST_CASE("ThreadPool: concurrent callers serialize") {
    smol::ThreadPool pool(2);
    std::atomic<int> inside{0}, max_inside{0};
    std::atomic<long> total{0};
    auto caller = [&] {
        for (int i = 0; i < 300; ++i) {
            pool.run([&](int, int) {
                const int now = ++inside;
                int seen = max_inside.load();
                while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
                }
                ++total;
                --inside;
            });
        }
    };
    std::thread a(caller), b(caller);
    a.join();
    b.join();
    CHECK(total == 2L * 300 * 2);
    CHECK(max_inside <= 2);  // never more than one job's threads at once
}

TEST_CASE("ThreadPool: construction and destruction without jobs, and bad sizes") {
    for (int i = 0; i < 20; ++i) {
        smol::ThreadPool pool(4);
        (void)pool;
    }
    smol::ThreadPool automatic(0);
    CHECK(automatic.size() >= 1);
    CHECK_THROWS_AS(smol::ThreadPool(100000), smol::Error);
}

// --- run_dynamic: jobs that finish when the shared work is exhausted ---

namespace {
// A deterministic per-row result (rows are never split, so it cannot depend on
// which thread computed it).
double row_value(size_t row) {
    double sum = 0;
    for (size_t k = 1; k <= 64; ++k) sum += 1.0 / double(row * 64 + k);
    return sum;
}
}  // namespace

TEST_CASE("ThreadPool: parallel_for results are identical across thread counts") {
    const size_t n = 4099;
    std::vector<double> reference;
    for (int threads : {1, 2, 3, 4}) {
        smol::ThreadPool pool(threads);
        std::vector<double> out(n, -1.0);
        pool.parallel_for(n, [&](size_t begin, size_t end, int thread) {
            CHECK(thread >= 0);
            CHECK(thread < threads);
            for (size_t i = begin; i < end; ++i) out[i] = row_value(i);
        });
        if (reference.empty()) {
            reference = out;
        } else {
            CHECK(out == reference);  // bit-identical
        }
    }
}

TEST_CASE("ThreadPool: no lost or duplicated items over many tiny dynamic jobs") {
    for (int threads : {1, 2, 3, 4}) {
        smol::ThreadPool pool(threads);
        for (int job = 0; job < 3000; ++job) {
            const size_t n = size_t(job % 7);  // includes empty and 1-item jobs
            std::vector<std::atomic<int>> hits(n);
            pool.parallel_for(n, [&](size_t begin, size_t end, int) {
                for (size_t i = begin; i < end; ++i) ++hits[i];
            });
            for (auto& h : hits) REQUIRE(h == 1);
            // Interleave full barriers so both kinds follow each other.
            if (job % 5 == 0) {
                std::atomic<int> ran{0};
                pool.run([&](int, int) { ++ran; });
                REQUIRE(ran == threads);
            }
        }
    }
}

TEST_CASE("ThreadPool: an exception in a dynamic job reaches the caller") {
    smol::ThreadPool pool(3);
    for (int round = 0; round < 50; ++round) {
        CHECK_THROWS_AS(pool.parallel_for(64,
                                          [&](size_t begin, size_t, int) {
                                              if (begin == 0) throw std::runtime_error("boom");
                                          }),
                        std::runtime_error);
    }
    std::atomic<int> total{0};
    pool.run([&](int, int) { ++total; });
    CHECK(total == 3);
}

TEST_CASE("ThreadPool: destruction while idle, right after dynamic jobs") {
    for (int i = 0; i < 50; ++i) {
        smol::ThreadPool pool(1 + i % 4);
        std::atomic<int> total{0};
        pool.parallel_for(10, [&](size_t begin, size_t end, int) { total += int(end - begin); });
        CHECK(total == 10);
        if (i % 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

}  // namespace test_threadpool
