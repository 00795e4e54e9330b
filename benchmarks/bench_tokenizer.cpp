// Tokenizer benchmarks: vocabulary load time (128k tokens + 280k merges),
// encode throughput in MB/s over ~1 MB of mixed text (prose, code, numbers,
// chat markup, CJK, emoji, whitespace runs) for both pre types, the
// pre-tokenizer split alone, and decode.
// Fixtures: $SMOL_FIXTURES, else ../shared/fixtures next to the source tree.
#include <benchmark/benchmark.h>
#include <smol/smol.hpp>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <sys/stat.h>

namespace {

std::string fixture_path(const std::string& name) {
    std::string dir;
    if (const char* env = std::getenv("SMOL_FIXTURES")) {
        dir = env;
    } else {
        const std::string src = __FILE__;  // .../benchmarks/bench_tokenizer.cpp
        dir = src.substr(0, src.rfind('/')) + "/../../shared/fixtures";
    }
    return dir + "/" + name;
}

bool exists(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0;
}

// ~1 MB of deterministic mixed text.
const std::string& mixed_text() {
    static const std::string text = [] {
        const char* snippets[] = {
            "The blacksmith's hammer rang out across the village square, and the apprentices "
            "stopped to listen. ",
            "I'M HERE, YOU'LL SEE. They'd've known it was 12345678 o'clock by then. ",
            "def add(a, b):\n    return a + b  # sum\n\n\tif x:\n\t\tpass\n",
            "<|im_start|>user\nWhat does the merchant sell?<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n",
            "Numbers: 1 12 123 1234 12345 3.14159 -42 1e10 0x1F, totals 98,765.43. ",
            "\xE5\x9F\x8E\xE5\xA0\xA1\xE9\x87\x8C\xE7\x9A\x84\xE9\x93\x81\xE5\x8C\xA0"
            "\xE6\x89\x93\xE9\x80\xA0\xE4\xBA\x86\xE4\xB8\x80\xE6\x8A\x8A\xE5\x89\x91\xE3\x80\x82",
            "Emoji \xF0\x9F\xA7\x99\xE2\x80\x8D\xE2\x99\x82\xEF\xB8\x8F\xE2\x9A\x94\xEF\xB8\x8F"
            "\xF0\x9F\x90\x89 and \xF0\x9F\x9A\x80 (normal) ",
            "na\xC3\xAFve caf\xC3\xA9 r\xC3\xA9sum\xC3\xA9 co\xC3\xB6perate "
            "\xC3\x85ngstr\xC3\xB6m ",
            "\xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE \xD0\xBD\xD0\xB0 \xD0\x91\xD1\x8A\xD0\xBB\xD0\xB3"
            "\xD0\xB0\xD1\x80\xD1\x81\xD0\xBA\xD0\xB8 ",
            "   leading and trailing spaces   \n\n\n",
            "Supercalifragilisticexpialidocious antidisestablishmentarianism "
            "pneumonoultramicroscopicsilicovolcanoconiosis. ",
        };
        // Between the snippets, made-up words and numbers, so that a good part
        // of the text is not a repeat (a pre-token cache cannot hide BPE).
        const char* syllables[] = {"ka",  "lo", "min", "tor", "ux", "ve", "bra", "sel",
                                   "qui", "nd", "ph",  "ost", "er", "ly", "zh",  "ae"};
        std::mt19937 rng(1234);
        std::string out;
        while (out.size() < (1u << 20)) {
            const unsigned pick = rng() % 10;
            if (pick < 4) {
                out += snippets[rng() % std::size(snippets)];
            } else if (pick < 9) {
                out += ' ';
                for (unsigned k = 0, n = 1 + rng() % 4; k < n; ++k) out += syllables[rng() % 16];
            } else {
                out += ' ' + std::to_string(rng() % 1000000);
            }
        }
        return out;
    }();
    return text;
}

std::shared_ptr<const smol::Tokenizer> tokenizer_for(const std::string& model) {
    static std::map<std::string, std::shared_ptr<const smol::Tokenizer>> cache;
    auto& slot = cache[model];
    if (!slot) {
        const std::string path = fixture_path(model);
        if (!exists(path)) return nullptr;
        slot = std::make_shared<const smol::Tokenizer>(
            smol::Tokenizer::from_gguf(smol::gguf::File::open(path)));
    }
    return slot;
}

void BM_LoadVocabulary(benchmark::State& state, const char* model) {
    const std::string path = fixture_path(model);
    if (!exists(path)) {
        state.SkipWithError("fixture missing (set SMOL_FIXTURES)");
        return;
    }
    for (auto _ : state) {
        auto tok = smol::Tokenizer::from_gguf(smol::gguf::File::open(path));
        benchmark::DoNotOptimize(tok.vocab_size());
    }
}

void BM_Encode(benchmark::State& state, const char* model) {
    auto tok = tokenizer_for(model);
    if (!tok) {
        state.SkipWithError("fixture missing (set SMOL_FIXTURES)");
        return;
    }
    const std::string& text = mixed_text();
    size_t tokens = 0;
    for (auto _ : state) {
        auto ids = tok->encode(text, true);
        tokens = ids.size();
        benchmark::DoNotOptimize(ids.data());
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
    state.counters["tokens"] = double(tokens);
    state.counters["bytes_per_token"] = double(text.size()) / double(tokens);
}

void BM_Split(benchmark::State& state) {
    const std::string& text = mixed_text();
    smol::unicode::SplitScratch scratch;
    size_t pieces = 0;
    for (auto _ : state) {
        pieces = 0;
        smol::unicode::split_llama3(text, scratch, [&](std::string_view) { ++pieces; });
        benchmark::DoNotOptimize(pieces);
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
    state.counters["pieces"] = double(pieces);
}

void BM_Decode(benchmark::State& state) {
    auto tok = tokenizer_for("tiny-q4km.gguf");
    if (!tok) {
        state.SkipWithError("fixture missing (set SMOL_FIXTURES)");
        return;
    }
    const auto ids = tok->encode(mixed_text(), true);
    for (auto _ : state) {
        auto text = tok->decode(ids);
        benchmark::DoNotOptimize(text.data());
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(mixed_text().size()));
}

}  // namespace

BENCHMARK_CAPTURE(BM_LoadVocabulary, smaug_bpe, "tiny-q4km.gguf")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LoadVocabulary, llama_bpe, "vocab-llama-bpe.gguf")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, smaug_bpe, "tiny-q4km.gguf")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, llama_bpe, "vocab-llama-bpe.gguf")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Split)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
