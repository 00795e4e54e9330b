// smol::Model: a loaded SmolLM3 GGUF file, the public face of the model layer.
// One Model (weights mapped once, tokenizer, thread pool) is shared by any
// number of sessions, each with its own KVCache:
//
//   auto model = smol::Model::load("model.gguf");
//   smol::KVCache kv = model->new_cache();   // n_ctx = min(4096, context length)
//   std::vector<float> logits(model->config().vocab_size);
//   auto ids = model->tokenizer().encode("Hello", true);
//   model->forward(ids.data(), ids.size(), 0, kv, logits.data());
//
// Loading: maps the file (or borrows the caller's buffer), reads and validates
// the Config, binds every tensor by name (zero-copy), builds the tokenizer and
// starts the thread pool. Errors are smol::Error naming the file, key or
// tensor; LoadOptions::progress returning false cancels with Error(cancelled).
// forward() is SmolLM3::forward (model/smollm3.hpp) on the model's pool.
//
// Backends (model/backend.hpp): the Model owns the backend its generators run
// on, chosen at load by LoadOptions::device: cpu (a CpuBackend over the same
// SmolLM3 and pool), cuda (a CudaModel, cuda/backend.hpp: the weights uploaded
// once; needs a unit linked against smol::cuda, so SMOL_CUDA_ENABLED, and a
// device, else Error(unsupported)), or automatic (cuda when both exist and the
// GPU can run the file, else cpu; LoadOptions::log says which and why). backend() is that choice;
// forward()/new_cache() stay on the CPU whatever was chosen (a KVCache is a CPU
// cache), for the tests and tools that drive the network directly.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "../core/threadpool.hpp"
#include "../detail/checked.hpp"
#include "../error.hpp"
#include "../gguf/gguf.hpp"
#include "../cuda/backend.hpp"
#include "../text/tokenizer.hpp"
#include "backend.hpp"
#include "config.hpp"
#include "kv_cache.hpp"
#include "smollm3.hpp"
#include "weights.hpp"

SMOL_NAMESPACE_BEGIN

struct LoadOptions {
    int n_threads = 0;  // 0 = hardware threads, capped at physical cores
    // Kernel level (kernels/cpu.hpp). automatic: SMOL_CPU from the environment,
    // else the best this CPU runs. Naming a level forces it (for comparisons and
    // tests); one the CPU cannot run is Error(invalid_argument).
    CpuLevel cpu = CpuLevel::automatic;
    // Bytes that one allocation sized by the file or a caller may take (a KV
    // cache, the tokenizer's tables): past it, Error(resource) naming the size,
    // before anything is allocated. 0: the machine's physical memory.
    uint64_t memory_budget = 0;
    // Where generators run (model/backend.hpp): cpu, cuda (Error(unsupported)
    // without CUDA support or a device) or automatic (cuda if possible, else
    // cpu; the log says which). cuda_device picks the GPU.
    Device device = Device::cpu;
    int cuda_device = 0;
    std::function<bool(float progress)> progress;  // 0..1; return false cancels the load
    std::function<void(int level, const std::string& msg)> log;  // level: 0 info, 1 warning
};

namespace detail {

// Physical cores (hyper-threads share a core's vector units, so more threads
// than cores rarely helps mat-vecs). Linux: distinct (package, core) pairs in
// /proc/cpuinfo; elsewhere, or if that fails, the hardware thread count.
inline int physical_core_count() {
    const int logical = int(std::max(1u, std::thread::hardware_concurrency()));
#if defined(__linux__)
    if (std::FILE* f = std::fopen("/proc/cpuinfo", "r")) {
        std::set<std::pair<int, int>> cores;
        char line[512];
        int package = 0;
        while (std::fgets(line, sizeof line, f)) {
            int value = 0;
            if (std::sscanf(line, "physical id : %d", &value) == 1) package = value;
            else if (std::sscanf(line, "core id : %d", &value) == 1) cores.insert({package, value});
        }
        std::fclose(f);
        if (!cores.empty()) return std::max(1, std::min(logical, int(cores.size())));
    }
#endif
    return logical;
}

// FNV-1a, 64-bit.
inline uint64_t fnv1a(const uint8_t* data, size_t n, uint64_t hash = 0xcbf29ce484222325ull) noexcept {
    for (size_t i = 0; i < n; ++i) hash = (hash ^ data[i]) * 0x100000001b3ull;
    return hash;
}

}  // namespace detail

class Model {
public:
    // An allocation that fails while loading is Error(resource); nothing half
    // built is left behind.
    static std::shared_ptr<const Model> load(const std::string& path, const LoadOptions& options = {}) {
        return detail::translate_bad_alloc("model: loading " + path, [&] {
            report(options, 0.0f);
            std::shared_ptr<const gguf::File> file = gguf::File::open(path);
            return std::shared_ptr<const Model>(new Model(std::move(file), options));
        });
    }

    // The caller keeps the buffer alive (and unchanged) as long as the Model lives.
    static std::shared_ptr<const Model> load_from_memory(const void* data, size_t size,
                                                         const LoadOptions& options = {}) {
        return detail::translate_bad_alloc("model: loading from memory", [&] {
            report(options, 0.0f);
            std::shared_ptr<const gguf::File> file = gguf::File::from_buffer(data, size);
            return std::shared_ptr<const Model>(new Model(std::move(file), options));
        });
    }

    const Config& config() const noexcept { return net_.config(); }
    const Tokenizer& tokenizer() const noexcept { return tokenizer_; }
    const gguf::File& file() const noexcept { return net_.file(); }
    const Weights& weights() const noexcept { return net_.weights(); }
    const SmolLM3& network() const noexcept { return net_; }

