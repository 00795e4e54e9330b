// Locating ../shared/fixtures from tests. SMOL_FIXTURES overrides the default
// path; when the fixtures are absent a test skips with a message, unless
// SMOL_REQUIRE_FIXTURES=1 (CI), where a skip becomes a failure. Cases that
// need a device (a GPU) skip the same way, and SMOL_REQUIRE_DEVICE=1 turns
// those skips into failures.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <iterator>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "sanitized.hpp"  // kSanitized

namespace smol_test {

inline std::atomic<long>& golden_counter() {
    static std::atomic<long> n{0};
    return n;
}
inline std::atomic<long>& skip_counter() {
    static std::atomic<long> n{0};
    return n;
}
inline std::atomic<long>& device_skip_counter() {
    static std::atomic<long> n{0};
    return n;
}
// Call once per golden case compared against the reference outputs.
inline void count_golden(long n = 1) {
    golden_counter() += n;
}

inline bool path_exists(const std::string& p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0;
}

// The build's fixture path (test_main.cpp: the only unit compiled with the
// absolute path, so every other test object is the same in any checkout and
// a compiler cache shares it between clones).
std::string fixtures_default_dir();

inline std::string fixtures_dir() {
    if (const char* env = std::getenv("SMOL_FIXTURES")) return env;
    return fixtures_default_dir();
}

inline bool env_is_1(const char* name) {
    const char* env = std::getenv(name);
    return env && std::string(env) == "1";
}

inline bool fixtures_required() {
    return env_is_1("SMOL_REQUIRE_FIXTURES");
}

// A case that needs a device this machine cannot use (`why` says what is
// missing): a skip with a message, counted in the closing line, or a failure
// when SMOL_REQUIRE_DEVICE=1 (the GPU script sets it, so a machine whose GPU
// cannot be used never passes by skipping everything).
inline void skip_without_device(const std::string& why) {
    if (env_is_1("SMOL_REQUIRE_DEVICE")) {
        FAIL("no usable device and SMOL_REQUIRE_DEVICE=1: " << why);
    } else {
        ++device_skip_counter();
        MESSAGE("skipping: no usable device: " << why);
    }
}

// Full path of a fixture file, or nullopt (after reporting a skip) if missing.
inline std::optional<std::string> fixture(const std::string& relative) {
    const std::string path = fixtures_dir() + "/" + relative;
    if (path_exists(path)) return path;
    if (fixtures_required()) {
        FAIL("fixture '" << path << "' is missing and SMOL_REQUIRE_FIXTURES=1");
    } else {
        ++skip_counter();
        MESSAGE("skipping: fixture '"
                << path << "' not found (set SMOL_FIXTURES to the fixtures directory)");
    }
    return std::nullopt;
}

inline std::vector<unsigned char> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot open " << path);
    return std::vector<unsigned char>((std::istreambuf_iterator<char>(in)),
                                      std::istreambuf_iterator<char>());
}

inline std::vector<float> read_f32(const std::string& path) {
    const auto bytes = read_file(path);
    std::vector<float> out(bytes.size() / 4);
    std::memcpy(out.data(), bytes.data(), out.size() * 4);
    return out;
}

}  // namespace smol_test
