// The memory-read roofline: how fast `threads` threads stream a buffer far
// larger than the last-level cache, with a kernel level's own widest loads
// (KernelSet::sum_bytes). Decode is a chain of mat-vecs that read every
// weight byte once, so bytes per token / this bandwidth bounds decode speed;
// smol-bench and benchmarks/bench_memory report it from here.
//
//   double measure_read_bandwidth(const kernels::KernelSet& k, int threads,
//                                 size_t bytes = 1 GiB, int repeats = 3);
//       GB/s (1e9 bytes/s), best of `repeats`; each thread reads one contiguous
//       4 KiB-aligned slice. Allocates `bytes` for the duration of the call and
//       writes every page first (no shared zero pages).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../core/tensor.hpp"
#include "../core/threadpool.hpp"
#include "kernel_set.hpp"

SMOL_NAMESPACE_BEGIN

inline double measure_read_bandwidth(const kernels::KernelSet& k, int threads, size_t bytes = size_t(1) << 30,
                                     int repeats = 3) {
    threads = std::max(1, threads);
    bytes = std::max<size_t>(bytes / 4096 * 4096, 4096 * size_t(threads));
    AlignedBuffer buffer(bytes);
    uint64_t* words = buffer.as<uint64_t>();
    for (size_t i = 0; i < bytes / 8; ++i) words[i] = i * 0x9e3779b97f4a7c15ull;
    const uint8_t* data = buffer.data();
    ThreadPool pool(threads);
    std::vector<uint64_t> sums(size_t(threads) * 8, 0);  // one cache line per thread
    const size_t slice = bytes / size_t(threads) / 4096 * 4096;
    double best = 0;
    for (int r = 0; r < std::max(1, repeats); ++r) {
        const auto start = std::chrono::steady_clock::now();
        pool.run([&](int thread, int) { sums[size_t(thread) * 8] += k.sum_bytes(data + slice * size_t(thread), slice); });
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        best = std::max(best, double(slice * size_t(threads)) / seconds / 1e9);
    }
    volatile uint64_t sink = 0;
    for (uint64_t s : sums) sink = sink + s;
    (void)sink;
    return best;
}

SMOL_NAMESPACE_END
