// The memory-read roofline: how fast `threads` threads stream a buffer far
// larger than the last-level cache, with a kernel level's own widest loads
// (KernelSet::sum_bytes). Decode is a chain of mat-vecs that read every
// weight byte once, so bytes per token / this bandwidth bounds decode speed;
// smol-bench and benchmarks/bench_memory report it from here.
//
//   double measure_read_bandwidth(const kernels::KernelSet& k, int threads,
//                                 size_t bytes = 1 GiB, int repeats = 3);
//       GB/s (1e9 bytes/s), best of `repeats`; each thread reads one contiguous
//       slice, a multiple of 4 KiB long (starting on a cache line). Allocates
//       `bytes` for the duration of the call and writes every page first (no
//       shared zero pages).
//   ReadBandwidthProbe(k, threads, bytes): the same measurement with the buffer
//       kept, for timing passes one by one (pass() -> seconds, bytes_read()).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../core/threadpool.hpp"
#include "../detail/aligned.hpp"
#include "kernel_set.hpp"

SMOL_NAMESPACE_BEGIN

// The buffer and threads of the measurement, kept between passes so that a
// benchmark harness (benchmarks/bench_memory) can time passes one at a time.
class ReadBandwidthProbe {
public:
    ReadBandwidthProbe(const kernels::KernelSet& k, int threads, size_t bytes = size_t(1) << 30)
        : kernels_(k),
          threads_(std::max(1, threads)),
          slice_(std::max<size_t>(bytes / 4096 * 4096, 4096 * size_t(threads_)) / size_t(threads_) /
                 4096 * 4096),
          buffer_(slice_ * size_t(threads_)),
          pool_(threads_),
          sums_(size_t(threads_) * 8, 0) {  // one cache line per thread
        uint64_t* words = buffer_.as<uint64_t>();
        for (size_t i = 0; i < bytes_read() / 8; ++i) words[i] = i * 0x9e3779b97f4a7c15ull;
    }
    ~ReadBandwidthProbe() {
        volatile uint64_t sink = 0;  // the sums are the reads' only visible effect
        for (uint64_t s : sums_) sink = sink + s;
        (void)sink;
    }
    ReadBandwidthProbe(const ReadBandwidthProbe&) = delete;
    ReadBandwidthProbe& operator=(const ReadBandwidthProbe&) = delete;

    size_t bytes_read() const noexcept { return slice_ * size_t(threads_); }  // by one pass
    int threads() const noexcept { return threads_; }

    // One pass: every thread reads its contiguous 4 KiB-aligned slice once. Seconds.
    double pass() {
        const uint8_t* data = buffer_.data();
        const auto start = std::chrono::steady_clock::now();
        pool_.run([&](int thread, int) {
            sums_[size_t(thread) * 8] += kernels_.sum_bytes(data + slice_ * size_t(thread), slice_);
        });
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }

    // GB/s of the fastest of `repeats` passes.
    double best_gb_per_s(int repeats) {
        double best = 0;
        for (int r = 0; r < std::max(1, repeats); ++r)
            best = std::max(best, double(bytes_read()) / pass() / 1e9);
        return best;
    }

private:
    const kernels::KernelSet& kernels_;
    int threads_;
    size_t slice_;
    detail::AlignedBuffer buffer_;
    ThreadPool pool_;
    std::vector<uint64_t> sums_;
};

inline double measure_read_bandwidth(const kernels::KernelSet& k, int threads,
                                     size_t bytes = size_t(1) << 30, int repeats = 3) {
    return ReadBandwidthProbe(k, threads, bytes).best_gb_per_s(repeats);
}

SMOL_NAMESPACE_END
