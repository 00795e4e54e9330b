// Kernel benchmarks at SmolLM3-3B shapes (hidden 2048, ffn 11008, 16/4 heads
// of 128, vocab 128256) with the types of a Q4_K_M file.
//
//   MatVec/<type>/<rows>x<cols>/threads   one token (decode): GB/s of weights read.
//       The weights are cycled through several copies (>= 256 MiB in all), so
//       every call streams from DRAM as in real decode, not from the 32 MiB L3.
//       "_interleaved": in the layout the model gives them at load where the level
//       has tiles over it (LoadOptions::interleave_weights; quant/weight_matrix.hpp),
//       as the model's decode reads them; as stored on other levels (see the label).
//   DecodeLayer/<variant>/threads         the seven mat-vecs of one layer (q k v o
//       gate up down), input quantized once per matrix group as the model does:
//       effective GB/s = layer weight bytes / time. Variant 0: attn_v/ffn_down Q4_K;
//       1: attn_v/ffn_down Q6_K (Q4_K_M gives half the layers the bigger types).
//   MatVecHot/<type>                     256x2048 kept in L2, 1 thread, CPU time: the
//       compute ceiling of one core (what the kernel could stream if DRAM kept up).
//       "_gathers": the codebook tiles with KernelParams::codebook_gathers = 1.
//   MatMat/<type>/<rows>x<cols>/tokens/threads   prefill: GOPS = 2 * rows * cols * tokens / time.
//       "_interleaved" with 2-8 tokens: a batched decode step of several conversations
//       (smol::Batcher) over the interleaved rows; q6k_2048x2048 with 1-8 tokens: the
//       stored Q6_K tiles' rate with the matrix in L3 (a step's Q6_K part, hot).
//   MatMatStreamed/<type>/<rows>x<cols>/tokens/threads   a batched decode step: 2-8 tokens
//       against weights cycled from DRAM as in MatVec; GB/s and GOPS.
//   MatMatLevel/<type>/<rows>x<cols>/level/tokens/threads   a prompt's mat-mat at the
//       avx512 level (level:4) and the amx level (level:7: AMX tiles on the converted
//       rows), side by side; the label names the level. Skipped where the CPU lacks it.
//   Quantize/<cols>                      activation quantization to Q8_K32 (with the permuted
//   copy).
//
// Compare GB/s with bench_memory's read bandwidth (the roofline).
#include <benchmark/benchmark.h>

#include <smol/core/threadpool.hpp>
#include <smol/detail/aligned.hpp>
#include <smol/kernels/kernels.hpp>
#include <smol/quant/weight_matrix.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using smol::GGMLType;

constexpr size_t kWorkingSetBytes = size_t(256) << 20;

uint64_t next_random(uint64_t& state) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

