// Locating ../shared/fixtures from tests. SMOL_FIXTURES overrides the default
// path; when the fixtures are absent a test skips with a message, unless
// SMOL_REQUIRE_FIXTURES=1 (CI), where a skip becomes a failure.
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

namespace smol_test {

inline std::atomic<long>& golden_counter() {
    static std::atomic<long> n{0};
    return n;
}
inline std::atomic<long>& skip_counter() {
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

inline std::string fixtures_dir() {
    if (const char* env = std::getenv("SMOL_FIXTURES")) return env;
#ifdef SMOL_FIXTURES_DEFAULT
    return SMOL_FIXTURES_DEFAULT;
#else
    return "../shared/fixtures";
#endif
}

inline bool fixtures_required() {
    const char* env = std::getenv("SMOL_REQUIRE_FIXTURES");
    return env && std::string(env) == "1";
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
