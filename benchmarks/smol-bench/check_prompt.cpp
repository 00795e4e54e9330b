// smol-bench --check-prompt TEXT: instead of the benchmark, the greedy ids of
// TEXT (prompt, then -n tokens), comparable with smol-generate's --temp 0 --json.
#include <cstdio>
#include <stdexcept>

#include "bench.hpp"

namespace smol_bench {
namespace {

std::string join_ids(const std::vector<int32_t>& ids) {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) out += ' ';
        out += std::to_string(ids[i]);
    }
    return out;
}

}  // namespace

int check_prompt(const Options& options, const smol::LoadOptions& load_options,
                 const smol::ForwardOptions& forward_options) {
    const std::string& model_path = options.model_path;
    const std::string& text = *options.check_prompt;
    const long n_gen = options.n_gen, n_ctx_arg = options.n_ctx;
    const bool json = options.json;
    auto run = [&](const smol::Model& model, smol::BackendCache& cache, const int32_t* tokens,
                   size_t n, size_t start, std::vector<float>& out) {
        run_forward(model, cache, tokens, n, start, out, forward_options);
    };
    auto model = smol::Model::load(model_path, load_options);
    const smol::Tokenizer& tokenizer = model->tokenizer();
    std::vector<int32_t> prompt;
    if (tokenizer.add_bos() && tokenizer.bos_id()) prompt.push_back(*tokenizer.bos_id());
    tokenizer.encode(text, /*parse_special=*/true, prompt);
    if (prompt.empty()) throw std::invalid_argument("--check-prompt: the text has no tokens");
    const size_t need = prompt.size() + size_t(n_gen);
    const auto cache = model->backend().make_cache(
        n_ctx_arg
            ? size_t(n_ctx_arg)
            : std::min(model->config().context_length,
                       std::max(std::min<size_t>(4096, model->config().context_length), need)));
    smol::BackendCache& kv = *cache;
    std::vector<float> logits(model->config().vocab_size);
    run(*model, kv, prompt.data(), prompt.size(), 0, logits);
    std::vector<int32_t> generated;
    while (generated.size() < size_t(n_gen)) {
        const int32_t token = argmax(logits);
        generated.push_back(token);
        if (tokenizer.is_end_of_generation(token) || kv.size() >= kv.n_ctx()) break;
        if (generated.size() >= size_t(n_gen)) break;
        run(*model, kv, &token, 1, kv.size(), logits);
    }
    if (json) {
        nlohmann::json out;
        out["prompt_ids"] = prompt;
        out["generated_ids"] = generated;
        std::printf("%s\n", out.dump().c_str());
    } else {
        std::printf("prompt ids (%zu): %s\n", prompt.size(), join_ids(prompt).c_str());
        std::printf("generated ids (%zu): %s\n", generated.size(), join_ids(generated).c_str());
    }
    return 0;
}

}  // namespace smol_bench
