// The optional module of the mixed-flags program, built with -mavx2 -mfma
// -mf16c (see main.cpp). Its copy of smol lives in a different ABI namespace
// from the baseline unit's, so neither can take the other's symbols.
#include "check.hpp"

int run_avx2_module() { return check_against_golden("avx2 unit"); }
