// smol-bench --step-rows N[,N...]: one batched decode step straight on the
// backend, N sequences of one token each (each after its own prompt): what a
// step of N rows costs against one of fewer.
#include <cstdio>

#include "bench.hpp"

namespace smol_bench {

nlohmann::json step_rows(const Options& args, const std::shared_ptr<const smol::Model>& model,
                         const smol::ForwardOptions& forward_options, RandomIds& random_ids) {
    const std::vector<long>& step_rows = args.step_rows;
    const long repeats = args.repeats;
    const size_t vocab = model->config().vocab_size;
    auto run = [&](const smol::Model& m, smol::BackendCache& cache, const int32_t* tokens, size_t n,
                   size_t start, std::vector<float>& out) {
        run_forward(m, cache, tokens, n, start, out, forward_options);
    };
    constexpr size_t kStepPrompt = 64, kStepsPerRun = 8;
    std::printf(
        "\nbatched decode steps on the backend: N sequences, each after a %zu-token "
        "prompt, one token each; median of %ld x %zu steps [min-max]; the "
        "backend's row group (batch_rows): %zu\n\n",
        kStepPrompt, repeats, kStepsPerRun, model->backend().batch_rows());
    std::printf("| rows | step ms | rows/s |\n|---|---|---|\n");
    nlohmann::json step_rows_json = nlohmann::json::array();
    for (const long n_rows : step_rows) {
        const size_t n = size_t(n_rows);
        const size_t positions = kStepPrompt + size_t(repeats) * kStepsPerRun + 1;
        std::vector<std::unique_ptr<smol::BackendCache>> caches;
        std::vector<std::vector<float>> step_logits(n, std::vector<float>(vocab));
        for (size_t i = 0; i < n; ++i) {
            caches.push_back(model->backend().make_cache(positions));
            const std::vector<int32_t> prompt = random_ids(kStepPrompt);
            run(*model, *caches[i], prompt.data(), prompt.size(), 0, step_logits[i]);
        }
        const std::vector<int32_t> next = random_ids(n);
        std::vector<smol::Segment> segments(n);
        std::vector<double> step_ms;
        for (size_t step = 0; step < size_t(repeats) * kStepsPerRun; ++step) {
            for (size_t i = 0; i < n; ++i) {
                segments[i].tokens = &next[i];
                segments[i].n_tokens = 1;
                segments[i].start = caches[i]->size();
                segments[i].cache = caches[i].get();
                segments[i].logits = step_logits[i].data();
            }
            const auto t0 = Clock::now();
            model->backend().forward(segments.data(), n, forward_options);
            step_ms.push_back(ms_between(t0, Clock::now()));
        }
        const Spread ms = spread_of(step_ms);
        std::printf("| %zu | %.2f [%.2f-%.2f] | %.1f |\n", n, ms.median, ms.min, ms.max,
                    1000.0 * double(n) / ms.median);
        step_rows_json.push_back({{"rows", n},
                                  {"step_ms", spread_json(ms, step_ms)},
                                  {"rows_per_s", 1000.0 * double(n) / ms.median}});
    }
    std::fflush(stdout);
    return step_rows_json;
}

}  // namespace smol_bench
