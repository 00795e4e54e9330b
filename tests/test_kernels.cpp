// Tests for include/smol/kernels: every kernel level this machine runs
// (forced dispatch: kernels::kernel_set(level) for each level cpu_supports,
// the others named and skipped) against the scalar reference on random
// inputs (odd shapes, 1..9 token columns, 1-3 threads, blocks at odd byte
// addresses), run-time dispatch judged independently of smol's detection,
// the scalar references against a double-precision dot of the dequantized
// operands (smol::dequantize_row, an independent spec), activation
// quantization, the float helpers, and matmul's argument checks.
//
// The golden case (real tensors of the fixture models against rows dequantized
// by an independent implementation) needs the fixtures and nlohmann-json; with
// SMOL_TEST_NO_FIXTURES the file is self-contained, which is how
// tools/ci-aarch64.sh cross-compiles it for NEON and runs it under qemu.
#include <doctest/doctest.h>

#include "support/cpu_expectation.hpp"

#include <smol/build_info.hpp>
#include <smol/core/threadpool.hpp>
#include <smol/kernels/dispatch.hpp>
#include <smol/kernels/kernels.hpp>
#include <smol/quant/reference.hpp>

#if !defined(SMOL_TEST_NO_FIXTURES)
#include <nlohmann/json.hpp>
#include <smol/gguf/gguf.hpp>

#include <fstream>

#include "support/fixtures.hpp"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <random>
#include <vector>

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_kernels {

namespace {

using smol::ActivationType;
using smol::GGMLType;
namespace kernels = smol::kernels;

std::mt19937& rng() {
    static std::mt19937 engine(12345);
    return engine;
}

float uniform(float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(rng());
}
int uniform_int(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng());
}

std::vector<float> random_floats(size_t n, float scale = 1.0f) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng());
    return v;
}

// IQ1_M keeps its fp16 d in the top nibbles of its four scale words (bytes 48-55).
void set_iq1m_d(uint8_t* block, uint16_t d) {
    for (int w = 0; w < 4; ++w) {
        uint16_t word = smol::load_u16(block + 48 + 2 * w);
        word = uint16_t((word & 0x0FFF) | (((d >> (4 * w)) & 0xF) << 12));
        std::memcpy(block + 48 + 2 * w, &word, sizeof word);
    }
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
            case GGMLType::Q4_0:
            case GGMLType::Q5_0:
            case GGMLType::IQ4_NL:
                // d is the first field of each of these blocks.
                for (size_t b = 0; b < cols / 32; ++b) {
                    const uint16_t d = half(uniform(0.0002f, 0.002f));
                    std::memcpy(row + b * smol::type_traits(type).type_size, &d, sizeof d);
                }
                break;
            case GGMLType::Q4_1:
            case GGMLType::Q5_1:
                // d, then m.
                for (size_t b = 0; b < cols / 32; ++b) {
                    const uint16_t d = half(uniform(0.001f, 0.01f)),
                                   m = half(uniform(-0.05f, 0.05f));
                    std::memcpy(row + b * smol::type_traits(type).type_size, &d, sizeof d);
                    std::memcpy(row + b * smol::type_traits(type).type_size + 2, &m, sizeof m);
                }
                break;
            case GGMLType::Q2_K:
                for (size_t b = 0; b < cols / 256; ++b) {
                    auto* block = reinterpret_cast<smol::BlockQ2K*>(row) + b;
                    block->d = half(uniform(0.0005f, 0.004f));
                    block->dmin = half(uniform(0.0005f, 0.004f));
                }
                break;
            case GGMLType::Q3_K:
                for (size_t b = 0; b < cols / 256; ++b)
                    reinterpret_cast<smol::BlockQ3K*>(row)[b].d = half(uniform(0.0002f, 0.002f));
                break;
            case GGMLType::IQ4_XS:
                for (size_t b = 0; b < cols / 256; ++b)
                    reinterpret_cast<smol::BlockIQ4XS*>(row)[b].d =
                        half(uniform(0.00002f, 0.0002f));
                break;
            case GGMLType::IQ2_XXS:
            case GGMLType::IQ2_XS:
            case GGMLType::IQ2_S:
            case GGMLType::IQ3_XXS:
            case GGMLType::IQ3_S:
            case GGMLType::IQ1_S:
                // d is the first field of each of these blocks.
                for (size_t b = 0; b < cols / 256; ++b) {
                    const uint16_t d = half(uniform(0.0002f, 0.002f));
                    std::memcpy(row + b * smol::type_traits(type).type_size, &d, sizeof d);
                }
                break;
            case GGMLType::IQ1_M:
                for (size_t b = 0; b < cols / 256; ++b)
                    set_iq1m_d(row + b * smol::type_traits(type).type_size,
                               half(uniform(0.0002f, 0.002f)));
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
            default:
                break;
        }
    }
    return bytes;
}

// The quantized activation rows the scalar reference produces for x.
std::vector<uint8_t> reference_activations(GGMLType weight_type, const std::vector<float>& x,
                                           size_t n_tokens, size_t cols) {
    const ActivationType act = smol::activation_type_for(weight_type);
    const size_t row_bytes = smol::activation_row_bytes(act, cols);
    std::vector<uint8_t> out(n_tokens * row_bytes);
    for (size_t t = 0; t < n_tokens; ++t) {
        uint8_t* dst = out.data() + t * row_bytes;
        if (act == ActivationType::Q8_K32) {
            kernels::scalar::quantize_row_q8_k32(x.data() + t * cols,
                                                 reinterpret_cast<smol::BlockQ8K32*>(dst), cols);
        } else if (act == ActivationType::Q8_0) {
            kernels::scalar::quantize_row_q8_0(x.data() + t * cols,
                                               reinterpret_cast<smol::BlockQ8_0*>(dst), cols);
        } else if (act == ActivationType::Q8_K) {
            kernels::scalar::quantize_row_q8_k_activations(
                x.data() + t * cols, reinterpret_cast<smol::BlockQ8K*>(dst), cols);
        } else {
            std::memcpy(dst, x.data() + t * cols, cols * sizeof(float));
        }
    }
    return out;
}

// Sum of |w_i x_i| of the dequantized operands: the scale float-rounding
// differences are measured against.
double magnitude(GGMLType type, const uint8_t* w_row, ActivationType act, const uint8_t* x_row,
                 size_t cols) {
    std::vector<float> w(cols), x(cols);
    smol::dequantize_row(type, w_row, w.data(), cols);
    smol::dequantize_activation_row(act, x_row, x.data(), cols);
    double sum = 0.0;
    for (size_t i = 0; i < cols; ++i) sum += std::fabs(double(w[i]) * double(x[i]));
    return sum;
}

// The kernel sets of every level this machine runs, lowest first; the levels
// compiled in but not runnable here are reported once.
std::vector<const kernels::KernelSet*> runnable_sets() {
    static const std::vector<const kernels::KernelSet*> sets = [] {
        std::vector<const kernels::KernelSet*> out;
        size_t count = 0;
        const smol::CpuLevel* levels = smol::compiled_cpu_levels(count);
        std::string skipped;
        for (size_t i = 0; i < count; ++i) {
            if (smol::cpu_supports(levels[i]))
                out.push_back(&kernels::kernel_set(levels[i]));
            else
                skipped +=
                    std::string(skipped.empty() ? "" : ", ") + smol::cpu_level_name(levels[i]);
        }
        if (!skipped.empty())
            MESSAGE("kernel levels compiled but not runnable on this CPU, skipped: " << skipped);
        return out;
    }();
    return sets;
}

// runnable_sets() and the sets whose speed-only settings choose other tiles
// over stored rows than the defaults for some type the settings test below
// leaves out (KernelParams::codebook_gathers: other codebook tiles at the zmm
// levels; ctest's kernels_without_vbmi runs the tile test again with the
// codebook tiles a CPU without AVX512-VBMI runs).
std::vector<const kernels::KernelSet*> sets_with_other_tiles() {
    std::vector<const kernels::KernelSet*> out = runnable_sets();
    for (const kernels::KernelSet* set : runnable_sets()) {
        kernels::KernelParams gathers;
        gathers.codebook_gathers = 1;
        const kernels::KernelSet& other = kernels::kernel_set(set->level, gathers);
        if (&other != set) out.push_back(&other);
    }
    return out;
}

const kernels::KernelSet& scalar_set() {
    return kernels::kernel_set(smol::CpuLevel::scalar);
}

const GGMLType kAllTypes[] = {
    GGMLType::Q4_K,    GGMLType::Q5_K,   GGMLType::Q6_K,  GGMLType::Q8_0,    GGMLType::F16,
    GGMLType::BF16,    GGMLType::F32,    GGMLType::Q4_0,  GGMLType::Q4_1,    GGMLType::Q5_0,
    GGMLType::Q5_1,    GGMLType::IQ4_NL, GGMLType::Q2_K,  GGMLType::Q3_K,    GGMLType::IQ4_XS,
    GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S, GGMLType::IQ3_XXS, GGMLType::IQ3_S,
    GGMLType::IQ1_S,   GGMLType::IQ1_M};
// The codebook types (quant/codebook.hpp).
const GGMLType kCodebookTypes[] = {GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S,
                                   GGMLType::IQ3_XXS, GGMLType::IQ3_S,  GGMLType::IQ1_S,
                                   GGMLType::IQ1_M};
static_assert(std::size(kAllTypes) == smol::kWeightTypeCount, "every weight type is tested");

// The types every level (but scalar) has stored-row tiles of its own for; the
// others run the scalar spec except where a level's row in the kernel-set
// table lists them.
const GGMLType kTilesEverywhere[] = {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q8_0,
                                     GGMLType::F16,  GGMLType::BF16, GGMLType::F32};

}  // namespace

TEST_CASE("dispatch: the default level is the best this CPU runs, judged independently of smol") {
    MESSAGE("kernels: default " << std::string(kernels::default_kernels().name()) << ", "
                                << smol::build_info_string());
    const std::string expected = smol_test::expected_cpu_level();
    CHECK(std::string(smol::cpu_level_name(smol::best_cpu_level())) == expected);
    if (std::getenv("SMOL_CPU") == nullptr)
        CHECK(std::string(kernels::default_kernels().name()) == expected);
    // Every runnable level hands out a complete table.
    for (const kernels::KernelSet* set : runnable_sets()) {
        const std::string level_name = set->name();
        CAPTURE(level_name);
        CHECK((set->quantize_q8_k32 != nullptr));
        CHECK((set->quantize_q8_0 != nullptr));
        CHECK((set->quantize_q8_k != nullptr));
        CHECK((set->dot_f32 != nullptr));
        CHECK((set->rmsnorm != nullptr));
        CHECK((set->swiglu != nullptr));
        CHECK((set->softmax != nullptr));
        CHECK((set->rope != nullptr));
        CHECK((set->attend != nullptr));
        for (const smol::WeightTypeInfo& info : smol::kWeightTypes)
            for (int n = 1; n <= kernels::kMaxTileCols; ++n)
                CHECK((set->of(info.type).tiles[size_t(n - 1)] != nullptr));
    }
}

TEST_CASE("weight table: every type's converted rule has its reference dot") {
    smol::for_each_weight_type<smol::WeightTraits>([](auto traits) {
        using W = decltype(traits);
        CHECK((W::convert_min_tokens == 0) == (W::converted_dot_reference == nullptr));
    });
}

