// Tests of the optional CUDA backend (built only with SMOL_CUDA=ON).
//
// Without a GPU: the host emulation of the kernels' block decoding and int8 dot
// products is checked against the reference dequantization (and the fixtures'
// independent dequantized rows), and constructing a CudaBackend must fail with
// Error(unsupported); every GPU case is skipped with a message naming the
// reason (a failure with SMOL_REQUIRE_DEVICE=1: support/fixtures.hpp).
// With a GPU: every kernel against the CPU reference, the whole forward pass
// against the CPU model on generated files (prefill, graph decode, KV rows),
// the fixture goldens (per-position top-8, last-position logits, greedy). The
// backend seam: LoadOptions::device (here too without a GPU: auto falls back
// to the CPU, cuda is Error(unsupported)) and, with one, Generator on the GPU,
// forks, two segments per forward, and sessions moving between CPU and GPU
// generators byte for byte. The pp512 / tg128 throughput run is
// benchmarks/bench_cuda.cpp.
#include <doctest/doctest.h>

#include <smol/cuda/backend.hpp>
#include <test_hooks.hpp>
#include <cuda_runtime.h>
#include <smol/smol.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/fixtures.hpp"
#include "support/model_testutil.hpp"
#include "support/cuda_testutil.hpp"

namespace {

using smol::GGMLType;

// True when a CUDA device is usable; otherwise the case is skipped (counted
// in the closing line), or fails when SMOL_REQUIRE_DEVICE=1.
using smol_test::have_gpu;

std::vector<float> random_floats(size_t n, uint64_t seed, float sd = 1.0f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

// rows x cols random weights quantized to `type`.
std::vector<uint8_t> random_matrix(GGMLType type, size_t rows, size_t cols, uint64_t seed) {
    const auto values = random_floats(rows * cols, seed, 1.0f / std::sqrt(float(cols)));
    const size_t row_bytes = smol::row_bytes(type, cols);
    std::vector<uint8_t> packed(rows * row_bytes);
    for (size_t r = 0; r < rows; ++r)
        smol::quantize_row(type, &values[r * cols], &packed[r * row_bytes], cols,
                           smol::QuantizeEffort::fast);
    return packed;
}

std::vector<float> dequantized(GGMLType type, const std::vector<uint8_t>& packed, size_t rows,
                               size_t cols) {
    std::vector<float> out(rows * cols);
    const size_t row_bytes = smol::row_bytes(type, cols);
    for (size_t r = 0; r < rows; ++r)
        smol::dequantize_row(type, &packed[r * row_bytes], &out[r * cols], cols);
    return out;
}

// The error bound of w . x when x is rounded to int8 blocks of 32 plus float
// rounding. Per element, with d = max|x| / 127: half a step of the K-quants'
// bf16-rounded scale (at most d / 2 * (1 + 2^-8)), or for Q8_0 half a step of
// d plus the fp16 rounding of the stored scale over 127 codes (d * 127 * 2^-11):
// at most 0.57 d either way.
double act_rounding_bound(const float* w, const float* x, size_t cols) {
    double bound = 0;
    for (size_t b = 0; b < cols / 32; ++b) {
        float amax = 0, wsum = 0;
        for (size_t i = 0; i < 32; ++i) {
            amax = std::max(amax, std::fabs(x[b * 32 + i]));
            wsum += std::fabs(w[b * 32 + i]);
        }
        bound += double(wsum) * amax / 127.0 * 0.57;
    }
    double magnitude = 0;
    for (size_t i = 0; i < cols; ++i) magnitude += std::fabs(double(w[i]) * x[i]);
    return bound * 1.001 + 1e-5 * magnitude + 1e-6;
}

double dot_double(const float* a, const float* b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += double(a[i]) * b[i];
    return s;
}

float max_abs(const std::vector<float>& v) {
    float m = 0;
    for (float x : v) m = std::max(m, std::fabs(x));
    return m;
}

const GGMLType kMatrixTypes[] = {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q8_0};

// Rows of a type smol reads but does not write (no quantize_row): random bytes
// with every fp16 field of each block (its byte offsets: `fields`) a small scale.
std::vector<uint8_t> random_read_only_matrix(GGMLType type, size_t rows, size_t cols,
                                             std::vector<size_t> fields, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> bytes(rows * smol::row_bytes(type, cols));
    for (uint8_t& b : bytes) b = uint8_t(rng());
    const size_t block_bytes = smol::type_traits(type).type_size;
    std::uniform_real_distribution<float> scale(-0.01f, 0.01f);
    for (size_t block = 0; block < bytes.size() / block_bytes; ++block)
        for (size_t field : fields) {
            const uint16_t h = smol::fp32_to_fp16(scale(rng));
            std::memcpy(&bytes[block * block_bytes + field], &h, sizeof h);
        }
    return bytes;
}

}  // namespace

// ---------------------------------------------------------------------------
// Host emulation (runs everywhere)

TEST_CASE("cuda emulation: the device's block dequantization matches the reference") {
    const GGMLType types[] = {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q8_0,
                              GGMLType::F16,  GGMLType::BF16, GGMLType::F32};
    const size_t rows = 6, cols = 512;
    for (GGMLType type : types) {
        CAPTURE(smol::type_name(type));
        const auto packed = random_matrix(type, rows, cols, 11 + uint64_t(type));
        const auto reference = dequantized(type, packed, rows, cols);
        std::vector<float> ours(rows * cols);
        const size_t row_bytes = smol::row_bytes(type, cols);
        for (size_t r = 0; r < rows; ++r)
            smol::cuda_detail::emulate_dequantize_row(type, &packed[r * row_bytes], cols,
                                                      &ours[r * cols]);
        const float tolerance = 1e-6f * max_abs(reference);
        size_t bad = 0;
        for (size_t i = 0; i < ours.size(); ++i)
            if (!(std::fabs(ours[i] - reference[i]) <= tolerance)) ++bad;
        CHECK_MESSAGE(bad == 0, bad << " elements differ from dequantize_row");
    }
}

TEST_CASE("cuda emulation: embedding rows of the read-only types match dequantize_row") {
    // The device reads these types as embedding tables only (no device matmul).
    struct Case {
        GGMLType type;
        std::vector<size_t> fields;
    };
    const Case cases[] = {
        {GGMLType::Q4_0, {offsetof(smol::BlockQ4_0, d)}},
        {GGMLType::Q4_1, {offsetof(smol::BlockQ4_1, d), offsetof(smol::BlockQ4_1, m)}},
        {GGMLType::Q5_0, {offsetof(smol::BlockQ5_0, d)}},
        {GGMLType::Q5_1, {offsetof(smol::BlockQ5_1, d), offsetof(smol::BlockQ5_1, m)}},
        {GGMLType::IQ4_NL, {offsetof(smol::BlockIQ4NL, d)}},
        {GGMLType::Q2_K, {offsetof(smol::BlockQ2K, d), offsetof(smol::BlockQ2K, dmin)}},
        {GGMLType::Q3_K, {offsetof(smol::BlockQ3K, d)}},
        {GGMLType::IQ4_XS, {offsetof(smol::BlockIQ4XS, d)}},
    };
    const size_t rows = 6, cols = 512;
    for (const Case& c : cases) {
        CAPTURE(smol::type_name(c.type));
        const auto packed =
            random_read_only_matrix(c.type, rows, cols, c.fields, 5 + uint64_t(c.type));
        const auto reference = dequantized(c.type, packed, rows, cols);
        std::vector<float> ours(rows * cols);
        const size_t row_bytes = smol::row_bytes(c.type, cols);
        for (size_t r = 0; r < rows; ++r)
            smol::cuda_detail::emulate_dequantize_row(c.type, &packed[r * row_bytes], cols,
                                                      &ours[r * cols]);
        size_t bad = 0;
        for (size_t i = 0; i < ours.size(); ++i)
            if (!(std::fabs(ours[i] - reference[i]) <= 1e-6f * std::fabs(reference[i]) + 1e-12f))
                ++bad;
        CHECK_MESSAGE(bad == 0, bad << " elements differ from dequantize_row");
    }
}

TEST_CASE("cuda emulation: the codebook types are CPU only, tables included") {
    // Their grids live on the host (quant/codebook.hpp): the device decodes
    // neither their matrices nor their embedding tables, so a model with them
    // stays on the CPU under Device::automatic.
    std::vector<float> out(256);
    for (GGMLType type : {GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S, GGMLType::IQ3_XXS,
                          GGMLType::IQ3_S, GGMLType::IQ1_S, GGMLType::IQ1_M}) {
        CAPTURE(smol::type_name(type));
        std::vector<uint8_t> bytes(smol::row_bytes(type, 256));
        CHECK_THROWS_AS(
            smol::cuda_detail::emulate_dequantize_row(type, bytes.data(), 256, out.data()),
            smol::Error);
        CHECK_THROWS_AS(smol::cuda_detail::emulate_dot(type, bytes.data(), 256, out.data()),
                        smol::Error);
    }
}

TEST_CASE("cuda emulation: dequantization matches the fixtures' independent rows") {
    const auto index_path = smol_test::fixture("dequant/index.json");
    if (!index_path) return;
    std::ifstream in(*index_path);
    const nlohmann::json index = nlohmann::json::parse(in);
    for (const auto& entry : index) {
        const std::string model = entry["model"].get<std::string>();
        const std::string tensor = entry["tensor"].get<std::string>();
        CAPTURE(model);
        CAPTURE(tensor);
        const auto model_path = smol_test::fixture(model);
        const auto rows_path = smol_test::fixture("dequant/" + entry["file"].get<std::string>());
        if (!model_path || !rows_path) continue;
        const auto file = smol::gguf::File::open(*model_path);
        const smol::gguf::TensorInfo* info = file->find_tensor(tensor);
        REQUIRE(info != nullptr);
        const size_t cols = entry["row_length"].get<size_t>();
        const auto expected = smol_test::read_f32(*rows_path);
        const auto row_ids = entry["rows"].get<std::vector<size_t>>();
        REQUIRE(expected.size() == row_ids.size() * cols);
        const size_t row_bytes = smol::row_bytes(info->type, cols);
        std::vector<float> ours(cols);
        for (size_t k = 0; k < row_ids.size(); ++k) {
            smol::cuda_detail::emulate_dequantize_row(
                info->type, info->data + row_ids[k] * row_bytes, cols, ours.data());
            size_t bad = 0;
            for (size_t i = 0; i < cols; ++i) {
                const float want = expected[k * cols + i];
                if (!(std::fabs(ours[i] - want) <= 1e-6f * std::max(1.0f, std::fabs(want)))) ++bad;
            }
            CHECK_MESSAGE(bad == 0, "row " << row_ids[k] << ": " << bad << " elements differ");
            smol_test::count_golden();
        }
    }
}

TEST_CASE("cuda emulation: the int8 block dot products match float math") {
    const size_t rows = 8, cols = 1024;
    for (GGMLType type : kMatrixTypes) {
        CAPTURE(smol::type_name(type));
        const auto packed = random_matrix(type, rows, cols, 101 + uint64_t(type));
        const auto weights = dequantized(type, packed, rows, cols);
        const size_t row_bytes = smol::row_bytes(type, cols);
        for (uint64_t seed = 0; seed < 3; ++seed) {
            auto x = random_floats(cols, 1000 + seed);
            if (seed == 2)  // uneven magnitudes across blocks
                for (size_t i = 0; i < cols; ++i)
                    x[i] *= float(1 + (i / 32) % 5) * (i % 7 == 0 ? 10.0f : 1.0f);
            for (size_t r = 0; r < rows; ++r) {
                const double reference = dot_double(&weights[r * cols], x.data(), cols);
                const float ours =
                    smol::cuda_detail::emulate_dot(type, &packed[r * row_bytes], cols, x.data());
                const double bound = act_rounding_bound(&weights[r * cols], x.data(), cols);
                CHECK_MESSAGE(std::fabs(ours - reference) <= bound,
                              "row " << r << " seed " << seed << ": " << ours << " vs " << reference
                                     << " (bound " << bound << ")");
            }
        }
    }
}

// The prefill's tensor-core tiles (src/cuda/tiles.cuh), run on the host with
// the warp's mma modelled by the PTX fragment layout: every output within the
// activation-rounding bound, for partial row and token tiles; and each token's
// result the same bits whatever tile it sits in and whatever shares it.
TEST_CASE("cuda emulation: the tensor-core tiles match float math") {
    const size_t rows = 67;  // a full and a partial 64-row tile
    for (GGMLType type : kMatrixTypes) {
        for (size_t cols : {size_t(256), size_t(1024)}) {
            CAPTURE(smol::type_name(type));
            CAPTURE(cols);
            const auto packed = random_matrix(type, rows, cols, 211 + cols + uint64_t(type));
            const auto weights = dequantized(type, packed, rows, cols);
            const size_t n_tokens = 70;  // a full and a partial 64-token tile
            auto x = random_floats(n_tokens * cols, 17 + cols);
            for (size_t i = 0; i < x.size(); ++i)  // uneven magnitudes across blocks
                x[i] *= float(1 + (i / 32) % 5);
            std::vector<float> y(n_tokens * rows, NAN);
            smol::cuda_detail::emulate_matmul_tiles(type, packed.data(), rows, cols, x.data(),
                                                    n_tokens, y.data());
            size_t bad = 0;
            for (size_t t = 0; t < n_tokens; ++t)
                for (size_t r = 0; r < rows; ++r) {
                    const double reference = dot_double(&weights[r * cols], &x[t * cols], cols);
                    const double bound = act_rounding_bound(&weights[r * cols], &x[t * cols], cols);
                    if (!(std::fabs(y[t * rows + r] - reference) <= bound)) ++bad;
                }
            CHECK_MESSAGE(bad == 0, bad << " outputs outside the activation-rounding bound");
            // Tokens 66..69 alone (another tile position, fewer tokens): same bits.
            std::vector<float> tail(4 * rows, NAN);
            smol::cuda_detail::emulate_matmul_tiles(type, packed.data(), rows, cols, &x[66 * cols],
                                                    4, tail.data());
            CHECK(std::equal(tail.begin(), tail.end(), &y[66 * rows]));
        }
    }
}

// The GPU's activation codes are the CPU path's (kernels/activations.hpp), so
// both round as the reference engine does: Q8_K32 for the K-quants, Q8_0 for Q8_0.
TEST_CASE("cuda emulation: activation codes and scales equal the CPU quantizers'") {
    for (float sd : {0.02f, 1.0f, 40.0f}) {
        CAPTURE(sd);
        auto x = random_floats(1024, 41 + uint64_t(sd), sd);
        x[37] = 0.0f;
        for (size_t i = 64; i < 96; ++i) x[i] = 0.0f;  // an all-zero block
        x[200] = 127.0f * sd;                          // an outlier
        std::vector<int8_t> q(x.size());
        std::vector<float> d(x.size() / 32);

        smol::cuda_detail::emulate_quantize_activations(GGMLType::Q4_K, x.data(), x.size(),
                                                        q.data(), d.data());
        std::vector<smol::BlockQ8K32> k32(x.size() / 256);
        smol::kernels::scalar::quantize_row_q8_k32(x.data(), k32.data(), x.size());
        size_t bad = 0;
        for (size_t i = 0; i < x.size(); ++i) bad += q[i] != k32[i / 256].qs[i % 256];
        for (size_t b = 0; b < d.size(); ++b) bad += d[b] != k32[b / 8].d[b % 8];
        CHECK_MESSAGE(bad == 0, bad << " codes or scales differ from Q8_K32");

        smol::cuda_detail::emulate_quantize_activations(GGMLType::Q8_0, x.data(), x.size(),
                                                        q.data(), d.data());
        std::vector<smol::BlockQ8_0> q80(x.size() / 32);
        smol::kernels::scalar::quantize_row_q8_0(x.data(), q80.data(), x.size());
        bad = 0;
        for (size_t i = 0; i < x.size(); ++i) bad += q[i] != q80[i / 32].qs[i % 32];
        for (size_t b = 0; b < d.size(); ++b) bad += d[b] != smol::fp16_to_fp32(q80[b].d);
        CHECK_MESSAGE(bad == 0, bad << " codes or scales differ from Q8_0");
    }
}

TEST_CASE("cuda: without a usable device, the backend reports unsupported") {
    std::string why;
    if (smol::cuda_available(&why)) {
        MESSAGE("a CUDA device is present: the no-device path is not exercised");
        return;
    }
    CHECK(!why.empty());
    const auto file = smol::gguf::File::from_bytes(
        smol_tools::make_model_bytes(smol_test::small_model()), "made-model");
    const smol::SmolLM3 net(file);
    bool threw = false;
    try {
        smol::CudaBackend gpu(net);
    } catch (const smol::Error& e) {
        threw = true;
        CHECK(e.kind() == smol::ErrorKind::unsupported);
        CHECK(std::string(e.what()).find("cuda") != std::string::npos);
    }
    CHECK(threw);
}

// ---------------------------------------------------------------------------
// Kernels against the CPU reference (need a device)

TEST_CASE("cuda kernels: quantized mat-vec and mat-mat") {
    if (!have_gpu()) return;
    const size_t rows = 67;  // not a multiple of the 4 rows per thread block
    for (GGMLType type : kMatrixTypes) {
        // Q4_K: 256 and 1024 columns: 8 and 32 slices per row, 32 lanes per row
        // (four rows per block); 4096: 128 slices, 64 lanes (two rows per block);
        // 8448: 264 slices, 128 lanes per row and an odd last slice per lane.
        for (size_t cols : {size_t(256), size_t(1024), size_t(4096), size_t(8448)}) {
            const auto packed = random_matrix(type, rows, cols, 7 + cols + uint64_t(type));
            const auto weights = dequantized(type, packed, rows, cols);
            // Every token tile (1, 2, 4, 8) with full and partial tiles.
            for (size_t n_tokens :
                 {size_t(1), size_t(2), size_t(3), size_t(4), size_t(5), size_t(8), size_t(13)}) {
                CAPTURE(smol::type_name(type));
                CAPTURE(cols);
                CAPTURE(n_tokens);
                const auto x = random_floats(n_tokens * cols, 5 + n_tokens);
                std::vector<float> y(n_tokens * rows, NAN);
                smol::cuda_detail::run_matmul(type, packed.data(), rows, cols, x.data(), n_tokens,
                                              y.data());
                size_t bad = 0;
                for (size_t t = 0; t < n_tokens; ++t)
                    for (size_t r = 0; r < rows; ++r) {
                        const double reference = dot_double(&weights[r * cols], &x[t * cols], cols);
                        const double bound =
                            act_rounding_bound(&weights[r * cols], &x[t * cols], cols);
                        if (!(std::fabs(y[t * rows + r] - reference) <= bound)) ++bad;
                    }
                CHECK_MESSAGE(bad == 0, bad << " outputs outside the activation-rounding bound");
            }
        }
    }
}

// A prefill chunk of 32 tokens or more multiplies on the tensor-core tiles: the
// same bits as their host emulation (tiles.cuh's code, the mma by the PTX
// layout), within the activation-rounding bound of float math, and each
// token's bits independent of the tile it sits in (32 tokens against 77).
TEST_CASE("cuda kernels: the tensor-core tiles of a prefill chunk") {
    if (!have_gpu()) return;
    REQUIRE(smol::cuda_detail::tile_min_tokens() <= 32);
    const size_t rows = 131;  // two full 64-row tiles and a partial one
    for (GGMLType type : kMatrixTypes) {
        for (size_t cols : {size_t(256), size_t(2048)}) {
            CAPTURE(smol::type_name(type));
            CAPTURE(cols);
            const auto packed = random_matrix(type, rows, cols, 57 + cols + uint64_t(type));
            const auto weights = dequantized(type, packed, rows, cols);
            const size_t n_tokens = 77;
            const auto x = random_floats(n_tokens * cols, 91 + cols);
            std::vector<float> y(n_tokens * rows, NAN), emulated(n_tokens * rows, NAN);
            smol::cuda_detail::run_matmul(type, packed.data(), rows, cols, x.data(), n_tokens,
                                          y.data());
            smol::cuda_detail::emulate_matmul_tiles(type, packed.data(), rows, cols, x.data(),
                                                    n_tokens, emulated.data());
            size_t bad = 0, differ = 0;
            for (size_t t = 0; t < n_tokens; ++t)
                for (size_t r = 0; r < rows; ++r) {
                    const double reference = dot_double(&weights[r * cols], &x[t * cols], cols);
                    const double bound = act_rounding_bound(&weights[r * cols], &x[t * cols], cols);
                    if (!(std::fabs(y[t * rows + r] - reference) <= bound)) ++bad;
                    differ += y[t * rows + r] != emulated[t * rows + r];
                }
            CHECK_MESSAGE(bad == 0, bad << " outputs outside the activation-rounding bound");
            CHECK_MESSAGE(differ == 0, differ << " outputs differ from the host emulation");
            std::vector<float> part(32 * rows, NAN);
            smol::cuda_detail::run_matmul(type, packed.data(), rows, cols, &x[45 * cols], 32,
                                          part.data());
            CHECK_MESSAGE(std::equal(part.begin(), part.end(), &y[45 * rows]),
                          "tokens 45..76 alone differ from the same tokens in 77");
        }
    }
}

// A decode step multiplies q, k, v (and gate, up) in one grouped launch, and a
// batched step runs several sequences' tokens in one tile: both must give each
// matrix and each token exactly the bits it gets alone.
TEST_CASE("cuda kernels: grouped matrices and token tiles give the bits of a lone mat-vec") {
    if (!have_gpu()) return;
    const size_t rows[] = {67, 16, 5};  // row blocks that straddle two matrices
    for (GGMLType type : kMatrixTypes) {
        for (size_t cols : {size_t(1024), size_t(8448)}) {
            CAPTURE(smol::type_name(type));
            CAPTURE(cols);
            const size_t n_tokens = 5;
            const auto x = random_floats(n_tokens * cols, 77 + cols);
            std::vector<std::vector<uint8_t>> packed;
            std::vector<std::vector<float>> grouped;
            for (size_t i = 0; i < 3; ++i) {
                packed.push_back(random_matrix(type, rows[i], cols, 300 + 10 * i + cols));
                grouped.push_back(random_floats(n_tokens * rows[i], 400 + i));  // accumulated onto
            }
            const std::vector<std::vector<float>> initial = grouped;
            const void* weights[] = {packed[0].data(), packed[1].data(), packed[2].data()};
            float* y[] = {grouped[0].data(), grouped[1].data(), grouped[2].data()};
            const bool accumulate[] = {false, true, false};
            smol::cuda_detail::run_matmul_group(type, weights, rows, 3, cols, x.data(), n_tokens, y,
                                                accumulate);
            for (size_t i = 0; i < 3; ++i) {
                std::vector<float> alone(n_tokens * rows[i]);
                smol::cuda_detail::run_matmul(type, packed[i].data(), rows[i], cols, x.data(),
                                              n_tokens, alone.data());
                size_t differ = 0;
                for (size_t k = 0; k < alone.size(); ++k) {
                    const float expected = accumulate[i] ? initial[i][k] + alone[k] : alone[k];
                    if (grouped[i][k] != expected) ++differ;
                }
                CHECK_MESSAGE(differ == 0, "matrix " << i << ": " << differ << " outputs differ");
                // Each token of the 5-token tile against the token alone.
                for (size_t t = 0; t < n_tokens; ++t) {
                    std::vector<float> one(rows[i]);
                    smol::cuda_detail::run_matmul(type, packed[i].data(), rows[i], cols,
                                                  &x[t * cols], 1, one.data());
                    CHECK_MESSAGE(std::equal(one.begin(), one.end(), &alone[t * rows[i]]),
                                  "matrix " << i << " token " << t << " differs alone");
                }
            }
        }
    }
}

TEST_CASE("cuda kernels: embedding rows") {
    if (!have_gpu()) return;
    const GGMLType types[] = {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q8_0,
                              GGMLType::F16,  GGMLType::BF16, GGMLType::F32};
    const size_t rows = 40, cols = 512;
    for (GGMLType type : types) {
        CAPTURE(smol::type_name(type));
        const auto packed = random_matrix(type, rows, cols, 3 + uint64_t(type));
        const auto reference = dequantized(type, packed, rows, cols);
        const std::vector<int32_t> tokens = {0, 39, 7, 7, 21};
        std::vector<float> out(tokens.size() * cols);
        smol::cuda_detail::run_embed(type, packed.data(), rows, cols, tokens.data(), tokens.size(),
                                     out.data());
        const float tolerance = 1e-6f * max_abs(reference);
        size_t bad = 0;
        for (size_t t = 0; t < tokens.size(); ++t)
            for (size_t i = 0; i < cols; ++i)
                if (!(std::fabs(out[t * cols + i] - reference[size_t(tokens[t]) * cols + i]) <=
                      tolerance))
                    ++bad;
        CHECK(bad == 0);
    }
}

TEST_CASE("cuda kernels: rmsnorm + activation quantization, swiglu") {
    if (!have_gpu()) return;
    const size_t n_tokens = 5, cols = 768;
    auto x = random_floats(n_tokens * cols, 21, 3.0f);
    const auto weight = random_floats(cols, 22, 1.0f);
    std::vector<float> out(n_tokens * cols), quantized(n_tokens * cols), reference(cols);
    smol::cuda_detail::run_rmsnorm(x.data(), weight.data(), n_tokens, cols, 1e-6f, out.data(),
                                   quantized.data());
    for (size_t t = 0; t < n_tokens; ++t) {
        smol::kernels::scalar::rmsnorm(&x[t * cols], weight.data(), reference.data(), cols, 1e-6f);
        for (size_t b = 0; b < cols / 32; ++b) {
            float amax = 0;
            for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(reference[b * 32 + i]));
            for (size_t i = b * 32; i < b * 32 + 32; ++i) {
                CHECK(out[t * cols + i] == doctest::Approx(reference[i]).epsilon(1e-4).scale(1.0));
                CHECK(std::fabs(quantized[t * cols + i] - reference[i]) <=
                      amax / 127.0f * 0.5f * 1.01f + 1e-5f);
            }
        }
    }
    const size_t n = 1024;
    const auto gate = random_floats(n, 31, 3.0f), up = random_floats(n, 32, 1.0f);
    std::vector<float> ours(n), expected(n);
    smol::cuda_detail::run_swiglu(gate.data(), up.data(), n, ours.data());
    smol::kernels::scalar::swiglu(gate.data(), up.data(), expected.data(), n);
    for (size_t i = 0; i < n; ++i)
        CHECK(ours[i] == doctest::Approx(expected[i]).epsilon(1e-5).scale(1e-3));
}

