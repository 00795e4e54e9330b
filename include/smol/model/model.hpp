// smol::Model: a loaded SmolLM3 GGUF file, the public face of the model layer.
// One Model (weights mapped once, tokenizer, thread pool) is shared by any
// number of sessions, each with its own KVCache:
//
//   auto model = smol::Model::load("model.gguf");
//   smol::KVCache kv = model->make_cache();   // n_ctx = min(4096, context length)
//   std::vector<float> logits(model->config().vocab_size);
//   auto ids = model->tokenizer().encode("Hello", true);
//   model->forward(ids.data(), ids.size(), 0, kv, logits.data());
//
// Loading: maps the file (or borrows the caller's buffer), reads and validates
// the Config, binds every tensor by name (zero-copy), builds the tokenizer and
// starts the thread pool. Errors name the file, key or tensor: try_load returns
// them as a value, load throws them as smol::Error; LoadOptions::progress
// returning false cancels with Error(cancelled).
//
// Backends (model/backend.hpp): the Model owns the backend its generators run
// on, chosen at load by LoadOptions::device: cpu (a CpuBackend over the same
// SmolLM3 and pool), cuda (the backend LoadOptions::device_backend makes: for
// CUDA, smol::cuda_backend() from cuda/backend.hpp in a program linked with
// smol::cuda; no factory or no device is Error(unsupported)), or automatic
// (the device backend when a factory was given, a device exists and it can run
// the file, else cpu; LoadOptions::log says which and why). This header
// includes no device header: a CPU-only program compiles no GPU code.
// backend() is that choice; forward()/make_cache() stay on the CPU whatever
// was chosen (a KVCache is a CPU cache), for the tests and tools that drive
// the network directly: forward() is the CPU backend's Backend::forward over
// one segment, so it checks and chunks exactly as generators do.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "../core/threadpool.hpp"
#include "../detail/checked.hpp"
#include "../detail/fnv.hpp"
#include "../error.hpp"
#include "../gguf/gguf.hpp"
#include "../kernels/tune.hpp"
#include "../log.hpp"
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
    // without a device_backend or a device) or automatic (the device backend if
    // possible, else cpu; the log says which). cuda_device picks the GPU.
    Device device = Device::cpu;
    int cuda_device = 0;
    // The GPU backend's factory, for device cuda / automatic: in a program
    // linked with smol::cuda, smol::cuda_backend() (cuda/backend.hpp). Empty:
    // the CPU only.
    DeviceBackendFactory device_backend;
    // On the CPU, move the matrices the kernel level has interleaved tiles for
    // (KernelSet::interleaves: Q4_K and Q5_K at avx512 / amx; the 32-weight
    // formats and IQ4_XS at every x86 level) into the interleaved
    // layout at load (SmolLM3::interleave_weights): decode streams them
    // faster, the results are the same bits. The load takes longer (the whole
    // matrix bytes are read once), and the weights then live in the process's
    // memory instead of the page cache (two models of one file no longer share
    // them). Skipped, with a log line, when they do not fit memory_budget.
    bool interleave_weights = true;
    // The kernels' speed-only settings (kernels::KernelParams: pacing, prefetch
    // distances, chunks per thread), which give the same bits whatever they
    // are. automatic: measured at load on the model's own matrices (a few
    // hundred ms, kernels/tune.hpp) for models of at least
    // kernels::kTuneMinWeightBytes of weights, the defaults for smaller ones;
    // on: measured whatever the size; off: the defaults. SMOL_TUNE=off in the
    // environment turns it off. The log and Model::tuning() say what was chosen.
    TuneMode tune = TuneMode::automatic;
    // Pins the settings instead of measuring them (tune is then ignored): each
    // field one of its candidates (kernels/kernel_set.hpp), else
    // Error(invalid_argument).
    std::optional<kernels::KernelParams> kernel_params;
    // A small text file where tuned settings are remembered per CPU model,
    // kernel level and thread count (kernels/tune.hpp); empty: none. When it
    // holds this machine's line, the load uses it instead of measuring; after
    // measuring, the load writes it. A file that is not one of these files is
    // ignored with a log warning (and rewritten after the measurement).
    std::string tune_file;
    std::function<bool(float progress)> progress;  // 0..1; return false cancels the load
    LogCallback log;                               // LogLevel (log.hpp): log_info, log_warning
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
            if (std::sscanf(line, "physical id : %d", &value) == 1)
                package = value;
            else if (std::sscanf(line, "core id : %d", &value) == 1)
                cores.insert({package, value});
        }
        std::fclose(f);
        if (!cores.empty()) return std::max(1, std::min(logical, int(cores.size())));
    }
#endif
    return logical;
}

}  // namespace detail

