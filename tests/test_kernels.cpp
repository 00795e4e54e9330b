// Tests for include/smol/kernels: every fast kernel against its scalar
// reference on random inputs (odd shapes, 1..9 token columns, 1-3 threads),
// the scalar references against a double-precision dot of the dequantized
// operands (smol::dequantize_row, an independent spec), activation
// quantization, the float helpers, and matmul's argument checks.
//
// The golden case (real tensors of the fixture models against rows dequantized
// by an independent implementation) needs the fixtures and nlohmann-json; with
// SMOL_TEST_NO_FIXTURES the file is self-contained, which is how
// tools/ci-aarch64.sh cross-compiles it for NEON and runs it under qemu.
#include <doctest/doctest.h>

#include <smol/core/threadpool.hpp>
#include <smol/kernels/kernels.hpp>
#include <smol/quant/reference.hpp>

#if !defined(SMOL_TEST_NO_FIXTURES)
#include <nlohmann/json.hpp>
#include <smol/gguf/gguf.hpp>

#include <fstream>

#include "fixtures.hpp"
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

using smol::ActivationType;
using smol::GGMLType;
namespace kernels = smol::kernels;

std::mt19937& rng() {
    static std::mt19937 engine(12345);
    return engine;
}

float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng()); }
int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng()); }

std::vector<float> random_floats(size_t n, float scale = 1.0f) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng());
    return v;
}

// Random weight bytes of `rows` rows: random bytes are valid quant data; the
// fp16 scales are then overwritten with sane values.
std::vector<uint8_t> random_weights(GGMLType type, size_t rows, size_t cols) {
    const size_t row_bytes = smol::row_bytes(type, cols);
    std::vector<uint8_t> bytes(rows * row_bytes + 64);
    for (uint8_t& b : bytes) b = uint8_t(uniform_int(0, 255));
    auto half = [](float v) { return smol::fp32_to_fp16(v); };
    for (size_t r = 0; r < rows; ++r) {
        uint8_t* row = bytes.data() + r * row_bytes;
        switch (type) {
            case GGMLType::Q4_K:
                for (size_t b = 0; b < cols / 256; ++b) {
                    auto* block = reinterpret_cast<smol::BlockQ4K*>(row) + b;
                    block->d = half(uniform(0.0005f, 0.004f));
                    block->dmin = half(uniform(0.0005f, 0.004f));
                }
                break;
            case GGMLType::Q5_K:
                for (size_t b = 0; b < cols / 256; ++b) {
                    auto* block = reinterpret_cast<smol::BlockQ5K*>(row) + b;
                    block->d = half(uniform(0.0005f, 0.004f));
                    block->dmin = half(uniform(0.0005f, 0.004f));
                }
                break;
            case GGMLType::Q6_K:
                for (size_t b = 0; b < cols / 256; ++b) {
                    reinterpret_cast<smol::BlockQ6K*>(row)[b].d = half(uniform(0.0002f, 0.002f));
                }
                break;
            case GGMLType::Q8_0:
                for (size_t b = 0; b < cols / 32; ++b) {
                    reinterpret_cast<smol::BlockQ8_0*>(row)[b].d = half(uniform(0.001f, 0.01f));
                }
                break;
            case GGMLType::F16: {
                auto* h = reinterpret_cast<uint16_t*>(row);
                for (size_t i = 0; i < cols; ++i) h[i] = half(uniform(-1.0f, 1.0f));
                break;
            }
            case GGMLType::BF16: {
                auto* h = reinterpret_cast<uint16_t*>(row);
                for (size_t i = 0; i < cols; ++i) h[i] = smol::fp32_to_bf16(uniform(-1.0f, 1.0f));
                break;
            }
            case GGMLType::F32: {
                auto* f = reinterpret_cast<float*>(row);
                for (size_t i = 0; i < cols; ++i) f[i] = uniform(-1.0f, 1.0f);
                break;
            }
            default: break;
        }
    }
    return bytes;
}