TEST_CASE("cuda kernels: RoPE on adjacent pairs and NoPE") {
    if (!have_gpu()) return;
    const size_t n_tokens = 3, heads = 4, kv_heads = 2, head_dim = 64, start = 1000;
    const float base = 5e6f;
    for (bool use_rope : {true, false}) {
        for (size_t rope_dims : {head_dim, size_t(32)}) {
            CAPTURE(use_rope);
            CAPTURE(rope_dims);
            auto q = random_floats(n_tokens * heads * head_dim, 41),
                 k = random_floats(n_tokens * kv_heads * head_dim, 42);
            const auto q_in = q, k_in = k;
            auto q_gpu = q, k_gpu = k;
            smol::cuda_detail::run_rope(q_gpu.data(), k_gpu.data(), n_tokens, heads, kv_heads,
                                        head_dim, rope_dims, base, start, use_rope);
            auto rotate = [&](std::vector<float>& v, size_t n_heads) {
                if (!use_rope) return;
                for (size_t t = 0; t < n_tokens; ++t)
                    for (size_t h = 0; h < n_heads; ++h)
                        for (size_t i = 0; i < rope_dims / 2; ++i) {
                            const double theta =
                                double(start + t) *
                                std::pow(double(base), -2.0 * double(i) / double(rope_dims));
                            const float c = float(std::cos(theta)), s = float(std::sin(theta));
                            float* p = &v[(t * n_heads + h) * head_dim + 2 * i];
                            const float x0 = p[0], x1 = p[1];
                            p[0] = x0 * c - x1 * s;
                            p[1] = x0 * s + x1 * c;
                        }
            };
            rotate(q, heads);
            rotate(k, kv_heads);
            // A rotated value is x0 c - x1 s: where the two products nearly cancel,
            // a relative bound on the result fails for rounding alone (nvcc may
            // contract to an FMA, the device's sin/cos differ from the host's by
            // an ulp). The error is bounded by the inputs' size instead.
            auto check_rotated = [&](const std::vector<float>& got, const std::vector<float>& want,
                                     const std::vector<float>& in) {
                for (size_t i = 0; i < want.size(); ++i) {
                    const size_t pair = i & ~size_t(1);
                    const double magnitude =
                        std::fabs(double(in[pair])) + std::fabs(double(in[pair + 1]));
                    CHECK(std::fabs(double(got[i]) - double(want[i])) <= 4e-6 * magnitude + 1e-7);
                }
            };
            check_rotated(q_gpu, q, q_in);
            check_rotated(k_gpu, k, k_in);
        }
    }
}