    // The kernel level every op of this model runs with, e.g. CpuLevel::avx2
    // (cpu_level_name() gives "avx2").
    CpuLevel cpu_level() const noexcept { return net_.kernels().level; }
    const kernels::KernelSet& kernels() const noexcept { return net_.kernels(); }

    // "smollm3-" + 16 hex digits: FNV-1a of the file's header, metadata and
    // tensor table (everything before the tensor data) and its size. Two files
    // with the same identity have the same config, vocabulary and tensor layout.
    const std::string& identity() const noexcept { return identity_; }

    // Shared by every generator on this model; jobs from different callers queue.
    ThreadPool& thread_pool() const noexcept { return *pool_; }

    // The backend generators run on (LoadOptions::device), and the CPU one,
    // which always exists.
    const Backend& backend() const noexcept {
        if (device_backend_) return *device_backend_;
        return cpu_;
    }
    const CpuBackend& cpu_backend() const noexcept { return cpu_; }
    Device device() const noexcept { return backend().device(); }

    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    // A cache for this model: n_ctx defaults to min(4096, context length); 0 or more
    // than the context length is Error(invalid_argument).
    // Its size is checked against LoadOptions::memory_budget (Error(resource)).
    KVCache new_cache(size_t n_ctx = KVCache::kDefaultSize, KVType type = KVType::f16) const {
        return KVCache(config(), n_ctx, type, memory_budget_);
    }

    // LoadOptions::memory_budget as given at load (0: physical memory).
    uint64_t memory_budget() const noexcept { return memory_budget_; }

    // Runs tokens [n] at positions start_pos.. through the model, appending K/V to kv;
    // writes the logits of the last position ([vocab]) or of all ([n][vocab]) to logits.
    // Errors and cancellation: see model/smollm3.hpp; a failed allocation is
    // Error(resource) (Backend::forward, model/backend.hpp).
    void forward(const int32_t* tokens, size_t n, size_t start_pos, KVCache& kv, float* logits,
                 const ForwardOptions& options = {}) const {
        net_.forward(tokens, n, start_pos, kv, logits, *pool_, options);
    }

private:
    Model(std::shared_ptr<const gguf::File> file, const LoadOptions& options)
        : net_(bound(file, options)), tokenizer_(Tokenizer::from_gguf(file)),
          memory_budget_(options.memory_budget),
          pool_(std::make_unique<ThreadPool>(options.n_threads > 0 ? options.n_threads
                                                                   : detail::physical_core_count())),
          cpu_(net_, *pool_) {
        report(options, 0.8f);
        if (size_t(tokenizer_.vocab_size()) != net_.config().vocab_size)
            detail::fail(ErrorKind::shape, "model: " + file->source() + ": the tokenizer has " +
                                               std::to_string(tokenizer_.vocab_size()) +
                                               " tokens, the model " +
                                               std::to_string(net_.config().vocab_size));
        const uint64_t size = file->size();
        uint64_t hash = detail::fnv1a(file->bytes(), file->data_offset());
        hash = detail::fnv1a(reinterpret_cast<const uint8_t*>(&size), sizeof size, hash);
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
        identity_ = "smollm3-" + std::string(hex);
        const int threads = pool_->size();
        if (options.log)
            options.log(0, "smol: loaded " + file->source() + " (" +
                               std::to_string(net_.config().n_layers) + " layers, hidden " +
                               std::to_string(net_.config().hidden) + ", " + std::to_string(threads) +
                               " threads, " + cpu_level_name(cpu_level()) + " kernels)");
        choose_device(options);
        report(options, 1.0f);
    }

    void choose_device(const LoadOptions& options) {
        if (options.device != Device::cpu && options.device != Device::cuda && options.device != Device::automatic)
            detail::fail(ErrorKind::invalid_argument, "model: unknown LoadOptions::device");
        std::string why;
        if (options.device == Device::cpu) {
            why = "asked for";
        } else if (cuda_available(&why)) {
            // automatic falls back to the CPU when the GPU cannot run this file
            // (Error(unsupported): a matrix type or head size the kernels lack).
            ErrorInfo error;
            if (try_call([&] { device_backend_ = std::make_unique<CudaModel>(net_, options.cuda_device); }, &error))
                why = options.device == Device::cuda ? "asked for" : "auto: a CUDA device exists";
            else if (options.device == Device::automatic && error.kind == ErrorKind::unsupported)
                why = "auto: " + error.message;
            else
                detail::fail(error.kind, error.message);
        } else if (options.device == Device::cuda) {
            detail::fail(ErrorKind::unsupported, "model: device cuda was asked for, but " + why);
        } else {
            why = "auto: " + why;
        }
        if (options.log) options.log(0, "smol: device " + backend().name() + " (" + why + ")");
    }

    static SmolLM3 bound(const std::shared_ptr<const gguf::File>& file, const LoadOptions& options) {
        report(options, 0.2f);
        const kernels::KernelSet& kernel_set = options.cpu == CpuLevel::automatic
                                                   ? kernels::default_kernels()
                                                   : kernels::kernel_set(options.cpu);
        SmolLM3 net(file, kernel_set);
        report(options, 0.6f);
        return net;
    }

    static void report(const LoadOptions& options, float progress) {
        if (options.progress && !options.progress(progress))
            detail::fail(ErrorKind::cancelled, "model: loading cancelled");
    }

    SmolLM3 net_;
    Tokenizer tokenizer_;
    uint64_t memory_budget_ = 0;
    std::string identity_;
    std::unique_ptr<ThreadPool> pool_;
    CpuBackend cpu_;                           // over net_ and *pool_
    std::unique_ptr<Backend> device_backend_;  // null: cpu_
};

SMOL_NAMESPACE_END
