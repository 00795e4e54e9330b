// smol::Error: the one exception type the library throws on bad input or a
// failed operation. Its kind lets callers branch without parsing the message;
// the message names the file, key or tensor at fault. Also owns the error
// path for consumers built with -fno-exceptions (see detail::fail, try_call).
#pragma once

#include "detail/abi.hpp"

#include <csetjmp>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

namespace smol {

enum class ErrorKind {
    io,           // file missing, unreadable, not mappable
    format,       // malformed or truncated GGUF, bad magic, bad version
    unsupported,  // well-formed but not something smol implements (tensor type, architecture)
    shape,        // a tensor or buffer whose shape disagrees with the config
    missing,      // a required key or tensor is absent
    type,         // a metadata value of the wrong type
    invalid_argument,  // a caller passed something impossible (n_ctx 0, bad UTF-8, ...)
    out_of_range,      // positions or prompts past the context
    cancelled,    // the operation was cancelled by the caller
    internal,     // a bug in smol: please report it
    resource,     // a size past the memory budget (LoadOptions::memory_budget), or an
                  // allocation that failed; the message names the size
};

inline const char* to_string(ErrorKind kind) noexcept {
    switch (kind) {
        case ErrorKind::io: return "io";
        case ErrorKind::format: return "format";
        case ErrorKind::unsupported: return "unsupported";
        case ErrorKind::shape: return "shape";
        case ErrorKind::missing: return "missing";
        case ErrorKind::type: return "type";
        case ErrorKind::invalid_argument: return "invalid_argument";
        case ErrorKind::out_of_range: return "out_of_range";
        case ErrorKind::cancelled: return "cancelled";
        case ErrorKind::internal: return "internal";
        case ErrorKind::resource: return "resource";
    }
    return "unknown";
}

class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, const std::string& message)
        : std::runtime_error(message), kind_(kind) {}
    ErrorKind kind() const noexcept { return kind_; }

private:
    ErrorKind kind_;
};

// SMOL_HAS_EXCEPTIONS (detail/abi.hpp): whether the consumer compiles with
// exceptions; it is part of the ABI tag, since fail() differs between the modes.

// A caught error as a value: what the non-throwing API variants report.
struct ErrorInfo {
    ErrorKind kind = ErrorKind::internal;
    std::string message;
};

}  // namespace smol

// Everything below depends on the unit's flags (exceptions on or off), so it
// lives in the ABI-tagged namespace; the types above are shared by all units.
SMOL_NAMESPACE_BEGIN

// Library headers never write try/catch directly (they would not compile under
// -fno-exceptions): code that must observe an error uses smol::try_call below,
// or guards its try/catch with #if SMOL_HAS_EXCEPTIONS.

namespace detail {

#if !SMOL_HAS_EXCEPTIONS
// -fno-exceptions: fail() cannot throw and must not return. A try_call() on the
// calling thread installs a recovery point (an ErrorTrap, a setjmp buffer);
// fail() records the error there and longjmps back to it. Frames between the
// two are abandoned without running destructors, so an error that takes this
// path may leak what those frames owned (the message string, a half-built
// object); the public try_* entry points check the common failures (missing
// file, bad UTF-8, prompt too long) up front so those leak nothing. With no
// recovery point, fail() calls the handler set by set_fatal_error_handler (if
// any) and then std::abort(): there is nowhere else to go.
struct ErrorTrap {
    std::jmp_buf resume;
    ErrorKind kind = ErrorKind::internal;
    std::string message;
    ErrorTrap* outer = nullptr;
};
inline ErrorTrap*& current_error_trap() noexcept {
    thread_local ErrorTrap* trap = nullptr;
    return trap;
}
#endif

using FatalErrorHandler = void (*)(ErrorKind kind, const char* message);
inline FatalErrorHandler& fatal_error_handler() noexcept {
    static FatalErrorHandler handler = nullptr;
    return handler;
}

// Every library error goes through here. With exceptions: throws smol::Error.
[[noreturn]] inline void fail(ErrorKind kind, const std::string& message) {
#if SMOL_HAS_EXCEPTIONS
    throw Error(kind, message);
#else
    if (ErrorTrap* trap = current_error_trap()) {
        trap->kind = kind;
        trap->message = message;
        std::longjmp(trap->resume, 1);
    }
    if (FatalErrorHandler handler = fatal_error_handler()) handler(kind, message.c_str());
    std::abort();
#endif
}

}  // namespace detail

// Only matters under -fno-exceptions: called with an error that no try_call()
// was there to receive, just before the process aborts (e.g. to log it).
inline void set_fatal_error_handler(detail::FatalErrorHandler handler) noexcept {
    detail::fatal_error_handler() = handler;
}

// Runs f(); returns true if it completed, false if it failed with a smol
// error (then *error, when given, receives it). With exceptions this is a
// try/catch of smol::Error (other exceptions propagate, e.g. std::bad_alloc);
// without, it is the recovery point described at detail::ErrorTrap.
template <class F>
bool try_call(F&& f, ErrorInfo* error = nullptr) {
#if SMOL_HAS_EXCEPTIONS
    try {
        f();
        return true;
    } catch (const Error& e) {
        if (error) *error = ErrorInfo{e.kind(), e.what()};
        return false;
    }
#else
    detail::ErrorTrap trap;
    trap.outer = detail::current_error_trap();
    detail::current_error_trap() = &trap;
    if (setjmp(trap.resume) == 0) {
        f();
        detail::current_error_trap() = trap.outer;
        return true;
    }
    detail::current_error_trap() = trap.outer;
    if (error) *error = ErrorInfo{trap.kind, std::move(trap.message)};
    return false;
#endif
}

SMOL_NAMESPACE_END
