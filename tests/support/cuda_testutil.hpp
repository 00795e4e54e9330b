// Helpers of the CUDA backend's device tests (tests/test_cuda.cpp,
// tests/test_cuda_features.cpp).
#pragma once

#include <doctest/doctest.h>
#include <smol/cuda/backend.hpp>
#include <smol/smol.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support/fixtures.hpp"
#include "support/model_testutil.hpp"

namespace smol_test {

// True when a usable GPU exists; else reports the skip (a failure under
// SMOL_REQUIRE_DEVICE=1).
inline bool have_gpu() {
    std::string why;
    if (smol::cuda_available(&why)) return true;
    skip_without_device("cuda: " + why);
    return false;
}

// One segment of `ids` from position `start` of `cache`, its last logits into `logits`.
inline smol::Segment one_segment(const std::vector<int32_t>& ids, size_t start,
                                 smol::BackendCache& cache, std::vector<float>& logits) {
    smol::Segment s;
    s.tokens = ids.data();
    s.n_tokens = ids.size();
    s.start = start;
    s.cache = &cache;
    s.logits = logits.data();
    return s;
}

// The GPU's logits against the CPU's: the goldens' float tolerance (cosine, and
// the largest error against the logits' range).
inline void check_logits_close(const float* ours, const float* ref, size_t vocab,
                               const std::string& where) {
    const auto cmp = compare_logits(ours, ref, vocab);
    CHECK_MESSAGE(cmp.cosine >= 0.999, where << ": cosine " << cmp.cosine);
    CHECK_MESSAGE(cmp.max_abs_error <= 0.02f * cmp.range,
                  where << ": max abs error " << cmp.max_abs_error << ", range " << cmp.range);
}

// One cached K or V row on the GPU against the CPU's: within 5 % of the row's
// largest magnitude (F16 storage and the two paths' rounding).
inline void check_kv_row_close(const float* gpu, const float* cpu, size_t n,
                               const std::string& where) {
    float scale = 0, diff = 0;
    for (size_t d = 0; d < n; ++d) {
        scale = std::max(scale, std::fabs(cpu[d]));
        diff = std::max(diff, std::fabs(cpu[d] - gpu[d]));
    }
    CHECK_MESSAGE(diff <= 0.05f * scale + 1e-3f, where << ": difference " << diff);
}

}  // namespace smol_test
