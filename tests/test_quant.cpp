// Quantization: reference dequantization against an independent implementation
// (fixtures), quantization error bounds and edge cases, and the model maker's
// recipe and output.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <smol/quant/reference.hpp>
#include <smol/smol.hpp>
#include <string>
#include <vector>

#include "../tools/model_maker.hpp"
#include "support/fixtures.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_quant {

namespace {

// Relative closeness with an absolute floor for values near zero.
bool close_rel(float a, float b, float rel) {
    const float scale = std::max(std::fabs(a), std::fabs(b));
    return std::fabs(a - b) <= rel * scale + 1e-30f;
}

}  // namespace

TEST_CASE("dequantize_row matches the fixtures' independent dequantization") {
    auto index_path = smol_test::fixture("dequant/index.json");
    if (!index_path) return;
    std::ifstream in(*index_path);
    const nlohmann::json index = nlohmann::json::parse(in);
    REQUIRE(index.size() >= 7);
    for (const auto& entry : index) {
        const std::string model = entry["model"];
        const std::string tensor_name = entry["tensor"];
        const std::string type = entry["type"];
        auto model_path = smol_test::fixture(model);
        auto data_path = smol_test::fixture("dequant/" + entry["file"].get<std::string>());
        if (!model_path || !data_path) continue;
        CAPTURE(model);
        CAPTURE(tensor_name);
        auto file = smol::gguf::File::open(*model_path);
        const smol::gguf::TensorInfo& t = file->tensor(tensor_name);
        CHECK(smol::type_name(t.type) == type);
        REQUIRE(smol::can_dequantize(t.type));
        const size_t row_length = entry["row_length"];
        REQUIRE(t.dims[0] == row_length);
        const std::vector<float> expected = smol_test::read_f32(*data_path);
        const auto rows = entry["rows"].get<std::vector<uint64_t>>();
        REQUIRE(expected.size() == rows.size() * row_length);
        const size_t bytes_per_row = smol::row_bytes(t.type, row_length);
        std::vector<float> row(row_length);
        long mismatches = 0;
        for (size_t r = 0; r < rows.size(); ++r) {
            REQUIRE(rows[r] < t.rows());
            smol::dequantize_row(t.type, t.data + rows[r] * bytes_per_row, row.data(), row_length);
            for (size_t i = 0; i < row_length; ++i) {
                if (!close_rel(row[i], expected[r * row_length + i], 1e-6f)) ++mismatches;
            }
        }
        CHECK(mismatches == 0);
        smol_test::count_golden();
    }
}

TEST_CASE("dequantize_row rejects unsupported types and partial blocks") {
    std::vector<uint8_t> bytes(1024);
    std::vector<float> out(256);
    CHECK_THROWS_AS(smol::dequantize_row(smol::GGMLType::I8, bytes.data(), out.data(), 256),
                    smol::Error);
    CHECK_FALSE(smol::can_dequantize(smol::GGMLType::Q8_1));
    CHECK(smol::can_dequantize(smol::GGMLType::IQ2_XS));
    try {
        smol::dequantize_row(smol::GGMLType::Q8_1, bytes.data(), out.data(), 256);
        FAIL("expected a throw");
    } catch (const smol::Error& e) {
        CHECK(e.kind() == smol::ErrorKind::unsupported);
        CHECK(std::string(e.what()).find("Q8_1") != std::string::npos);
    }
    CHECK_THROWS_AS(smol::dequantize_row(smol::GGMLType::Q4_K, bytes.data(), out.data(), 100),
                    smol::Error);
}

// ---------------------------------------------------------------------------
// Quantization
// ---------------------------------------------------------------------------