class Model {
public:
    // Loads a model file. try_load returns every error as a value (the file,
    // its metadata, tensors and vocabulary, the options, a cancelled load and,
    // with exceptions, a failed allocation as Error(resource)); load throws
    // it. Nothing half built is left behind.
    static Expected<std::shared_ptr<const Model>> try_load(const std::string& path,
                                                           const LoadOptions& options = {}) {
        return detail::catch_bad_alloc(
            "model: loading " + path, [&]() -> Expected<std::shared_ptr<const Model>> {
                SMOL_TRY(report(options, 0.0f));
                SMOL_TRY_ASSIGN(std::shared_ptr<const gguf::File> file, gguf::File::try_open(path));
                return create(std::move(file), options);
            });
    }
    static std::shared_ptr<const Model> load(const std::string& path,
                                             const LoadOptions& options = {}) {
        return detail::value_or_fail(try_load(path, options));
    }

    // The caller keeps the buffer alive (and unchanged) as long as the Model lives.
    static Expected<std::shared_ptr<const Model>> try_load_from_memory(
        const void* data, size_t size, const LoadOptions& options = {}) {
        return detail::catch_bad_alloc("model: loading from memory",
                                       [&]() -> Expected<std::shared_ptr<const Model>> {
                                           SMOL_TRY(report(options, 0.0f));
                                           SMOL_TRY_ASSIGN(std::shared_ptr<const gguf::File> file,
                                                           gguf::File::try_from_buffer(data, size));
                                           return create(std::move(file), options);
                                       });
    }
    static std::shared_ptr<const Model> load_from_memory(const void* data, size_t size,
                                                         const LoadOptions& options = {}) {
        return detail::value_or_fail(try_load_from_memory(data, size, options));
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
    // How kernels().params were chosen at load (LoadOptions::tune): measured,
    // with the times per candidate, or why the defaults (or the pinned ones) were kept.
    const kernels::TuneReport& tuning() const noexcept { return tuning_; }

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

    // A CPU cache for forward(): n_ctx kDefaultSize picks min(4096, context
    // length); 0 or more than the context length is Error(invalid_argument);
    // its size is checked against LoadOptions::memory_budget (Error(resource)).
    // Generators make theirs through backend().make_cache (model/backend.hpp).
    Expected<KVCache> try_make_cache(size_t n_ctx = KVCache::kDefaultSize,
                                     KVType type = KVType::f16) const {
        return KVCache::try_create(config(), n_ctx, type, memory_budget_);
    }
    KVCache make_cache(size_t n_ctx = KVCache::kDefaultSize, KVType type = KVType::f16) const {
        return detail::value_or_fail(try_make_cache(n_ctx, type));
    }

    // LoadOptions::memory_budget as given at load (0: physical memory).
    uint64_t memory_budget() const noexcept { return memory_budget_; }

    // Runs tokens [n] at positions start_pos.. through the model on the CPU,
    // appending K/V to kv; writes the logits of the last position ([vocab]) or
    // of all ([n][vocab], options.all_logits) to logits. The CPU backend's
    // Backend::forward over one segment: its checks and chunking (see
    // model/backend.hpp); cancellation as in model/smollm3.hpp; a failed
    // allocation is Error(resource). try_forward returns those errors as a value.
    Status try_forward(const int32_t* tokens, size_t n, size_t start_pos, KVCache& kv,
                       float* logits, const ForwardOptions& options = {}) const {
        return cpu_.try_forward(Segment{tokens, n, start_pos, &kv, logits, options.all_logits},
                                options);
    }
    void forward(const int32_t* tokens, size_t n, size_t start_pos, KVCache& kv, float* logits,
                 const ForwardOptions& options = {}) const {
        detail::ok_or_fail(try_forward(tokens, n, start_pos, kv, logits, options));
    }

private:
    Model(SmolLM3 net, Tokenizer tokenizer, const LoadOptions& options, int threads)
        : net_(std::move(net)),
          tokenizer_(std::move(tokenizer)),
          memory_budget_(options.memory_budget),
          pool_(std::make_unique<ThreadPool>(threads)),
          cpu_(net_, *pool_) {}

    // The steps of a load after the file is parsed, in order, each reporting
    // progress: the network (config, weights, kernels), the tokenizer, the
    // thread pool, the checks between them, the device.
    static Expected<std::shared_ptr<const Model>> create(std::shared_ptr<const gguf::File> file,
                                                         const LoadOptions& options) {
        SMOL_TRY(report(options, 0.2f));
        SMOL_TRY_ASSIGN(const kernels::KernelSet* kernel_set, kernels_for(options));
        SMOL_TRY_ASSIGN(SmolLM3 net, SmolLM3::try_create(file, *kernel_set));
        SMOL_TRY(report(options, 0.6f));
        SMOL_TRY_ASSIGN(Tokenizer tokenizer, Tokenizer::try_from_gguf(file));
        const int threads =
            options.n_threads > 0 ? options.n_threads : detail::physical_core_count();
        SMOL_TRY(ThreadPool::check_size(threads));
        std::shared_ptr<Model> model(
            new Model(std::move(net), std::move(tokenizer), options, threads));
        SMOL_TRY(model->finish(*file, options));
        return std::shared_ptr<const Model>(std::move(model));
    }

    // LoadOptions::cpu (automatic: SMOL_CPU, else the best level), checked
    // before the kernel set is built.
    static Expected<const kernels::KernelSet*> kernels_for(const LoadOptions& options) {
        if (options.cpu == CpuLevel::automatic) {
            SMOL_TRY(try_requested_cpu_level());
            return &kernels::default_kernels();
        }
        SMOL_TRY(try_resolve_cpu_level(options.cpu, "kernels"));
        return &kernels::kernel_set(options.cpu);
    }

    Status finish(const gguf::File& file, const LoadOptions& options) {
        SMOL_TRY(report(options, 0.8f));
        if (size_t(tokenizer_.vocab_size()) != net_.config().vocab_size)
            return Status(ErrorKind::shape, "model: " + file.source() + ": the tokenizer has " +
                                                std::to_string(tokenizer_.vocab_size()) +
                                                " tokens, the model " +
                                                std::to_string(net_.config().vocab_size));
        const uint64_t size = file.size();
        uint64_t hash = detail::fnv1a(file.bytes(), file.data_offset());
        hash = detail::fnv1a(&size, sizeof size, hash);
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
        identity_ = "smollm3-" + std::string(hex);
        const int threads = pool_->size();
        if (options.log)
            options.log(log_info, "smol: loaded " + file.source() + " (" +
                                      std::to_string(net_.config().n_layers) + " layers, hidden " +
                                      std::to_string(net_.config().hidden) + ", " +
                                      std::to_string(threads) + " threads, " +
                                      cpu_level_name(cpu_level()) + " kernels)");
        SMOL_TRY(choose_device(options));
        if (!device_backend_ && options.interleave_weights) {
            SMOL_TRY(report(options, 0.9f));
            size_t wanted = 0;
            const size_t moved = net_.interleave_weights(*pool_, memory_budget_, &wanted);
            if (options.log && moved > 0)
                options.log(log_info, "smol: interleaved " + std::to_string(moved >> 20) +
                                          " MiB of weights for the " + cpu_level_name(cpu_level()) +
                                          " kernels");
            else if (options.log && wanted > 0)
                options.log(log_warning, "smol: weights left as stored: no room for " +
                                             std::to_string(wanted >> 20) +
                                             " MiB interleaved (slower decode)");
        }
        SMOL_TRY(choose_kernel_params(options));
        return report(options, 1.0f);
    }

    // LoadOptions::kernel_params, else LoadOptions::tune (after the weights are
    // interleaved: the tuner measures the matrices as decode reads them).
    Status choose_kernel_params(const LoadOptions& options) {
        const kernels::KernelSet& base = net_.kernels();
        tuning_.chosen = base.params;
        const TuneMode mode = requested_tune_mode(options.tune);
        uint64_t weight_bytes = 0;
        std::vector<std::vector<WeightMatrix>> layers;
        for (const LayerWeights& l : net_.weights().layers) {
            layers.push_back(
                {l.attn_q, l.attn_k, l.attn_v, l.attn_output, l.ffn_gate, l.ffn_up, l.ffn_down});
            for (const WeightMatrix& w : layers.back()) weight_bytes += w.rows * w.row_bytes;
        }
        const WeightMatrix& embd = net_.weights().token_embd;
        weight_bytes += embd.rows * embd.row_bytes;
        if (options.kernel_params) {
            if (!kernels::valid_kernel_params(*options.kernel_params))
                return Status(ErrorKind::invalid_argument,
                              "model: LoadOptions::kernel_params (" +
                                  kernels::kernel_params_text(*options.kernel_params) +
                                  ") names a value that is not a candidate");
            tuning_.skipped = "pinned by LoadOptions::kernel_params";
            net_.use_kernels(kernels::kernel_set(base.level, *options.kernel_params));
            tuning_.chosen = net_.kernels().params;
        } else if (mode == TuneMode::off) {
            tuning_.skipped = tune_off_by_environment() ? "SMOL_TUNE=off" : "LoadOptions::tune off";
        } else if (device_backend_) {
            tuning_.skipped = "generators run on " + device_backend_->name();
        } else if (mode == TuneMode::automatic && weight_bytes < kernels::kTuneMinWeightBytes) {
            tuning_.skipped =
                "small model, " + std::to_string(weight_bytes >> 20) + " MiB of weights";
        } else {
            const std::string key = kernels::tune_key(base.level, pool_->size());
            kernels::TuneFileRead remembered;
            if (!options.tune_file.empty()) {
                remembered = kernels::read_tune_file(options.tune_file, key);
                if (remembered.malformed && options.log)
                    options.log(log_warning, "smol: " + options.tune_file +
                                                 " is not a tuning file; ignored (rewritten "
                                                 "after this measurement)");
            }
            if (remembered.found) {
                tuning_.skipped = "remembered in " + options.tune_file;
                net_.use_kernels(kernels::kernel_set(base.level, remembered.params));
                tuning_.chosen = net_.kernels().params;
            } else {
                SMOL_TRY(report(options, 0.95f));
                tuning_ = kernels::tune_kernels(base, layers, *pool_);
                net_.use_kernels(kernels::kernel_set(base.level, tuning_.chosen));
                if (!options.tune_file.empty() &&
                    !kernels::write_tune_file(options.tune_file, key, tuning_.chosen) &&
                    options.log)
                    options.log(log_warning,
                                "smol: could not write the tuning to " + options.tune_file);
            }
        }
        if (options.log) {
            options.log(log_info, "smol: kernel params " + tuning_.text());
            // Per weight type: the level's own tiles or the scalar spec, and its
            // packed / converted / interleaved rows (kernels::kernel_table_text).
            options.log(log_info, "smol: kernels " + kernels::kernel_table_text(net_.kernels()));
        }
        return {};
    }

    Status choose_device(const LoadOptions& options) {
        if (options.device != Device::cpu && options.device != Device::cuda &&
            options.device != Device::automatic)
            return Status(ErrorKind::invalid_argument, "model: unknown LoadOptions::device");
        const DeviceBackendFactory& factory = options.device_backend;
        std::string why;
        if (options.device == Device::cpu) {
            why = "asked for";
        } else if (!factory) {
            why =
                "no device backend was given (LoadOptions::device_backend: include "
                "<smol/cuda/backend.hpp>, link smol::cuda, set it to smol::cuda_backend())";
        } else if (options.device == Device::cuda && factory.device != Device::cuda) {
            return Status(ErrorKind::invalid_argument,
                          "model: device cuda was asked for, but LoadOptions::device_backend "
                          "makes a " +
                              std::string(device_name(factory.device)) + " backend");
        } else if (factory.available(&why)) {
            // automatic falls back to the CPU when the GPU cannot run this file
            // (Error(unsupported): a matrix type or head size the kernels lack).
            Expected<std::unique_ptr<Backend>> gpu = factory.create(net_, options.cuda_device);
            if (gpu.ok()) {
                device_backend_ = std::move(gpu).value();
                why = options.device == Device::cuda ? "asked for" : "auto: a device exists";
            } else if (options.device == Device::automatic &&
                       gpu.error().kind == ErrorKind::unsupported) {
                why = "auto: " + gpu.error().message;
            } else {
                return gpu.take_error();
            }
        }
        if (!device_backend_ && options.device == Device::cuda)
            return Status(ErrorKind::unsupported, "model: device cuda was asked for, but " + why);
        if (!device_backend_ && options.device == Device::automatic) why = "auto: " + why;
        if (options.log)
            options.log(log_info, "smol: device " + backend().name() + " (" + why + ")");
        return {};
    }

    static Status report(const LoadOptions& options, float progress) {
        if (options.progress && !options.progress(progress))
            return Status(ErrorKind::cancelled, "model: loading cancelled");
        return {};
    }

    SmolLM3 net_;
    Tokenizer tokenizer_;
    uint64_t memory_budget_ = 0;
    std::string identity_;
    std::unique_ptr<ThreadPool> pool_;
    CpuBackend cpu_;                           // over net_ and *pool_
    std::unique_ptr<Backend> device_backend_;  // null: cpu_
    kernels::TuneReport tuning_;
};

// Model::try_load as a pointer (null, and *error filled, on failure), for
// -fno-exceptions callers who keep a plain pointer-or-null style.
inline std::shared_ptr<const Model> try_load_model(const std::string& path,
                                                   ErrorInfo* error = nullptr,
                                                   const LoadOptions& options = {}) {
    Expected<std::shared_ptr<const Model>> model = Model::try_load(path, options);
    if (model) return std::move(model).value();
    if (error) *error = model.take_error();
    return nullptr;
}

SMOL_NAMESPACE_END