TEST_CASE("kernel sets: each level has the packed, converted and interleaved rows of its table") {
    // What each level's make_kernel_set builds, written out independently of it
    // (kernels::kernel_table_text prints the built sets' rows).
    struct Level {
        smol::CpuLevel level;
        std::vector<GGMLType> packed, converted, interleaved;
        std::vector<GGMLType> own;  // own stored-row tiles beyond kTilesEverywhere
    };
    using T = GGMLType;
    const std::vector<GGMLType> legacy32 = {T::Q4_0,  T::Q4_1,    T::Q5_0,   T::Q5_1,    T::IQ4_NL,
                                            T::Q2_K,  T::Q3_K,    T::IQ4_XS, T::IQ2_XXS, T::IQ2_XS,
                                            T::IQ2_S, T::IQ3_XXS, T::IQ3_S,  T::IQ1_S,   T::IQ1_M};
    const std::vector<GGMLType> arm_own = legacy32;  // the same types as x86's
    // Q2_K, Q3_K, IQ4_XS, the codebook types and the 32-weight formats
    // convert rows at every level: with the level's tiles, by the spec at the
    // scalar level.
    auto with_q8k = [](std::vector<GGMLType> types) {
        types.insert(types.end(),
                     {GGMLType::Q2_K, GGMLType::Q3_K, GGMLType::IQ4_XS, GGMLType::Q4_0,
                      GGMLType::Q4_1, GGMLType::Q5_0, GGMLType::Q5_1, GGMLType::IQ4_NL,
                      GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S, GGMLType::IQ3_XXS,
                      GGMLType::IQ3_S, GGMLType::IQ1_S, GGMLType::IQ1_M});
        return types;
    };
    const Level table[] = {
        {smol::CpuLevel::scalar, {}, with_q8k({T::Q4_K, T::Q5_K, T::Q6_K}), {}, {}},
        {smol::CpuLevel::avx2,
         {T::Q4_K},
         with_q8k({T::Q4_K, T::Q5_K}),
         {T::Q4_0, T::Q4_1, T::Q5_0, T::Q5_1, T::IQ4_NL, T::IQ4_XS},
         legacy32},
        {smol::CpuLevel::avxvnni,
         {},
         with_q8k({T::Q4_K, T::Q5_K, T::Q6_K}),
         {T::Q4_0, T::Q4_1, T::Q5_0, T::Q5_1, T::IQ4_NL, T::IQ4_XS},
         legacy32},
        {smol::CpuLevel::avx512,
         {T::Q4_K},
         with_q8k({T::Q4_K, T::Q5_K, T::Q6_K}),
         {T::Q4_K, T::Q5_K, T::Q4_0, T::Q4_1, T::Q5_0, T::Q5_1, T::IQ4_NL, T::IQ4_XS},
         legacy32},
        {smol::CpuLevel::amx,
         {T::Q4_K},
         with_q8k({T::Q4_K, T::Q5_K, T::Q6_K}),
         {T::Q4_K, T::Q5_K, T::Q4_0, T::Q4_1, T::Q5_0, T::Q5_1, T::IQ4_NL, T::IQ4_XS},
         legacy32},
        {smol::CpuLevel::neon, {}, with_q8k({T::Q4_K, T::Q5_K, T::Q6_K}), {}, arm_own},
        {smol::CpuLevel::dotprod, {}, with_q8k({T::Q4_K, T::Q5_K, T::Q6_K}), {}, arm_own},
        {smol::CpuLevel::i8mm, {}, with_q8k({T::Q4_K, T::Q5_K, T::Q6_K}), {}, arm_own},
    };
    auto has = [](const std::vector<GGMLType>& types, GGMLType type) {
        return std::find(types.begin(), types.end(), type) != types.end();
    };
    for (const kernels::KernelSet* set : runnable_sets()) {
        const std::string level_name = set->name();
        CAPTURE(level_name);
        MESSAGE(kernels::kernel_table_text(*set));
        const Level* row = nullptr;
        for (const Level& level : table)
            if (level.level == set->level) row = &level;
        REQUIRE(row != nullptr);
        for (GGMLType type : kAllTypes) {
            CAPTURE(smol::type_name(type));
            // The scalar level's tiles are the spec itself; the others have their
            // own for kTilesEverywhere and their row's `own`.
            const bool own = set->level != smol::CpuLevel::scalar &&
                             (has(row->own, type) ||
                              std::find(std::begin(kTilesEverywhere), std::end(kTilesEverywhere),
                                        type) != std::end(kTilesEverywhere));
            CHECK((set->of(type).tiles_from == kernels::TileSource::level) == own);
            // The spec reads the quantizer's order; a level's own tiles may read either.
            if (!own) CHECK(set->of(type).tiles_read_quantizer_order);
            CHECK((set->packing(type) != nullptr) == has(row->packed, type));
            CHECK((set->of(type).converted.pack != nullptr) == has(row->converted, type));
            CHECK(set->interleaves(type) == has(row->interleaved, type));
            if (set->of(type).converted.pack)
                CHECK(set->of(type).converted.min_tokens ==
                      smol::weight_type_info(type)->convert_min_tokens);
        }
    }
}

// A level that has no tiles for a type gets the scalar spec's, marked as such
// (never a null pointer), and the generated table says so.
TEST_CASE("kernel sets: a type a level has no tiles for runs the scalar spec, and says so") {
    kernels::KernelSet set = kernels::kernel_set(smol::best_cpu_level());
    set.of(GGMLType::Q8_0).tiles = {};
    kernels::complete_with_spec(set);
    const kernels::TileRow spec = kernels::scalar::spec_tiles(GGMLType::Q8_0);
    CHECK(set.of(GGMLType::Q8_0).tiles == spec);
    CHECK(set.of(GGMLType::Q8_0).tiles_from == kernels::TileSource::scalar_spec);
    CHECK(kernels::kernel_table_text(set).find("Q8_0 spec") != std::string::npos);
    if (set.level != smol::CpuLevel::scalar)
        CHECK(kernels::kernel_table_text(set).find("Q4_K own") != std::string::npos);
}

namespace {

// A kernel set holding only what the matmul planner reads (its kernels are
// never called): Q4_K packed from 9 tokens, converted in groups of 16 rows
// from 32 tokens, and read through interleaved tiles when `interleaves`.
kernels::KernelSet planner_set(bool interleaves) {
    kernels::KernelSet set;
    kernels::TypeKernels& q4k = set.of(GGMLType::Q4_K);
    const kernels::TileKernel tile = [](const uint8_t*, size_t, size_t, const uint8_t*, size_t,
                                        size_t, float*, size_t) {};
    const auto pack = [](const uint8_t*, size_t, size_t, size_t, uint8_t*) {};
    q4k.tiles.fill(tile);
    q4k.packed.pack = pack;
    q4k.packed.row_bytes = [](size_t cols) { return cols / 256 * 160; };
    q4k.packed.tiles.fill(tile);
    q4k.converted.pack = pack;
    q4k.converted.row_bytes = [](size_t cols) { return cols; };
    q4k.converted.tiles.fill(tile);
    q4k.converted.min_tokens = 32;
    q4k.converted.row_group = 16;
    if (interleaves) q4k.interleaved.fill(tile);
    return set;
}

struct PlanCase {
    std::vector<kernels::MatmulRun> runs;
    kernels::MatmulPlan plan;
};

PlanCase plan_for(const kernels::KernelSet& set, size_t rows, size_t interleaved_rows,
                  std::vector<size_t> sequence_sizes, size_t n_threads) {
    // Q4_K rows of 2048 values: 1152 bytes.
    const kernels::MatrixShape shape{GGMLType::Q4_K, rows, 2048, 1152, interleaved_rows};
    std::vector<kernels::TokenRange> sequences;
    size_t n_tokens = 0;
    for (size_t n : sequence_sizes) {
        sequences.push_back({n_tokens, n});
        n_tokens += n;
    }
    PlanCase out;
    out.runs.resize(sequences.size());
    out.plan = kernels::plan_matmul(set, shape, n_tokens, sequences.data(), sequences.size(),
                                    n_threads, out.runs.data());
    out.runs.resize(out.plan.n_runs);
    return out;
}

bool same_runs(const std::vector<kernels::MatmulRun>& got,
               std::initializer_list<kernels::MatmulRun> expected) {
    if (got.size() != expected.size()) return false;
    size_t i = 0;
    for (const kernels::MatmulRun& run : expected) {
        if (got[i].begin != run.begin || got[i].n != run.n || got[i].layout != run.layout)
            return false;
        ++i;
    }
    return true;
}

}  // namespace

// The planner's rules (kernels/matmul_plan.hpp), worked by hand.
TEST_CASE("matmul plan: runs, chunks and scratch follow the planner's rules") {
    using L = kernels::RowLayout;
    const kernels::KernelSet set = planner_set(false);
    SUBCASE("decode: one token, ~8 chunks per thread in multiples of 4 rows") {
        // 2048 / (2 threads * 8) = 128 rows.
        PlanCase c = plan_for(set, 2048, 0, {1}, 2);
        CHECK(same_runs(c.runs, {{0, 1, L::stored}}));
        CHECK(c.plan.chunk_rows == 128);
        CHECK(c.plan.n_chunks == 16);
        CHECK(c.plan.stored_bytes + c.plan.packed_bytes + c.plan.converted_bytes == 0);
        // 1000 / (3 * 8) = 41, rounded up to 44: 22 chunks of 44 and one of 32.
        c = plan_for(set, 1000, 0, {1}, 3);
        CHECK(c.plan.chunk_rows == 44);
        CHECK(c.plan.n_chunks == 23);
    }
    SUBCASE("a batched step: one-token sequences run as one run, ~4 chunks per thread") {
        // 2048 / (2 * 4) = 256 rows.
        const PlanCase c = plan_for(set, 2048, 0, {1, 1, 1, 1}, 2);
        CHECK(same_runs(c.runs, {{0, 4, L::stored}}));
        CHECK(c.plan.chunk_rows == 256);
        CHECK(c.plan.n_chunks == 8);
    }
    SUBCASE("a short prompt: packed rows, chunks of ~48 KiB") {
        // 48 KiB / 1152 bytes = 42 rows, 40 in multiples of 4: 51 chunks of 40 and one of 8.
        const PlanCase c = plan_for(set, 2048, 0, {20}, 2);
        CHECK(same_runs(c.runs, {{0, 20, L::packed}}));
        CHECK(c.plan.chunk_rows == 40);
        CHECK(c.plan.n_chunks == 52);
        CHECK(c.plan.packed_bytes == 40 * 1280);
        CHECK(c.plan.converted_bytes == 0);
        // Below packed.min_tokens (9) a run reads the rows as stored.
        CHECK(same_runs(plan_for(set, 2048, 0, {8}, 2).runs, {{0, 8, L::stored}}));
    }
    SUBCASE("each sequence converts by its own length; the rest merge and may pack") {
        // 40 and 70 convert (>= 32); 1 + 3 read exactly, as one run of 4 (too few to pack).
        PlanCase c = plan_for(set, 2048, 0, {40, 1, 3, 70}, 2);
        CHECK(
            same_runs(c.runs, {{0, 40, L::converted}, {40, 4, L::stored}, {44, 70, L::converted}}));
        // 40 rows rounded up to the converted layout's groups of 16.
        CHECK(c.plan.chunk_rows == 48);
        CHECK(c.plan.n_chunks == 43);
        CHECK(c.plan.converted_bytes == 48 * 2048);
        CHECK(c.plan.packed_bytes == 0);
        // 20 + 12 tokens: 32 in all, but neither sequence converts; together they pack.
        c = plan_for(set, 2048, 0, {20, 12}, 2);
        CHECK(same_runs(c.runs, {{0, 32, L::packed}}));
        CHECK(c.plan.chunk_rows == 40);
    }
    SUBCASE("interleaved rows: read by the set's tiles, else put back as stored per chunk") {
        const kernels::KernelSet interleaving = planner_set(true);
        // The interleaved tiles need no packing; chunks of whole 16-row groups.
        PlanCase c = plan_for(interleaving, 2048, 2048, {20}, 2);
        CHECK(same_runs(c.runs, {{0, 20, L::stored}}));
        CHECK(c.plan.interleaved_tiles);
        CHECK(c.plan.chunk_rows == 48);
        CHECK(c.plan.stored_bytes == 0);
        // A converted run needs the chunk back as stored first.
        c = plan_for(interleaving, 2048, 2048, {40}, 2);
        CHECK(same_runs(c.runs, {{0, 40, L::converted}}));
        CHECK(c.plan.stored_bytes == 48 * 1152);
        CHECK(c.plan.converted_bytes == 48 * 2048);
        // A set without interleaved tiles reads every run from the stored copy.
        c = plan_for(set, 2048, 2048, {1}, 2);
        CHECK_FALSE(c.plan.interleaved_tiles);
        CHECK(c.plan.chunk_rows == 128);
        CHECK(c.plan.stored_bytes == 128 * 1152);
    }
    SUBCASE("token groups: as few as fit, of near-equal sizes") {
        CHECK(kernels::token_groups(8) == 1);
        CHECK(kernels::token_group_size(8, 0) == 8);
        CHECK(kernels::token_groups(9) == 2);
        CHECK(kernels::token_group_size(9, 0) == 5);
        CHECK(kernels::token_group_size(9, 1) == 4);
        CHECK(kernels::token_groups(17) == 3);
        CHECK(kernels::token_group_size(17, 0) == 6);
        CHECK(kernels::token_group_size(17, 1) == 6);
        CHECK(kernels::token_group_size(17, 2) == 5);
        // A layout with wide tiles (PackedTiles::max_cols 16): 512 as 32 x 16, 17 as 9 + 8.
        CHECK(kernels::token_groups(512, 16) == 32);
        CHECK(kernels::token_group_size(512, 31, 16) == 16);
        CHECK(kernels::token_groups(17, 16) == 2);
        CHECK(kernels::token_group_size(17, 0, 16) == 9);
        CHECK(kernels::token_group_size(17, 1, 16) == 8);
    }
}

