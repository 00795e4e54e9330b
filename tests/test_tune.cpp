// Tests for the kernels' self-tuning at load (kernels/tune.hpp, LoadOptions::tune
// and kernel_params): a tiny model keeps the defaults without measuring,
// SMOL_TUNE=off and LoadOptions pin them, a forced tuning measures every
// candidate of the settings its matrices use, LoadOptions::tune_file
// remembers the choice (a malformed file is ignored), and whatever is chosen, the
// logits are the defaults' bits (tests/test_kernels.cpp, "kernel params",
// proves the same per kernel and candidate).
#include <doctest/doctest.h>

#include <smol/smol.hpp>
#include <smol/kernels/tune.hpp>
#include <smol/model/model.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "support/fixtures.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_tune {

namespace {

namespace kernels = smol::kernels;

// SMOL_TUNE set (or unset) for one scope, the previous value restored after.
class TuneEnvironment {
public:
    explicit TuneEnvironment(const char* value) {
        if (const char* old = std::getenv("SMOL_TUNE")) previous_ = old, had_ = true;
        if (value)
            setenv("SMOL_TUNE", value, 1);
        else
            unsetenv("SMOL_TUNE");
    }
    ~TuneEnvironment() {
        if (had_)
            setenv("SMOL_TUNE", previous_.c_str(), 1);
        else
            unsetenv("SMOL_TUNE");
    }
    TuneEnvironment(const TuneEnvironment&) = delete;
    TuneEnvironment& operator=(const TuneEnvironment&) = delete;

private:
    std::string previous_;
    bool had_ = false;
};

// The logits of a short prompt and three decode steps, concatenated.
std::vector<float> run(const smol::Model& model) {
    const size_t vocab = model.config().vocab_size;
    std::vector<int32_t> prompt;
    for (int32_t i = 0; i < 20; ++i) prompt.push_back(int32_t((i * 7919 + 13) % int32_t(vocab)));
    std::vector<float> all, logits(vocab);
    auto kv = model.make_cache(64);
    model.forward(prompt.data(), prompt.size(), 0, kv, logits.data());
    all.insert(all.end(), logits.begin(), logits.end());
    for (size_t pos = prompt.size(); pos < prompt.size() + 3; ++pos) {
        const int32_t next = int32_t(pos * 31 % vocab);
        model.forward(&next, 1, pos, kv, logits.data());
        all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("tuning: a tiny model keeps the defaults without measuring; the log says so") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    TuneEnvironment env(nullptr);
    smol::LoadOptions options;
    options.n_threads = 2;
    std::string log;
    options.log = [&](int, const std::string& m) { log += m + "\n"; };
    const auto model = smol::Model::load(*path, options);
    CHECK_FALSE(model->tuning().tuned);
    CHECK(model->tuning().skipped.find("small model") != std::string::npos);
    CHECK(model->tuning().timings.empty());
    CHECK(model->kernels().params == kernels::KernelParams{});
    CHECK(&model->kernels() == &kernels::kernel_set(model->cpu_level()));
    CHECK(log.find("smol: kernel params pace 60") != std::string::npos);
    CHECK(log.find("small model") != std::string::npos);
}

TEST_CASE("tuning: forced on a fixture, it measures the candidates and keeps the logits' bits") {
    TuneEnvironment env(nullptr);
    size_t count = 0;
    const smol::CpuLevel* levels = smol::compiled_cpu_levels(count);
    for (const char* name : {"tiny-q4km.gguf", "tiny-gqa-q5km.gguf"}) {
        const auto path = smol_test::fixture(name);
        if (!path) return;
        for (size_t i = 0; i < count; ++i) {
            if (!smol::cpu_supports(levels[i])) continue;
            CAPTURE(name);
            CAPTURE(smol::cpu_level_name(levels[i]));
            smol::LoadOptions options;
            options.n_threads = 2;
            options.cpu = levels[i];
            options.tune = smol::TuneMode::off;
            const auto plain = smol::Model::load(*path, options);
            CHECK_FALSE(plain->tuning().tuned);
            CHECK(plain->tuning().skipped == "LoadOptions::tune off");
            const std::vector<float> want = run(*plain);

            options.tune = smol::TuneMode::on;
            std::string log;
            options.log = [&](int, const std::string& m) { log += m + "\n"; };
            const auto tuned = smol::Model::load(*path, options);
            const kernels::TuneReport& report = tuned->tuning();
            REQUIRE(report.tuned);
            CHECK(report.skipped.empty());
            CHECK(kernels::valid_kernel_params(report.chosen));
            CHECK(tuned->kernels().params == report.chosen);
            CHECK(tuned->cpu_level() == levels[i]);
            CHECK(log.find("(tuned in ") != std::string::npos);
            // Every candidate of each setting the level and the matrices use was timed.
            const bool zmm =
                levels[i] == smol::CpuLevel::avx512 || levels[i] == smol::CpuLevel::amx;
            const bool interleaved = tuned->weights().layers[0].ffn_up.interleaved_rows > 0;
            size_t expected = std::size(kernels::kDecodeChunkCandidates);
            if (zmm && interleaved)
                expected += std::size(kernels::kPaceCandidates) +
                            std::size(kernels::kInterleavedPrefetchCandidates);
            bool stored = false;
            for (const smol::LayerWeights& l : tuned->weights().layers)
                for (const smol::WeightMatrix* w : {&l.attn_q, &l.attn_k, &l.attn_v, &l.attn_output,
                                                    &l.ffn_gate, &l.ffn_up, &l.ffn_down})
                    stored |= w->interleaved_rows == 0 &&
                              kernels::tunes_stored_prefetch(levels[i], w->type);
            if (stored) expected += std::size(kernels::kStoredPrefetchCandidates);
            CHECK(report.timings.size() == expected);
            for (const kernels::TuneTiming& t : report.timings) {
                CHECK(t.samples >= 1);
                CHECK(t.ns_per_mib > 0);
            }
            CHECK(same_bits(run(*tuned), want));
        }
    }
}

TEST_CASE("tuning: SMOL_TUNE=off and LoadOptions::kernel_params pin the settings") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    smol::LoadOptions options;
    options.n_threads = 2;
    options.tune = smol::TuneMode::on;
    {
        TuneEnvironment env("off");
        const auto model = smol::Model::load(*path, options);
        CHECK_FALSE(model->tuning().tuned);
        CHECK(model->tuning().skipped == "SMOL_TUNE=off");
        CHECK(model->kernels().params == kernels::KernelParams{});
    }
    TuneEnvironment env(nullptr);
    options.tune = smol::TuneMode::off;
    const std::vector<float> want = run(*smol::Model::load(*path, options));
    kernels::KernelParams pinned;
    pinned.pace_steps = 0;
    pinned.interleaved_prefetch = 12288;
    pinned.stored_prefetch = 2048;
    pinned.decode_chunks = 4;
    options.kernel_params = pinned;
    options.tune = smol::TuneMode::on;  // the pin wins
    const auto model = smol::Model::load(*path, options);
    CHECK_FALSE(model->tuning().tuned);
    CHECK(model->tuning().skipped == "pinned by LoadOptions::kernel_params");
    CHECK(model->kernels().params.decode_chunks == 4);
    if (model->cpu_level() == smol::CpuLevel::avx512 || model->cpu_level() == smol::CpuLevel::amx)
        CHECK(model->kernels().params == pinned);
    CHECK(same_bits(run(*model), want));

    pinned.decode_chunks = 5;  // not a candidate
    options.kernel_params = pinned;
    const auto bad = smol::Model::try_load(*path, options);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().kind == smol::ErrorKind::invalid_argument);
}

