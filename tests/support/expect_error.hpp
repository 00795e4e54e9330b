// expect_error: runs an action that must throw smol::Error of a given kind
// whose message names what is at fault; shared by the bad-input tests
// (test_reliability.cpp, test_hostile.cpp).
#pragma once

#include <doctest/doctest.h>
#include <smol/smol.hpp>

#include <functional>
#include <string>
#include <vector>

namespace smol_test {

// `action` must throw smol::Error of `kind` whose message holds every one of `needles`.
inline void expect_error(const std::function<void()>& action, smol::ErrorKind kind,
                         const std::vector<std::string>& needles) {
    try {
        action();
    } catch (const smol::Error& e) {
        const std::string message = e.what();
        INFO("message: " << message);
        CHECK_MESSAGE(e.kind() == kind, "kind " << smol::to_string(e.kind()) << ", expected "
                                                << smol::to_string(kind));
        for (const auto& needle : needles)
            CHECK_MESSAGE(message.find(needle) != std::string::npos,
                          "message lacks '" << needle << "'");
        return;
    }
    FAIL("no smol::Error; expected " << smol::to_string(kind) << " naming '"
                                     << (needles.empty() ? "" : needles.front()) << "'");
}

// The kind of the smol::Error `f` throws (a failed check if it throws none);
// *message receives its text.
template <class F>
smol::ErrorKind error_kind_of(F&& f, std::string* message = nullptr) {
    try {
        f();
    } catch (const smol::Error& e) {
        if (message) *message = e.what();
        return e.kind();
    }
    FAIL("no smol::Error was thrown");
    return smol::ErrorKind::internal;
}

}  // namespace smol_test