TEST_CASE("dispatch: a level the CPU cannot run, or an unknown name, is a typed error") {
    CHECK(smol::parse_cpu_level("avx2") == smol::CpuLevel::avx2);
    CHECK_FALSE(smol::parse_cpu_level("avx3"));
    size_t count = 0;
    const smol::CpuLevel* levels = smol::compiled_cpu_levels(count);
    for (size_t i = 0; i < count; ++i) {
        if (smol::cpu_supports(levels[i])) continue;
        try {
            kernels::kernel_set(levels[i]);
            FAIL("expected a throw");
        } catch (const smol::Error& e) {
            CHECK(e.kind() == smol::ErrorKind::invalid_argument);
            CHECK(std::string(e.what()).find(smol::cpu_level_name(levels[i])) != std::string::npos);
        }
    }
#if defined(__x86_64__) || defined(_M_X64)
    CHECK_THROWS_AS(kernels::kernel_set(smol::CpuLevel::neon), smol::Error);
#else
    CHECK_THROWS_AS(kernels::kernel_set(smol::CpuLevel::avx2), smol::Error);
#endif
}

TEST_CASE(
    "dispatch: SMOL_CPU_DISABLE takes features away with what needs them; others are errors") {
    smol::detail::CpuFeatures all;
    all.avx2 = all.avxvnni = all.avx512 = all.amx = all.avx512vbmi = true;
    all.dotprod = all.i8mm = true;
    const smol::detail::CpuFeatures no_vbmi = smol::detail::without_features(all, "avx512vbmi");
    CHECK_FALSE(no_vbmi.avx512vbmi);
    CHECK((no_vbmi.avx512 && no_vbmi.amx && no_vbmi.avx2 && no_vbmi.avxvnni));
    const smol::detail::CpuFeatures no_avx2 = smol::detail::without_features(all, ",avx2,,i8mm");
    CHECK_FALSE((no_avx2.avx2 || no_avx2.avxvnni || no_avx2.avx512 || no_avx2.amx ||
                 no_avx2.avx512vbmi || no_avx2.i8mm));
    CHECK(no_avx2.dotprod);
    const smol::detail::CpuFeatures unknown = smol::detail::without_features(all, "avx512vbm");
    CHECK((unknown.avx512vbmi && unknown.avx512));
#if !defined(_WIN32)  // setenv: POSIX
    // The process's own variable: a name that is no feature is a typed error at
    // the point a level is requested (Model::load, default_kernels).
    const char* before = std::getenv("SMOL_CPU_DISABLE");
    const std::string saved = before ? before : "";
    setenv("SMOL_CPU_DISABLE", "avx512vbmi,vbmi2", 1);
    const smol::Expected<smol::CpuLevel> level = smol::try_requested_cpu_level();
    REQUIRE_FALSE(level.ok());
    CHECK(level.error().kind == smol::ErrorKind::invalid_argument);
    CHECK(level.error().message.find("'vbmi2'") != std::string::npos);
    if (before)
        setenv("SMOL_CPU_DISABLE", saved.c_str(), 1);
    else
        unsetenv("SMOL_CPU_DISABLE");
    CHECK(smol::try_requested_cpu_level().ok());
#endif
}

TEST_CASE(
    "quantize_row_q8_k32: fast path is bit-identical to the reference, which meets the spec") {
    const size_t n = 4 * 256;
    std::vector<float> x = random_floats(n, 2.0f);
    for (size_t i = 256; i < 512; ++i) x[i] = 0.0f;  // an all-zero block
    for (size_t i = 544; i < 576; ++i) x[i] = 0.0f;  // an all-zero sub-block
    x[600] = -900.0f;  // one huge value: coarsens its own 32 values only
    for (size_t i = 768; i < 1024; ++i) x[i] = float(int(i % 7) - 3) * 0.5f;  // many ties
    x[1000] = 127.0f * 1.00390625f * 0.999f;  // max / 127 just below a bf16 step: q clamps to 127
    std::vector<smol::BlockQ8K32> fast(n / 256), ref(n / 256);
    kernels::scalar::quantize_row_q8_k32(x.data(), ref.data(), n);
    for (const kernels::KernelSet* set : runnable_sets()) {
        const std::string level_name = set->name();
        CAPTURE(level_name);
        set->quantize_q8_k32(x.data(), fast.data(), n);
        CHECK(std::memcmp(fast.data(), ref.data(), sizeof(smol::BlockQ8K32) * ref.size()) == 0);
    }

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
    CHECK(ref[2].qs[600 - 512] == -127);       // the extreme element maps to -127
    CHECK(ref[2].d[2] > ref[2].d[0] * 50.0f);  // its sub-block (values 576..607) only
    CHECK(ref[3].qs[1000 - 768] == 127);
}

TEST_CASE("quantize_row_q8_0: fast path is bit-identical to the reference, which meets the spec") {
    const size_t n = 7 * 32;
    std::vector<float> x = random_floats(n, 0.5f);
    for (size_t i = 32; i < 64; ++i) x[i] = 0.0f;
    std::vector<smol::BlockQ8_0> fast(n / 32), ref(n / 32);
    kernels::scalar::quantize_row_q8_0(x.data(), ref.data(), n);
    for (const kernels::KernelSet* set : runnable_sets()) {
        const std::string level_name = set->name();
        CAPTURE(level_name);
        set->quantize_q8_0(x.data(), fast.data(), n);
        CHECK(std::memcmp(fast.data(), ref.data(), sizeof(smol::BlockQ8_0) * ref.size()) == 0);
    }
    for (size_t b = 0; b < ref.size(); ++b) {
        const float d = smol::fp16_to_fp32(ref[b].d);
        float max_abs = 0.0f;
        for (int i = 0; i < 32; ++i) max_abs = std::max(max_abs, std::fabs(x[32 * b + i]));
        CHECK(d == doctest::Approx(max_abs / 127.0f).epsilon(1e-3));
        for (int i = 0; i < 32; ++i) {
            CHECK(std::fabs(d * ref[b].qs[i] - x[32 * b + i]) <=
                  d * 0.51f + max_abs * 1e-3f + 1e-7f);
        }
    }
}

TEST_CASE("quantize_row_q8_k_activations: every level's is bit-identical to the scalar one") {
    const size_t n = 4 * 256;
    std::vector<float> x = random_floats(n, 2.0f);
    for (size_t i = 256; i < 512; ++i) x[i] = 0.0f;                           // all zero
    for (size_t i = 768; i < 1024; ++i) x[i] = float(int(i % 7) - 3) * 0.5f;  // many ties
    x[600] = -900.0f;                                                         // one huge value
    std::vector<smol::BlockQ8K> fast(n / 256), ref(n / 256);
    kernels::scalar::quantize_row_q8_k_activations(x.data(), ref.data(), n);
    for (const kernels::KernelSet* set : runnable_sets()) {
        const std::string level_name = set->name();
        CAPTURE(level_name);
        std::memset(fast.data(), 0xA5, sizeof(smol::BlockQ8K) * fast.size());
        set->quantize_q8_k(x.data(), fast.data(), n);
        CHECK(std::memcmp(fast.data(), ref.data(), sizeof(smol::BlockQ8K) * ref.size()) == 0);
    }
}

TEST_CASE("quantize_row_q8_k_activations: one scale per 256, codes within half a step, sums") {
    const size_t n = 512;
    std::vector<float> x = random_floats(n);
    std::fill(x.begin() + 256, x.end(), 0.0f);  // an all-zero block
    x[7] = -4.0f;                               // the largest magnitude is negative
    std::vector<smol::BlockQ8K> q(n / 256);
    kernels::scalar::quantize_row_q8_k_activations(x.data(), q.data(), n);
    CHECK(q[0].d == 4.0f / 127.0f);
    CHECK(q[0].qs[7] == -127);
    for (int i = 0; i < 256; ++i)
        CHECK(std::fabs(q[0].d * q[0].qs[i] - x[size_t(i)]) <= q[0].d * 0.5f + 1e-6f);
    for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += q[0].qs[16 * g + i];
        CHECK(q[0].bsums[g] == sum);
    }
    CHECK(q[1].d == 0.0f);
    for (int i = 0; i < 256; ++i) CHECK(q[1].qs[i] == 0);
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
            const float got = smol::weight_type_info(type)->dot_reference(row, xq.data(), cols);
            CHECK(std::fabs(double(got) - exact) <= 2e-5 * scale + 1e-9);
        }
    }
}

