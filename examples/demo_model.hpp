// Where the examples find the demo model when no -m is given: the path the
// build defined (SMOL_DEMO_MODEL_PATH, from tools/demo-model.cmake), else
// build/demo/smol-demo.gguf next to build/examples/ (this binary's folder).
#pragma once

#include <string>

#if defined(__linux__)
#include <unistd.h>
#endif

namespace smol_examples {

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
