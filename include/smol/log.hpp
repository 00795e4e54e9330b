// smol's log levels and callback type. Base layer: the model layer's load log
// (LoadOptions::log) and the generator's (GeneratorOptions::log) share them.
// The library never prints; it calls the callback the caller gave, if any.
#pragma once

#include "detail/abi.hpp"

#include <functional>
#include <string>

SMOL_NAMESPACE_BEGIN

// Plain int values (the callback takes an int), so a caller may also compare
// with numbers: -1 debug, 0 info, 1 warning, 2 error.
enum LogLevel : int { log_debug = -1, log_info = 0, log_warning = 1, log_error = 2 };

// Called with a level and a complete line (no trailing newline), on the
// thread doing the work that logs.
using LogCallback = std::function<void(int level, const std::string& message)>;

SMOL_NAMESPACE_END
