// smol::Error: the one exception type the library throws on bad input or a
// failed operation. Its kind lets callers branch without parsing the message;
// the message names the file, key or tensor at fault. Also the error values
// (Status, Expected) that carry errors through the layers in both modes.
#pragma once

#include "detail/abi.hpp"

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace smol {

enum class ErrorKind {
    io,                // file missing, unreadable, not mappable
    format,            // malformed or truncated GGUF, bad magic, bad version
    unsupported,       // well-formed but not something smol implements (tensor type, architecture)
    shape,             // a tensor or buffer whose shape disagrees with the config
    missing,           // a required key or tensor is absent
    type,              // a metadata value of the wrong type
    invalid_argument,  // a caller passed something impossible (n_ctx 0, bad UTF-8, ...)
    out_of_range,      // positions or prompts past the context
    cancelled,         // the operation was cancelled by the caller
    internal,          // a bug in smol: please report it
    resource,          // a size past the memory budget (LoadOptions::memory_budget), or an
                       // allocation that failed; the message names the size
};

inline const char* to_string(ErrorKind kind) noexcept {
    switch (kind) {
        case ErrorKind::io:
            return "io";
        case ErrorKind::format:
            return "format";
        case ErrorKind::unsupported:
            return "unsupported";
        case ErrorKind::shape:
            return "shape";
        case ErrorKind::missing:
            return "missing";
        case ErrorKind::type:
            return "type";
        case ErrorKind::invalid_argument:
            return "invalid_argument";
        case ErrorKind::out_of_range:
            return "out_of_range";
        case ErrorKind::cancelled:
            return "cancelled";
        case ErrorKind::internal:
            return "internal";
        case ErrorKind::resource:
            return "resource";
    }
    return "unknown";
}

class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
    ErrorKind kind() const noexcept { return kind_; }

private:
    ErrorKind kind_;
};

// SMOL_HAS_EXCEPTIONS (detail/abi.hpp): whether the consumer compiles with
// exceptions; it is part of the ABI tag, since fail() differs between the modes.

// An error as a value: what the non-throwing entry points report, and what
// Status / Expected below carry.
struct ErrorInfo {
    ErrorKind kind = ErrorKind::internal;
    std::string message;
};

// How errors travel inside smol, in both modes: a function that can fail on
// bad input returns a Status (nothing or an error) or an Expected<T> (a T or
// an error), and its caller passes a failure on with SMOL_TRY. Only at the
// public throwing entry points (Model::load, Generator's constructor, ...)
// does an error become a smol::Error exception; the try_* entry points hand
// it back as ErrorInfo. So a consumer built with -fno-exceptions sees every
// bad input as a value, and no frame is ever abandoned (no longjmp).
class [[nodiscard]] Status {
public:
    Status() = default;  // success
    Status(ErrorInfo error) : error_(std::move(error)) {}
    Status(ErrorKind kind, std::string message) : error_(ErrorInfo{kind, std::move(message)}) {}

    bool ok() const noexcept { return !error_.has_value(); }
    explicit operator bool() const noexcept { return ok(); }
    // Only when !ok().
    const ErrorInfo& error() const& { return *error_; }
    ErrorInfo take_error() { return std::move(*error_); }

private:
    std::optional<ErrorInfo> error_;
};

template <class T>
class [[nodiscard]] Expected {
public:
    Expected(T value) : value_(std::move(value)) {}
    Expected(ErrorInfo error) : error_(std::move(error)) {}
    Expected(ErrorKind kind, std::string message) : error_(ErrorInfo{kind, std::move(message)}) {}
    // From a failed Status (SMOL_TRY's path); a Status that is ok has no T to give.
    Expected(Status status)
        : error_(status.ok() ? ErrorInfo{ErrorKind::internal, "Expected from an ok Status"}
                             : status.take_error()) {}