// Random quantized rows with sane fp16 scales.
void fill_weights(GGMLType type, uint8_t* data, size_t rows, size_t cols, uint64_t seed) {
    const size_t row_bytes = smol::row_bytes(type, cols);
    uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i + 8 <= rows * row_bytes; i += 8) {
        const uint64_t v = next_random(state);
        std::memcpy(data + i, &v, 8);
    }
    const uint16_t scale = smol::fp32_to_fp16(0.002f);
    for (size_t r = 0; r < rows; ++r) {
        uint8_t* row = data + r * row_bytes;
        for (size_t b = 0; b < cols / 256; ++b) {
            if (type == GGMLType::Q4_K) {
                reinterpret_cast<smol::BlockQ4K*>(row)[b].d = scale;
                reinterpret_cast<smol::BlockQ4K*>(row)[b].dmin = scale;
            } else if (type == GGMLType::Q5_K) {
                reinterpret_cast<smol::BlockQ5K*>(row)[b].d = scale;
                reinterpret_cast<smol::BlockQ5K*>(row)[b].dmin = scale;
            } else if (type == GGMLType::Q6_K) {
                reinterpret_cast<smol::BlockQ6K*>(row)[b].d = scale;
            } else if (type == GGMLType::Q2_K) {
                reinterpret_cast<smol::BlockQ2K*>(row)[b].d = scale;
                reinterpret_cast<smol::BlockQ2K*>(row)[b].dmin = scale;
            } else if (type == GGMLType::Q3_K) {
                reinterpret_cast<smol::BlockQ3K*>(row)[b].d = scale;
            } else if (type == GGMLType::IQ4_XS) {
                reinterpret_cast<smol::BlockIQ4XS*>(row)[b].d = scale;
            } else if (type == GGMLType::IQ1_M) {  // d in the scale words' top nibbles
                uint8_t* block = row + b * smol::type_traits(type).type_size;
                for (int w = 0; w < 4; ++w)
                    block[48 + 2 * w + 1] =
                        uint8_t((block[48 + 2 * w + 1] & 0x0F) | (((scale >> (4 * w)) & 15) << 4));
            } else if (smol::is_codebook_type(type)) {  // d first
                std::memcpy(row + b * smol::type_traits(type).type_size, &scale, sizeof scale);
            }
        }
        // The 32-weight formats: d first in every block (and Q4_1 / Q5_1's m next).
        if (smol::type_traits(type).block_size == 32 && type != GGMLType::Q8_0) {
            const size_t block_bytes = smol::type_traits(type).type_size;
            for (size_t b = 0; b < cols / 32; ++b) {
                std::memcpy(row + b * block_bytes, &scale, sizeof scale);
                if (type == GGMLType::Q4_1 || type == GGMLType::Q5_1)
                    std::memcpy(row + b * block_bytes + 2, &scale, sizeof scale);
            }
        }
    }
}

// `copies` copies of one weight matrix, back to back.
struct WeightSet {
    smol::detail::AlignedBuffer bytes;
    std::vector<smol::WeightMatrix> copies;
    size_t matrix_bytes = 0;
    bool interleaved = false;
};

// Moves each copy's leading 16-row groups into the interleaved layout, as
// SmolLM3::interleave_weights does at load, if the running level has tiles over
// it for this type (otherwise the model keeps the rows as stored, and so do we).
void interleave_copies(WeightSet& set) {
    if (set.copies.empty()) return;
    const smol::WeightMatrix& first = set.copies.front();
    if (!smol::kernels::default_kernels().interleaves(first.type) ||
        !smol::can_interleave(first.row_bytes) || first.rows < smol::kInterleaveRows)
        return;
    std::vector<uint8_t> stored(set.matrix_bytes);
    for (smol::WeightMatrix& w : set.copies) {
        uint8_t* data = set.bytes.data() + (w.data - set.bytes.data());
        std::memcpy(stored.data(), data, set.matrix_bytes);
        smol::WeightMatrix stored_view = w;
        stored_view.data = stored.data();
        w = stored_view.interleaved_copy(data);
    }
    set.interleaved = true;
}

WeightSet make_weight_set(GGMLType type, size_t rows, size_t cols, size_t min_total_bytes,
                          bool interleaved = false) {
    WeightSet set;
    const size_t row_bytes = smol::row_bytes(type, cols);
    // Round each copy to 4 KiB so copies start on fresh pages.
    set.matrix_bytes = rows * row_bytes;
    const size_t stride = (set.matrix_bytes + 4095) / 4096 * 4096;
    const size_t n_copies =
        std::max<size_t>(1, (min_total_bytes + set.matrix_bytes - 1) / set.matrix_bytes);
    set.bytes.resize(stride * n_copies);
    for (size_t c = 0; c < n_copies; ++c) {
        uint8_t* data = set.bytes.data() + c * stride;
        fill_weights(type, data, rows, cols, c + 1);
        set.copies.push_back(smol::make_weight_matrix(type, data, rows, cols));
    }
    if (interleaved) interleave_copies(set);
    return set;
}

std::vector<float> random_activations(size_t n) {
    std::vector<float> x(n);
    uint64_t state = 42;
    for (float& v : x) v = float(int64_t(next_random(state) % 2001) - 1000) * 0.001f;
    return x;
}

