// Whether this test program is built with a sanitizer (tools/ci-sanitize.sh),
// where code runs 5-20x slower than in Release. The few dense sweeps (thousands
// of parses or forwards of the same code path) take a sample there: what the
// sanitizers check is each path's memory and thread safety, which a sample
// covers; the Release run keeps the full sweep. No doctest here: the C ABI's
// parity program (tests/c_abi/) includes it too.
#pragma once

namespace smol_test {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = kThreadSanitizer;
#endif
#else
inline constexpr bool kSanitized = kThreadSanitizer;
#endif

}  // namespace smol_test