TEST_CASE("cuda kernels: causal GQA attention over the F16 cache") {
    if (!have_gpu()) return;
    struct Case {
        size_t n_tokens, start, heads, kv_heads, head_dim;
    };
    // From 32 tokens on a chunk takes the tiles (attention_tiles.cu): head dims
    // 64 and 128, query heads per kv head 1, 2, 4, 8, several key tiles and
    // blocks; head dim 256 and 3 heads per kv head stay on the one-token kernel.
    const Case cases[] = {{1, 0, 4, 1, 64},      {1, 37, 16, 4, 128}, {5, 11, 8, 2, 32},
                          {3, 600, 4, 4, 256},   {9, 0, 4, 2, 64},    {32, 0, 16, 4, 128},
                          {77, 100, 16, 4, 128}, {40, 5, 4, 2, 64},   {36, 0, 8, 1, 64},
                          {33, 70, 4, 4, 128},   {40, 0, 4, 4, 256},  {34, 2, 6, 2, 64}};
    for (const Case& c : cases) {
        CAPTURE(c.n_tokens);
        CAPTURE(c.start);
        CAPTURE(c.head_dim);
        const size_t positions = c.start + c.n_tokens, hd = c.head_dim;
        const auto q = random_floats(c.n_tokens * c.heads * hd, 51, 1.0f);
        auto keys = random_floats(c.kv_heads * positions * hd, 52, 1.0f);
        auto values = random_floats(c.kv_heads * positions * hd, 53, 1.0f);
        std::vector<float> out(c.n_tokens * c.heads * hd);
        smol::cuda_detail::run_attention(q.data(), keys.data(), values.data(), c.n_tokens, c.start,
                                         c.heads, c.kv_heads, hd, out.data());
        for (float& v : keys)
            v = smol::fp16_to_fp32(smol::fp32_to_fp16(v));  // as the cache stores them
        for (float& v : values) v = smol::fp16_to_fp32(smol::fp32_to_fp16(v));
        const size_t group = c.heads / c.kv_heads;
        size_t bad = 0;
        for (size_t t = 0; t < c.n_tokens; ++t)
            for (size_t h = 0; h < c.heads; ++h) {
                const size_t kvh = h / group, seen = c.start + t + 1;
                const float* qh = &q[(t * c.heads + h) * hd];
                std::vector<double> scores(seen);
                double top = -1e300;
                for (size_t p = 0; p < seen; ++p) {
                    scores[p] = dot_double(qh, &keys[(kvh * positions + p) * hd], hd) /
                                std::sqrt(double(hd));
                    top = std::max(top, scores[p]);
                }
                double total = 0;
                for (double& s : scores) total += (s = std::exp(s - top));
                for (size_t d = 0; d < hd; ++d) {
                    double o = 0;
                    for (size_t p = 0; p < seen; ++p)
                        o += scores[p] / total * values[(kvh * positions + p) * hd + d];
                    if (!(std::fabs(out[(t * c.heads + h) * hd + d] - o) <=
                          1e-4 + 1e-4 * std::fabs(o)))
                        ++bad;
                }
            }
        CHECK_MESSAGE(bad == 0, bad << " outputs differ");
    }
    // A token's bits on the tiles do not depend on the chunk around it: the last
    // 32 tokens of a 77-token chunk alone (same cache, same positions).
    {
        const size_t n = 77, start = 100, heads = 16, kv_heads = 4, hd = 128;
        const size_t positions = start + n;
        const auto q = random_floats(n * heads * hd, 61, 1.0f);
        const auto keys = random_floats(kv_heads * positions * hd, 62, 1.0f);
        const auto values = random_floats(kv_heads * positions * hd, 63, 1.0f);
        std::vector<float> all(n * heads * hd), tail(32 * heads * hd);
        smol::cuda_detail::run_attention(q.data(), keys.data(), values.data(), n, start, heads,
                                         kv_heads, hd, all.data());
        smol::cuda_detail::run_attention(&q[45 * heads * hd], keys.data(), values.data(), 32,
                                         start + 45, heads, kv_heads, hd, tail.data());
        CHECK(std::equal(tail.begin(), tail.end(), &all[45 * heads * hd]));
    }
}