// The quantized activation rows the scalar reference produces for x.
std::vector<uint8_t> reference_activations(GGMLType weight_type, const std::vector<float>& x, size_t n_tokens,
                                           size_t cols) {
    const ActivationType act = smol::activation_type_for(weight_type);
    const size_t row_bytes = smol::activation_row_bytes(act, cols);
    std::vector<uint8_t> out(n_tokens * row_bytes);
    for (size_t t = 0; t < n_tokens; ++t) {
        uint8_t* dst = out.data() + t * row_bytes;
        if (act == ActivationType::Q8_K32) {
            kernels::scalar::quantize_row_q8_k32(x.data() + t * cols, reinterpret_cast<smol::BlockQ8K32*>(dst), cols);
        } else if (act == ActivationType::Q8_0) {
            kernels::scalar::quantize_row_q8_0(x.data() + t * cols, reinterpret_cast<smol::BlockQ8_0*>(dst), cols);
        } else {
            std::memcpy(dst, x.data() + t * cols, cols * sizeof(float));
        }
    }
    return out;
}

// Sum of |w_i x_i| of the dequantized operands: the scale float-rounding
// differences are measured against.
double magnitude(GGMLType type, const uint8_t* w_row, ActivationType act, const uint8_t* x_row, size_t cols) {
    std::vector<float> w(cols), x(cols);
    smol::dequantize_row(type, w_row, w.data(), cols);
    smol::dequantize_activation_row(act, x_row, x.data(), cols);
    double sum = 0.0;
    for (size_t i = 0; i < cols; ++i) sum += std::fabs(double(w[i]) * double(x[i]));
    return sum;
}

const GGMLType kAllTypes[] = {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q8_0,
                              GGMLType::F16,  GGMLType::BF16, GGMLType::F32};

}  // namespace

TEST_CASE("kernels: an instruction set is selected") {
    MESSAGE("kernels: " << std::string(kernels::isa_name()));
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(SMOL_KERNELS_FORCE_SCALAR)
    CHECK(std::string(kernels::isa_name()).rfind("avx2", 0) == 0);
#endif
}

TEST_CASE("quantize_row_q8_k32: fast path is bit-identical to the reference, which meets the spec") {
    const size_t n = 4 * 256;
    std::vector<float> x = random_floats(n, 2.0f);
    for (size_t i = 256; i < 512; ++i) x[i] = 0.0f;  // an all-zero block
    for (size_t i = 544; i < 576; ++i) x[i] = 0.0f;  // an all-zero sub-block
    x[600] = -900.0f;                                    // one huge value: coarsens its own 32 values only
    for (size_t i = 768; i < 1024; ++i) x[i] = float(int(i % 7) - 3) * 0.5f;  // many ties
    x[1000] = 127.0f * 1.00390625f * 0.999f;  // max / 127 just below a bf16 step: q clamps to 127
    std::vector<smol::BlockQ8K32> fast(n / 256), ref(n / 256);
    kernels::quantize_row_q8_k32(x.data(), fast.data(), n);
    kernels::scalar::quantize_row_q8_k32(x.data(), ref.data(), n);
    CHECK(std::memcmp(fast.data(), ref.data(), sizeof(smol::BlockQ8K32) * ref.size()) == 0);

    for (size_t b = 0; b < ref.size(); ++b) {
        const smol::BlockQ8K32& block = ref[b];
        for (int s = 0; s < 8; ++s) {
            const float* xs = x.data() + 256 * b + 32 * s;
            float max_abs = 0.0f;
            for (int i = 0; i < 32; ++i) max_abs = std::max(max_abs, std::fabs(xs[i]));
            const float d = block.d[s];
            // d is max / 127 rounded to bf16 (8 significant bits).
            CHECK(d == smol::bf16_to_fp32(smol::fp32_to_bf16(d)));
            CHECK(std::fabs(d - max_abs / 127.0f) <= max_abs / 127.0f / 256.0f);
            for (int i = 0; i < 32; ++i) {
                const int q = block.qs[32 * s + i];
                CHECK(q >= -127);
                CHECK(q <= 127);
                CHECK(std::fabs(d * float(q) - xs[i]) <= d * 0.5001f + max_abs / 256.0f + 1e-7f);
            }
        }
        for (int g = 0; g < 16; ++g) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += block.qs[16 * g + i];
            CHECK(block.bsums[g] == sum);
        }
    }
    for (int s = 0; s < 8; ++s) CHECK(ref[1].d[s] == 0.0f);
    CHECK(ref[2].d[1] == 0.0f);
    CHECK(ref[2].qs[600 - 512] == -127);  // the extreme element maps to -127
    CHECK(ref[2].d[2] > ref[2].d[0] * 50.0f);  // its sub-block (values 576..607) only
    CHECK(ref[3].qs[1000 - 768] == 127);
}