TEST_CASE(
    "tile kernels of every level: integer parts equal the reference exactly, at any alignment") {
    // With unit weight scales, activation scales of 1/2, 1 or 2 per 32 values
    // and small activations every partial sum is exact in float (a multiple
    // of 1/2 far below 2^23), so float rounding cannot hide a wrong integer
    // nor a sub-block meeting another sub-block's scale. An odd row count: tiles
    // that take rows in twos (Q6_K from 3 tokens) end on a row alone.
    const size_t cols = 512, rows = 7;
    for (GGMLType type : kAllTypes) {
        if (smol::activation_type_for(type) == ActivationType::F32) continue;
        CAPTURE(smol::type_name(type));
        std::vector<uint8_t> w = random_weights(type, rows, cols);
        const size_t w_row_bytes = smol::row_bytes(type, cols);
        const uint16_t one = smol::fp32_to_fp16(1.0f);
        // The byte offsets of the block's fp16 scales (d, and dmin / m where it has one).
        std::vector<size_t> scale_fields;
        switch (type) {
            case GGMLType::Q4_K:
                scale_fields = {offsetof(smol::BlockQ4K, d), offsetof(smol::BlockQ4K, dmin)};
                break;
            case GGMLType::Q5_K:
                scale_fields = {offsetof(smol::BlockQ5K, d), offsetof(smol::BlockQ5K, dmin)};
                break;
            case GGMLType::Q6_K:
                scale_fields = {offsetof(smol::BlockQ6K, d)};
                break;
            case GGMLType::Q2_K:
                scale_fields = {offsetof(smol::BlockQ2K, d), offsetof(smol::BlockQ2K, dmin)};
                break;
            case GGMLType::Q3_K:
                scale_fields = {offsetof(smol::BlockQ3K, d)};
                break;
            case GGMLType::IQ4_XS:
                scale_fields = {offsetof(smol::BlockIQ4XS, d)};
                break;
            case GGMLType::Q4_1:
                scale_fields = {offsetof(smol::BlockQ4_1, d), offsetof(smol::BlockQ4_1, m)};
                break;
            case GGMLType::Q5_1:
                scale_fields = {offsetof(smol::BlockQ5_1, d), offsetof(smol::BlockQ5_1, m)};
                break;
            case GGMLType::IQ1_M:
                scale_fields = {};  // d in the scale words' top nibbles (set_iq1m_d)
                break;
            default:
                scale_fields = {0};
                break;  // Q8_0, Q4_0, Q5_0, IQ4_NL, the other codebook types: d first
        }
        const size_t block_bytes = smol::type_traits(type).type_size;
        const size_t block_values = smol::type_traits(type).block_size;
        for (size_t r = 0; r < rows; ++r) {
            uint8_t* row = w.data() + r * w_row_bytes;
            for (size_t b = 0; b < cols / block_values; ++b) {
                for (size_t field : scale_fields)
                    std::memcpy(row + b * block_bytes + field, &one, sizeof one);
                if (type == GGMLType::IQ1_M) set_iq1m_d(row + b * block_bytes, one);
            }
        }
        // The same rows one byte off their natural alignment (general.alignment = 1).
        std::vector<uint8_t> shifted_storage(w.size() + 1);
        std::memcpy(shifted_storage.data() + 1, w.data(), w.size());
        const uint8_t* shifted = shifted_storage.data() + 1;
        const smol::ReferenceDot reference = smol::weight_type_info(type)->dot_reference;
        for (const kernels::KernelSet* set : sets_with_other_tiles())
            for (int n_cols = 1; n_cols <= kernels::kMaxTileCols; ++n_cols) {
                const std::string level_name = set->name();
                const std::string params = kernels::kernel_params_text(set->params);
                CAPTURE(level_name);
                CAPTURE(params);
                CAPTURE(n_cols);
                const ActivationType act = smol::activation_type_for(type);
                const size_t x_row_bytes = smol::activation_row_bytes(act, cols);
                std::vector<uint8_t> x(size_t(n_cols) * x_row_bytes);
                for (int c = 0; c < n_cols; ++c) {
                    uint8_t* xr = x.data() + size_t(c) * x_row_bytes;
                    if (act == ActivationType::Q8_K) {
                        for (size_t b = 0; b < cols / 256; ++b) {
                            smol::BlockQ8K& block = reinterpret_cast<smol::BlockQ8K*>(xr)[b];
                            block.d = float(1 << uniform_int(0, 2)) * 0.5f;
                            for (int i = 0; i < 256; ++i) block.qs[i] = int8_t(uniform_int(-3, 3));
                            for (int g = 0; g < 16; ++g) {
                                int sum = 0;
                                for (int i = 0; i < 16; ++i) sum += block.qs[16 * g + i];
                                block.bsums[g] = int16_t(sum);
                            }
                        }
                    } else if (act == ActivationType::Q8_K32) {
                        for (size_t b = 0; b < cols / 256; ++b) {
                            smol::BlockQ8K32& block = reinterpret_cast<smol::BlockQ8K32*>(xr)[b];
                            for (int s = 0; s < 8; ++s)
                                block.d[s] = float(1 << uniform_int(0, 2)) * 0.5f;
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
                            for (int i = 0; i < 32; ++i)
                                block.qs[i] = int8_t(uniform_int(-127, 127));
                        }
                    }
                }
                std::vector<uint8_t> x_kernel = x;
                if (act == ActivationType::Q8_K32 && set->layout_q8_k32) {
                    for (int c = 0; c < n_cols; ++c) {
                        set->layout_q8_k32(reinterpret_cast<const smol::BlockQ8K32*>(
                                               x.data() + size_t(c) * x_row_bytes),
                                           reinterpret_cast<smol::BlockQ8K32*>(
                                               x_kernel.data() + size_t(c) * x_row_bytes),
                                           cols / 256);
                    }
                }
                const kernels::PackedTiles* packing = set->packing(type);
                for (const uint8_t* weights : {static_cast<const uint8_t*>(w.data()), shifted}) {
                    std::vector<float> fast(size_t(n_cols) * rows, -1.0f);
                    const bool quantizer_order = set->of(type).tiles_read_quantizer_order;
                    set->of(type).tiles[size_t(n_cols - 1)](
                        weights, w_row_bytes, rows, quantizer_order ? x.data() : x_kernel.data(),
                        x_row_bytes, cols, fast.data(), rows);
                    // The packed tiles (mat-mat) read rows packed from the same weights.
                    std::vector<float> packed_out(size_t(n_cols) * rows, -1.0f);
                    if (packing) {
                        const size_t packed_row_bytes = packing->row_bytes(cols);
                        std::vector<uint8_t> packed(rows * packed_row_bytes);
                        packing->pack(weights, w_row_bytes, rows, cols, packed.data());
                        packing->tiles[n_cols - 1](packed.data(), packed_row_bytes, rows,
                                                   x_kernel.data(), x_row_bytes, cols,
                                                   packed_out.data(), rows);
                    }
                    for (int c = 0; c < n_cols; ++c) {
                        for (size_t r = 0; r < rows; ++r) {
                            const float ref = reference(weights + r * w_row_bytes,
                                                        x.data() + size_t(c) * x_row_bytes, cols);
                            CHECK(fast[size_t(c) * rows + r] == ref);
                            if (packing) CHECK(packed_out[size_t(c) * rows + r] == ref);
                        }
                    }
                }
            }
    }
}

TEST_CASE("packed mat-mat: several row chunks, a full token group and a tail equal the reference") {
    // Each thread packs a chunk of rows (about 48 KiB of stored weights) into
    // its own buffer: 100 rows of 2048 or 11008 values are several chunks, so
    // threads reuse their buffers and the last chunk is short.
    smol::ThreadPool pool(2);
    for (const kernels::KernelSet* set : runnable_sets())
        for (GGMLType type : kAllTypes) {
            if (!set->packing(type)) continue;
            for (size_t cols : {size_t(2048), size_t(11008)}) {
                const size_t rows = 100, n_tokens = 11;  // a full group of 8 and a tail of 3
                const std::string level_name = set->name();
                CAPTURE(level_name);
                CAPTURE(smol::type_name(type));
                CAPTURE(cols);
                const std::vector<uint8_t> w_bytes = random_weights(type, rows, cols);
                const smol::WeightMatrix w =
                    smol::make_weight_matrix(type, w_bytes.data(), rows, cols, "test");
                const std::vector<float> x = random_floats(n_tokens * cols);
                smol::QuantizedInput input(*set);
                input.quantize(type, x.data(), n_tokens, cols, &pool);
                std::vector<float> ref(n_tokens * rows), y(n_tokens * rows);
                smol::matmul_reference(w, input, ref.data(), rows);
                smol::matmul(w, input, y.data(), rows, pool);
                for (size_t t = 0; t < n_tokens; ++t)
                    for (size_t r = 0; r < rows; ++r) {
                        const double scale = magnitude(type, w_bytes.data() + r * w.row_bytes,
                                                       input.type(), input.row(t), cols);
                        CHECK(std::fabs(double(y[t * rows + r]) - double(ref[t * rows + r])) <=
                              1e-5 * scale + 1e-9);
                    }
            }
        }
}

// Long batches multiply K-quant rows converted to 8 bits (kernels/scalar.hpp,
// "long batches"). The spec first: a converted weight is the stored one up to
// the conversion's rounding, and the converted dot is the dot of those weights.
// The 32-weight formats' conversion keeps every value (the golden engine's is
// lossless too): their converted weights are the stored ones exactly.
namespace {
// Block b (256 values) of a stored row, converted by the type's scalar spec.
void convert_block(GGMLType type, const uint8_t* row, size_t b,
                   kernels::scalar::ConvertedBlock& c) {
    const uint8_t* block = row + b * smol::row_bytes(type, 256);
    switch (type) {
        case GGMLType::Q4_K:
            kernels::scalar::convert_k4_block<false, smol::BlockQ4K>(block, c);
            break;
        case GGMLType::Q5_K:
            kernels::scalar::convert_k4_block<true, smol::BlockQ5K>(block, c);
            break;
        case GGMLType::Q6_K:
            kernels::scalar::convert_q6k_block(block, c);
            break;
        case GGMLType::Q4_0:
            kernels::scalar::convert_legacy32_blocks<smol::BlockQ4_0>(block, c);
            break;
        case GGMLType::Q4_1:
            kernels::scalar::convert_legacy32_blocks<smol::BlockQ4_1>(block, c);
            break;
        case GGMLType::Q5_0:
            kernels::scalar::convert_legacy32_blocks<smol::BlockQ5_0>(block, c);
            break;
        case GGMLType::Q5_1:
            kernels::scalar::convert_legacy32_blocks<smol::BlockQ5_1>(block, c);
            break;
        default:
            REQUIRE(type == GGMLType::IQ4_NL);
            kernels::scalar::convert_legacy32_blocks<smol::BlockIQ4NL>(block, c);
            break;
    }
}
}  // namespace

TEST_CASE("converted rows: each weight within the conversion's rounding, the dot exact over them") {
    for (GGMLType type : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q4_0,
                          GGMLType::Q4_1, GGMLType::Q5_0, GGMLType::Q5_1, GGMLType::IQ4_NL}) {
        CAPTURE(smol::type_name(type));
        const bool k_quant =
            type == GGMLType::Q4_K || type == GGMLType::Q5_K || type == GGMLType::Q6_K;
        const smol::WeightTypeInfo& info = *smol::weight_type_info(type);
        REQUIRE(bool(info.converted_dot_reference));
        CHECK(info.convert_min_tokens == (type == GGMLType::Q6_K ? 64u : 32u));
        const size_t cols = 512, rows = 6;
        const std::vector<uint8_t> w = random_weights(type, rows, cols);
        const std::vector<float> x = random_floats(cols);
        const std::vector<uint8_t> xq = reference_activations(type, x, 1, cols);
        std::vector<float> xd(cols), wd(cols);
        smol::dequantize_activation_row(ActivationType::Q8_K32, xq.data(), xd.data(), cols);
        for (size_t r = 0; r < rows; ++r) {
            const uint8_t* row = w.data() + r * smol::row_bytes(type, cols);
            smol::dequantize_row(type, row, wd.data(), cols);
            double exact = 0.0, scale = 0.0;
            for (size_t b = 0; b < cols / 256; ++b) {
                kernels::scalar::ConvertedBlock c;
                convert_block(type, row, b, c);
                for (int i = 0; i < 256; ++i) {
                    const int s = i / 32;
                    const double converted = double(c.scale[s]) * c.q[i] + c.offset[s];
                    const double stored = wd[256 * b + size_t(i)];
                    if (!k_quant) {
                        CHECK(float(converted) == float(stored));
                    } else {
                        // fp16 rounding of each scale (2^-11 relative), and for Q6_K
                        // the requantization to 8 bits (half a step of S).
                        const double bound =
                            type == GGMLType::Q6_K
                                ? 0.5 * std::fabs(c.scale[s]) * (1 + 1e-3) +
                                      std::ldexp(std::fabs(c.scale[s]) * 127, -11)
                                : std::ldexp(std::fabs(c.scale[s]) * std::abs(c.q[i]) +
                                                 std::fabs(c.offset[s]),
                                             -11);
                        CHECK(std::fabs(converted - stored) <= bound + 1e-12);
                        if (type != GGMLType::Q6_K) CHECK((c.q[i] >= 0 && c.q[i] <= 31));
                    }
                    exact += converted * double(xd[256 * b + size_t(i)]);
                    scale += std::fabs(converted * double(xd[256 * b + size_t(i)]));
                }
            }
            const float got = info.converted_dot_reference(row, xq.data(), cols);
            CHECK(std::fabs(double(got) - exact) <= 2e-5 * scale + 1e-9);
        }
    }
}

// The scalar conversion of `type` (Q2_K, Q3_K, IQ4_XS or a codebook type): n_rows rows into out.
void pack_converted_q8k(GGMLType type, const uint8_t* w, size_t w_row_bytes, size_t n_rows,
                        size_t cols, uint8_t* out) {
    smol::for_each_weight_type<smol::TypeTag>([&](auto tag) {
        constexpr GGMLType t = decltype(tag)::type;
        if constexpr (t == GGMLType::Q2_K || t == GGMLType::Q3_K || t == GGMLType::IQ4_XS ||
                      smol::is_codebook_type(t))
            if (t == type)
                kernels::scalar::pack_converted_q8k<t>(w, w_row_bytes, n_rows, cols, out);
    });
}

TEST_CASE("converted Q8_K-family rows: each weight within half a step, the dot exact") {
    std::vector<GGMLType> types = {GGMLType::Q2_K, GGMLType::Q3_K, GGMLType::IQ4_XS};
    types.insert(types.end(), std::begin(kCodebookTypes), std::end(kCodebookTypes));
    for (GGMLType type : types) {
        CAPTURE(smol::type_name(type));
        const smol::WeightTypeInfo& info = *smol::weight_type_info(type);
        CHECK(info.convert_min_tokens == (type == GGMLType::IQ2_S ? 16u : 32u));
        const size_t cols = 512, rows = 6;
        const std::vector<uint8_t> w = random_weights(type, rows, cols);
        const std::vector<float> x = random_floats(cols);
        const std::vector<uint8_t> xq = reference_activations(type, x, 1, cols);
        std::vector<float> xd(cols), wd(cols);
        smol::dequantize_activation_row(ActivationType::Q8_K, xq.data(), xd.data(), cols);
        std::vector<uint8_t> packed(kernels::scalar::converted_q8k_row_bytes(cols));
        for (size_t r = 0; r < rows; ++r) {
            const uint8_t* row = w.data() + r * smol::row_bytes(type, cols);
            smol::dequantize_row(type, row, wd.data(), cols);
            pack_converted_q8k(type, row, 0, 1, cols, packed.data());
            double exact = 0.0, scale = 0.0;
            for (size_t b = 0; b < cols / 256; ++b) {
                const uint8_t* block = packed.data() + b * kernels::scalar::kConvertedQ8KBytes;
                const double step = smol::fp16_to_fp32(smol::load_u16(block));
                double largest = 0;
                for (size_t i = 0; i < 256; ++i)
                    largest = std::max(largest, std::fabs(double(wd[256 * b + i])));
                for (size_t i = 0; i < 256; ++i) {
                    const double converted = step * int8_t(block[2 + i]);
                    const double stored = wd[256 * b + i];
                    // Half a step, and the fp16 rounding of the stored scale over
                    // up to 128 codes (2^-11 relative, twice for good measure).
                    CHECK(std::fabs(converted - stored) <=
                          0.5 * step + std::ldexp(largest, -10) + 1e-12);
                    exact += converted * double(xd[256 * b + i]);
                    scale += std::fabs(converted * double(xd[256 * b + i]));
                }
            }
            const float got = info.converted_dot_reference(row, xq.data(), cols);
            CHECK(std::fabs(double(got) - exact) <= 2e-5 * scale + 1e-9);
            CHECK(got == kernels::scalar::dot_converted_q8k(
                             packed.data(), reinterpret_cast<const smol::BlockQ8K*>(xq.data()),
                             cols / 256));
        }
    }
}