TEST_CASE("tuning: LoadOptions::tune_file remembers the choice per CPU; a bad file is ignored") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    TuneEnvironment env(nullptr);
    const std::string file = "smol-test-tune-" + std::to_string(long(getpid())) + ".txt";
    std::remove(file.c_str());
    smol::LoadOptions options;
    options.n_threads = 2;
    options.tune = smol::TuneMode::on;
    options.tune_file = file;
    std::string log;
    options.log = [&](int level, const std::string& m) {
        log += std::to_string(level) + " " + m + "\n";
    };
    // No file yet: measured, then written.
    const auto first = smol::Model::load(*path, options);
    REQUIRE(first->tuning().tuned);
    const std::string key = kernels::tune_key(first->cpu_level(), 2);
    kernels::TuneFileRead read = kernels::read_tune_file(file, key);
    REQUIRE(read.found);
    CHECK_FALSE(read.malformed);
    CHECK(read.params == first->kernels().params);
    // Remembered: not measured again.
    const auto second = smol::Model::load(*path, options);
    CHECK_FALSE(second->tuning().tuned);
    CHECK(second->tuning().skipped == "remembered in " + file);
    CHECK(second->kernels().params == first->kernels().params);
    // Another key's line is kept when the file is rewritten.
    kernels::KernelParams other;
    other.decode_chunks = 16;
    other.codebook_gathers = 1;
    REQUIRE(kernels::write_tune_file(file, "avx2 7 Some Other CPU", other));
    read = kernels::read_tune_file(file, "avx2 7 Some Other CPU");
    CHECK(read.found);
    CHECK(read.params == other);
    CHECK(read.entries.size() == 2);
    CHECK(kernels::read_tune_file(file, key).found);
    // A version 1 line (before codebook_gathers) still reads, with that setting's default.
    {
        std::FILE* f = std::fopen(file.c_str(), "wb");
        REQUIRE(f);
        std::fputs("smol-tune 1 30 4096 2048 4 avx2 7 Some Other CPU\n", f);
        std::fclose(f);
        read = kernels::read_tune_file(file, "avx2 7 Some Other CPU");
        REQUIRE(read.found);
        CHECK_FALSE(read.malformed);
        CHECK(read.params.pace_steps == 30);
        CHECK(read.params.decode_chunks == 4);
        CHECK(read.params.codebook_gathers == kernels::KernelParams{}.codebook_gathers);
    }
    // Malformed files: a warning, a measurement, a well-formed file again.
    for (const char* text :
         {"garbage\n", "smol-tune 1 7 8192 4096 8 avx512 2 X\n",
          "smol-tune 2 60 8192 4096 8 avx512 2 X\n", "smol-tune 2 60 8192 4096 8 2 avx512 2 X\n",
          "smol-tune 3 60 8192 4096 8 0 avx512 2 X\n", "smol-tune 1 60 8192\n", "\x01\x02\xff\n"}) {
        CAPTURE(text);
        {
            std::FILE* f = std::fopen(file.c_str(), "wb");
            REQUIRE(f);
            std::fputs(text, f);
            std::fclose(f);
        }
        CHECK(kernels::read_tune_file(file, key).malformed);
        log.clear();
        const auto model = smol::Model::load(*path, options);
        CHECK(model->tuning().tuned);
        CHECK(log.find(std::to_string(smol::log_warning) + " smol: " + file +
                       " is not a tuning file") != std::string::npos);
        read = kernels::read_tune_file(file, key);
        CHECK_FALSE(read.malformed);
        CHECK(read.found);
        CHECK(read.entries.size() == 1);
    }
    std::remove(file.c_str());
}

}  // namespace test_tune