TEST_CASE("quantize_row_q8_0: fast path is bit-identical to the reference, which meets the spec") {
    const size_t n = 7 * 32;
    std::vector<float> x = random_floats(n, 0.5f);
    for (size_t i = 32; i < 64; ++i) x[i] = 0.0f;
    std::vector<smol::BlockQ8_0> fast(n / 32), ref(n / 32);
    kernels::quantize_row_q8_0(x.data(), fast.data(), n);
    kernels::scalar::quantize_row_q8_0(x.data(), ref.data(), n);
    CHECK(std::memcmp(fast.data(), ref.data(), sizeof(smol::BlockQ8_0) * ref.size()) == 0);
    for (size_t b = 0; b < ref.size(); ++b) {
        const float d = smol::fp16_to_fp32(ref[b].d);
        float max_abs = 0.0f;
        for (int i = 0; i < 32; ++i) max_abs = std::max(max_abs, std::fabs(x[32 * b + i]));
        CHECK(d == doctest::Approx(max_abs / 127.0f).epsilon(1e-3));
        for (int i = 0; i < 32; ++i) {
            CHECK(std::fabs(d * ref[b].qs[i] - x[32 * b + i]) <= d * 0.51f + max_abs * 1e-3f + 1e-7f);
        }
    }
}

TEST_CASE("scalar reference dots equal a double-precision dot of the dequantized operands") {
    for (GGMLType type : kAllTypes) {
        const size_t cols = (type == GGMLType::Q8_0) ? 96 : 512;
        const size_t rows = 5;
        CAPTURE(smol::type_name(type));
        const std::vector<uint8_t> w = random_weights(type, rows, cols);
        const std::vector<float> x = random_floats(cols);
        const std::vector<uint8_t> xq = reference_activations(type, x, 1, cols);
        const ActivationType act = smol::activation_type_for(type);
        std::vector<float> wd(cols), xd(cols);
        smol::dequantize_activation_row(act, xq.data(), xd.data(), cols);
        for (size_t r = 0; r < rows; ++r) {
            const uint8_t* row = w.data() + r * smol::row_bytes(type, cols);
            smol::dequantize_row(type, row, wd.data(), cols);
            double exact = 0.0, scale = 0.0;
            for (size_t i = 0; i < cols; ++i) {
                exact += double(wd[i]) * double(xd[i]);
                scale += std::fabs(double(wd[i]) * double(xd[i]));
            }
            const float got = kernels::scalar::dot_row(type, row, xq.data(), cols);
            CHECK(std::fabs(double(got) - exact) <= 2e-5 * scale + 1e-9);
        }
    }
}