TEST_CASE("converted rows: every level's tiles equal the converted reference, bit for bit") {
    for (const kernels::KernelSet* set : runnable_sets())
        for (GGMLType type : kAllTypes) {
            const kernels::PackedTiles& converted = set->of(type).converted;
            if (!converted.pack) continue;
            const std::string level_name = set->name();
            CAPTURE(level_name);
            CAPTURE(smol::type_name(type));
            const smol::ReferenceDot reference =
                smol::weight_type_info(type)->converted_dot_reference;
            for (size_t cols : {size_t(256), size_t(768)}) {
                const size_t rows = 37;  // groups of 16 and a short last group
                const std::vector<uint8_t> w = random_weights(type, rows, cols);
                const size_t w_row_bytes = smol::row_bytes(type, cols);
                std::vector<uint8_t> shifted_storage(w.size() + 1);
                std::memcpy(shifted_storage.data() + 1, w.data(), w.size());
                const size_t padded_rows =
                    (rows + converted.row_group - 1) / converted.row_group * converted.row_group;
                const size_t packed_row_bytes = converted.row_bytes(cols);
                const size_t max_cols = converted.max_cols();  // wide tiles too
                const std::vector<float> x = random_floats(max_cols * cols);
                smol::QuantizedInput input(*set);
                input.quantize(type, x.data(), max_cols, cols);
                for (const uint8_t* weights :
                     {static_cast<const uint8_t*>(w.data()),
                      static_cast<const uint8_t*>(shifted_storage.data() + 1)}) {
                    std::vector<uint8_t> packed(padded_rows * packed_row_bytes);
                    converted.pack(weights, w_row_bytes, rows, cols, packed.data());
                    for (size_t n_cols = 1; n_cols <= max_cols; ++n_cols) {
                        CAPTURE(n_cols);
                        const uint8_t* activations =
                            converted.reads_quantizer_order ? input.row(0) : input.kernel_row(0);
                        std::vector<float> y(n_cols * rows, -1.0f);
                        converted.tile(n_cols)(packed.data(), packed_row_bytes, rows, activations,
                                               input.row_bytes(), cols, y.data(), rows);
                        for (size_t c = 0; c < n_cols; ++c)
                            for (size_t r = 0; r < rows; ++r)
                                CHECK(y[c * rows + r] ==
                                      reference(weights + r * w_row_bytes, input.row(c), cols));
                    }
                }
            }
        }
}

// The conversion's rare branches, which random blocks seldom reach: blocks
// whose integer weights all stay under 127 (Q3_K, IQ4_XS keep them as codes,
// S = d), and all-zero blocks (Q2_K with d = dmin = 0: S = 0, codes 0).
// Codebook blocks: scale fields 0 (odd scale 1) keep every integer weight
// under 124 (as codes, S = D); d = 0 zeroes the block.
void shrink_codebook_block(GGMLType type, uint8_t* block, bool zero) {
    const uint16_t no_d = 0;
    switch (type) {
        case GGMLType::IQ2_XXS:
            for (int s = 0; s < 8; ++s) block[2 + 8 * s + 7] &= 0x0F;
            break;
        case GGMLType::IQ2_XS:
            std::memset(block + 66, 0, 8);
            break;
        case GGMLType::IQ2_S:
            std::memset(block + 74, 0, 8);
            break;
        case GGMLType::IQ3_XXS:
            for (int s = 0; s < 8; ++s) block[66 + 4 * s + 3] &= 0x0F;
            break;
        case GGMLType::IQ3_S:
            std::memset(block + 106, 0, 4);
            break;
        case GGMLType::IQ1_S:
            for (int s = 0; s < 8; ++s) block[34 + 2 * s + 1] &= 0x8F;
            break;
        default:  // IQ1_M: scales in bits 0-11 of its four words
            for (int w = 0; w < 4; ++w) {
                block[48 + 2 * w] = 0;
                block[48 + 2 * w + 1] &= 0xF0;
            }
            break;
    }
    if (zero) {
        if (type == GGMLType::IQ1_M)
            set_iq1m_d(block, 0);
        else
            std::memcpy(block, &no_d, sizeof no_d);
    }
}

TEST_CASE("converted Q8_K-family rows: small and zero blocks, every level as the spec") {
    const size_t rows = 21, cols = 512;
    std::vector<GGMLType> types = {GGMLType::Q2_K, GGMLType::Q3_K, GGMLType::IQ4_XS};
    types.insert(types.end(), std::begin(kCodebookTypes), std::end(kCodebookTypes));
    for (GGMLType type : types) {
        CAPTURE(smol::type_name(type));
        std::vector<uint8_t> w = random_weights(type, rows, cols);
        const size_t w_row_bytes = smol::row_bytes(type, cols);
        for (size_t r = 0; r < rows; ++r)
            for (size_t b = 0; b < cols / 256; ++b) {
                uint8_t* block = w.data() + r * w_row_bytes + b * smol::type_traits(type).type_size;
                const int kind = int((r + b) % 3);  // 0: as random, 1: small scales, 2: zero
                if (kind == 0) continue;
                if (type == GGMLType::Q2_K) {
                    auto* q2 = reinterpret_cast<smol::BlockQ2K*>(block);
                    if (kind == 2)
                        q2->d = q2->dmin = 0;
                    else
                        for (uint8_t& sc : q2->scales) sc = uint8_t(sc & 0x11);
                } else if (type == GGMLType::Q3_K) {
                    // scale = (low | high << 4) - 32: high 2, low 0 or 1 -> 0 or 1.
                    auto* q3 = reinterpret_cast<smol::BlockQ3K*>(block);
                    for (int i = 0; i < 8; ++i) q3->scales[i] = kind == 2 ? 0x00 : 0x11;
                    for (int i = 8; i < 12; ++i) q3->scales[i] = 0xAA;
                } else if (type == GGMLType::IQ4_XS) {
                    auto* iq = reinterpret_cast<smol::BlockIQ4XS*>(block);
                    for (uint8_t& low : iq->scales_l) low = kind == 2 ? 0x00 : 0x11;
                    iq->scales_h = 0xAAAA;
                } else {
                    shrink_codebook_block(type, block, kind == 2);
                }
            }
        const std::vector<float> x = random_floats(kernels::kMaxWideTileCols * cols);
        const smol::ReferenceDot reference = smol::weight_type_info(type)->converted_dot_reference;
        for (const kernels::KernelSet* set : runnable_sets()) {
            const kernels::PackedTiles& converted = set->of(type).converted;
            if (!converted.pack) continue;
            const std::string level_name = set->name();
            CAPTURE(level_name);
            const size_t n_cols = converted.max_cols();
            smol::QuantizedInput input(*set);
            input.quantize(type, x.data(), n_cols, cols);
            const size_t padded_rows =
                (rows + converted.row_group - 1) / converted.row_group * converted.row_group;
            std::vector<uint8_t> packed(padded_rows * converted.row_bytes(cols));
            converted.pack(w.data(), w_row_bytes, rows, cols, packed.data());
            std::vector<float> y(n_cols * rows);
            converted.tile(n_cols)(packed.data(), converted.row_bytes(cols), rows, input.row(0),
                                   input.row_bytes(), cols, y.data(), rows);
            for (size_t c = 0; c < n_cols; ++c)
                for (size_t r = 0; r < rows; ++r)
                    CHECK(y[c * rows + r] ==
                          reference(w.data() + r * w_row_bytes, input.row(c), cols));
        }
    }
}

TEST_CASE("matmul of a long batch: converted rows from the weight table's threshold on") {
    smol::ThreadPool pool(2);
    for (const kernels::KernelSet* set : runnable_sets())
        for (GGMLType type :
             {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q2_K, GGMLType::Q3_K,
              GGMLType::IQ4_XS, GGMLType::IQ2_S, GGMLType::IQ3_XXS, GGMLType::IQ1_M}) {
            for (size_t n_tokens :
                 {size_t(15), size_t(16), size_t(31), size_t(32), size_t(63), size_t(70)}) {
                const size_t rows = 100, cols = 2048;  // several row chunks
                const std::string level_name = set->name();
                CAPTURE(level_name);
                CAPTURE(smol::type_name(type));
                CAPTURE(n_tokens);
                const bool converts = set->converts(type, n_tokens);
                if (set->of(type).converted.pack)
                    CHECK(converts ==
                          (n_tokens >= smol::weight_type_info(type)->convert_min_tokens));
                const std::vector<uint8_t> w_bytes = random_weights(type, rows, cols);
                const smol::WeightMatrix w =
                    smol::make_weight_matrix(type, w_bytes.data(), rows, cols, "test");
                const std::vector<float> x = random_floats(n_tokens * cols);
                smol::QuantizedInput input(*set);
                input.quantize(type, x.data(), n_tokens, cols, &pool);
                std::vector<float> ref(n_tokens * rows), y(n_tokens * rows);
                smol::matmul_reference(w, input, ref.data(), rows);
                smol::matmul(w, input, y.data(), rows, pool);
                const smol::ReferenceDot converted_dot =
                    smol::weight_type_info(type)->converted_dot_reference;
                for (size_t t = 0; t < n_tokens; t += 3)
                    for (size_t r = 0; r < rows; ++r) {
                        const double scale = magnitude(type, w_bytes.data() + r * w.row_bytes,
                                                       input.type(), input.row(t), cols);
                        CHECK(std::fabs(double(y[t * rows + r]) - double(ref[t * rows + r])) <=
                              1e-5 * scale + 1e-9);
                        // The reference follows the same rule (the converted dot exactly).
                        if (converts)
                            CHECK(ref[t * rows + r] ==
                                  converted_dot(w_bytes.data() + r * w.row_bytes, input.row(t),
                                                cols));
                    }
            }
        }
}

// The tile test above calls the converted tiles directly; here the executor
// runs them (packing per chunk, token groups, threads) over whole long
// batches, row counts that end on a short group, every level that converts.
TEST_CASE("matmul of a long batch: every level gives the converted reference's bits") {
    smol::ThreadPool pool(2);
    for (const kernels::KernelSet* set : runnable_sets())
        for (GGMLType type : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q2_K,
                              GGMLType::Q3_K, GGMLType::IQ4_XS, GGMLType::IQ2_XXS, GGMLType::IQ2_XS,
                              GGMLType::IQ3_S, GGMLType::IQ1_S}) {
            if (!set->of(type).converted.pack) continue;
            const smol::ReferenceDot converted_dot =
                smol::weight_type_info(type)->converted_dot_reference;
            const size_t cols = 512;
            for (size_t rows : {size_t(16), size_t(45), size_t(130)})
                for (size_t n_tokens : {size_t(64), size_t(77)}) {
                    const std::string level_name = set->name();
                    CAPTURE(level_name);
                    CAPTURE(smol::type_name(type));
                    CAPTURE(rows);
                    CAPTURE(n_tokens);
                    REQUIRE(set->converts(type, n_tokens));
                    const std::vector<uint8_t> w_bytes = random_weights(type, rows, cols);
                    const smol::WeightMatrix w =
                        smol::make_weight_matrix(type, w_bytes.data(), rows, cols, "test");
                    const std::vector<float> x = random_floats(n_tokens * cols);
                    smol::QuantizedInput input(*set);
                    input.quantize(type, x.data(), n_tokens, cols, &pool);
                    std::vector<float> y(n_tokens * rows, -1.0f);
                    smol::matmul(w, input, y.data(), rows, pool);
                    size_t mismatches = 0;
                    for (size_t t = 0; t < n_tokens; ++t)
                        for (size_t r = 0; r < rows; ++r)
                            mismatches +=
                                y[t * rows + r] !=
                                converted_dot(w_bytes.data() + r * w.row_bytes, input.row(t), cols);
                    CHECK(mismatches == 0);
                }
        }
}

