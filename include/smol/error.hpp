// smol::Error: the one exception type the library throws on bad input or a
// failed operation. Its kind lets callers branch without parsing the message;
// the message names the file, key or tensor at fault.
#pragma once

#include <stdexcept>
#include <string>

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

namespace detail {
// Throws smol::Error. When the consumer builds with -fno-exceptions, the
// non-throwing API variants catch nothing: the headers that offer them check
// SMOL_NO_EXCEPTIONS and route errors through return values instead.
[[noreturn]] inline void fail(ErrorKind kind, const std::string& message) {
    throw Error(kind, message);
}
}  // namespace detail

}  // namespace smol
