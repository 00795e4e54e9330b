// <windows.h> as smol includes it: without the rarely used APIs
// (WIN32_LEAN_AND_MEAN) and without the min/max macros that would break
// std::min / std::max in every unit that includes smol (NOMINMAX).
#pragma once

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#endif
