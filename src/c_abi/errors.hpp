// The C ABI's error side: the thread's last error, the guard every entry point
// runs its work in, and the checks of arguments (handles, strings, counts).
// Part of the C ABI's one source file: only src/smol_c.cpp includes it, so
// its helpers stay in an unnamed namespace of that unit.
#pragma once

#include <smol/smol.h>
#include <smol/smol.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

struct LastError {
    smol_status code = SMOL_OK;
    std::string message;
};
LastError& last_error() noexcept {
    // Constructed on first use per thread; constructing an empty string cannot throw.
    thread_local LastError error;
    return error;
}

void set_ok() noexcept {
    LastError& e = last_error();
    e.code = SMOL_OK;
    e.message.clear();
}
void set_error(smol_status code, const char* message) noexcept {
    LastError& e = last_error();
    e.code = code;
    try {
        e.message = message;
    } catch (...) {
        e.message.clear();  // out of memory for the message: the code still tells
    }
}

[[noreturn]] void invalid(const std::string& message) {
    throw smol::Error(smol::ErrorKind::invalid_argument, message);
}

// Runs f(); on any exception records it and returns
// `failed`. Every fallible entry point goes through here. The record is
// cleared again after a success: a callback of f may have made a failing call.
template <class R, class F>
R guarded(R failed, F&& f) noexcept {
    set_ok();
    try {
        R result = f();
        set_ok();
        return result;
    } catch (const smol::Error& e) {
        set_error(smol_status(int(e.kind()) + 1), e.what());
    } catch (const std::bad_alloc&) {
        set_error(SMOL_ERR_RESOURCE, "out of memory");
    } catch (const std::exception& e) {
        set_error(SMOL_ERR_INTERNAL, e.what());
    } catch (...) {
        set_error(SMOL_ERR_INTERNAL, "unknown exception");
    }
    return failed;
}

int to_int(int64_t value, const char* what) {
    if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max())
        invalid(std::string(what) + " = " + std::to_string(value) + " is out of range");
    return int(value);
}

const char* need_string(const char* text, const char* what) {
    if (!text) invalid(std::string(what) + " is NULL");
    return text;
}

template <class T>
T& need(T* handle, const char* what) {
    if (!handle) invalid(std::string(what) + " is NULL");
    return *handle;
}

// The count of an array argument, checked against its pointer.
size_t array_count(const void* data, int64_t n, const char* what) {
    if (n < 0) invalid(std::string(what) + ": count " + std::to_string(n) + " is negative");
    if (n > 0 && !data)
        invalid(std::string(what) + " is NULL with a count of " + std::to_string(n));
    return size_t(n);
}

// A (strings, count) pair of smol_params as the C++ vector; a NULL string is
// an error naming the array and the index.
std::vector<std::string> to_strings(const char* const* strings, int64_t n, const char* what) {
    const size_t count = array_count(strings, n, what);
    std::vector<std::string> out;
    out.reserve(count);
    for (size_t i = 0; i < count; ++i)
        out.emplace_back(
            need_string(strings[i], (std::string(what) + "[" + std::to_string(i) + "]").c_str()));
    return out;
}

size_t to_count(int64_t value, const char* what) {
    if (value < 0) invalid(std::string(what) + " = " + std::to_string(value) + " is negative");
    return size_t(value);
}

}  // namespace