namespace {

using smol::GGMLType;

std::vector<float> gaussian_row(uint64_t seed, size_t n, float stddev, float mean = 0) {
    smol_tools::Gaussian g(seed);
    std::vector<float> x(n);
    for (auto& v : x) v = mean + stddev * g.next();
    return x;
}

std::vector<float> round_trip(GGMLType type, const std::vector<float>& x,
                              smol::QuantizeEffort effort = smol::QuantizeEffort::standard) {
    std::vector<uint8_t> bytes(smol::row_bytes(type, x.size()));
    smol::quantize_row(type, x.data(), bytes.data(), x.size(), effort);
    std::vector<float> y(x.size());
    smol::dequantize_row(type, bytes.data(), y.data(), y.size());
    return y;
}

double rms_error(const std::vector<float>& a, const std::vector<float>& b, size_t begin = 0,
                 size_t end = size_t(-1)) {
    end = std::min(end, a.size());
    double sum = 0;
    for (size_t i = begin; i < end; ++i) sum += double(a[i] - b[i]) * double(a[i] - b[i]);
    return std::sqrt(sum / double(end - begin));
}

double stddev_of(const std::vector<float>& a) {
    double mean = 0, sq = 0;
    for (float v : a) mean += v;
    mean /= double(a.size());
    for (float v : a) sq += (v - mean) * (v - mean);
    return std::sqrt(sq / double(a.size()));
}

bool all_finite(const std::vector<float>& a) {
    for (float v : a)
        if (!std::isfinite(v)) return false;
    return true;
}

// Quantize-then-dequantize RMSE bounds, as a fraction of the data's standard
// deviation (the fixtures' README: Q4_K <= 0.075, Q6_K <= 0.019; the reference
// quantizer reaches 0.071 / 0.0176).
struct Bound {
    GGMLType type;
    double standard, fast;
};
const Bound kBounds[] = {
    {GGMLType::Q4_K, 0.075, 0.077},
    {GGMLType::Q5_K, 0.037, 0.039},
    {GGMLType::Q6_K, 0.019, 0.019},
    {GGMLType::Q8_0, 0.0060, 0.0060},
};

}  // namespace

TEST_CASE("quantize_row error on Gaussian data is within the reference quantizer's bounds") {
    const size_t sizes[] = {256, 4096, 32768};
    const float stddevs[] = {1.0f, 0.02f, 300.0f};
    for (const Bound& bound : kBounds) {
        for (uint64_t seed = 1; seed <= 3; ++seed) {
            for (size_t n : sizes) {
                const float stddev = stddevs[seed - 1];
                const auto x = gaussian_row(seed * 1000 + n, n, stddev);
                const double sd = stddev_of(x);
                CAPTURE(smol::type_name(bound.type));
                CAPTURE(seed);
                CAPTURE(n);
                const double relative = rms_error(x, round_trip(bound.type, x)) / sd;
                // Tiny rows are noisy estimates: allow 10% slack at 256 weights.
                CHECK(relative <= bound.standard * (n == 256 ? 1.1 : 1.0));
                const double fast =
                    rms_error(x, round_trip(bound.type, x, smol::QuantizeEffort::fast)) / sd;
                CHECK(fast <= bound.fast * (n == 256 ? 1.1 : 1.0));
            }
        }
    }
}

TEST_CASE("quantize_row: F32, F16, BF16 and Q8_0 are exact on their own grids") {
    const auto x = gaussian_row(7, 1024, 3.0f);
    CHECK(round_trip(GGMLType::F32, x) == x);
    std::vector<float> half(x.size()), brain(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        half[i] = smol::fp16_to_fp32(smol::fp32_to_fp16(x[i]));
        brain[i] = smol::bf16_to_fp32(smol::fp32_to_bf16(x[i]));
    }
    CHECK(round_trip(GGMLType::F16, half) == half);
    CHECK(round_trip(GGMLType::BF16, brain) == brain);
    CHECK(round_trip(GGMLType::F16, x) != x);  // the check can fail

    // Q8_0: integers in [-127, 127] times an fp16 step, each block reaching +-127.
    smol_tools::SplitMix64 rng(3);
    std::vector<float> grid(1024);
    for (size_t b = 0; b < grid.size() / 32; ++b) {
        const float step = std::ldexp(1.0f + float(b % 7) / 8, -int(b % 9));
        for (size_t i = 0; i < 32; ++i)
            grid[b * 32 + i] = step * float(int(rng.next() % 255) - 127);
        grid[b * 32 + b % 32] = (b % 2 ? -127.0f : 127.0f) * step;
    }
    CHECK(round_trip(GGMLType::Q8_0, grid) == grid);
}