    bool ok() const noexcept { return value_.has_value(); }
    explicit operator bool() const noexcept { return ok(); }
    // Only when ok().
    T& value() & { return *value_; }
    const T& value() const& { return *value_; }
    T&& value() && { return std::move(*value_); }
    T* operator->() { return &*value_; }
    const T* operator->() const { return &*value_; }
    // Only when !ok().
    const ErrorInfo& error() const& { return error_; }
    ErrorInfo take_error() { return std::move(error_); }

private:
    std::optional<T> value_;
    ErrorInfo error_;
};

}  // namespace smol

// Passes a failed Status / Expected on to the caller (whose return type is a
// Status or an Expected); an ok one is discarded.
#define SMOL_TRY(expr)                                                    \
    do {                                                                  \
        auto smol_try_result_ = (expr);                                   \
        if (!smol_try_result_.ok()) return smol_try_result_.take_error(); \
    } while (0)

// `lhs = value of expr`, or return its error: SMOL_TRY_ASSIGN(auto file, open(path));
#define SMOL_TRY_CAT2_(a, b) a##b
#define SMOL_TRY_CAT_(a, b) SMOL_TRY_CAT2_(a, b)
#define SMOL_TRY_ASSIGN(lhs, expr) \
    SMOL_TRY_ASSIGN_(SMOL_TRY_CAT_(smol_try_value_, __LINE__), lhs, expr)
#define SMOL_TRY_ASSIGN_(tmp, lhs, expr)    \
    auto tmp = (expr);                      \
    if (!tmp.ok()) return tmp.take_error(); \
    lhs = std::move(tmp).value()

// Everything below depends on the unit's flags (exceptions on or off), so it
// lives in the ABI-tagged namespace; the types above are shared by all units.
SMOL_NAMESPACE_BEGIN

// Library headers never write try/catch directly (they would not compile under
// -fno-exceptions): errors travel as Status / Expected, and the few places that
// must observe a thrown error guard their try/catch with #if SMOL_HAS_EXCEPTIONS.

namespace detail {

using FatalErrorHandler = void (*)(ErrorKind kind, const char* message);
inline FatalErrorHandler& fatal_error_handler() noexcept {
    static FatalErrorHandler handler = nullptr;
    return handler;
}

// Raises an error at a throwing entry point, or where no caller can be handed a
// value (a broken internal invariant). With exceptions: throws smol::Error.
// Without: there is nowhere to go, so it calls the handler set by
// set_fatal_error_handler (if any) and aborts. A -fno-exceptions consumer uses
// the try_* entry points, which never get here for bad input: they return the
// Status / Expected the layers below produce.
[[noreturn]] inline void fail(ErrorKind kind, const std::string& message) {
#if SMOL_HAS_EXCEPTIONS
    throw Error(kind, message);
#else
    if (FatalErrorHandler handler = fatal_error_handler()) handler(kind, message.c_str());
    std::abort();
#endif
}
[[noreturn]] inline void fail(ErrorInfo error) {
    fail(error.kind, error.message);
}

// The throwing form of an Expected / Status: its value, or fail() with its error.
template <class T>
T value_or_fail(Expected<T>&& result) {
    if (!result.ok()) fail(result.take_error());
    return std::move(result).value();
}
inline void ok_or_fail(Status status) {
    if (!status.ok()) fail(status.take_error());
}

}  // namespace detail

// Only matters under -fno-exceptions: called with an error raised where no
// try_* entry point could return it (a throwing entry point called anyway, a
// broken invariant), just before the process aborts (e.g. to log it).
inline void set_fatal_error_handler(detail::FatalErrorHandler handler) noexcept {
    detail::fatal_error_handler() = handler;
}

#if SMOL_HAS_EXCEPTIONS
// Runs f(); returns true if it completed, false if it threw a smol::Error
// (then *error, when given, receives it); other exceptions propagate. Only
// with exceptions: without them nothing can be caught, and the try_* entry
// points return errors as values instead.
template <class F>
bool try_call(F&& f, ErrorInfo* error = nullptr) {
    try {
        f();
        return true;
    } catch (const Error& e) {
        if (error) *error = ErrorInfo{e.kind(), e.what()};
        return false;
    }
}
#endif

SMOL_NAMESPACE_END
