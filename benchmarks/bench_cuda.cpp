// CUDA throughput: pp512 (one 512-token prefill, best of 3 after a warm-up)
// and tg128 (128 greedy decode steps through the captured decode graph) of
// the CudaBackend on the first device, printed, never asserted. Built only with
// SMOL_CUDA=ON. For a whole Generator on the GPU, use smol-bench --device cuda.
//   bench_cuda path/to/SmolLM3-3B-Q4_K_M.gguf   (or SMOL_CUDA_BENCH_MODEL=path)
#include <smol/cuda/backend.hpp>
#include <smol/smol.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

int run(const char* model_path) {
    const auto model = smol::Model::load(model_path);
    smol::CudaBackend gpu(*model);
    const size_t vocab = gpu.vocab_size();
    smol::CudaKVCache kv(gpu, 1024);
    std::vector<int32_t> prompt(512);
    std::mt19937 rng(7);
    for (int32_t& id : prompt) id = int32_t(rng() % vocab);
    std::vector<float> logits(vocab);
    using clock = std::chrono::steady_clock;
    gpu.forward(prompt.data(), prompt.size(), 0, kv, logits.data());  // warm-up (and graph-free)
    double best_pp = 0;
    for (int rep = 0; rep < 3; ++rep) {
        const auto t0 = clock::now();
        gpu.forward(prompt.data(), prompt.size(), 0, kv, logits.data());
        const double s = std::chrono::duration<double>(clock::now() - t0).count();
        best_pp = std::max(best_pp, 512.0 / s);
    }
    int32_t next = 0;
    gpu.forward(&next, 1, 512, kv, logits.data());  // captures the decode graph
    const auto t0 = clock::now();
    for (size_t i = 0; i < 128; ++i) {
        next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        gpu.forward(&next, 1, 513 + i, kv, logits.data());
    }
    const double tg = 128.0 / std::chrono::duration<double>(clock::now() - t0).count();
    std::printf("cuda %s: %s: weights %.1f MiB\n", gpu.device_name().c_str(), model_path,
                gpu.weight_bytes() / 1048576.0);
    std::printf("smol-cuda-bench: device=\"%s\" pp512=%.1f tok/s tg128=%.1f tok/s\n",
                gpu.device_name().c_str(), best_pp, tg);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const char* model_path = argc > 1 ? argv[1] : std::getenv("SMOL_CUDA_BENCH_MODEL");
    if (!model_path || !*model_path) {
        std::fprintf(stderr, "usage: bench_cuda MODEL.gguf (or set SMOL_CUDA_BENCH_MODEL)\n");
        return 2;
    }
    std::string why;
    if (!smol::cuda_available(&why)) {
        std::fprintf(stderr, "bench_cuda: skipped, no usable CUDA device: %s\n", why.c_str());
        return 77;  // the conventional "skipped" status
    }
    try {
        return run(model_path);
    } catch (const smol::Error& e) {
        std::fprintf(stderr, "bench_cuda: %s\n", e.what());
        return 1;
    }
}