TEST_CASE("quantize_row: k-quants are exact on values already on their grid") {
    smol_tools::SplitMix64 rng(5);
    // Q4_K / Q5_K: x = step * q - offset with q in [0, max_q], every sub-block using
    // the full range and the same step and offset, so the stored codes are 63 / 63
    // and d = step / 63, dmin = offset / 63 are exact in fp16.
    for (int bits : {4, 5}) {
        const int max_q = (1 << bits) - 1;
        const float step = 63.0f * std::ldexp(1.0f, -10);
        const float offset = 63.0f * std::ldexp(1.0f, -9);
        std::vector<float> x(512);
        for (size_t i = 0; i < x.size(); ++i) {
            int q = int(rng.next() % uint64_t(max_q + 1));
            if (i % 32 == 0) q = 0;
            if (i % 32 == 1) q = max_q;
            x[i] = step * float(q) - offset;
        }
        CAPTURE(bits);
        const GGMLType type = bits == 4 ? GGMLType::Q4_K : GGMLType::Q5_K;
        CHECK(round_trip(type, x) == x);
    }
    // Q6_K: x = step * q with q in [-32, 31] and -32 in every sub-block of 16.
    {
        const float step = 128.0f * std::ldexp(1.0f, -12);
        std::vector<float> x(512);
        for (size_t i = 0; i < x.size(); ++i) {
            int q = int(rng.next() % 64) - 32;
            if (i % 16 == 3) q = -32;
            x[i] = step * float(q);
        }
        CHECK(round_trip(GGMLType::Q6_K, x) == x);
    }
}

TEST_CASE("quantize_row edge cases: zeros, constants, magnitudes, outliers") {
    const GGMLType types[] = {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K,
                              GGMLType::Q8_0, GGMLType::F16,  GGMLType::BF16};
    for (GGMLType type : types) {
        CAPTURE(smol::type_name(type));
        // All zeros stay exactly zero.
        const std::vector<float> zeros(512, 0.0f);
        CHECK(round_trip(type, zeros) == zeros);
        // Constant rows (positive and negative) come back within fp16 scale rounding.
        for (float c : {0.37f, -2.5f, 1000.0f}) {
            const std::vector<float> constant(512, c);
            const auto y = round_trip(type, constant);
            double worst = 0;
            for (float v : y) worst = std::max(worst, double(std::fabs(v - c)));
            CAPTURE(c);
            // fp16 scales round to 2^-11 relative; bf16 values to 2^-9.
            CHECK(worst <= (type == GGMLType::BF16 ? 4e-3 : 2e-3) * std::fabs(c));
        }
        // Large and small magnitudes: the relative error stays bounded and finite.
        for (float stddev : {1e4f, 1e-3f}) {
            const auto x = gaussian_row(11, 2048, stddev);
            const auto y = round_trip(type, x);
            CAPTURE(stddev);
            REQUIRE(all_finite(y));
            CHECK(rms_error(x, y) / stddev_of(x) <= 0.08);
        }
        // Absurd magnitudes must not produce inf or NaN.
        auto huge = gaussian_row(12, 512, 1e30f);
        if (type != GGMLType::F16) CHECK(all_finite(round_trip(type, huge)));
        // One outlier: it is kept within a few percent and the other super-blocks
        // are unaffected.
        auto x = gaussian_row(13, 1024, 1.0f);
        x[300] = 60.0f;
        const auto y = round_trip(type, x);
        CHECK(std::fabs(y[300] - 60.0f) <= 0.05f * 60.0f);
        const auto x_clean = gaussian_row(13, 1024, 1.0f);
        const auto y_clean = round_trip(type, x_clean);
        CHECK(rms_error(x, y, 512, 1024) ==
              doctest::Approx(rms_error(x_clean, y_clean, 512, 1024)));
    }
}

