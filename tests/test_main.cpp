// Test runner for every smol test executable: doctest's main, plus a closing
// line with the number of golden (fixture) cases the run checked and of the
// cases skipped for a missing fixture or device.
//
// Several components share one program (tests/CMakeLists.txt: the library is
// compiled once per group), and each ctest case runs its component's cases
// with --source-file: a filter that matches no case fails the run, so a
// renamed file cannot turn its ctest case into one that always passes.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/fixtures.hpp"

namespace {

// How many test cases passed the run's filters (doctest reports it to listeners).
struct MatchedCases : doctest::IReporter {
    static unsigned& count() {
        static unsigned n = 0;
        return n;
    }
    explicit MatchedCases(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats& stats) override {
        count() = stats.numTestCasesPassingFilters;
    }
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

DOCTEST_REGISTER_LISTENER("smol_matched_cases", 1, MatchedCases);

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
    const char* exclude = std::getenv("SMOL_TEST_EXCLUDE");
    const bool excluding = exclude && *exclude;
    if (excluding) context.addFilter("test-case-exclude", exclude);
    const int rc = context.run();
    if (context.shouldExit()) return rc;
    // With SMOL_TEST_EXCLUDE a component may rightly have nothing left to run.
    if (MatchedCases::count() == 0 && !excluding) {
        std::fprintf(stderr, "smol: no test case matched this run's filters\n");
        return rc != 0 ? rc : 1;
    }
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
