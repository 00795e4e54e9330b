// The optional module of the mixed-flags program, built with -mavx2 -mfma
// -mf16c (see main.cpp). Its copy of smol lives in a different ABI namespace
// from the baseline unit's, so neither can take the other's symbols.
#include "check.hpp"

// Plain pointers across the boundary: no type of either unit's inline code is
// shared, and this unit builds no std container of a plain type (check.hpp).
int run_avx2_module(const char* model_path, const int32_t* ids, size_t n_ids, const float* logits,
                    size_t vocab, float* scratch) {
    const Golden golden{model_path, ids, n_ids, logits, vocab, scratch};
    return check_against_golden("avx2 unit", golden);
}