// ---------------------------------------------------------------------------
// The whole forward pass (need a device)

using smol_test::check_logits_close;

TEST_CASE("cuda forward agrees with the CPU forward on generated models") {
    if (!have_gpu()) return;
    struct Case {
        GGMLType matrices, embedding;
        bool tied;
        size_t heads, kv_heads, head_dim;
    };
    const Case cases[] = {{GGMLType::Q4_K, GGMLType::Q6_K, true, 4, 1, 64},
                          {GGMLType::Q5_K, GGMLType::Q5_K, false, 4, 2, 64},
                          {GGMLType::Q6_K, GGMLType::Q6_K, true, 4, 4, 64},
                          {GGMLType::Q8_0, GGMLType::Q8_0, false, 8, 2, 32}};
    smol::ThreadPool pool(2);
    for (const Case& c : cases) {
        auto spec = smol_test::small_model();
        spec.matrix_type = c.matrices;
        spec.embedding_type = c.embedding;
        spec.untied = !c.tied;
        spec.shape.heads = uint32_t(c.heads);
        spec.shape.kv_heads = uint32_t(c.kv_heads);
        spec.shape.head_dim = uint32_t(c.head_dim);
        spec.seed = uint64_t(c.matrices) * 17 + c.heads;
        const std::string where = smol::type_name(c.matrices) + " model";
        CAPTURE(where);
        const auto file =
            smol::gguf::File::from_bytes(smol_tools::make_model_bytes(spec), "made-model");
        const smol::SmolLM3 net(file);
        const size_t vocab = net.config().vocab_size;
        smol::CudaBackend gpu(net);
        REQUIRE(gpu.vocab_size() == vocab);

        std::mt19937 rng(unsigned(spec.seed));
        std::vector<int32_t> ids(30);
        for (int32_t& id : ids) id = int32_t(rng() % vocab);

        // Prefill with every position's logits.
        smol::KVCache kv(net.config(), 256);
        smol::CudaKVCache gkv(gpu, 256);
        std::vector<float> cpu(ids.size() * vocab), ours(ids.size() * vocab);
        smol::ForwardOptions all;
        all.all_logits = true;
        net.forward(ids.data(), ids.size(), 0, kv, cpu.data(), pool, all);
        gpu.forward(ids.data(), ids.size(), 0, gkv, ours.data(), true);
        CHECK(gkv.size() == ids.size());
        for (size_t t = 0; t < ids.size(); ++t)
            check_logits_close(&ours[t * vocab], &cpu[t * vocab], vocab,
                               where + " position " + std::to_string(t));

        // KV rows as the CPU cache holds them.
        std::vector<float> row_cpu(c.head_dim), row_gpu(c.head_dim);
        for (size_t layer : {size_t(0), net.config().n_layers - 1})
            for (const smol::KVPart kind : {smol::KVPart::keys, smol::KVPart::values})
                for (size_t pos : {size_t(0), ids.size() - 1}) {
                    kv.load_row(layer, kind, c.kv_heads - 1, pos, row_cpu.data());
                    gkv.load_row(layer, kind, c.kv_heads - 1, pos, row_gpu.data());
                    smol_test::check_kv_row_close(row_gpu.data(), row_cpu.data(), c.head_dim,
                                                  "layer " + std::to_string(layer) + " kind " +
                                                      std::to_string(int(kind)) + " pos " +
                                                      std::to_string(pos));
                }

        // Decode steps (the graph path) after a last-logits prefill.
        std::vector<float> cpu_step(vocab), gpu_step(vocab);
        gpu.forward(ids.data(), 20, 0, gkv, gpu_step.data());
        net.forward(ids.data(), 20, 0, kv, cpu_step.data(), pool);
        check_logits_close(gpu_step.data(), cpu_step.data(), vocab, where + " prefill 20");
        for (size_t s = 20; s < ids.size(); ++s) {
            gpu.forward(&ids[s], 1, s, gkv, gpu_step.data());
            net.forward(&ids[s], 1, s, kv, cpu_step.data(), pool);
            check_logits_close(gpu_step.data(), cpu_step.data(), vocab,
                               where + " decode " + std::to_string(s));
            // The decode logits equal the prefill's logits at that position (same math).
            check_logits_close(gpu_step.data(), &ours[s * vocab], vocab,
                               where + " decode vs prefill");
        }
        // Re-running from an earlier position overwrites the cache (prompt-prefix reuse).
        gpu.forward(&ids[10], 1, 10, gkv, gpu_step.data());
        CHECK(gkv.size() == 11);
        check_logits_close(gpu_step.data(), &ours[10 * vocab], vocab, where + " rewind");

        // Contract errors.
        auto kind_of = [](auto&& f) {
            try {
                f();
            } catch (const smol::Error& e) {
                return e.kind();
            }
            return smol::ErrorKind::internal;
        };
        const int32_t bad_token = int32_t(vocab);
        CHECK(kind_of([&] { gpu.forward(&bad_token, 1, 0, gkv, gpu_step.data()); }) ==
              smol::ErrorKind::invalid_argument);
        CHECK(kind_of([&] { gpu.forward(ids.data(), 1, 12, gkv, gpu_step.data()); }) ==
              smol::ErrorKind::out_of_range);
        CHECK(kind_of([&] { gpu.forward(ids.data(), 2, 255, gkv, gpu_step.data()); }) ==
              smol::ErrorKind::out_of_range);
        CHECK(kind_of([&] { gpu.forward(ids.data(), 0, 0, gkv, gpu_step.data()); }) ==
              smol::ErrorKind::invalid_argument);
        CHECK(kind_of([&] { smol::CudaKVCache(gpu, net.config().context_length + 1); }) ==
              smol::ErrorKind::invalid_argument);
        smol::CudaBackend other(net);
        CHECK(kind_of([&] { other.forward(ids.data(), 1, 0, gkv, gpu_step.data()); }) ==
              smol::ErrorKind::invalid_argument);
    }
}