TEST_CASE("tile kernels: integer parts equal the reference exactly") {
    // With unit weight scales, activation scales of 1/2, 1 or 2 per 32 values
    // and small activations every partial sum is exact in float (a multiple
    // of 1/2 far below 2^23), so float rounding cannot hide a wrong integer
    // nor a sub-block meeting another sub-block's scale.
    const size_t cols = 512, rows = 6;
    for (GGMLType type : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q8_0}) {
        CAPTURE(smol::type_name(type));
        std::vector<uint8_t> w = random_weights(type, rows, cols);
        const size_t w_row_bytes = smol::row_bytes(type, cols);
        const uint16_t one = smol::fp32_to_fp16(1.0f);
        for (size_t r = 0; r < rows; ++r) {
            uint8_t* row = w.data() + r * w_row_bytes;
            for (size_t b = 0; b < cols / 256; ++b) {
                if (type == GGMLType::Q4_K) {
                    reinterpret_cast<smol::BlockQ4K*>(row)[b].d = one;
                    reinterpret_cast<smol::BlockQ4K*>(row)[b].dmin = one;
                } else if (type == GGMLType::Q5_K) {
                    reinterpret_cast<smol::BlockQ5K*>(row)[b].d = one;
                    reinterpret_cast<smol::BlockQ5K*>(row)[b].dmin = one;
                } else if (type == GGMLType::Q6_K) {
                    reinterpret_cast<smol::BlockQ6K*>(row)[b].d = one;
                }
            }
            if (type == GGMLType::Q8_0) {
                for (size_t b = 0; b < cols / 32; ++b) reinterpret_cast<smol::BlockQ8_0*>(row)[b].d = one;
            }
        }
        for (int n_cols = 1; n_cols <= kernels::kMaxTileCols; ++n_cols) {
            const ActivationType act = smol::activation_type_for(type);
            const size_t x_row_bytes = smol::activation_row_bytes(act, cols);
            std::vector<uint8_t> x(size_t(n_cols) * x_row_bytes);
            for (int c = 0; c < n_cols; ++c) {
                uint8_t* xr = x.data() + size_t(c) * x_row_bytes;
                if (act == ActivationType::Q8_K32) {
                    for (size_t b = 0; b < cols / 256; ++b) {
                        smol::BlockQ8K32& block = reinterpret_cast<smol::BlockQ8K32*>(xr)[b];
                        for (int s = 0; s < 8; ++s) block.d[s] = float(1 << uniform_int(0, 2)) * 0.5f;
                        for (int i = 0; i < 256; ++i) block.qs[i] = int8_t(uniform_int(-3, 3));
                        for (int g = 0; g < 16; ++g) {
                            int sum = 0;
                            for (int i = 0; i < 16; ++i) sum += block.qs[16 * g + i];
                            block.bsums[g] = int16_t(sum);
                        }
                    }
                } else {
                    for (size_t b = 0; b < cols / 32; ++b) {
                        smol::BlockQ8_0& block = reinterpret_cast<smol::BlockQ8_0*>(xr)[b];
                        block.d = one;
                        for (int i = 0; i < 32; ++i) block.qs[i] = int8_t(uniform_int(-127, 127));
                    }
                }
            }
            std::vector<uint8_t> x_kernel(x.size());
            for (int c = 0; c < n_cols; ++c) {
                kernels::kernel_layout_row(act, x.data() + size_t(c) * x_row_bytes,
                                           x_kernel.data() + size_t(c) * x_row_bytes, cols);
            }
            std::vector<float> fast(size_t(n_cols) * rows, -1.0f);
            kernels::select_tile(type, n_cols)(w.data(), w_row_bytes, rows, x_kernel.data(), x_row_bytes, cols,
                                               fast.data(), rows);
            for (int c = 0; c < n_cols; ++c) {
                for (size_t r = 0; r < rows; ++r) {
                    const float ref = kernels::scalar::dot_row(type, w.data() + r * w_row_bytes,
                                                               x.data() + size_t(c) * x_row_bytes, cols);
                    CHECK(fast[size_t(c) * rows + r] == ref);
                }
            }
        }
    }
}

