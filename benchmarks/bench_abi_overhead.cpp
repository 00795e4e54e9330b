// What the C ABI costs per generated token against the C++ API (issue 43, item
// 6; target <= 5 us per token), and the C side of the Python comparison
// (benchmarks/abi_overhead.py). A plain program rather than Google Benchmark:
// a tiny model's decode step is tens of microseconds, near the noise of a
// shared machine, so the two paths are run alternately, pair by pair, and the
// figure is the median of the per-pair differences with its spread, not two
// separately measured means. Printed, never asserted.
//
//   bench_abi_overhead [--pairs 200] [--tokens 64] [--threads 1] [--model FILE]
//       Greedy generation of --tokens tokens through smol::Generator::generate
//       and through smol_generate (each with a streaming callback), alternated
//       (the order flips every pair), on the "tiny" preset made in memory or
//       on FILE. Prints per-token times and the C - C++ difference per token.
//   bench_abi_overhead --only c|cpp [--model FILE] [--runs 5] [--warmup 2] [--tokens 64]
//       One path alone: times --runs streaming generate calls after --warmup
//       and prints "c_us_per_token <median>" (or cpp_...). With --only c
//       --model FILE it is abi_overhead.py's C side: FILE is loaded with
//       smol_model_load, as the Python package does. Alone, a path can also be
//       counted (perf stat -e instructions:u at two --runs: the difference is
//       the runs' own instructions, free of the load's).
//   bench_abi_overhead --write-model FILE
//       Writes the tiny model (the same bytes the first mode makes) to FILE.
#include <smol/smol.h>
#include <smol/smol.hpp>

#include "../tools/model_maker.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    int pairs = 200;
    int tokens = 64;
    int threads = 1;
    int runs = 5;
    int warmup = 2;
    std::string model;        // empty: the tiny preset made in memory
    std::string write_model;  // non-empty: write the tiny model there and exit
    std::string only;         // "c" or "cpp": that path alone
};

// The prompt both paths complete; short, so the prefill is a small share of
// the call and the difference is dominated by the per-token path.
constexpr const char* kPrompt = "Once upon a time";

std::vector<uint8_t> tiny_model_bytes() {
    smol_tools::MakeOptions options;
    options.shape = smol_tools::preset_shape("tiny");
    options.effort = smol_tools::MakeOptions::Effort::fast;
    return smol_tools::make_model_bytes(options);
}

std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

double quantile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double at = q * double(v.size() - 1);
    const size_t lo = size_t(at);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (at - double(lo)) * (v[hi] - v[lo]);
}

// The machine is shared: the load average before and after tells a reader
// whether other jobs ran beside the measurement.
std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return in ? a + " " + b + " " + c : "unknown";
}

[[noreturn]] void c_fail(const char* what) {
    throw std::runtime_error(std::string(what) + ": " + smol_last_error_message());
}

// The streaming callback of the C path: counts bytes, as the C++ one does, so
// the two callbacks do the same work.
int count_piece(const char* /*piece*/, size_t length, void* user_data) {
    *static_cast<size_t*>(user_data) += length;
    return 1;
}

struct CPath {
    smol_model* model = nullptr;
    smol_generator* generator = nullptr;
    smol_params params{};

    CPath(const std::vector<uint8_t>* bytes, const std::string& path, const Options& o) {
        smol_load_options load;
        smol_load_options_init(&load);
        load.n_threads = o.threads;
        model = bytes ? smol_model_load_memory(bytes->data(), bytes->size(), &load)
                      : smol_model_load(path.c_str(), &load);
        if (!model) c_fail("smol_model_load");
        generator = smol_generator_new(model, nullptr);
        if (!generator) c_fail("smol_generator_new");
        smol_params_init(&params);
        params.temperature = 0;
        params.seed = 1;
        params.max_tokens = o.tokens;
        params.ignore_eos = 1;  // always --tokens tokens, whatever the random weights say
    }
    CPath(const CPath&) = delete;
    CPath& operator=(const CPath&) = delete;
    ~CPath() {
        smol_generator_free(generator);
        smol_model_free(model);
    }

