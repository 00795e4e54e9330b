// The memory-read roofline for the kernel benchmarks: how fast 1 and 2
// threads can stream a buffer far larger than the last-level cache with the
// dispatched kernel level's loads (KernelSet::sum_bytes; SMOL_CPU forces one). Decode mat-vecs are
// bandwidth-bound, so bench_kernels' GB/s are judged against these numbers.
// The measurement is the library's own (kernels/bandwidth.hpp, also behind
// smol-bench's roofline line); this file only lets Google Benchmark repeat it.
//
//   bench_memory                       (best of 5 repetitions is the "max" row)
//   bench_memory --benchmark_filter=2  (2 threads only)
#include <benchmark/benchmark.h>

#include <smol/kernels/bandwidth.hpp>
#include <smol/kernels/dispatch.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

namespace {

constexpr size_t kBufferBytes = size_t(1) << 30;  // 1 GiB: ~30x the L3 here

// One probe at a time (each holds 1 GiB), kept across the repetitions of a thread count.
smol::ReadBandwidthProbe& probe(int threads) {
    static std::unique_ptr<smol::ReadBandwidthProbe> current;
    if (!current || current->threads() != threads) {
        current.reset();
        current = std::make_unique<smol::ReadBandwidthProbe>(smol::kernels::default_kernels(),
                                                             threads, kBufferBytes);
    }
    return *current;
}

void BM_MemoryRead(benchmark::State& state) {
    smol::ReadBandwidthProbe& p = probe(int(state.range(0)));
    double seconds = 0;
    for (auto _ : state) {
        const double pass = p.pass();
        state.SetIterationTime(pass);
        seconds += pass;
    }
    // From the passes' own times, which are what the manual timing reports.
    state.counters["GB/s"] = double(p.bytes_read()) * double(state.iterations()) / seconds / 1e9;
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
    ->UseManualTime()
    ->MinTime(0.5)
    ->Repetitions(5)
    ->ComputeStatistics("max", max_of)
    ->ReportAggregatesOnly(true);

BENCHMARK_MAIN();