TEST_CASE("type table: the weight types, their order, and the reference codecs over them") {
    // The list every per-type table follows (quant/types.hpp), in its order.
    const GGMLType expected[] = {
        GGMLType::F32,     GGMLType::F16,    GGMLType::BF16,  GGMLType::Q8_0,    GGMLType::Q4_K,
        GGMLType::Q5_K,    GGMLType::Q6_K,   GGMLType::Q4_0,  GGMLType::Q4_1,    GGMLType::Q5_0,
        GGMLType::Q5_1,    GGMLType::IQ4_NL, GGMLType::Q2_K,  GGMLType::Q3_K,    GGMLType::IQ4_XS,
        GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S, GGMLType::IQ3_XXS, GGMLType::IQ3_S,
        GGMLType::IQ1_S,   GGMLType::IQ1_M};
    REQUIRE(smol::kWeightTypeCount == 22);
    for (size_t i = 0; i < smol::kWeightTypeCount; ++i)
        CHECK(smol::weight_type_index(expected[i]) == int(i));
    CHECK(smol::weight_type_names() ==
          "F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, "
          "IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M");
    // The types smol writes as well as reads (the others come from other quantizers).
    const GGMLType written[] = {GGMLType::F32,  GGMLType::F16,  GGMLType::BF16, GGMLType::Q8_0,
                                GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q8_K};
    // Every GGUF id: a weight type is visited (once, with its own traits), and
    // the reference converts exactly the weight types and Q8_K.
    for (uint32_t id = 0; id <= 40; ++id) {
        const GGMLType type = GGMLType(id);
        CAPTURE(id);
        int visits = 0;
        const bool visited = smol::visit_weight_type<smol::TypeTag>(type, [&](auto tag) {
            ++visits;
            CHECK(decltype(tag)::type == type);
        });
        CHECK(visited == smol::is_supported_weight_type(type));
        CHECK(visits == (visited ? 1 : 0));
        CHECK(smol::can_dequantize(type) == (visited || type == GGMLType::Q8_K));
        CHECK(smol::can_quantize(type) ==
              (std::find(std::begin(written), std::end(written), type) != std::end(written)));
        smol::visit_weight_type<smol::RowCodec, smol::ReferenceTypes>(type, [&](auto codec) {
            using Codec = decltype(codec);
            CHECK(Codec::type == type);
            CHECK(sizeof(typename Codec::Block) == smol::type_traits(type).type_size);
        });
    }
}

TEST_CASE("quantize_row rejects unsupported types and partial blocks") {
    std::vector<float> x(256, 1.0f);
    std::vector<uint8_t> out(4096);
    CHECK_FALSE(smol::can_quantize(GGMLType::Q3_K));
    CHECK(smol::can_quantize(GGMLType::Q4_K));
    try {
        smol::quantize_row(GGMLType::IQ4_XS, x.data(), out.data(), 256);
        FAIL("expected a throw");
    } catch (const smol::Error& e) {
        CHECK(e.kind() == smol::ErrorKind::unsupported);
        CHECK(std::string(e.what()).find("IQ4_XS") != std::string::npos);
    }
    CHECK_THROWS_AS(smol::quantize_row(GGMLType::Q6_K, x.data(), out.data(), 100), smol::Error);
}