    // Seconds of one streaming smol_generate, freeing its result included (a C
    // caller must); the reset before it is not timed. Its text and token count
    // go to *text and *n_tokens.
    double run(std::string* text, size_t* n_tokens) {
        if (smol_reset(generator) != SMOL_OK) c_fail("smol_reset");
        size_t bytes = 0;
        const auto t0 = Clock::now();
        smol_result* r = smol_generate(generator, kPrompt, &params, count_piece, &bytes);
        if (!r) c_fail("smol_generate");
        *n_tokens = r->n_tokens;
        if (text) text->assign(r->text, r->text_length);
        smol_result_free(r);
        return std::chrono::duration<double>(Clock::now() - t0).count();
    }
};

struct CppPath {
    std::shared_ptr<const smol::Model> model;
    std::unique_ptr<smol::Generator> generator;
    smol::GenerateParams params;

    CppPath(const std::vector<uint8_t>& bytes, const Options& o) {
        smol::LoadOptions load;
        load.n_threads = o.threads;
        model = smol::Model::load_from_memory(bytes.data(), bytes.size(), load);
        generator = std::make_unique<smol::Generator>(model);
        params.temperature = 0;
        params.seed = 1;
        params.max_tokens = o.tokens;
        params.ignore_eos = true;
    }

    double run(std::string* text, size_t* n_tokens) {
        generator->reset();
        size_t bytes = 0;
        const auto t0 = Clock::now();
        {
            // Destroyed inside the timed scope, as the C path frees its result.
            const smol::GenerateResult r =
                generator->generate(kPrompt, params, [&bytes](std::string_view piece) {
                    bytes += piece.size();
                    return true;
                });
            *n_tokens = r.tokens.size();
            if (text) *text = r.text;
        }
        return std::chrono::duration<double>(Clock::now() - t0).count();
    }
};