TEST_CASE("cuda host side: moved-from caches, the caller's device, row sizes") {
    if (!have_gpu()) return;
    const auto file = smol::gguf::File::from_bytes(
        smol_tools::make_model_bytes(smol_test::small_model()), "made-model");
    const smol::SmolLM3 net(file);
    int before = -1;
    REQUIRE(cudaGetDevice(&before) == cudaSuccess);
    smol::CudaBackend gpu(net);
    smol::CudaKVCache kv(gpu, 64);
    smol::CudaKVCache moved = std::move(kv);
    CHECK(kv.size() == 0);
    kv.truncate(0);  // nothing to drop: no write through the empty state
    CHECK_THROWS_AS(kv.truncate(1), smol::Error);
    std::vector<float> logits(gpu.vocab_size());
    const int32_t token = 1;
    gpu.forward(&token, 1, 0, moved, logits.data());
    int after = -1;
    REQUIRE(cudaGetDevice(&after) == cudaSuccess);
    CHECK(after == before);  // the backend gives the thread its device back

    // A row size that disagrees with the type and width is named as such.
    smol::cuda_detail::ModelUpload upload = smol::cuda_detail::describe(net);
    upload.layers[0].q.row_bytes += 4;
    try {
        smol::CudaBackend bad(upload);
        FAIL("a padded row was accepted");
    } catch (const smol::Error& e) {
        CHECK(e.kind() == smol::ErrorKind::shape);
        CHECK(std::string(e.what()).find("bytes") != std::string::npos);
    }
}

