// GGUF open cost: File::open of a model (mmap + header, metadata and tensor
// table, including the 128k-token and 280k-merge string arrays) and the peak
// resident memory right after the first open, which should stay far below the
// file size because tensor bytes are mapped, not read.
//   bench_gguf [MODEL.gguf] [--benchmark_* flags]
// Default model: $SMOL_FIXTURES/small-q4km.gguf (else ../shared/fixtures
// beside the source tree).
#include <benchmark/benchmark.h>
#include <smol/gguf/gguf.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

std::string g_model;

// A line of /proc/self/status ("VmHWM:   1234 kB") in MiB; -1 where unavailable.
double status_mib(const char* field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    const std::string prefix = std::string(field) + ":";
    while (std::getline(in, line))
        if (line.compare(0, prefix.size(), prefix) == 0)
            return std::atof(line.c_str() + prefix.size()) / 1024.0;
    return -1;
}

std::string default_model() {
    if (const char* env = std::getenv("SMOL_FIXTURES"))
        return std::string(env) + "/small-q4km.gguf";
    std::string here = __FILE__;  // .../main/benchmarks/bench_gguf.cpp
    here = here.substr(0, here.find_last_of('/'));
    here = here.substr(0, here.find_last_of('/'));
    return here + "/../shared/fixtures/small-q4km.gguf";
}

// Open and parse only.
void BM_open(benchmark::State& state) {
    for (auto _ : state) {
        auto file = smol::gguf::File::open(g_model);
        benchmark::DoNotOptimize(file->tensors().data());
    }
}
BENCHMARK(BM_open)->Unit(benchmark::kMillisecond);

// What a loader does next: views of every token and merge string.
void BM_open_and_vocab_views(benchmark::State& state) {
    for (auto _ : state) {
        auto file = smol::gguf::File::open(g_model);
        auto tokens = file->get<std::vector<std::string_view>>("tokenizer.ggml.tokens");
        auto merges = file->get<smol::gguf::ArrayView>("tokenizer.ggml.merges").strings();
        benchmark::DoNotOptimize(tokens.data());
        benchmark::DoNotOptimize(merges.data());
    }
}
BENCHMARK(BM_open_and_vocab_views)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    g_model = argc > 1 ? argv[1] : default_model();

    // The first open in a fresh process: its wall time and the resident memory
    // it leaves (the mapping's pages are only counted once touched).
    const double rss_before = status_mib("VmRSS");
    const auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<smol::gguf::File> file;
    try {
        file = smol::gguf::File::open(g_model);
    } catch (const smol::Error& e) {
        std::fprintf(stderr, "bench_gguf: %s\n", e.what());
        return 1;
    }
    const double first_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double hwm_after = status_mib("VmHWM");
    const double rss_after = status_mib("VmRSS");
    std::printf("model: %s (%.1f MiB, %zu keys, %zu tensors, header %.1f MiB)\n", g_model.c_str(),
                double(file->size()) / (1 << 20), file->metadata().size(), file->tensors().size(),
                double(file->data_offset()) / (1 << 20));
    std::printf("first open: %.2f ms; RSS %.1f -> %.1f MiB, peak RSS (VmHWM) %.1f MiB\n", first_ms,
                rss_before, rss_after, hwm_after);
    file.reset();

    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