int pairs_mode(const Options& o) {
    const std::vector<uint8_t> bytes = o.model.empty() ? tiny_model_bytes() : read_file(o.model);
    CppPath cpp(bytes, o);
    CPath c(&bytes, "", o);
    std::printf("bench_abi_overhead: %s, %d tokens per run, %d thread(s), %d pairs\n",
                smol_model_identity(c.model), o.tokens, o.threads, o.pairs);
    std::printf("build: %s\n", smol_build_info());
    std::printf("load average before: %s\n", load_average().c_str());

    // Same output both ways, or the comparison means nothing.
    std::string cpp_text, c_text;
    size_t cpp_n = 0, c_n = 0;
    cpp.run(&cpp_text, &cpp_n);
    c.run(&c_text, &c_n);
    if (cpp_text != c_text || cpp_n != c_n || c_n != size_t(o.tokens)) {
        std::fprintf(stderr, "the C++ and C runs differ (%zu / %zu tokens)\n", cpp_n, c_n);
        return 1;
    }
    for (int i = 0; i < 5; ++i) {  // warm both paths (caches, allocator, branch predictors)
        cpp.run(nullptr, &cpp_n);
        c.run(nullptr, &c_n);
    }

    std::vector<double> cpp_us, c_us, diff_us;  // per token
    const double per_token = 1e6 / o.tokens;
    for (int i = 0; i < o.pairs; ++i) {
        double a, b;
        if (i % 2 == 0) {  // flip the order so neither path always runs second
            a = cpp.run(nullptr, &cpp_n);
            b = c.run(nullptr, &c_n);
        } else {
            b = c.run(nullptr, &c_n);
            a = cpp.run(nullptr, &cpp_n);
        }
        cpp_us.push_back(a * per_token);
        c_us.push_back(b * per_token);
        diff_us.push_back((b - a) * per_token);
    }
    std::printf("load average after: %s\n", load_average().c_str());
    auto row = [](const char* name, const std::vector<double>& v) {
        std::printf("%-22s median %8.3f  p25 %8.3f  p75 %8.3f  min %8.3f  max %8.3f us/token\n",
                    name, quantile(v, 0.5), quantile(v, 0.25), quantile(v, 0.75),
                    *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
    };
    row("C++ Generator", cpp_us);
    row("C smol_generate", c_us);
    row("C - C++ (per pair)", diff_us);
    const long c_slower =
        std::count_if(diff_us.begin(), diff_us.end(), [](double d) { return d > 0; });
    // A distribution-free 95 % interval for the median: the order statistics
    // n/2 -+ 1.96 sqrt(n)/2 (the sign test's normal approximation).
    std::vector<double> sorted = diff_us;
    std::sort(sorted.begin(), sorted.end());
    const double half = 0.98 * std::sqrt(double(sorted.size()));
    const size_t lo = size_t(std::max(0.0, double(sorted.size()) / 2 - half));
    const size_t hi = std::min(sorted.size() - 1, size_t(double(sorted.size()) / 2 + half));
    std::printf(
        "C - C++: median %.3f us/token (95 %% interval %.3f .. %.3f), IQR %.3f (p25 "
        "%.3f, p75 %.3f); C slower in %ld of %d pairs; target <= 5 us/token\n",
        quantile(diff_us, 0.5), sorted[lo], sorted[hi],
        quantile(diff_us, 0.75) - quantile(diff_us, 0.25), quantile(diff_us, 0.25),
        quantile(diff_us, 0.75), c_slower, o.pairs);
    return 0;
}

template <class Path>
int time_alone(Path& path, const Options& o) {
    size_t n = 0;
    for (int i = 0; i < o.warmup; ++i) path.run(nullptr, &n);
    std::vector<double> us;
    for (int i = 0; i < o.runs; ++i) {
        us.push_back(path.run(nullptr, &n) * 1e6 / o.tokens);
        if (n != size_t(o.tokens)) {
            std::fprintf(stderr, "generated %zu tokens, not %d\n", n, o.tokens);
            return 1;
        }
    }
    std::printf("%s_us_per_token %.4f\n", o.only.c_str(), quantile(us, 0.5));
    return 0;
}

int only_mode(const Options& o) {
    if (o.only == "c" && !o.model.empty()) {
        CPath c(nullptr, o.model, o);
        return time_alone(c, o);
    }
    const std::vector<uint8_t> bytes = o.model.empty() ? tiny_model_bytes() : read_file(o.model);
    if (o.only == "c") {
        CPath c(&bytes, "", o);
        return time_alone(c, o);
    }
    CppPath cpp(bytes, o);
    return time_alone(cpp, o);
}

int parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (has_value && a == "--only") {
            o.only = argv[++i];
        } else if (has_value && a == "--pairs") {
            o.pairs = std::atoi(argv[++i]);
        } else if (has_value && a == "--tokens") {
            o.tokens = std::atoi(argv[++i]);
        } else if (has_value && a == "--threads") {
            o.threads = std::atoi(argv[++i]);
        } else if (has_value && a == "--runs") {
            o.runs = std::atoi(argv[++i]);
        } else if (has_value && a == "--warmup") {
            o.warmup = std::atoi(argv[++i]);
        } else if (has_value && a == "--model") {
            o.model = argv[++i];
        } else if (has_value && a == "--write-model") {
            o.write_model = argv[++i];
        } else {
            std::fprintf(stderr,
                         "bench_abi_overhead: unknown or incomplete argument '%s' (see "
                         "the comment at the top of benchmarks/bench_abi_overhead.cpp)\n",
                         a.c_str());
            return 2;
        }
    }
    if (o.pairs < 1 || o.tokens < 1 || o.threads < 1 || o.runs < 1 || o.warmup < 0) {
        std::fprintf(stderr, "bench_abi_overhead: counts must be positive\n");
        return 2;
    }
    if (!o.only.empty() && o.only != "c" && o.only != "cpp") {
        std::fprintf(stderr, "bench_abi_overhead: --only takes c or cpp\n");
        return 2;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (const int bad = parse(argc, argv, o)) return bad;
    try {
        if (!o.write_model.empty()) {
            const std::vector<uint8_t> bytes = tiny_model_bytes();
            std::ofstream out(o.write_model, std::ios::binary);
            out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
            if (!out) throw std::runtime_error("cannot write " + o.write_model);
            return 0;
        }
        return o.only.empty() ? pairs_mode(o) : only_mode(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_abi_overhead: %s\n", e.what());
        return 1;
    }
}
