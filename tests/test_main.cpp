// Test runner for every smol test executable: doctest's main, plus a closing
// line with the number of golden (fixture) cases the run checked and of the
// cases skipped for a missing fixture or device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/fixtures.hpp"

std::string smol_test::fixtures_default_dir() {
#ifdef SMOL_FIXTURES_DEFAULT
    return SMOL_FIXTURES_DEFAULT;
#else
    return "../shared/fixtures";
#endif
}

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    // CI's sanitizer stage skips the slowest reference-only cases with this
    // (a doctest test-case-exclude pattern list, e.g. "*[slow]*").
    if (const char* exclude = std::getenv("SMOL_TEST_EXCLUDE")) {
        if (*exclude) context.addFilter("test-case-exclude", exclude);
    }
    const int rc = context.run();
    if (context.shouldExit()) return rc;
    std::printf(
        "smol: golden cases checked: %ld, fixture tests skipped: %ld, device tests "
        "skipped: %ld\n",
        smol_test::golden_counter().load(), smol_test::skip_counter().load(),
        smol_test::device_skip_counter().load());
    // CI sums these lines to report how many golden cases the whole suite checked.
    if (const char* log = std::getenv("SMOL_GOLDEN_LOG")) {
        if (std::FILE* f = std::fopen(log, "a")) {
            std::fprintf(f, "%s %ld %ld\n", argc > 0 ? argv[0] : "?",
                         smol_test::golden_counter().load(), smol_test::skip_counter().load());
            std::fclose(f);
        }
    }
    return rc;
}
