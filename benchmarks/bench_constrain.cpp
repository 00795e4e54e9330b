// Structured-output benchmarks, on the real 128k
// vocabulary (a byte vocabulary would make masks trivial):
//   - BM_CompileSchema20: a 20-property JSON Schema to a ready masker
//     (conversion, grammar compile, matcher tables); the token trie is built
//     once per generator and is reported apart (BM_BuildVocabulary).
//   - BM_MaskReplay: a fixed replay of valid documents token by token through
//     a fresh TokenConstraint: per token, apply() (mask, cached or computed,
//     and the logits write) plus accept(). Lazily filled caches count: the
//     replay starts cold. Counters p50_ms / p99_ms / max_ms per token.
// The model file only supplies the tokenizer: $SMOL_BENCH_MODEL (e.g. the
// 3B-shaped file from `smol-make-model --preset 3b --tokenizer-from
// ../shared/fixtures/tiny-q4km.gguf`), else the tiny-q4km fixture, which has
// the same vocabulary.
#include <benchmark/benchmark.h>
#include <smol/constrain/constraint.hpp>
#include <smol/model/model.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

std::string model_path() {
    if (const char* env = std::getenv("SMOL_BENCH_MODEL")) return env;
    std::string dir;
    if (const char* env = std::getenv("SMOL_FIXTURES")) {
        dir = env;
    } else {
        const std::string src = __FILE__;  // .../benchmarks/bench_constrain.cpp
        dir = src.substr(0, src.rfind('/')) + "/../../shared/fixtures";
    }
    return dir + "/tiny-q4km.gguf";
}

const smol::Model& model() {
    static std::shared_ptr<const smol::Model> m = smol::Model::load(model_path());
    return *m;
}

std::shared_ptr<const smol::TokenVocabulary> vocabulary() {
    static auto v = std::make_shared<const smol::TokenVocabulary>(model().tokenizer());
    return v;
}

// Twenty properties of the kinds tool arguments use.
const char* kSchema20 = R"({
  "type": "object",
  "properties": {
    "id": {"type": "integer", "minimum": 0, "maximum": 1000000},
    "name": {"type": "string", "maxLength": 32},
    "email": {"type": "string", "maxLength": 48},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "score": {"type": "number"},
    "active": {"type": "boolean"},
    "role": {"enum": ["admin", "editor", "viewer", "guest"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 5},
    "created": {"type": "string", "format": "date"},
    "city": {"type": "string", "maxLength": 24},
    "country": {"type": "string", "maxLength": 24},
    "zip": {"type": "string", "maxLength": 10},
    "phone": {"type": ["string", "null"], "maxLength": 20},
    "level": {"type": "integer", "minimum": 1, "maximum": 10},
    "ratio": {"type": "number", "minimum": 0, "maximum": 1},
    "notes": {"type": "string", "maxLength": 64},
    "manager": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 32},
                "id": {"type": "integer"}}, "required": ["name"]},
    "skills": {"type": "array", "items": {"enum": ["c++", "python", "rust", "go"]}, "maxItems": 4},
    "verified": {"type": "boolean"},
    "status": {"const": "ok"}
  },
  "required": ["id", "name", "email", "age", "role", "created", "status"]
})";

