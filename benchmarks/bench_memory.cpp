// The memory-read roofline for the kernel benchmarks: how fast 1 and 2
// threads can stream a buffer far larger than the last-level cache with the
// dispatched kernel level's loads (KernelSet::sum_bytes; SMOL_CPU forces one). Decode mat-vecs are
// bandwidth-bound, so bench_kernels' GB/s are judged against these numbers.
//
//   bench_memory                       (best of 5 repetitions is the "max" row)
//   bench_memory --benchmark_filter=2  (2 threads only)
#include <benchmark/benchmark.h>

#include <smol/core/tensor.hpp>
#include <smol/core/threadpool.hpp>
#include <smol/kernels/dispatch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>


namespace {

constexpr size_t kBufferBytes = size_t(1) << 30;  // 1 GiB: ~30x the L3 here

smol::AlignedBuffer& buffer() {
    static smol::AlignedBuffer data = [] {
        smol::AlignedBuffer b(kBufferBytes);
        // Touch every page with non-zero data so reads are not served from
        // the shared zero page.
        uint64_t* words = b.as<uint64_t>();
        for (size_t i = 0; i < kBufferBytes / 8; ++i) words[i] = i * 0x9e3779b97f4a7c15ull;
        return b;
    }();
    return data;
}

void BM_MemoryRead(benchmark::State& state) {
    const int n_threads = int(state.range(0));
    const uint8_t* data = buffer().data();
    smol::ThreadPool pool(n_threads);
    uint64_t sums[64] = {};
    for (auto _ : state) {
        pool.run([&](int thread, int n) {
            // 4 KiB-aligned contiguous slices, one per thread.
            const size_t slice = kBufferBytes / size_t(n) / 4096 * 4096;
            const uint8_t* begin = data + slice * size_t(thread);
            sums[thread * 8] += smol::kernels::default_kernels().sum_bytes(begin, slice);
        });
        benchmark::DoNotOptimize(sums);
    }
    state.counters["GB/s"] = benchmark::Counter(double(kBufferBytes) * double(state.iterations()) / 1e9,
                                                benchmark::Counter::kIsRate);
}

double max_of(const std::vector<double>& v) {
    double best = 0;
    for (double x : v) best = std::max(best, x);
    return best;
}

}  // namespace

BENCHMARK(BM_MemoryRead)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5)
    ->Repetitions(5)
    ->ComputeStatistics("max", max_of)
    ->ReportAggregatesOnly(true);

BENCHMARK_MAIN();