TEST_CASE("re-quantizing fixture rows stays close to them") {
    auto index_path = smol_test::fixture("dequant/index.json");
    if (!index_path) return;
    std::ifstream in(*index_path);
    const nlohmann::json index = nlohmann::json::parse(in);
    for (const auto& entry : index) {
        auto data_path = smol_test::fixture("dequant/" + entry["file"].get<std::string>());
        if (!data_path) continue;
        const GGMLType type = entry["type"] == "Q4_K"   ? GGMLType::Q4_K
                              : entry["type"] == "Q5_K" ? GGMLType::Q5_K
                              : entry["type"] == "Q6_K" ? GGMLType::Q6_K
                                                        : GGMLType::Q8_0;
        const std::vector<float> rows = smol_test::read_f32(*data_path);
        CAPTURE(entry["file"].get<std::string>());
        const auto y = round_trip(type, rows);
        const double relative = rms_error(rows, y) / stddev_of(rows);
        if (type == GGMLType::Q8_0) {
            CHECK(y == rows);  // the step of each block is recovered exactly
        } else {
            // Already on a grid of this type: far below the Gaussian error bound.
            CHECK(relative <= 0.5 * (type == GGMLType::Q6_K ? 0.019 : 0.075));
        }
    }
}

// ---------------------------------------------------------------------------
// The model maker (tools/model_maker.hpp)
// ---------------------------------------------------------------------------

TEST_CASE("model maker: the Q4_K_M recipe on the SmolLM3-3B shape") {
    const auto shape = smol_tools::preset_shape("3b");
    auto plan = smol_tools::plan_tensors(shape, smol_tools::Recipe::q4_k_m, false);
    const auto counts = smol_tools::count_types(plan);
    CHECK(counts.at("Q4_K") == 198);
    CHECK(counts.at("Q5_K") == 18);
    CHECK(counts.at("Q6_K") == 37);
    CHECK(counts.at("F32") == 73);
    CHECK(counts.size() == 4);
    const double gigabytes = double(smol_tools::tensor_bytes(plan)) / 1e9;
    CHECK(gigabytes == doctest::Approx(1.92).epsilon(0.01));
    // Untied adds a Q6_K output.weight of the embedding's shape.
    plan = smol_tools::plan_tensors(shape, smol_tools::Recipe::q4_k_m, true);
    CHECK(smol_tools::count_types(plan).at("Q6_K") == 38);
    CHECK(plan[2].name == "output.weight");
    CHECK(plan[2].dims == std::vector<uint64_t>{2048, 128256});
    // more_bits: first and last eighth, every third layer between.
    CHECK(smol_tools::uses_more_bits(0, 36));
    CHECK_FALSE(smol_tools::uses_more_bits(4, 36));
    CHECK(smol_tools::uses_more_bits(6, 36));
    CHECK(smol_tools::uses_more_bits(31, 36));
    CHECK_FALSE(smol_tools::uses_more_bits(30 - 1, 36));
    CHECK(smol_tools::uses_more_bits(2, 4));  // n / 8 == 0
}

TEST_CASE("model maker: recipes reproduce the fixture files' tensor names, shapes and types") {
    struct Case {
        const char* file;
        smol_tools::Recipe recipe;
    };
    const Case cases[] = {{"tiny-q4km.gguf", smol_tools::Recipe::q4_k_m},
                          {"small-q4km.gguf", smol_tools::Recipe::q4_k_m},
                          {"tiny-gqa-q5km.gguf", smol_tools::Recipe::q5_k_m},
                          {"tiny-q8_0.gguf", smol_tools::Recipe::q8_0}};
    for (const Case& c : cases) {
        auto path = smol_test::fixture(c.file);
        if (!path) continue;
        CAPTURE(c.file);
        auto file = smol::gguf::File::open(*path);
        smol_tools::ModelShape shape;
        shape.hidden = file->get<uint32_t>("smollm3.embedding_length");
        shape.layers = file->get<uint32_t>("smollm3.block_count");
        shape.heads = file->get<uint32_t>("smollm3.attention.head_count");
        shape.kv_heads = file->get<uint32_t>("smollm3.attention.head_count_kv");
        shape.head_dim = file->get<uint32_t>("smollm3.rope.dimension_count");
        shape.ffn = file->get<uint32_t>("smollm3.feed_forward_length");
        shape.vocab = file->get<uint32_t>("smollm3.vocab_size");
        shape.ctx = file->get<uint32_t>("smollm3.context_length");
        const auto plan = smol_tools::plan_tensors(shape, c.recipe, false);
        REQUIRE(plan.size() == file->tensors().size());
        for (size_t i = 0; i < plan.size(); ++i) {
            const auto& expected = file->tensors()[i];
            CAPTURE(expected.name);
            CHECK(plan[i].name == expected.name);
            CHECK(plan[i].dims == expected.dims);
            CHECK(smol::type_name(plan[i].type) == smol::type_name(expected.type));
        }
        CHECK(file->get<uint32_t>("general.file_type") == smol_tools::file_type_of(c.recipe));
        smol_test::count_golden();
    }
}

