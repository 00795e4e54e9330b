// smol::Device: which backend a Model runs its generators on (LoadOptions::device),
// with its name as the tools write it (--device cpu|cuda|auto). The backend seam
// (model/backend.hpp) and its caches (model/backend_cache.hpp) carry one.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

SMOL_NAMESPACE_BEGIN

// Which backend a Model runs its generators on (LoadOptions::device).
// automatic: the device backend of LoadOptions::device_backend when one was
// given and a usable device exists, else the CPU; the load log says which and why.
enum class Device : uint32_t { cpu = 0, cuda = 1, automatic = 2 };

inline const char* device_name(Device device) noexcept {
    switch (device) {
        case Device::cpu:
            return "cpu";
        case Device::cuda:
            return "cuda";
        case Device::automatic:
            return "auto";
    }
    return "unknown";
}

// "cpu", "cuda" or "auto" (what --device takes in the tools); nullopt otherwise.
inline std::optional<Device> parse_device(std::string_view name) noexcept {
    for (const Device d : {Device::cpu, Device::cuda, Device::automatic})
        if (name == device_name(d)) return d;
    return std::nullopt;
}

SMOL_NAMESPACE_END
