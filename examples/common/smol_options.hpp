// What several examples share beyond argument parsing: the options that need
// smol's own parsers (--cpu, --device) and where the build's demo model is.
#pragma once

#include <smol/smol.hpp>
#include <string>

#if defined(SMOL_CUDA_ENABLED)  // the example links smol::cuda
#include <smol/cuda/backend.hpp>
#endif

#if defined(__linux__)
#include <unistd.h>
#endif

#include "cli.hpp"

namespace smol_examples {

// --cpu LEVEL into LoadOptions::cpu.
inline smol_cli::Option& add_cpu_option(smol_cli::Parser& cli, smol::CpuLevel& target) {
    return cli.option(
        "--cpu",
        [&target](const std::string& name) {
            const auto level = smol::parse_cpu_level(name);
            if (!level) throw smol_cli::BadValue("unknown kernel level '" + name + "'");
            target = *level;
        },
        "LEVEL",
        "kernel level: auto (default: SMOL_CPU, else the best this CPU runs),\n"
        "scalar, avx2, avxvnni, avx512, amx, neon, dotprod, i8mm");
}

// --device DEV into LoadOptions::device.
inline smol_cli::Option& add_device_option(smol_cli::Parser& cli, smol::Device& target) {
    return cli.option(
        "--device",
        [&target](const std::string& name) {
            const auto device = smol::parse_device(name);
            if (!device) throw smol_cli::BadValue("expected cpu, cuda or auto, not '" + name + "'");
            target = *device;
        },
        "DEV",
        "where to run: cpu (default), cuda (a build with smol::cuda and a GPU),\n"
        "auto (cuda when possible, else cpu)");
}

// --kv-type TYPE into GeneratorOptions::kv_type (or a cache's type); `help`
// replaces the default help text (a program whose default is not f16).
inline smol_cli::Option& add_kv_type_option(smol_cli::Parser& cli, smol::KVType& target,
                                            const char* help = nullptr) {
    return cli.option(
        "--kv-type",
        [&target](const std::string& name) {
            const auto type = smol::parse_kv_type(name);
            if (!type) throw smol_cli::BadValue("expected f16, f32 or q8_0, not '" + name + "'");
            target = *type;
        },
        "TYPE",
        help ? help
             : "KV cache element type: f16 (default), f32, q8_0 (53 % of F16's bytes; CPU only)");
}

// The device backends this build has, for --device cuda|auto, and with a
// device other than the CPU a load log whose device line says which one ran
// and why (everything else in that log stays quiet).
inline void log_device_choice(smol::LoadOptions& options) {
#if defined(SMOL_CUDA_ENABLED)
    options.device_backend = smol::cuda_backend();
#endif
    if (options.device == smol::Device::cpu) return;
    options.log = [](int, const std::string& message) {
        if (message.rfind("smol: device", 0) == 0) std::fprintf(stderr, "%s\n", message.c_str());
    };
}

// Where the examples find the demo model when no -m is given: the path the
// build defined (SMOL_DEMO_MODEL_PATH, from tools/demo-model.cmake), else
// build/demo/smol-demo.gguf next to build/examples/ (this binary's folder).
inline std::string demo_model_path() {
#ifdef SMOL_DEMO_MODEL_PATH
    return SMOL_DEMO_MODEL_PATH;
#else
#if defined(__linux__)
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        std::string exe(buf, size_t(n));
        const size_t slash = exe.rfind('/');
        if (slash != std::string::npos) return exe.substr(0, slash) + "/../demo/smol-demo.gguf";
    }
#endif
    return "demo/smol-demo.gguf";
#endif
}

}  // namespace smol_examples