TEST_CASE(
    "matmul of every level equals the scalar reference over odd shapes, and is independent of the "
    "thread count") {
    smol::ThreadPool pools[] = {smol::ThreadPool(1), smol::ThreadPool(2), smol::ThreadPool(3)};
    for (const kernels::KernelSet* set : runnable_sets())
        for (GGMLType type : kAllTypes) {
            const bool small_blocks = type == GGMLType::Q8_0 || type == GGMLType::F16 ||
                                      type == GGMLType::BF16 || type == GGMLType::F32;
            const size_t col_options[] = {small_blocks ? size_t(32) : size_t(256),
                                          small_blocks ? size_t(160) : size_t(768)};
            for (size_t cols : col_options) {
                for (size_t rows : {size_t(1), size_t(7), size_t(37)}) {
                    const std::vector<uint8_t> w_bytes = random_weights(type, rows, cols);
                    const smol::WeightMatrix w =
                        smol::make_weight_matrix(type, w_bytes.data(), rows, cols, "test");
                    for (size_t n_tokens = 1; n_tokens <= 9; ++n_tokens) {
                        if (rows == 37 && n_tokens % 4 != 1) continue;  // keep the run short
                        CAPTURE(smol::type_name(type));
                        CAPTURE(rows);
                        CAPTURE(cols);
                        CAPTURE(n_tokens);
                        const std::string level_name = set->name();
                        CAPTURE(level_name);
                        const std::vector<float> x = random_floats(n_tokens * cols);
                        smol::QuantizedInput input(*set);
                        input.quantize(type, x.data(), n_tokens, cols, &pools[1]);
                        // The fast quantizer is bit-identical to the reference one.
                        const std::vector<uint8_t> ref_input =
                            reference_activations(type, x, n_tokens, cols);
                        REQUIRE(std::memcmp(input.data(), ref_input.data(), ref_input.size()) == 0);

                        const size_t y_stride = rows + 3;  // a stride wider than the row count
                        std::vector<float> ref(n_tokens * y_stride, 0.0f);
                        smol::matmul_reference(w, input, ref.data(), y_stride);
                        std::vector<double> scale(n_tokens * rows);
                        for (size_t t = 0; t < n_tokens; ++t) {
                            for (size_t r = 0; r < rows; ++r) {
                                scale[t * rows + r] =
                                    magnitude(type, w_bytes.data() + r * w.row_bytes, input.type(),
                                              input.row(t), cols);
                            }
                        }
                        std::vector<float> first;
                        for (smol::ThreadPool& pool : pools) {
                            std::vector<float> y(n_tokens * y_stride, 0.0f);
                            smol::matmul(w, input, y.data(), y_stride, pool);
                            for (size_t t = 0; t < n_tokens; ++t) {
                                for (size_t r = 0; r < rows; ++r) {
                                    CHECK(std::fabs(double(y[t * y_stride + r]) -
                                                    double(ref[t * y_stride + r])) <=
                                          1e-5 * scale[t * rows + r] + 1e-9);
                                }
                                for (size_t r = rows; r < y_stride; ++r)
                                    CHECK(y[t * y_stride + r] == 0.0f);
                            }
                            if (first.empty()) {
                                first = y;
                            } else {
                                CHECK(std::memcmp(first.data(), y.data(),
                                                  y.size() * sizeof(float)) == 0);
                            }
                        }
                    }
                }
            }
        }
}

TEST_CASE("matmul over several sequences: each sequence's result equals its product alone") {
    // A batched step: sequences of 40, 1, 3 and 70 tokens in one input. Each
    // follows the long-batch rule by its own length, so the 1- and 3-token
    // sequences read stored rows although the step has 114 tokens.
    smol::ThreadPool pool(2);
    const size_t sizes[] = {40, 1, 3, 70};
    const size_t n_tokens = 114, rows = 37, cols = 512;
    for (const kernels::KernelSet* set : runnable_sets())
        for (GGMLType type : kAllTypes) {
            const std::string level_name = set->name();
            CAPTURE(level_name);
            CAPTURE(smol::type_name(type));
            const std::vector<uint8_t> w_bytes = random_weights(type, rows, cols);
            const smol::WeightMatrix w = smol::make_weight_matrix(type, w_bytes.data(), rows, cols);
            const std::vector<float> x = random_floats(n_tokens * cols);
            smol::QuantizedInput all(*set);
            all.set_sequences(sizes, 4);
            all.quantize(type, x.data(), n_tokens, cols, &pool);
            std::vector<float> y_all(n_tokens * rows), ref_all(n_tokens * rows);
            smol::matmul(w, all, y_all.data(), rows, pool);
            smol::matmul_reference(w, all, ref_all.data(), rows);
            for (size_t i = 0, begin = 0; i < 4; begin += sizes[i], ++i) {
                smol::QuantizedInput alone(*set);
                alone.quantize(type, x.data() + begin * cols, sizes[i], cols, &pool);
                std::vector<float> y(sizes[i] * rows), ref(sizes[i] * rows);
                smol::matmul(w, alone, y.data(), rows, pool);
                smol::matmul_reference(w, alone, ref.data(), rows);
                CHECK(std::memcmp(y.data(), y_all.data() + begin * rows,
                                  y.size() * sizeof(float)) == 0);
                CHECK(std::memcmp(ref.data(), ref_all.data() + begin * rows,
                                  ref.size() * sizeof(float)) == 0);
            }
            // Sizes that do not add up to the input are an error, not a guess.
            const size_t wrong[] = {100, 13};
            all.set_sequences(wrong, 2);
            CHECK_THROWS_AS(smol::matmul(w, all, y_all.data(), rows, pool), smol::Error);
        }
}

// A matrix whose first rows are interleaved (quant/weight_matrix.hpp), built
// from stored rows with WeightMatrix::interleaved_copy; the tail stays stored.
struct InterleavedCopy {
    std::vector<uint8_t> bytes;
    smol::WeightMatrix w;
    explicit InterleavedCopy(const smol::WeightMatrix& stored)
        : bytes(stored.rows * stored.row_bytes), w(stored.interleaved_copy(bytes.data())) {}
};

TEST_CASE("interleaved rows: word k of row r sits at 4 (16 k + r) of its group; rows come back") {
    const size_t rows = 37, cols = 512;
    const std::vector<uint8_t> stored = random_weights(GGMLType::Q4_K, rows, cols);
    const smol::WeightMatrix w =
        smol::make_weight_matrix(GGMLType::Q4_K, stored.data(), rows, cols);
    const InterleavedCopy copy(w);
    REQUIRE(copy.w.interleaved_rows == 32);
    const size_t row_bytes = w.row_bytes, group_bytes = 16 * row_bytes;
    for (size_t r = 0; r < 32; ++r)
        for (size_t k = 0; k < row_bytes / 4; ++k)
            REQUIRE(std::memcmp(copy.bytes.data() + r / 16 * group_bytes + 4 * (16 * k + r % 16),
                                stored.data() + r * row_bytes + 4 * k, 4) == 0);
    std::vector<uint8_t> row(row_bytes);
    for (size_t r = 0; r < rows; ++r) {
        copy.w.copy_row(r, row.data());
        CHECK(std::memcmp(row.data(), stored.data() + r * row_bytes, row_bytes) == 0);
    }
    std::vector<uint8_t> back(2 * group_bytes), all(rows * row_bytes);
    smol::deinterleave_rows(copy.bytes.data(), row_bytes, 2, back.data());
    CHECK(std::memcmp(back.data(), stored.data(), back.size()) == 0);
    copy.w.copy_stored(all.data());
    CHECK(std::memcmp(all.data(), stored.data(), all.size()) == 0);
    CHECK(smol::can_interleave(row_bytes));
    CHECK_FALSE(smol::can_interleave(34));  // one Q8_0 block: not whole words
}

TEST_CASE(
    "interleaved rows: a level's pack_interleaved writes pack's bytes over the rows as stored") {
    // Three groups of 16 rows, two widths; Q5_K's high bits too.
    for (GGMLType type : {GGMLType::Q4_K, GGMLType::Q5_K})
        for (size_t cols : {size_t(256), size_t(1024)}) {
            const size_t rows = 48;
            const std::vector<uint8_t> stored = random_weights(type, rows, cols);
            const smol::WeightMatrix w = smol::make_weight_matrix(type, stored.data(), rows, cols);
            const InterleavedCopy copy(w);
            REQUIRE(copy.w.interleaved_rows == rows);
            for (const kernels::KernelSet* set : runnable_sets())
                for (const kernels::PackedTiles* p :
                     {&set->of(type).packed, &set->of(type).converted}) {
                    if (!p->pack_interleaved) continue;
                    const std::string level_name = set->name();
                    CAPTURE(level_name);
                    CAPTURE(smol::type_name(type));
                    CAPTURE(cols);
                    REQUIRE(bool(p->pack));
                    std::vector<uint8_t> expected(rows * p->row_bytes(cols), 0xAA);
                    std::vector<uint8_t> got(expected.size(), 0x55);
                    p->pack(stored.data(), w.row_bytes, rows, cols, expected.data());
                    p->pack_interleaved(copy.bytes.data(), w.row_bytes, rows, cols, got.data());
                    CHECK(std::memcmp(got.data(), expected.data(), got.size()) == 0);
                }
        }
}

TEST_CASE("interleaved rows: matmul gives the stored rows' bits on every level, any batch") {
    // 37 rows: two groups and a stored tail of 5; with 3 threads a chunk can
    // reach past the groups. Every type: the layout moves bytes only, and a
    // level without tiles over it puts the rows back as stored per chunk.
    const size_t rows = 37, cols = 512;
    const size_t sizes[] = {40, 1, 3, 70};
    for (int threads : {1, 3}) {
        smol::ThreadPool pool(threads);
        for (const kernels::KernelSet* set : runnable_sets())
            for (GGMLType type : kAllTypes) {
                const std::string level_name = set->name();
                CAPTURE(level_name);
                CAPTURE(smol::type_name(type));
                CAPTURE(threads);
                const std::vector<uint8_t> w_bytes = random_weights(type, rows, cols);
                const smol::WeightMatrix w =
                    smol::make_weight_matrix(type, w_bytes.data(), rows, cols);
                REQUIRE(smol::can_interleave(w.row_bytes));
                const InterleavedCopy copy(w);
                for (size_t n_tokens : {1, 2, 5, 8, 9, 20, 40, 70, 114}) {
                    CAPTURE(n_tokens);
                    const std::vector<float> x = random_floats(n_tokens * cols);
                    smol::QuantizedInput input(*set);
                    if (n_tokens == 114) input.set_sequences(sizes, 4);
                    input.quantize(type, x.data(), n_tokens, cols, &pool);
                    std::vector<float> y(n_tokens * rows), y_stored(y), ref(y), ref_stored(y);
                    smol::matmul(copy.w, input, y.data(), rows, pool);
                    smol::matmul(w, input, y_stored.data(), rows, pool);
                    CHECK(std::memcmp(y.data(), y_stored.data(), y.size() * sizeof(float)) == 0);
                    if (n_tokens == 2 || n_tokens == 40) {
                        smol::matmul_reference(copy.w, input, ref.data(), rows);
                        smol::matmul_reference(w, input, ref_stored.data(), rows);
                        CHECK(std::memcmp(ref.data(), ref_stored.data(),
                                          ref.size() * sizeof(float)) == 0);
                    }
                }
            }
    }
    // Who reads the layout natively (the rest put rows back as stored).
    CHECK_FALSE(scalar_set().interleaves(GGMLType::Q4_K));
    for (const kernels::KernelSet* set : runnable_sets())
        if (set->level == smol::CpuLevel::avx512)
            CHECK((set->interleaves(GGMLType::Q4_K) && set->interleaves(GGMLType::Q5_K)));
}