TEST_CASE("model maker: a tiny model reads back with the right keys, shapes and weights") {
    smol_tools::MakeOptions options;
    options.shape = smol_tools::preset_shape("tiny");
    options.seed = 42;
    options.threads = 2;
    smol::gguf::Writer writer;
    smol_tools::make_model(options, writer);
    std::vector<uint8_t> bytes = writer.to_bytes();
    auto file = smol::gguf::File::from_bytes(bytes, "made");

    CHECK(file->get<std::string>("general.architecture") == "smollm3");
    CHECK(file->get<uint32_t>("general.file_type") == 15);
    CHECK(file->get<uint32_t>("general.quantization_version") == 2);
    CHECK(file->get<uint32_t>("smollm3.embedding_length") == 256);
    CHECK(file->get<uint32_t>("smollm3.block_count") == 2);
    CHECK(file->get<uint32_t>("smollm3.attention.head_count") == 4);
    CHECK(file->get<uint32_t>("smollm3.attention.head_count_kv") == 2);
    CHECK(file->get<uint32_t>("smollm3.rope.dimension_count") == 64);
    CHECK(file->get<float>("smollm3.rope.freq_base") == 5e6f);
    CHECK(file->get<float>("smollm3.attention.layer_norm_rms_epsilon") == 1e-6f);
    CHECK_FALSE(file->has("smollm3.attention.key_length"));  // head_dim == hidden / heads

    // Byte vocabulary: 256 byte tokens first, the specials last, eos = <|im_end|>.
    const auto tokens = file->get<std::vector<std::string>>("tokenizer.ggml.tokens");
    const auto types = file->get<std::vector<int32_t>>("tokenizer.ggml.token_type");
    REQUIRE(tokens.size() == types.size());
    CHECK(file->get<uint32_t>("smollm3.vocab_size") == tokens.size());
    CHECK(tokens[0] == "!");
    CHECK(tokens[255] == "\xC5\x83");  // U+0143: byte 0xAD, the last non-printable
    CHECK(file->get<std::string>("tokenizer.ggml.pre") == "smaug-bpe");
    const uint32_t eos = file->get<uint32_t>("tokenizer.ggml.eos_token_id");
    const uint32_t bos = file->get<uint32_t>("tokenizer.ggml.bos_token_id");
    CHECK(tokens.at(eos) == "<|im_end|>");
    CHECK(tokens.at(bos) == "<|begin_of_text|>");
    CHECK(types.at(eos) == 3);
    CHECK(tokens.back() == "<|im_end|>");
    std::set<std::string> unique(tokens.begin(), tokens.end());
    CHECK(unique.size() == tokens.size());
    const auto merges = file->get<std::vector<std::string>>("tokenizer.ggml.merges");
    CHECK(merges.size() > 100);
    for (const auto& m : merges) {
        const auto space = m.find(' ');
        REQUIRE(space != std::string::npos);
        CHECK(unique.count(m.substr(0, space) + m.substr(space + 1)) == 1);
    }

    // Tensors: names, shapes, types as planned; weights with the intended spread.
    const auto plan = smol_tools::plan_tensors(
        [&] {
            auto s = options.shape;
            s.vocab = uint32_t(tokens.size());
            return s;
        }(),
        options.recipe, false);
    REQUIRE(file->tensors().size() == plan.size());
    for (const auto& t : plan) {
        const auto& info = file->tensor(t.name);
        CHECK(info.dims == t.dims);
        CHECK(info.type == t.type);
    }
    auto spread = [&](const std::string& name, double& mean, double& stddev) {
        const auto& info = file->tensor(name);
        std::vector<float> values(size_t(info.n_elements));
        smol::dequantize_row(info.type, info.data, values.data(), values.size());
        mean = 0;
        for (float v : values) mean += v;
        mean /= double(values.size());
        stddev = stddev_of(values);
    };
    double mean = 0, stddev = 0;
    spread("token_embd.weight", mean, stddev);
    CHECK(stddev == doctest::Approx(0.02).epsilon(0.05));
    spread("blk.0.attn_q.weight", mean, stddev);
    CHECK(stddev == doctest::Approx(1 / 16.0).epsilon(0.05));
    spread("blk.1.ffn_down.weight", mean, stddev);
    CHECK(stddev == doctest::Approx(0.5 / std::sqrt(512.0)).epsilon(0.05));
    spread("output_norm.weight", mean, stddev);
    CHECK(mean == doctest::Approx(25).epsilon(0.02));
    spread("blk.0.attn_norm.weight", mean, stddev);
    CHECK(mean == doctest::Approx(1).epsilon(0.02));
    CHECK(stddev == doctest::Approx(0.1).epsilon(0.2));

    // Deterministic for a seed whatever the thread count; another seed differs.
    options.threads = 1;
    smol::gguf::Writer again;
    smol_tools::make_model(options, again);
    CHECK(again.to_bytes() == bytes);
    options.seed = 43;
    smol::gguf::Writer other;
    smol_tools::make_model(options, other);
    CHECK(other.to_bytes() != bytes);
}

