// The CUDA backend's tuning switches from the environment (SMOL_CUDA_*: tools/
// gpu-check.sh times the paths they turn off or resize). Each caller reads its
// variable once into a static, so a process uses one value throughout and its
// results stay deterministic.
//
//   env_off(name)   true when the variable is set and starts with '0'
//   env_int(name, fallback, low, high)
//                   its integer value (atoi) when set and within [low, high],
//                   else fallback
#pragma once

#include <smol/detail/abi.hpp>

#include <cstdlib>

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

inline bool env_off(const char* name) {
    const char* text = std::getenv(name);
    return text != nullptr && text[0] == '0';
}

inline int env_int(const char* name, int fallback, int low, int high) {
    const char* text = std::getenv(name);
    if (text == nullptr) return fallback;
    const int parsed = std::atoi(text);
    return parsed >= low && parsed <= high ? parsed : fallback;
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