TEST_CASE("cuda forward: unsupported matrix types are named") {
    if (!have_gpu()) return;
    auto spec = smol_test::small_model();
    spec.matrix_type = GGMLType::F16;
    const auto file =
        smol::gguf::File::from_bytes(smol_tools::make_model_bytes(spec), "made-model");
    const smol::SmolLM3 net(file);
    try {
        smol::CudaBackend gpu(net);
        FAIL("an F16 model was accepted");
    } catch (const smol::Error& e) {
        CHECK(e.kind() == smol::ErrorKind::unsupported);
        CHECK(std::string(e.what()).find("blk.0.attn_q.weight") != std::string::npos);
    }
}

TEST_CASE("cuda forward matches the fixture goldens") {
    if (!have_gpu()) return;
    for (const std::string name : {"tiny-q4km.gguf", "small-q4km.gguf", "tiny-q8_0.gguf"}) {
        CAPTURE(name);
        const auto path = smol_test::fixture(name);
        const auto goldens = smol_test::load_golden(name);
        if (!path || !goldens) continue;
        const auto model = smol::Model::load(*path);
        smol::CudaBackend gpu(*model);
        const size_t vocab = gpu.vocab_size();
        for (size_t i = 0; i < goldens->size(); ++i) {
            const smol_test::GoldenPrompt& g = (*goldens)[i];
            const std::string where = name + " prompt " + std::to_string(i);
            smol::CudaKVCache kv(gpu, 1024);
            std::vector<float> all(g.ids.size() * vocab);
            gpu.forward(g.ids.data(), g.ids.size(), 0, kv, all.data(), true);
            for (size_t t = 0; t < g.ids.size(); ++t)
                CHECK_MESSAGE(smol_test::top8_matches(&all[t * vocab], vocab, g.prompt_top[t],
                                                      where + " position " + std::to_string(t)),
                              where << " position " << t << " top-8");
            smol_test::count_golden();
            const auto reference = smol_test::read_f32(g.logits_path);
            REQUIRE(reference.size() == vocab);
            const float* last = &all[(g.ids.size() - 1) * vocab];
            check_logits_close(last, reference.data(), vocab, where + " last position");
            smol_test::count_golden();
            std::vector<float> step(vocab);
            size_t pos = g.ids.size();
            const size_t same = smol_test::check_greedy(
                g, last, vocab,
                [&](int32_t id) -> const float* {
                    gpu.forward(&id, 1, pos++, kv, step.data());
                    return step.data();
                },
                where);
            MESSAGE(where << ": " << same << " greedy steps identical");
            smol_test::count_golden();
        }
    }
}