smol::ThreadPool& pool_of(int n_threads) {
    static std::map<int, std::unique_ptr<smol::ThreadPool>> pools;
    auto& pool = pools[n_threads];
    if (!pool) pool = std::make_unique<smol::ThreadPool>(n_threads);
    return *pool;
}

// `n_tokens` tokens against weights cycled from DRAM, as a decode step reads
// them: one token is the mat-vec, a few the batched step of as many sequences
// (smol::Batcher). GB/s of weights streamed, and GOPS from 2 tokens on.
void run_streamed(benchmark::State& state, GGMLType type, size_t rows, size_t cols,
                  bool interleaved, size_t n_tokens, int n_threads) {
    smol::ThreadPool& pool = pool_of(n_threads);
    const WeightSet set = make_weight_set(type, rows, cols, kWorkingSetBytes, interleaved);
    const std::vector<float> x = random_activations(n_tokens * cols);
    smol::QuantizedInput input;
    input.quantize(type, x.data(), n_tokens, cols);
    std::vector<float> y(n_tokens * rows);
    size_t next = 0;
    for (auto _ : state) {
        smol::matmul(set.copies[next], input, y.data(), rows, pool);
        next = (next + 1) % set.copies.size();
        benchmark::DoNotOptimize(y.data());
    }
    state.counters["GB/s"] = benchmark::Counter(
        double(set.matrix_bytes) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
    if (n_tokens > 1)
        state.counters["GOPS"] = benchmark::Counter(
            2.0 * double(rows) * double(cols) * double(n_tokens) * double(state.iterations()) / 1e9,
            benchmark::Counter::kIsRate);
    state.SetLabel(
        smol::type_name(type) + " x" + std::to_string(set.copies.size()) + " copies" +
        (interleaved ? (set.interleaved ? ", interleaved" : ", stored (no tiles)") : ""));
}

void BM_MatVec(benchmark::State& state, GGMLType type, size_t rows, size_t cols,
               bool interleaved = false) {
    run_streamed(state, type, rows, cols, interleaved, 1, int(state.range(0)));
}

// A batched decode step's mat-mat (arguments: tokens, threads).
void BM_MatMatStreamed(benchmark::State& state, GGMLType type, size_t rows, size_t cols,
                       bool interleaved = false) {
    run_streamed(state, type, rows, cols, interleaved, size_t(state.range(0)), int(state.range(1)));
}

// One transformer layer of SmolLM3-3B at decode.
void BM_DecodeLayer(benchmark::State& state) {
    const bool bigger_types = state.range(0) == 1;
    smol::ThreadPool& pool = pool_of(int(state.range(1)));
    const size_t hidden = 2048, ffn = 11008, kv = 512;
    const GGMLType v_type = bigger_types ? GGMLType::Q6_K : GGMLType::Q4_K;
    const GGMLType down_type = bigger_types ? GGMLType::Q6_K : GGMLType::Q4_K;
    struct Shape {
        GGMLType type;
        size_t rows, cols;
    };
    const Shape shapes[7] = {{GGMLType::Q4_K, hidden, hidden},
                             {GGMLType::Q4_K, kv, hidden},
                             {v_type, kv, hidden},
                             {GGMLType::Q4_K, hidden, hidden},
                             {GGMLType::Q4_K, ffn, hidden},
                             {GGMLType::Q4_K, ffn, hidden},
                             {down_type, hidden, ffn}};
    size_t layer_bytes = 0;
    for (const Shape& s : shapes) layer_bytes += s.rows * smol::row_bytes(s.type, s.cols);
    const size_t n_layers = std::max<size_t>(2, (kWorkingSetBytes + layer_bytes - 1) / layer_bytes);
    std::vector<WeightSet> layers;  // per matrix: n_layers copies
    for (const Shape& s : shapes)
        layers.push_back(make_weight_set(s.type, s.rows, s.cols,
                                         n_layers * s.rows * smol::row_bytes(s.type, s.cols)));

    const std::vector<float> x_hidden = random_activations(hidden), x_ffn = random_activations(ffn);
    smol::QuantizedInput in_hidden, in_ffn;
    std::vector<float> y(ffn), y2(ffn);
    size_t layer = 0;
    for (auto _ : state) {
        // Same activation traffic as the model: quantize the normed hidden state
        // once for q/k/v, the attention output once for o, once for gate/up,
        // the SwiGLU output once for down.
        // q, k, v share one pool job, as do gate and up (matmul_batch).
        in_hidden.quantize(GGMLType::Q4_K, x_hidden.data(), 1, hidden);
        const smol::MatmulJob qkv[3] = {{layers[0].copies[layer], y.data(), 0},
                                        {layers[1].copies[layer], y.data() + hidden, 0},
                                        {layers[2].copies[layer], y.data() + hidden + kv, 0}};
        smol::matmul_batch(qkv, 3, in_hidden, pool);
        in_hidden.quantize(GGMLType::Q4_K, x_hidden.data(), 1, hidden);
        smol::matmul(layers[3].copies[layer], in_hidden, y.data(), ffn, pool);
        in_hidden.quantize(GGMLType::Q4_K, x_hidden.data(), 1, hidden);
        const smol::MatmulJob gate_up[2] = {{layers[4].copies[layer], y.data(), 0},
                                            {layers[5].copies[layer], y2.data(), 0}};
        smol::matmul_batch(gate_up, 2, in_hidden, pool);
        in_ffn.quantize(down_type, x_ffn.data(), 1, ffn);
        smol::matmul(layers[6].copies[layer], in_ffn, y.data(), ffn, pool);
        layer = (layer + 1) % n_layers;
        benchmark::DoNotOptimize(y.data());
    }
    state.counters["GB/s"] = benchmark::Counter(
        double(layer_bytes) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
    state.counters["MB/layer"] = double(layer_bytes) / 1e6;
}

// The compute ceiling of one core: a 256-row matrix that stays in L2, one
// thread, timed in CPU time (insensitive to other load on the machine).
// codebook_gathers: the default level's set with KernelParams::codebook_gathers
// = 1 (the codebook tiles gathering their grid rows; labelled "same set" where
// that changes nothing: no AVX512-VBMI, or not an avx512 / amx level).
// interleaved: the rows in the layout a Model moves the types its set has
// interleaved tiles for into (Q4_K, Q5_K at avx512 / amx; the 32-weight formats and IQ4_XS on x86).
void BM_MatVecHot(benchmark::State& state, GGMLType type, bool codebook_gathers = false,
                  bool interleaved = false) {
    const size_t rows = 256, cols = 2048;
    smol::ThreadPool& pool = pool_of(1);
    const WeightSet set = make_weight_set(type, rows, cols, 0, interleaved);
    const std::vector<float> x = random_activations(cols);
    smol::kernels::KernelParams params = smol::kernels::default_kernels().params;
    params.codebook_gathers = codebook_gathers ? 1 : 0;
    const smol::kernels::KernelSet& kernels =
        smol::kernels::kernel_set(smol::kernels::default_kernels().level, params);
    if (codebook_gathers && &kernels == &smol::kernels::default_kernels())
        state.SetLabel("same set");
    smol::QuantizedInput input(kernels);
    input.quantize(type, x.data(), 1, cols);
    std::vector<float> y(rows);
    for (auto _ : state) {
        smol::matmul(set.copies[0], input, y.data(), rows, pool);
        benchmark::DoNotOptimize(y.data());
    }
    state.counters["GB/s"] = benchmark::Counter(
        double(set.matrix_bytes) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void BM_MatMat(benchmark::State& state, GGMLType type, size_t rows, size_t cols,
               bool interleaved = false) {
    const size_t n_tokens = size_t(state.range(0));
    smol::ThreadPool& pool = pool_of(int(state.range(1)));
    const WeightSet set = make_weight_set(type, rows, cols, 0, interleaved);
    const std::vector<float> x = random_activations(n_tokens * cols);
    smol::QuantizedInput input;
    input.quantize(type, x.data(), n_tokens, cols, &pool);
    std::vector<float> y(n_tokens * rows);
    for (auto _ : state) {
        smol::matmul(set.copies[0], input, y.data(), rows, pool);
        benchmark::DoNotOptimize(y.data());
    }
    state.counters["GOPS"] = benchmark::Counter(
        2.0 * double(rows) * double(cols) * double(n_tokens) * double(state.iterations()) / 1e9,
        benchmark::Counter::kIsRate);
    if (interleaved) state.SetLabel(set.interleaved ? "interleaved" : "stored (no tiles)");
}

// A prompt's mat-mat at one kernel level (argument: smol::CpuLevel as an
// integer), so that two levels run side by side in one process; skipped where
// the CPU cannot run the level.
void BM_MatMatLevel(benchmark::State& state, GGMLType type, size_t rows, size_t cols) {
    const auto level = smol::CpuLevel(state.range(0));
    const size_t n_tokens = size_t(state.range(1));
    if (!smol::cpu_supports(level)) {
        state.SkipWithError(
            (std::string("this CPU cannot run ") + smol::cpu_level_name(level)).c_str());
        for (auto _ : state) {
        }
        return;
    }
    smol::ThreadPool& pool = pool_of(int(state.range(2)));
    const WeightSet set = make_weight_set(type, rows, cols, 0);
    const std::vector<float> x = random_activations(n_tokens * cols);
    smol::QuantizedInput input(smol::kernels::kernel_set(level));
    input.quantize(type, x.data(), n_tokens, cols, &pool);
    std::vector<float> y(n_tokens * rows);
    for (auto _ : state) {
        smol::matmul(set.copies[0], input, y.data(), rows, pool);
        benchmark::DoNotOptimize(y.data());
    }
    state.counters["GOPS"] = benchmark::Counter(
        2.0 * double(rows) * double(cols) * double(n_tokens) * double(state.iterations()) / 1e9,
        benchmark::Counter::kIsRate);
    state.SetLabel(smol::cpu_level_name(level));
}

void BM_Quantize(benchmark::State& state) {
    const size_t cols = size_t(state.range(0));
    const std::vector<float> x = random_activations(cols);
    smol::QuantizedInput input;
    for (auto _ : state) {
        input.quantize(GGMLType::Q4_K, x.data(), 1, cols);
        benchmark::DoNotOptimize(input.data());
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(cols));
}

void matvec_args(benchmark::internal::Benchmark* b) {
    b->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK_CAPTURE(BM_MatVec, q4k_2048x2048, GGMLType::Q4_K, 2048, 2048)->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, q4k_512x2048, GGMLType::Q4_K, 512, 2048)->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, q6k_512x2048, GGMLType::Q6_K, 512, 2048)->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, q4k_11008x2048, GGMLType::Q4_K, 11008, 2048)->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, q4k_2048x11008, GGMLType::Q4_K, 2048, 11008)->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, q4k_11008x2048_interleaved, GGMLType::Q4_K, 11008, 2048, true)
    ->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, q5k_2048x11008_interleaved, GGMLType::Q5_K, 2048, 11008, true)
    ->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, q5k_2048x11008, GGMLType::Q5_K, 2048, 11008)->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, q6k_2048x11008, GGMLType::Q6_K, 2048, 11008)->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, q6k_128256x2048, GGMLType::Q6_K, 128256, 2048)->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, q8_0_2048x2048, GGMLType::Q8_0, 2048, 2048)->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, f16_2048x2048, GGMLType::F16, 2048, 2048)->Apply(matvec_args);
