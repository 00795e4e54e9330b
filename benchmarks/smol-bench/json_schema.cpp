// smol-bench --json-schema FILE: the end-to-end cost of structured output.
// One generator, the same prompt, greedy; the free run ignores eos and makes
// -n tokens, the constrained one stops when the document is complete (or at
// -n). Decode t/s counts sampling, masks and forward passes
// (GenerateResult::decode_ms); runs alternate so drift cancels.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "bench.hpp"

namespace smol_bench {

nlohmann::json json_schema_cost(const Options& args,
                                const std::shared_ptr<const smol::Model>& model) {
    const smol::Config& config = model->config();
    const std::string& json_schema_path = args.json_schema_path;
    const long n_gen = args.n_gen, repeats = args.repeats;
    std::ifstream in(json_schema_path, std::ios::binary);
    if (!in) throw std::invalid_argument("--json-schema: cannot read " + json_schema_path);
    const std::string schema((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
    smol::GeneratorOptions options;
    options.n_ctx = std::min(size_t(64 + n_gen), config.context_length);
    smol::Generator gen(model, options);
    const std::string prompt = "Describe a person as JSON:";
    std::vector<double> free_rates, schema_rates, schema_tokens;
    int schema_complete = 0;
    for (long r = 0; r < repeats; ++r) {
        for (int constrained = 0; constrained < 2; ++constrained) {
            smol::GenerateParams p;
            p.temperature = 0;
            p.max_tokens = int(n_gen);
            if (constrained) {
                p.json_schema = schema;
            } else {
                p.ignore_eos = true;
            }
            const smol::GenerateResult result = gen.generate(prompt, p);
            if (constrained) {
                schema_rates.push_back(result.decode_tokens_per_s());
                schema_tokens.push_back(double(result.tokens.size()));
                schema_complete += result.stop_reason == smol::StopReason::eos;
            } else {
                free_rates.push_back(result.decode_tokens_per_s());
            }
        }
    }
    const Stats free_stats = stats_of(free_rates), schema_stats = stats_of(schema_rates);
    const double ratio = free_stats.mean > 0 ? schema_stats.mean / free_stats.mean : 0;
    std::printf(
        "\njson schema decode (%s, greedy, %ld runs each, interleaved):\n"
        "  free   %8.2f ± %.2f t/s (%ld tokens, ignore_eos)\n"
        "  schema %8.2f ± %.2f t/s (%.0f tokens on average, %d/%ld complete)\n"
        "  ratio  %8.3f (target >= 0.95)\n",
        json_schema_path.c_str(), repeats, free_stats.mean, free_stats.stddev, n_gen,
        schema_stats.mean, schema_stats.stddev, stats_of(schema_tokens).mean, schema_complete,
        repeats, ratio);
    std::fflush(stdout);
    return {{"free_tokens_per_s", free_stats.mean},
            {"schema_tokens_per_s", schema_stats.mean},
            {"ratio", ratio},
            {"free_runs", free_rates},
            {"schema_runs", schema_rates},
            {"schema_tokens", schema_tokens}};
}

}  // namespace smol_bench