TEST_CASE("cuda forward agrees with the CPU on the GQA Q5_K_M fixture") {
    if (!have_gpu()) return;
    const auto path = smol_test::fixture("tiny-gqa-q5km.gguf");
    if (!path) return;
    const auto model = smol::Model::load(*path);
    smol::CudaBackend gpu(*model);
    const auto ids =
        model->tokenizer().encode("The quick brown fox jumps over the lazy dog, twice.", false);
    const size_t vocab = gpu.vocab_size();
    smol::KVCache kv = model->make_cache(256);
    smol::CudaKVCache gkv(gpu, 256);
    std::vector<float> cpu(vocab), ours(vocab);
    model->forward(ids.data(), ids.size(), 0, kv, cpu.data());
    gpu.forward(ids.data(), ids.size(), 0, gkv, ours.data());
    check_logits_close(ours.data(), cpu.data(), vocab, "tiny-gqa-q5km prefill");
    for (int s = 0; s < 8; ++s) {
        const int32_t next = smol_test::argmax(cpu.data(), vocab);
        const size_t pos = ids.size() + size_t(s);
        model->forward(&next, 1, pos, kv, cpu.data());
        gpu.forward(&next, 1, pos, gkv, ours.data());
        check_logits_close(ours.data(), cpu.data(), vocab,
                           "tiny-gqa-q5km decode " + std::to_string(s));
    }
}

// ---------------------------------------------------------------------------
// The backend seam (model/backend.hpp): LoadOptions::device, Generator on the
// GPU, sessions moving between CPU and GPU caches.

using smol_test::one_segment;

// Host only: a CUDA backend made from a model whose CPU kernels interleaved its
// rows at load uploads the rows as stored in the file.
TEST_CASE("cuda upload: an interleaved CPU model uploads stored rows") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    size_t count = 0;
    const smol::CpuLevel* levels = smol::compiled_cpu_levels(count);
    for (size_t i = 0; i < count; ++i) {
        const smol::CpuLevel level = levels[i];
        if (!smol::cpu_supports(level)) continue;
        smol::LoadOptions options;
        options.n_threads = 1;
        options.cpu = level;
        const auto interleaved = smol::Model::load(*path, options);
        options.interleave_weights = false;
        const auto stored = smol::Model::load(*path, options);
        const auto upload = smol::cuda_detail::describe(*interleaved);
        const smol::WeightMatrix& up_stored = stored->weights().layers[0].ffn_up;
        CHECK(upload.layers[0].up.interleaved_rows == 0);
        CHECK(std::memcmp(upload.layers[0].up.data, up_stored.data,
                          up_stored.rows * up_stored.row_bytes) == 0);
    }
}