// The hub's types (decode: the one-token tile as stored).
BENCHMARK_CAPTURE(BM_MatVec, q4_0_2048x2048, GGMLType::Q4_0, 2048, 2048)->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, q2k_2048x2048, GGMLType::Q2_K, 2048, 2048)->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, q3k_2048x2048, GGMLType::Q3_K, 2048, 2048)->Apply(matvec_args);
BENCHMARK_CAPTURE(BM_MatVec, iq4_xs_2048x2048, GGMLType::IQ4_XS, 2048, 2048)->Apply(matvec_args);

BENCHMARK_CAPTURE(BM_MatVecHot, q4k, GGMLType::Q4_K)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q5k, GGMLType::Q5_K)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q6k, GGMLType::Q6_K)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q8_0, GGMLType::Q8_0)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q4_0, GGMLType::Q4_0)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q4_0_interleaved, GGMLType::Q4_0, false, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q4_1, GGMLType::Q4_1)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q4_1_interleaved, GGMLType::Q4_1, false, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q5_0, GGMLType::Q5_0)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q5_0_interleaved, GGMLType::Q5_0, false, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q5_1, GGMLType::Q5_1)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q5_1_interleaved, GGMLType::Q5_1, false, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq4_nl, GGMLType::IQ4_NL)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq4_nl_interleaved, GGMLType::IQ4_NL, false, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q4k_interleaved, GGMLType::Q4_K, false, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q2k, GGMLType::Q2_K)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, q3k, GGMLType::Q3_K)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq4_xs, GGMLType::IQ4_XS)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq4_xs_interleaved, GGMLType::IQ4_XS, false, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq2_xxs, GGMLType::IQ2_XXS)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq2_xs, GGMLType::IQ2_XS)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq2_s, GGMLType::IQ2_S)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq3_xxs, GGMLType::IQ3_XXS)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq3_s, GGMLType::IQ3_S)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq1_s, GGMLType::IQ1_S)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq1_m, GGMLType::IQ1_M)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq2_xxs_gathers, GGMLType::IQ2_XXS, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq2_xs_gathers, GGMLType::IQ2_XS, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq2_s_gathers, GGMLType::IQ2_S, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq3_s_gathers, GGMLType::IQ3_S, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq1_s_gathers, GGMLType::IQ1_S, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatVecHot, iq1_m_gathers, GGMLType::IQ1_M, true)
    ->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_DecodeLayer)
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->ArgNames({"q6k_variant", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(BM_MatMat, q4k_2048x2048, GGMLType::Q4_K, 2048, 2048)
    ->ArgsProduct({{8, 64, 512}, {1, 2}})
    ->ArgNames({"tokens", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MatMat, q4k_11008x2048, GGMLType::Q4_K, 11008, 2048)
    ->ArgsProduct({{8, 64, 512}, {2}})
    ->ArgNames({"tokens", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
// The hub's other types: a prompt's mat-mat (converted rows from 32 tokens),
// 512 tokens on one thread (and on two where the pair is worth watching).
void prompt_args_on(benchmark::internal::Benchmark* b, const std::vector<int64_t>& threads) {
    b->ArgsProduct({{512}, threads})
        ->ArgNames({"tokens", "threads"})
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
}
void prompt_args(benchmark::internal::Benchmark* b) {
    prompt_args_on(b, {1});
}
void prompt_args_two_threads(benchmark::internal::Benchmark* b) {
    prompt_args_on(b, {1, 2});
}
BENCHMARK_CAPTURE(BM_MatMat, q4_0_2048x2048, GGMLType::Q4_0, 2048, 2048)->Apply(prompt_args);
BENCHMARK_CAPTURE(BM_MatMat, q4_1_2048x2048, GGMLType::Q4_1, 2048, 2048)->Apply(prompt_args);
BENCHMARK_CAPTURE(BM_MatMat, q5_0_2048x2048, GGMLType::Q5_0, 2048, 2048)->Apply(prompt_args);
BENCHMARK_CAPTURE(BM_MatMat, q5_1_2048x2048, GGMLType::Q5_1, 2048, 2048)
    ->Apply(prompt_args_two_threads);
BENCHMARK_CAPTURE(BM_MatMat, q3_k_2048x2048, GGMLType::Q3_K, 2048, 2048)
    ->Apply(prompt_args_two_threads);
BENCHMARK_CAPTURE(BM_MatMat, iq4_xs_2048x2048, GGMLType::IQ4_XS, 2048, 2048)->Apply(prompt_args);
BENCHMARK_CAPTURE(BM_MatMat, iq4_nl_2048x2048_interleaved, GGMLType::IQ4_NL, 2048, 2048, true)
    ->Apply(prompt_args);
BENCHMARK_CAPTURE(BM_MatMat, iq3_xxs_2048x2048, GGMLType::IQ3_XXS, 2048, 2048)->Apply(prompt_args);
BENCHMARK_CAPTURE(BM_MatMat, iq2_xxs_2048x2048, GGMLType::IQ2_XXS, 2048, 2048)->Apply(prompt_args);
BENCHMARK_CAPTURE(BM_MatMat, q4k_2048x2048_interleaved, GGMLType::Q4_K, 2048, 2048, true)
    ->ArgsProduct({{1, 2, 4, 8}, {1, 2}})
    ->ArgNames({"tokens", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MatMatStreamed, q4k_11008x2048_interleaved, GGMLType::Q4_K, 11008, 2048, true)
    ->ArgsProduct({{2, 4, 8}, {2}})
    ->ArgNames({"tokens", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatMatStreamed, q6k_2048x11008, GGMLType::Q6_K, 2048, 11008)
    ->ArgsProduct({{2, 4, 8}, {2}})
    ->ArgNames({"tokens", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
// The same Q6_K bytes in short rows: a wide row's activations (13.8 KB per token
// at 11008 values) outgrow L1 from 4 tokens on, and the stored tile slows.
BENCHMARK_CAPTURE(BM_MatMatStreamed, q6k_11008x2048, GGMLType::Q6_K, 11008, 2048)
    ->ArgsProduct({{2, 4, 8}, {2}})
    ->ArgNames({"tokens", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MatMat, q6k_2048x2048, GGMLType::Q6_K, 2048, 2048)
    ->ArgsProduct({{1, 2, 4, 8}, {1, 2}})
    ->ArgNames({"tokens", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MatMat, q6k_2048x11008, GGMLType::Q6_K, 2048, 11008)
    ->ArgsProduct({{64}, {2}})
    ->ArgNames({"tokens", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The x86 levels side by side in one run (avx512 against amx: the AMX tiles
// on the converted rows; avx2 against avxvnni), the ones this CPU lacks
// skipped: the ratios are what to read where other jobs share the machine.
void level_pair_args(benchmark::internal::Benchmark* b) {
    b->ArgsProduct({{int64_t(smol::CpuLevel::avx2), int64_t(smol::CpuLevel::avxvnni),
                     int64_t(smol::CpuLevel::avx512), int64_t(smol::CpuLevel::amx)},
                    {512},
                    {2}})
        ->ArgNames({"level", "tokens", "threads"})
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
}
BENCHMARK_CAPTURE(BM_MatMatLevel, q4k_2048x11008, GGMLType::Q4_K, 2048, 11008)
    ->Apply(level_pair_args);
BENCHMARK_CAPTURE(BM_MatMatLevel, q4k_11008x2048, GGMLType::Q4_K, 11008, 2048)
    ->Apply(level_pair_args);
BENCHMARK_CAPTURE(BM_MatMatLevel, q6k_2048x11008, GGMLType::Q6_K, 2048, 11008)
    ->Apply(level_pair_args);

BENCHMARK(BM_Quantize)->Arg(2048)->Arg(11008);

// The kernel level every benchmark above runs (run-time dispatch; SMOL_CPU=scalar|avx2|...
// forces one), in the report's context block.
int main(int argc, char** argv) {
    benchmark::AddCustomContext("smol kernels", smol::kernels::default_kernels().name());
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