TEST_CASE("matmul equals the scalar reference over odd shapes, and is independent of the thread count") {
    smol::ThreadPool pools[] = {smol::ThreadPool(1), smol::ThreadPool(2), smol::ThreadPool(3)};
    for (GGMLType type : kAllTypes) {
        const bool small_blocks = type == GGMLType::Q8_0 || type == GGMLType::F16 || type == GGMLType::BF16 ||
                                  type == GGMLType::F32;
        const size_t col_options[] = {small_blocks ? size_t(32) : size_t(256), small_blocks ? size_t(160) : size_t(768)};
        for (size_t cols : col_options) {
            for (size_t rows : {size_t(1), size_t(7), size_t(37)}) {
                const std::vector<uint8_t> w_bytes = random_weights(type, rows, cols);
                const smol::WeightMatrix w = smol::make_weight_matrix(type, w_bytes.data(), rows, cols, "test");
                for (size_t n_tokens = 1; n_tokens <= 9; ++n_tokens) {
                    if (rows == 37 && n_tokens % 4 != 1) continue;  // keep the run short
                    CAPTURE(smol::type_name(type));
                    CAPTURE(rows);
                    CAPTURE(cols);
                    CAPTURE(n_tokens);
                    const std::vector<float> x = random_floats(n_tokens * cols);
                    smol::QuantizedInput input;
                    input.quantize(type, x.data(), n_tokens, cols, &pools[1]);
                    // The fast quantizer is bit-identical to the reference one.
                    const std::vector<uint8_t> ref_input = reference_activations(type, x, n_tokens, cols);
                    REQUIRE(std::memcmp(input.data(), ref_input.data(), ref_input.size()) == 0);

                    const size_t y_stride = rows + 3;  // a stride wider than the row count
                    std::vector<float> ref(n_tokens * y_stride, 0.0f);
                    smol::matmul_reference(w, input, ref.data(), y_stride);
                    std::vector<double> scale(n_tokens * rows);
                    for (size_t t = 0; t < n_tokens; ++t) {
                        for (size_t r = 0; r < rows; ++r) {
                            scale[t * rows + r] = magnitude(type, w_bytes.data() + r * w.row_bytes, input.type(),
                                                            input.row(t), cols);
                        }
                    }
                    std::vector<float> first;
                    for (smol::ThreadPool& pool : pools) {
                        std::vector<float> y(n_tokens * y_stride, 0.0f);
                        smol::matmul(w, input, y.data(), y_stride, pool);
                        for (size_t t = 0; t < n_tokens; ++t) {
                            for (size_t r = 0; r < rows; ++r) {
                                CHECK(std::fabs(double(y[t * y_stride + r]) - double(ref[t * y_stride + r])) <=
                                      1e-5 * scale[t * rows + r] + 1e-9);
                            }
                            for (size_t r = rows; r < y_stride; ++r) CHECK(y[t * y_stride + r] == 0.0f);
                        }
                        if (first.empty()) {
                            first = y;
                        } else {
                            CHECK(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)) == 0);
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("matmul: a token's result does not depend on how many tokens share the call") {
    smol::ThreadPool pool(2);
    for (GGMLType type : kAllTypes) {
        CAPTURE(smol::type_name(type));
        const size_t rows = 9, cols = 512;
        const std::vector<uint8_t> w_bytes = random_weights(type, rows, cols);
        const smol::WeightMatrix w = smol::make_weight_matrix(type, w_bytes.data(), rows, cols);
        const size_t n_tokens = 11;
        const std::vector<float> x = random_floats(n_tokens * cols);
        smol::QuantizedInput all;
        all.quantize(type, x.data(), n_tokens, cols);
        std::vector<float> y_all(n_tokens * rows);
        smol::matmul(w, all, y_all.data(), rows, pool);
        for (size_t t = 0; t < n_tokens; ++t) {
            smol::QuantizedInput one;
            one.quantize(type, x.data() + t * cols, 1, cols);
            std::vector<float> y(rows);
            smol::matmul(w, one, y.data(), rows, pool);
            CHECK(std::memcmp(y.data(), y_all.data() + t * rows, rows * sizeof(float)) == 0);
        }
    }
}

TEST_CASE("matmul_batch equals one matmul per matrix, bit for bit") {
    for (size_t n_tokens : {size_t(1), size_t(6)}) {
        smol::ThreadPool pool(3);
        const size_t cols = 512;
        const GGMLType types[3] = {GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::Q5_K};
        const size_t rows[3] = {13, 0, 40};
        std::vector<std::vector<uint8_t>> bytes;
        std::vector<smol::MatmulJob> jobs;
        std::vector<std::vector<float>> outputs(3), expected(3);
        for (int j = 0; j < 3; ++j) {
            bytes.push_back(random_weights(types[j], rows[j] ? rows[j] : 1, cols));
            outputs[size_t(j)].assign(n_tokens * (rows[j] + 1), 0.0f);
            expected[size_t(j)] = outputs[size_t(j)];
        }
        for (int j = 0; j < 3; ++j) {
            jobs.push_back({smol::make_weight_matrix(types[j], bytes[size_t(j)].data(), rows[j], cols),
                            outputs[size_t(j)].data(), rows[j] + 1});
        }
        const std::vector<float> x = random_floats(n_tokens * cols);
        smol::QuantizedInput input;
        input.quantize(GGMLType::Q4_K, x.data(), n_tokens, cols);
        smol::matmul_batch(jobs.data(), jobs.size(), input, pool);
        for (int j = 0; j < 3; ++j) {
            smol::matmul(jobs[size_t(j)].w, input, expected[size_t(j)].data(), rows[j] + 1, pool);
            CHECK(outputs[size_t(j)] == expected[size_t(j)]);
        }
    }
}

TEST_CASE("matmul: bad arguments throw smol::Error naming the problem") {
    smol::ThreadPool pool(1);
    std::vector<uint8_t> w_bytes = random_weights(GGMLType::Q4_K, 2, 256);
    const smol::WeightMatrix w = smol::make_weight_matrix(GGMLType::Q4_K, w_bytes.data(), 2, 256, "blk.0.ffn_up");
    std::vector<float> x(512, 0.5f), y(4);
    smol::QuantizedInput wrong_cols;
    wrong_cols.quantize(GGMLType::Q4_K, x.data(), 1, 512);
    CHECK_THROWS_AS(smol::matmul(w, wrong_cols, y.data(), 2, pool), smol::Error);
    smol::QuantizedInput wrong_type;
    wrong_type.quantize(GGMLType::Q8_0, x.data(), 1, 256);
    CHECK_THROWS_AS(smol::matmul(w, wrong_type, y.data(), 2, pool), smol::Error);
    try {
        smol::make_weight_matrix(GGMLType::Q4_K, w_bytes.data(), 2, 100, "blk.0.ffn_up");
        FAIL("expected a throw");
    } catch (const smol::Error& e) {
        CHECK(e.kind() == smol::ErrorKind::shape);
        CHECK(std::string(e.what()).find("blk.0.ffn_up") != std::string::npos);
    }
    CHECK_THROWS_AS(smol::make_weight_matrix(GGMLType::Q2_K, w_bytes.data(), 2, 256), smol::Error);
    CHECK_THROWS_AS(wrong_cols.quantize(GGMLType::Q4_K, x.data(), 1, 100), smol::Error);
}

TEST_CASE("float helpers match their scalar references") {
    for (size_t n : {size_t(1), size_t(7), size_t(8), size_t(33), size_t(2048)}) {
        CAPTURE(n);
        const std::vector<float> a = random_floats(n), b = random_floats(n), weight = random_floats(n);
        double magnitude_sum = 0.0;
        for (size_t i = 0; i < n; ++i) magnitude_sum += std::fabs(double(a[i]) * b[i]);
        CHECK(std::fabs(smol::dot_f32(a.data(), b.data(), n) - kernels::scalar::dot_f32(a.data(), b.data(), n)) <=
              1e-5 * magnitude_sum + 1e-9);

        std::vector<float> fast(n), ref(n);
        smol::rmsnorm(a.data(), weight.data(), fast.data(), n, 1e-6f);
        kernels::scalar::rmsnorm(a.data(), weight.data(), ref.data(), n, 1e-6f);
        for (size_t i = 0; i < n; ++i) CHECK(fast[i] == doctest::Approx(ref[i]).epsilon(1e-5));
        // In place works too.
        std::vector<float> in_place = a;
        smol::rmsnorm(in_place.data(), weight.data(), in_place.data(), n, 1e-6f);
        CHECK(std::memcmp(in_place.data(), fast.data(), n * sizeof(float)) == 0);

        smol::swiglu(a.data(), b.data(), fast.data(), n);
        kernels::scalar::swiglu(a.data(), b.data(), ref.data(), n);
        for (size_t i = 0; i < n; ++i) CHECK(fast[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1e-6));

        std::vector<float> logits = random_floats(n, 10.0f);
        fast = logits;
        ref = logits;
        smol::softmax(fast.data(), n);
        kernels::scalar::softmax(ref.data(), n);
        double total = 0.0;
        for (size_t i = 0; i < n; ++i) {
            CHECK(fast[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1e-7));
            total += fast[i];
        }
        CHECK(total == doctest::Approx(1.0).epsilon(1e-5));
    }
    // rmsnorm of a known vector: x = (3, 4), mean square 12.5.
    const float x[2] = {3.0f, 4.0f}, weight[2] = {1.0f, 2.0f};
    float out[2];
    smol::rmsnorm(x, weight, out, 2, 0.0f);
    CHECK(out[0] == doctest::Approx(3.0 / std::sqrt(12.5)));
    CHECK(out[1] == doctest::Approx(8.0 / std::sqrt(12.5)));
    // swiglu: silu(0) = 0, silu(large) ~ large.
    const float gate[2] = {0.0f, 20.0f}, up[2] = {5.0f, 2.0f};
    smol::swiglu(gate, up, out, 2);
    CHECK(out[0] == 0.0f);
    CHECK(out[1] == doctest::Approx(40.0).epsilon(1e-6));
}

#if !defined(SMOL_TEST_NO_FIXTURES)
TEST_CASE("golden: matmul over real fixture tensors matches independently dequantized rows") {
    const auto index_path = smol_test::fixture("dequant/index.json");
    if (!index_path) return;
    std::ifstream index_file(*index_path);
    const nlohmann::json index = nlohmann::json::parse(index_file);
    smol::ThreadPool pool(2);
    for (const auto& entry : index) {
        const std::string model = entry.at("model"), tensor_name = entry.at("tensor");
        CAPTURE(model);
        CAPTURE(tensor_name);
        const auto model_path = smol_test::fixture(model);
        const auto rows_path = smol_test::fixture("dequant/" + entry.at("file").get<std::string>());
        if (!model_path || !rows_path) continue;
        const auto file = smol::gguf::File::open(*model_path);
        const smol::gguf::TensorInfo& info = file->tensor(tensor_name);
        const size_t cols = size_t(info.dim(0)), rows = size_t(info.rows());
        REQUIRE(cols == entry.at("row_length").get<size_t>());
        const smol::WeightMatrix w = smol::make_weight_matrix(info.type, info.data, rows, cols, tensor_name);
        const std::vector<float> golden_rows = smol_test::read_f32(*rows_path);
        const std::vector<size_t> row_ids = entry.at("rows").get<std::vector<size_t>>();
        REQUIRE(golden_rows.size() == row_ids.size() * cols);

        const size_t n_tokens = 3;
        const std::vector<float> x = random_floats(n_tokens * cols);
        smol::QuantizedInput input;
        input.quantize(info.type, x.data(), n_tokens, cols);
        std::vector<float> y(n_tokens * rows);
        smol::matmul(w, input, y.data(), rows, pool);
        std::vector<float> x_dequantized(cols);
        for (size_t t = 0; t < n_tokens; ++t) {
            smol::dequantize_activation_row(input.type(), input.row(t), x_dequantized.data(), cols);
            for (size_t k = 0; k < row_ids.size(); ++k) {
                double exact = 0.0, scale = 0.0;
                for (size_t i = 0; i < cols; ++i) {
                    const double product = double(golden_rows[k * cols + i]) * double(x_dequantized[i]);
                    exact += product;
                    scale += std::fabs(product);
                }
                CHECK(std::fabs(double(y[t * rows + row_ids[k]]) - exact) <= 2e-5 * scale + 1e-9);
                smol_test::count_golden();
            }
        }
    }
}
#endif