// Valid documents for kSchema20, varied in content and layout.
std::vector<std::string> documents(size_t n) {
    static const char* words[] = {"Ada",   "Lovelace", "Grace", "Hopper", "Zürich", "東京",
                                  "north", "river",    "stone", "amber",  "quill",  "ember"};
    std::mt19937 rng(11);
    auto word = [&] { return std::string(words[rng() % 12]); };
    std::vector<std::string> docs;
    for (size_t i = 0; i < n; ++i) {
        const bool pretty = i % 2 == 1;
        const std::string sep = pretty ? ",\n  " : ", ";
        std::string d = pretty ? "{\n  " : "{";
        d += "\"id\": " + std::to_string(rng() % 1000000) + sep;
        d += "\"name\": \"" + word() + " " + word() + "\"" + sep;
        d += "\"email\": \"" + word() + "." + word() + "@example.org\"" + sep;
        d += "\"age\": " + std::to_string(rng() % 100) + sep;
        d += "\"score\": " + std::to_string(rng() % 1000) + "." + std::to_string(rng() % 100) + sep;
        d += std::string("\"active\": ") + (rng() % 2 ? "true" : "false") + sep;
        d += "\"role\": \"" + std::string(rng() % 2 ? "editor" : "viewer") + "\"" + sep;
        d += "\"tags\": [\"" + word() + "\", \"" + word() + "\"]" + sep;
        d += "\"created\": \"2026-" + std::string(rng() % 2 ? "03" : "11") + "-1" +
             std::to_string(rng() % 10) + "\"" + sep;
        d += "\"city\": \"" + word() + "\"" + sep;
        d += "\"country\": \"" + word() + "\"" + sep;
        d += "\"zip\": \"" + std::to_string(10000 + rng() % 80000) + "\"" + sep;
        d += std::string("\"phone\": ") + (rng() % 2 ? "null" : "\"+41 44 123\"") + sep;
        d += "\"level\": " + std::to_string(1 + rng() % 10) + sep;
        d += "\"ratio\": 0." + std::to_string(rng() % 1000) + sep;
        d += "\"notes\": \"" + word() + " met " + word() + " by the " + word() + "\"" + sep;
        d += "\"manager\": {\"name\": \"" + word() + "\", \"id\": " + std::to_string(rng() % 99) +
             "}" + sep;
        d += "\"skills\": [\"rust\", \"c++\"]" + sep;
        d += std::string("\"verified\": ") + (rng() % 2 ? "true" : "false") + sep;
        d += "\"status\": \"ok\"";
        d += pretty ? "\n}" : "}";
        docs.push_back(std::move(d));
    }
    return docs;
}

std::shared_ptr<smol::TokenMasker> compile_schema20() {
    auto grammar = std::make_shared<const smol::Grammar>(
        smol::Grammar::parse(smol::json_schema_to_grammar(kSchema20)));
    return std::make_shared<smol::TokenMasker>(std::move(grammar), vocabulary());
}

void BM_BuildVocabulary(benchmark::State& state) {
    for (auto _ : state) {
        smol::TokenVocabulary v(model().tokenizer());
        benchmark::DoNotOptimize(v.short_tokens().nodes.size() + v.long_tokens().nodes.size());
    }
    state.SetLabel("token trie of " + std::to_string(model().tokenizer().vocab_size()) + " ids");
}
BENCHMARK(BM_BuildVocabulary)->Unit(benchmark::kMillisecond);

void BM_CompileSchema20(benchmark::State& state) {
    vocabulary();  // built once per generator, not per schema
    for (auto _ : state) benchmark::DoNotOptimize(compile_schema20());
}
BENCHMARK(BM_CompileSchema20)->Unit(benchmark::kMillisecond);

void BM_MaskReplay(benchmark::State& state) {
    const smol::Tokenizer& tokenizer = model().tokenizer();
    std::vector<std::vector<int32_t>> docs;
    for (const std::string& d : documents(size_t(state.range(0))))
        docs.push_back(tokenizer.encode(d, /*parse_special=*/false));
    std::vector<float> logits(size_t(tokenizer.vocab_size()), 0.0f);
    std::vector<double> times;
    for (auto _ : state) {
        times.clear();
        smol::TokenConstraint constraint(compile_schema20());  // cold caches
        const auto start = std::chrono::steady_clock::now();
        for (const auto& doc : docs) {
            constraint.reset();
            for (int32_t token : doc) {
                const auto t0 = std::chrono::steady_clock::now();
                smol::detail::ok_or_fail(constraint.apply(logits.data(), logits.size()));
                smol::detail::ok_or_fail(constraint.accept(token));
                times.push_back(
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count());
            }
        }
        state.SetIterationTime(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    state.counters["tokens"] = double(times.size());
    state.counters["p50_ms"] = times[times.size() / 2];
    state.counters["p99_ms"] = times[times.size() * 99 / 100];
    state.counters["max_ms"] = times.back();
    // Tokens whose mask was computed rather than found (a whole trie walk for a
    // broad state costs ~1 ms; cached masks cost ~0.05 ms).
    state.counters["over_0.5ms"] =
        double(times.end() - std::lower_bound(times.begin(), times.end(), 0.5));
}
BENCHMARK(BM_MaskReplay)->Arg(20)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