TEST_CASE("cuda device choice: LoadOptions::device cuda / auto in a build with the backend") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    std::vector<std::string> lines;
    smol::LoadOptions automatic;
    automatic.device = smol::Device::automatic;
    automatic.device_backend = smol::cuda_backend();
    automatic.log = [&](int, const std::string& line) { lines.push_back(line); };
    const auto model = smol::Model::load(*path, automatic);
    auto said = [&](const std::string& prefix) {
        return std::any_of(lines.begin(), lines.end(),
                           [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
    };
    smol::LoadOptions cuda;
    cuda.device = smol::Device::cuda;
    cuda.device_backend = smol::cuda_backend();
    std::string why;
    if (!smol::cuda_available(&why)) {
        CHECK(model->device() == smol::Device::cpu);
        CHECK(said("smol: device cpu"));
        try {
            smol::Model::load(*path, cuda);
            FAIL("device cuda loaded without a device");
        } catch (const smol::Error& e) {
            CHECK(e.kind() == smol::ErrorKind::unsupported);
            CHECK(std::string(e.what()).find(why) != std::string::npos);
        }
        return;
    }
    CHECK(model->device() == smol::Device::cuda);
    CHECK(said("smol: device cuda"));
    CHECK(smol::Model::load(*path, cuda)->backend().name().rfind("cuda (", 0) == 0);
}

TEST_CASE("cuda seam: Generator on the GPU, forks, segments, sessions between CPU and GPU") {
    if (!have_gpu()) return;
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    smol::LoadOptions on_gpu;
    on_gpu.device = smol::Device::cuda;
    on_gpu.device_backend = smol::cuda_backend();
    const auto gpu_model = smol::Model::load(*path, on_gpu);
    const auto cpu_model = smol::Model::load(*path);
    REQUIRE(gpu_model->device() == smol::Device::cuda);
    REQUIRE(gpu_model->identity() == cpu_model->identity());

    smol::GenerateParams greedy;
    greedy.temperature = 0.0f;
    greedy.max_tokens = 16;
    greedy.ignore_eos = true;
    smol::GeneratorOptions options;
    options.n_ctx = 256;
    smol::Generator gpu(gpu_model, options), cpu(cpu_model, options);
    const auto a = gpu.generate("Once upon a time", greedy);
    CHECK(a.tokens.size() == 16);
    CHECK(gpu.n_cached() == a.n_prompt_tokens + 15);
    const auto again = gpu.generate("Once upon a time", greedy);  // the prompt is reused
    CHECK(again.n_reused_tokens == again.n_prompt_tokens - 1);

    // A fork continues exactly as the original.
    smol::Generator branch = gpu.fork();
    const std::string more = "Once upon a time there was";
    CHECK(branch.generate(more, greedy).tokens == gpu.generate(more, greedy).tokens);

    // GPU session -> CPU generator -> saved again: the same bytes (the cache is F16 on both).
    const auto from_gpu = gpu.save_session();
    cpu.restore_session(from_gpu);
    CHECK(cpu.history() == gpu.history());
    CHECK(cpu.save_session() == from_gpu);
    // CPU session -> GPU generator, the same way round.
    cpu.generate("The quick brown fox", greedy);
    const auto from_cpu = cpu.save_session();
    smol::Generator restored(gpu_model, options);
    restored.restore_session(from_cpu);
    CHECK(restored.save_session() == from_cpu);
    CHECK(restored.n_cached() == cpu.n_cached());

    // Cancellation through the seam (between chunks on the GPU).
    smol::GeneratorOptions small_chunks = options;
    small_chunks.prefill_chunk = 4;
    smol::Generator cancelled(gpu_model, small_chunks);
    greedy.logits_hook = [&](float*, size_t) { cancelled.cancel(); };
    const auto c = cancelled.generate("The quick brown fox jumps over the lazy dog", greedy);
    CHECK(c.stop_reason == smol::StopReason::cancelled);
    CHECK(c.tokens.size() == 1);

    // Two segments in one forward give what two forwards give.
    const smol::Backend& backend = gpu_model->backend();
    const size_t vocab = backend.vocab_size();
    const auto x = gpu_model->tokenizer().encode("Hello there, general", false);
    const auto y =
        gpu_model->tokenizer().encode("A longer second sequence of several tokens", false);
    auto run = [&](bool together) {
        auto cx = backend.make_cache(64), cy = backend.make_cache(64);
        std::vector<float> lx(vocab), ly(vocab);
        const smol::Segment both[2] = {one_segment(x, 0, *cx, lx), one_segment(y, 0, *cy, ly)};
        if (together) {
            backend.forward(both, 2);
        } else {
            backend.forward(both[0]);
            backend.forward(both[1]);
        }
        return std::make_pair(lx, ly);
    };
    const auto together = run(true), alone = run(false);
    check_logits_close(together.first.data(), alone.first.data(), vocab, "segment 0");
    check_logits_close(together.second.data(), alone.second.data(), vocab, "segment 1");

    // A CUDA cache refuses F32, a CPU cache on the GPU backend is refused.
    CHECK_THROWS_AS(backend.make_cache(64, smol::KVType::f32), smol::Error);
    smol::KVCache host = cpu_model->make_cache(64);
    std::vector<float> logits(vocab);
    try {
        backend.forward(one_segment(x, 0, host, logits));
        FAIL("a CPU cache ran on the GPU backend");
    } catch (const smol::Error& e) {
        CHECK(e.kind() == smol::ErrorKind::invalid_argument);
    }
}

// A batched step (several sequences in one pass over the weights) against the
// same chunks run one at a time: each token's arithmetic is the same whatever
// else shares its pass (per-row reductions in a fixed order), so the logits and
// the caches must be equal bit for bit.
TEST_CASE("cuda batched steps: one pass over several sequences equals separate passes") {
    if (!have_gpu()) return;
    const auto file = smol::gguf::File::from_bytes(
        smol_tools::make_model_bytes(smol_test::small_model()), "made-model");
    const smol::SmolLM3 net(file);
    smol::CudaBackend gpu(net);
    const smol::Backend& backend = gpu;
    const size_t vocab = backend.vocab_size();
    std::mt19937 rng(99);
    auto random_ids = [&](size_t n) {
        std::vector<int32_t> ids(n);
        for (int32_t& id : ids) id = int32_t(rng() % vocab);
        return ids;
    };
    // Four sequences: three with a history, one new.
    const size_t kSeqs = 4;
    const size_t history[kSeqs] = {20, 7, 33, 0};
    std::vector<std::unique_ptr<smol::BackendCache>> batched, alone;
    std::vector<float> scratch(vocab);
    for (size_t i = 0; i < kSeqs; ++i) {
        batched.push_back(backend.make_cache(128));
        alone.push_back(backend.make_cache(128));
        if (history[i] == 0) continue;
        const auto ids = random_ids(history[i]);
        backend.forward(one_segment(ids, 0, *batched[i], scratch));
        backend.forward(one_segment(ids, 0, *alone[i], scratch));
    }
    auto run_step = [&](const std::vector<std::vector<int32_t>>& ids, const bool* all,
                        const bool* want, size_t chunk_size) {
        std::vector<std::vector<float>> out_b(kSeqs), out_a(kSeqs);
        std::vector<smol::Segment> segments;
        for (size_t i = 0; i < kSeqs; ++i) {
            out_b[i].assign((all[i] ? ids[i].size() : 1) * vocab, NAN);
            out_a[i] = out_b[i];
            smol::Segment seg = one_segment(ids[i], batched[i]->size(), *batched[i], out_b[i]);
            seg.all_logits = all[i];
            if (!want[i]) seg.logits = nullptr;
            segments.push_back(seg);
        }
        smol::ForwardOptions options;
        options.chunk_size = chunk_size;
        backend.forward(segments.data(), segments.size(), options);
        for (size_t i = 0; i < kSeqs; ++i) {
            smol::Segment seg = one_segment(ids[i], alone[i]->size(), *alone[i], out_a[i]);
            seg.all_logits = all[i];
            if (!want[i]) seg.logits = nullptr;
            backend.forward(seg, options);
        }
        for (size_t i = 0; i < kSeqs; ++i) {
            CAPTURE(i);
            CHECK(batched[i]->size() == alone[i]->size());
            if (!want[i]) continue;
            float worst = 0;
            for (size_t j = 0; j < out_a[i].size(); ++j)
                worst = std::max(worst, std::fabs(out_b[i][j] - out_a[i][j]));
            CHECK_MESSAGE(out_b[i] == out_a[i], "max abs difference " << worst);
            check_logits_close(out_b[i].data(), out_a[i].data(), vocab, "batched step");
        }
    };
    // A decode token, a prefill chunk with every row's logits, a decode token
    // whose logits nobody wants, and a new sequence's prompt.
    {
        const std::vector<std::vector<int32_t>> ids = {random_ids(1), random_ids(9), random_ids(1),
                                                       random_ids(12)};
        const bool all[kSeqs] = {false, true, false, false};
        const bool want[kSeqs] = {true, true, false, true};
        run_step(ids, all, want, 0);
    }
    // Decode steps of all four (the Batcher's common case), then prompts chunked
    // by 8 so that later steps hold fewer sequences than the first.
    for (int step = 0; step < 3; ++step) {
        const std::vector<std::vector<int32_t>> ids = {random_ids(1), random_ids(1), random_ids(1),
                                                       random_ids(1)};
        const bool all[kSeqs] = {false, false, false, false};
        const bool want[kSeqs] = {true, true, true, true};
        run_step(ids, all, want, 0);
    }
    {
        const std::vector<std::vector<int32_t>> ids = {random_ids(20), random_ids(3), random_ids(1),
                                                       random_ids(11)};
        const bool all[kSeqs] = {false, false, false, true};
        const bool want[kSeqs] = {true, true, true, true};
        run_step(ids, all, want, 8);
    }
    // The caches hold the same rows.
    std::vector<float> row_b(smol_test::small_model().shape.head_dim),
        row_a(smol_test::small_model().shape.head_dim);
    for (size_t i = 0; i < kSeqs; ++i)
        for (size_t pos : {size_t(0), alone[i]->size() - 1})
            for (const smol::KVPart kind : {smol::KVPart::keys, smol::KVPart::values}) {
                static_cast<smol::CudaKVCache&>(*batched[i])
                    .load_row(1, kind, 0, pos, row_b.data());
                static_cast<smol::CudaKVCache&>(*alone[i]).load_row(1, kind, 0, pos, row_a.data());
                CHECK_MESSAGE(row_b == row_a, "sequence " << i << " position " << pos);
            }
}

// Generators sharing a Batcher on the GPU make the tokens they make alone.
TEST_CASE("cuda batcher: generators sharing steps match their runs alone") {
    if (!have_gpu()) return;
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    smol::LoadOptions on_gpu;
    on_gpu.device = smol::Device::cuda;
    on_gpu.device_backend = smol::cuda_backend();
    const auto model = smol::Model::load(*path, on_gpu);
    const std::vector<std::string> prompts = {"Once upon a time", "The quick brown fox",
                                              "In a village far away", "Hello there, general"};
    smol::GenerateParams greedy;
    greedy.temperature = 0.0f;
    greedy.max_tokens = 16;
    greedy.ignore_eos = true;
    smol::GeneratorOptions plain;
    plain.n_ctx = 256;
    std::vector<std::vector<int32_t>> alone;
    for (const std::string& prompt : prompts) {
        smol::Generator gen(model, plain);
        alone.push_back(gen.generate(prompt, greedy).tokens);
    }
    smol::GeneratorOptions shared = plain;
    shared.batcher = std::make_shared<smol::Batcher>(model);
    std::vector<std::unique_ptr<smol::Generator>> gens;
    std::vector<smol::AsyncGeneration> runs;
    for (size_t i = 0; i < prompts.size(); ++i) {
        gens.push_back(std::make_unique<smol::Generator>(model, shared));
        runs.push_back(gens.back()->generate_async(prompts[i], greedy));
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
        CAPTURE(prompts[i]);
        CHECK(runs[i].wait().tokens == alone[i]);
    }
    MESSAGE("batcher on the GPU: widest step " << shared.batcher->stats().widest << " of "
                                               << prompts.size());
}