TEST_CASE("model maker: other recipes, untied head, key_length and bad shapes") {
    smol_tools::MakeOptions options;
    options.shape = smol_tools::preset_shape("tiny");
    options.shape.head_dim = 128;  // heads * head_dim = 512 != hidden
    options.recipe = smol_tools::Recipe::q8_0;
    options.untied = true;
    smol::gguf::Writer writer;
    smol_tools::make_model(options, writer);
    auto file = smol::gguf::File::from_bytes(writer.to_bytes());
    CHECK(file->get<uint32_t>("smollm3.attention.key_length") == 128);
    CHECK(file->get<uint32_t>("smollm3.attention.value_length") == 128);
    CHECK(file->tensor("output.weight").type == GGMLType::Q8_0);
    CHECK(file->tensor("blk.0.attn_q.weight").dims == std::vector<uint64_t>{256, 512});
    CHECK(file->tensor("blk.0.attn_output.weight").dims == std::vector<uint64_t>{512, 256});
    CHECK(file->get<uint32_t>("general.file_type") == 7);

    // f16: the reference quantizer's source for the other types.
    options.recipe = smol_tools::parse_recipe("f16");
    smol::gguf::Writer f16_writer;
    smol_tools::make_model(options, f16_writer);
    auto f16_file = smol::gguf::File::from_bytes(f16_writer.to_bytes());
    CHECK(f16_file->tensor("blk.1.ffn_down.weight").type == GGMLType::F16);
    CHECK(f16_file->tensor("token_embd.weight").type == GGMLType::F16);
    CHECK(f16_file->tensor("blk.1.ffn_norm.weight").type == GGMLType::F32);
    CHECK(f16_file->get<uint32_t>("general.file_type") == 1);

    options.recipe = smol_tools::Recipe::q4_k_m;
    options.shape.ffn = 300;  // not a multiple of 256
    smol::gguf::Writer bad;
    CHECK_THROWS_AS(smol_tools::make_model(options, bad), std::invalid_argument);
    CHECK_THROWS_AS(smol_tools::preset_shape("7b"), std::invalid_argument);
    CHECK_THROWS_AS(smol_tools::parse_recipe("q3_k_s"), std::invalid_argument);
}

}  // namespace test_quant