// Every candidate of every speed-only setting (kernels::KernelParams) gives
// the default set's bits: the tuner may pick any of them, and switch at any time.
TEST_CASE("kernel params: every candidate gives the default's bits, at every level") {
    const size_t rows = 165, cols = 1024;  // 10 interleaved groups and a stored tail of 5
    std::vector<kernels::KernelParams> all;
    for (int pace : kernels::kPaceCandidates)
        for (int interleaved : kernels::kInterleavedPrefetchCandidates)
            for (int stored : kernels::kStoredPrefetchCandidates)
                for (int chunks : kernels::kDecodeChunkCandidates) {
                    kernels::KernelParams p;
                    p.pace_steps = pace;
                    p.interleaved_prefetch = interleaved;
                    p.stored_prefetch = stored;
                    p.decode_chunks = chunks;
                    all.push_back(p);
                }
    REQUIRE(all.size() == 81);
    const kernels::KernelParams defaults;
    for (int threads : {1, 3}) {
        smol::ThreadPool pool(threads);
        for (const kernels::KernelSet* set : runnable_sets()) {
            const std::string level_name = set->name();
            CAPTURE(level_name);
            CAPTURE(threads);
            CHECK(set->params == defaults);
            for (GGMLType type : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q8_0}) {
                CAPTURE(smol::type_name(type));
                const std::vector<uint8_t> w_bytes = random_weights(type, rows, cols);
                const smol::WeightMatrix stored =
                    smol::make_weight_matrix(type, w_bytes.data(), rows, cols);
                const InterleavedCopy copy(stored);
                for (size_t n_tokens : {1, 2, 8}) {
                    CAPTURE(n_tokens);
                    const std::vector<float> x = random_floats(n_tokens * cols);
                    smol::QuantizedInput input(*set);
                    input.quantize(type, x.data(), n_tokens, cols);
                    std::vector<float> want(n_tokens * rows), want_interleaved(want), got(want);
                    smol::matmul(stored, input, want.data(), rows, pool);
                    smol::matmul(copy.w, input, want_interleaved.data(), rows, pool);
                    REQUIRE(std::memcmp(want.data(), want_interleaved.data(),
                                        want.size() * sizeof(float)) == 0);
                    for (const kernels::KernelParams& p : all) {
                        const kernels::KernelSet& candidate = kernels::kernel_set(set->level, p);
                        CAPTURE(kernels::kernel_params_text(candidate.params));
                        REQUIRE(candidate.level == set->level);
                        smol::QuantizedInput candidate_input(candidate);
                        candidate_input.quantize(type, x.data(), n_tokens, cols);
                        for (const smol::WeightMatrix* w : {&stored, &copy.w}) {
                            std::fill(got.begin(), got.end(), -1.0f);
                            smol::matmul(*w, candidate_input, got.data(), rows, pool);
                            CHECK(std::memcmp(got.data(), want.data(),
                                              got.size() * sizeof(float)) == 0);
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("kernel params: sets are built once, differ where the level uses them, bad ones throw") {
    // Decode chunks per thread: 2048 rows / (2 threads * chunks), in multiples of 4.
    CHECK(kernels::chunk_rows(2048, 1152, 1, 2, 4) == 256);
    CHECK(kernels::chunk_rows(2048, 1152, 1, 2, 16) == 64);
    CHECK(kernels::chunk_rows(2048, 1152, 2, 2, 16) == 256);  // from 2 tokens on: 4 per thread
    for (const kernels::KernelSet* set : runnable_sets()) {
        const std::string level_name = set->name();
        CAPTURE(level_name);
        kernels::KernelParams p;
        CHECK(&kernels::kernel_set(set->level, p) == set);  // the defaults: the level's own set
        p.pace_steps = 0;
        p.interleaved_prefetch = 4096;
        p.stored_prefetch = 8192;
        p.decode_chunks = 16;
        const kernels::KernelSet& other = kernels::kernel_set(set->level, p);
        CHECK(&kernels::kernel_set(set->level, p) == &other);
        CHECK(other.params.decode_chunks == 16);
        const bool zmm = set->level == smol::CpuLevel::avx512 || set->level == smol::CpuLevel::amx;
        if (zmm) {
            // Each setting really selects another tile.
            CHECK(other.params == p);
            CHECK((other.of(GGMLType::Q4_K).interleaved[0] !=
                   set->of(GGMLType::Q4_K).interleaved[0]));
            CHECK((other.of(GGMLType::Q5_K).interleaved[0] !=
                   set->of(GGMLType::Q5_K).interleaved[0]));
            CHECK((other.of(GGMLType::Q6_K).tiles[0] != set->of(GGMLType::Q6_K).tiles[0]));
            CHECK((other.of(GGMLType::Q4_K).interleaved[1] ==
                   set->of(GGMLType::Q4_K).interleaved[1]));
        } else if (set->level == smol::CpuLevel::avx2 || set->level == smol::CpuLevel::avxvnni) {
            CHECK(other.params.stored_prefetch == 8192);
            CHECK(other.params.pace_steps == kernels::KernelParams{}.pace_steps);
            for (GGMLType type : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K}) {
                CHECK((other.of(type).tiles[0] != set->of(type).tiles[0]));
                CHECK((other.of(type).tiles[1] == set->of(type).tiles[1]));
            }
        } else {
            // Settings the level has no use for stay at their defaults.
            CHECK(other.params.pace_steps == kernels::KernelParams{}.pace_steps);
            CHECK(other.params.stored_prefetch == kernels::KernelParams{}.stored_prefetch);
        }
        // Codebook gathers: other codebook tiles at the zmm levels; elsewhere the
        // setting is kept at its default (the same set).
        kernels::KernelParams gathers;
        gathers.codebook_gathers = 1;
        const kernels::KernelSet& gathered = kernels::kernel_set(set->level, gathers);
        if (zmm) {
            CHECK(gathered.params == gathers);
            for (GGMLType type : {GGMLType::IQ2_XXS, GGMLType::IQ2_S, GGMLType::IQ1_M})
                CHECK((gathered.of(type).tiles[0] != set->of(type).tiles[0]));
            CHECK((gathered.of(GGMLType::IQ3_XXS).tiles[0] == set->of(GGMLType::IQ3_XXS).tiles[0]));
        } else {
            CHECK(&gathered == set);
        }
        kernels::KernelParams bad_gathers;
        bad_gathers.codebook_gathers = 2;
        CHECK_FALSE(kernels::valid_kernel_params(bad_gathers));
        kernels::KernelParams bad;
        bad.pace_steps = 7;
        CHECK_FALSE(kernels::valid_kernel_params(bad));
        try {
            kernels::kernel_set(set->level, bad);
            FAIL("a pacing that is not a candidate was accepted");
        } catch (const smol::Error& e) {
            CHECK(e.kind() == smol::ErrorKind::invalid_argument);
        }
    }
}

TEST_CASE("interleaved rows: a count that is not whole groups inside the matrix is an Error") {
    smol::ThreadPool pool(1);
    const std::vector<uint8_t> w_bytes = random_weights(GGMLType::Q4_K, 40, 256);
    smol::WeightMatrix w = smol::make_weight_matrix(GGMLType::Q4_K, w_bytes.data(), 40, 256);
    std::vector<float> x(256, 0.5f), y(40);
    smol::QuantizedInput input;
    input.quantize(GGMLType::Q4_K, x.data(), 1, 256);
    for (size_t bad : {size_t(8), size_t(48)}) {
        w.interleaved_rows = bad;
        CHECK_THROWS_AS(smol::matmul(w, input, y.data(), 40, pool), smol::Error);
    }
}

// Below the long-batch threshold (WeightTypeInfo::convert_min_tokens), where
// rows are multiplied as stored.
TEST_CASE("matmul: a token's result does not depend on how many tokens share the call") {
    smol::ThreadPool pool(2);
    for (const kernels::KernelSet* set : runnable_sets())
        for (GGMLType type : kAllTypes) {
            CAPTURE(smol::type_name(type));
            const std::string level_name = set->name();
            CAPTURE(level_name);
            const size_t rows = 9, cols = 512;
            const std::vector<uint8_t> w_bytes = random_weights(type, rows, cols);
            const smol::WeightMatrix w = smol::make_weight_matrix(type, w_bytes.data(), rows, cols);
            const size_t n_tokens = 11;
            const std::vector<float> x = random_floats(n_tokens * cols);
            smol::QuantizedInput all(*set);
            all.quantize(type, x.data(), n_tokens, cols);
            std::vector<float> y_all(n_tokens * rows);
            smol::matmul(w, all, y_all.data(), rows, pool);
            for (size_t t = 0; t < n_tokens; ++t) {
                smol::QuantizedInput one(*set);
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
            jobs.push_back(
                {smol::make_weight_matrix(types[j], bytes[size_t(j)].data(), rows[j], cols),
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
    const smol::WeightMatrix w =
        smol::make_weight_matrix(GGMLType::Q4_K, w_bytes.data(), 2, 256, "blk.0.ffn_up");
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
    CHECK_THROWS_AS(smol::make_weight_matrix(GGMLType::Q8_1, w_bytes.data(), 2, 256), smol::Error);
    CHECK_THROWS_AS(wrong_cols.quantize(GGMLType::Q4_K, x.data(), 1, 100), smol::Error);
}

TEST_CASE("float ops of every level match their scalar references") {
    const kernels::KernelSet& ref_set = scalar_set();
    for (const kernels::KernelSet* set : runnable_sets())
        for (size_t n : {size_t(1), size_t(7), size_t(8), size_t(33), size_t(2048)}) {
            const std::string level_name = set->name();
            CAPTURE(level_name);
            CAPTURE(n);
            const std::vector<float> a = random_floats(n), b = random_floats(n),
                                     weight = random_floats(n);
            double magnitude_sum = 0.0;
            for (size_t i = 0; i < n; ++i) magnitude_sum += std::fabs(double(a[i]) * b[i]);
            CHECK(std::fabs(set->dot_f32(a.data(), b.data(), n) -
                            ref_set.dot_f32(a.data(), b.data(), n)) <= 1e-5 * magnitude_sum + 1e-9);

            std::vector<float> fast(n), ref(n);
            set->rmsnorm(a.data(), weight.data(), fast.data(), n, 1e-6f);
            ref_set.rmsnorm(a.data(), weight.data(), ref.data(), n, 1e-6f);
            for (size_t i = 0; i < n; ++i) CHECK(fast[i] == doctest::Approx(ref[i]).epsilon(1e-5));
            // In place works too.
            std::vector<float> in_place = a;
            set->rmsnorm(in_place.data(), weight.data(), in_place.data(), n, 1e-6f);
            CHECK(std::memcmp(in_place.data(), fast.data(), n * sizeof(float)) == 0);

            std::vector<float> gate = random_floats(n, 4.0f);
            if (n > 3) gate[3] = -100.0f;  // exp overflow territory: silu -> -0
            set->swiglu(gate.data(), b.data(), fast.data(), n);
            ref_set.swiglu(gate.data(), b.data(), ref.data(), n);
            for (size_t i = 0; i < n; ++i)
                CHECK(fast[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1e-6));

            std::vector<float> logits = random_floats(n, 10.0f);
            fast = logits;
            ref = logits;
            set->softmax(fast.data(), n);
            ref_set.softmax(ref.data(), n);
            double total = 0.0;
            for (size_t i = 0; i < n; ++i) {
                CHECK(fast[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1e-7));
                total += fast[i];
            }
            CHECK(total == doctest::Approx(1.0).epsilon(1e-5));

            // RoPE over n / 2 pairs with angles of any size.
            const size_t pairs = n / 2;
            std::vector<float> cos(pairs), sin(pairs);
            for (size_t i = 0; i < pairs; ++i) {
                const float angle = uniform(-100.0f, 100.0f);
                cos[i] = std::cos(angle);
                sin[i] = std::sin(angle);
            }
            fast = a;
            ref = a;
            set->rope(fast.data(), cos.data(), sin.data(), pairs);
            ref_set.rope(ref.data(), cos.data(), sin.data(), pairs);
            // Levels may fuse x0 cos - x1 sin into one rounding: compare against the pair's size.
            for (size_t i = 0; i < 2 * pairs; ++i) {
                const double pair_size = std::fabs(a[i & ~size_t(1)]) + std::fabs(a[i | 1]);
                CHECK(std::fabs(double(fast[i]) - double(ref[i])) <= 1e-6 * pair_size + 1e-12);
            }
            for (size_t i = 2 * pairs; i < n; ++i)
                CHECK(fast[i] == a[i]);  // an odd tail is not touched
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

// Writes head_dim random values in [-1, 1] as one cache row of `format`
// (F16, F32, or Q8_0 blocks through the reference quantizer) and returns the
// values the row holds, as the kernels must read them.
std::vector<float> write_cache_row(uint8_t* row, size_t head_dim, kernels::CacheFormat format) {
    std::vector<float> x(head_dim);
    for (float& f : x) f = uniform(-1.0f, 1.0f);
    if (format == kernels::CacheFormat::q8_0) {
        std::vector<smol::BlockQ8_0> blocks(head_dim / smol::QK8_0);
        smol::quantize_row_q8_0(x.data(), blocks.data(), head_dim);
        std::memcpy(row, blocks.data(), blocks.size() * sizeof(smol::BlockQ8_0));
        smol::dequantize_row_q8_0(blocks.data(), x.data(), head_dim);
        return x;
    }
    for (size_t i = 0; i < head_dim; ++i) {
        if (format == kernels::CacheFormat::f16) {
            const uint16_t h = smol::fp32_to_fp16(x[i]);
            std::memcpy(row + 2 * i, &h, 2);
            x[i] = smol::fp16_to_fp32(h);
        } else {
            std::memcpy(row + 4 * i, &x[i], 4);
        }
    }
    return x;
}

size_t cache_row_bytes(size_t head_dim, kernels::CacheFormat format) {
    return format == kernels::CacheFormat::q8_0  ? head_dim / 32 * 34
           : format == kernels::CacheFormat::f16 ? head_dim * 2
                                                 : head_dim * 4;
}

constexpr kernels::CacheFormat kCacheFormats[] = {
    kernels::CacheFormat::f16, kernels::CacheFormat::f32, kernels::CacheFormat::q8_0};

// An attend() call over rows of one flat buffer (*flat: keys, then values
// `values_offset` bytes on), scale 1 / sqrt(head_dim); out left to the caller.
kernels::AttentionHead flat_head(const std::vector<float>& q, const uint8_t* const* flat,
                                 size_t values_offset, size_t row_bytes,
                                 kernels::CacheFormat format, size_t group, size_t head_dim,
                                 size_t n_positions, std::vector<float>& scores) {
    kernels::AttentionHead head;
    head.q = q.data();
    head.blocks = flat;
    head.values_offset = values_offset;
    head.row_bytes = row_bytes;
    head.format = format;
    head.group = group;
    head.head_dim = head_dim;
    head.n_positions = n_positions;
    head.scale = 1.0f / std::sqrt(float(head_dim));
    head.scores = scores.data();
    return head;
}

TEST_CASE(
    "attention: the avx512 level computes avx2's bits (same operations per element, 16 lanes)") {
    const kernels::KernelSet* avx2_set = nullptr;
    const kernels::KernelSet* avx512_set = nullptr;
    for (const kernels::KernelSet* set : runnable_sets()) {
        if (set->level == smol::CpuLevel::avx2) avx2_set = set;
        if (set->level == smol::CpuLevel::avx512) avx512_set = set;
    }
    if (!avx2_set || !avx512_set) {
        MESSAGE("skipped: this CPU cannot run both the avx2 and avx512 levels");
        return;
    }
    for (const kernels::CacheFormat format : kCacheFormats)
        for (size_t head_dim : {size_t(8), size_t(20), size_t(32), size_t(72), size_t(128)})
            for (size_t group : {size_t(1), size_t(3), size_t(4), size_t(6)})
                for (size_t n_positions :
                     {size_t(1), size_t(2), size_t(7), size_t(17), size_t(70)}) {
                    if (format == kernels::CacheFormat::q8_0 && head_dim % 32 != 0) continue;
                    CAPTURE(int(format));
                    CAPTURE(head_dim);
                    CAPTURE(group);
                    CAPTURE(n_positions);
                    const size_t row_bytes = cache_row_bytes(head_dim, format) + 2;
                    std::vector<uint8_t> storage(2 * n_positions * row_bytes + 1);
                    uint8_t* keys = storage.data() + 1;
                    for (size_t row = 0; row < 2 * n_positions; ++row)  // keys, then values
                        write_cache_row(keys + row * row_bytes, head_dim, format);
                    const std::vector<float> q = random_floats(group * head_dim, 2.0f);
                    std::vector<float> scores(group * n_positions), out_avx2(group * head_dim),
                        out_avx512(group * head_dim);
                    const uint8_t* flat = keys;  // one block of every position
                    kernels::AttentionHead head =
                        flat_head(q, &flat, n_positions * row_bytes, row_bytes, format, group,
                                  head_dim, n_positions, scores);
                    head.out = out_avx2.data();
                    avx2_set->attend(head);
                    head.out = out_avx512.data();
                    avx512_set->attend(head);
                    CHECK(std::memcmp(out_avx2.data(), out_avx512.data(),
                                      out_avx2.size() * sizeof(float)) == 0);
                }
}

// The KV cache keeps positions in blocks (model/kv_blocks.hpp): a block's
// streams one after another, the blocks anywhere in memory. Attention through
// such a table must give the bits of the same rows in one flat buffer.
TEST_CASE("attention over blocks of positions equals attention over one flat buffer") {
    for (const kernels::KernelSet* set : runnable_sets())
        for (const kernels::CacheFormat format : kCacheFormats)
            for (unsigned shift : {0u, 1u, 2u, 3u, 6u})
                for (size_t n_positions : {size_t(1), size_t(9), size_t(70), size_t(130)}) {
                    const size_t head_dim = 64, group = 4;
                    const std::string level_name = set->name();
                    CAPTURE(level_name);
                    CAPTURE(int(format));
                    CAPTURE(shift);
                    CAPTURE(n_positions);
                    const size_t row_bytes = cache_row_bytes(head_dim, format);
                    const size_t per_block = size_t(1) << shift;
                    const size_t n_blocks = (n_positions + per_block - 1) / per_block;
                    // Flat: keys then values. Blocked: per block [another stream][keys][values].
                    std::vector<uint8_t> flat(2 * n_positions * row_bytes);
                    std::vector<std::vector<uint8_t>> blocks(n_blocks);
                    for (size_t b = 0; b < n_blocks; ++b)
                        blocks[b].assign(3 * per_block * row_bytes, uint8_t(0xA5));
                    for (size_t part = 0; part < 2; ++part)
                        for (size_t p = 0; p < n_positions; ++p) {
                            uint8_t* row = flat.data() + (part * n_positions + p) * row_bytes;
                            write_cache_row(row, head_dim, format);
                            std::memcpy(blocks[p / per_block].data() +
                                            ((1 + part) * per_block + p % per_block) * row_bytes,
                                        row, row_bytes);
                        }
                    // Each block its own allocation, as the cache's blocks may be.
                    std::vector<const uint8_t*> table(n_blocks);
                    for (size_t b = 0; b < n_blocks; ++b) table[b] = blocks[b].data();
                    const std::vector<float> q = random_floats(group * head_dim, 2.0f);
                    std::vector<float> scores(group * n_positions), out_flat(group * head_dim),
                        out_blocked(group * head_dim, 3.0f);
                    const uint8_t* flat_base = flat.data();
                    kernels::AttentionHead head =
                        flat_head(q, &flat_base, n_positions * row_bytes, row_bytes, format, group,
                                  head_dim, n_positions, scores);
                    head.out = out_flat.data();
                    set->attend(head);
                    head.blocks = table.data();
                    head.block_shift = shift;
                    head.keys_offset = per_block * row_bytes;
                    head.values_offset = 2 * per_block * row_bytes;
                    head.out = out_blocked.data();
                    set->attend(head);
                    CHECK(std::memcmp(out_flat.data(), out_blocked.data(),
                                      out_flat.size() * sizeof(float)) == 0);
                }
}

TEST_CASE("attention of every level matches the scalar reference and a float64 softmax(qK)V") {
    for (const kernels::KernelSet* set : runnable_sets())
        for (const kernels::CacheFormat format : kCacheFormats)
            for (size_t head_dim : {size_t(8), size_t(20), size_t(64), size_t(128)})
                for (size_t group : {size_t(1), size_t(4)})
                    for (size_t n_positions : {size_t(1), size_t(3), size_t(70)}) {
                        if (format == kernels::CacheFormat::q8_0 && head_dim % 32 != 0) continue;
                        const std::string level_name = set->name();
                        CAPTURE(level_name);
                        CAPTURE(int(format));
                        CAPTURE(head_dim);
                        CAPTURE(group);
                        CAPTURE(n_positions);
                        const size_t row_bytes =
                            cache_row_bytes(head_dim, format) + 6;  // padded rows
                        // Cache rows at an odd address: the kernels must not assume alignment.
                        std::vector<uint8_t> storage(2 * n_positions * row_bytes + 1);
                        uint8_t* keys = storage.data() + 1;
                        uint8_t* values = keys + n_positions * row_bytes;
                        std::vector<double> k(n_positions * head_dim), v(n_positions * head_dim);
                        for (size_t p = 0; p < n_positions; ++p) {
                            const std::vector<float> kf =
                                write_cache_row(keys + p * row_bytes, head_dim, format);
                            const std::vector<float> vf =
                                write_cache_row(values + p * row_bytes, head_dim, format);
                            std::copy(kf.begin(), kf.end(), k.begin() + p * head_dim);
                            std::copy(vf.begin(), vf.end(), v.begin() + p * head_dim);
                        }
                        const std::vector<float> q = random_floats(group * head_dim, 2.0f);
                        std::vector<float> scores(group * n_positions), out(group * head_dim, 7.0f),
                            ref(group * head_dim);
                        const uint8_t* flat = keys;  // one block of every position
                        kernels::AttentionHead head =
                            flat_head(q, &flat, size_t(values - keys), row_bytes, format, group,
                                      head_dim, n_positions, scores);
                        head.out = out.data();
                        set->attend(head);
                        head.out = ref.data();
                        scalar_set().attend(head);
                        for (size_t g = 0; g < group; ++g) {
                            std::vector<double> w(n_positions);
                            double max_score = -1e300, total = 0.0;
                            for (size_t p = 0; p < n_positions; ++p) {
                                double dot = 0.0;
                                for (size_t i = 0; i < head_dim; ++i)
                                    dot += double(q[g * head_dim + i]) * k[p * head_dim + i];
                                w[p] = dot / std::sqrt(double(head_dim));
                                max_score = std::max(max_score, w[p]);
                            }
                            for (double& x : w) total += (x = std::exp(x - max_score));
                            for (size_t i = 0; i < head_dim; ++i) {
                                // Float rounding is judged against sum_p w_p |v_p| (the output can
                                // cancel to ~0).
                                double exact = 0.0, size = 0.0;
                                for (size_t p = 0; p < n_positions; ++p) {
                                    exact += w[p] / total * v[p * head_dim + i];
                                    size += w[p] / total * std::fabs(v[p * head_dim + i]);
                                }
                                CHECK(std::fabs(out[g * head_dim + i] - ref[g * head_dim + i]) <=
                                      1e-5 * size + 1e-9);
                                CHECK(std::fabs(out[g * head_dim + i] - exact) <=
                                      1e-5 * size + 1e-9);
                            }
                        }
                    }
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
        const smol::WeightMatrix w =
            smol::make_weight_matrix(info.type, info.data, rows, cols, tensor_name);
        const std::vector<float> golden_rows = smol_test::read_f32(*rows_path);
        const std::vector<size_t> row_ids = entry.at("rows").get<std::vector<size_t>>();
        REQUIRE(golden_rows.size() == row_ids.size() * cols);

        const size_t n_tokens = 3;
        const std::vector<float> x = random_floats(n_tokens * cols);
        for (const kernels::KernelSet* set : runnable_sets()) {
            const std::string level_name = set->name();
            CAPTURE(level_name);
            smol::QuantizedInput input(*set);
            input.quantize(info.type, x.data(), n_tokens, cols);
            std::vector<float> y(n_tokens * rows);
            smol::matmul(w, input, y.data(), rows, pool);
            std::vector<float> x_dequantized(cols);
            for (size_t t = 0; t < n_tokens; ++t) {
                smol::dequantize_activation_row(input.type(), input.row(t), x_dequantized.data(),
                                                cols);
                for (size_t k = 0; k < row_ids.size(); ++k) {
                    double exact = 0.0, scale = 0.0;
                    for (size_t i = 0; i < cols; ++i) {
                        const double product =
                            double(golden_rows[k * cols + i]) * double(x_dequantized[i]);
                        exact += product;
                        scale += std::fabs(product);
                    }
                    CHECK(std::fabs(double(y[t * rows + row_ids[k]]) - exact) <=
                          2e-5 * scale + 1e-9);
                    smol_test::count_golden();
                }
            }
        }
    }
}
#endif

}  // namespace test_kernels
