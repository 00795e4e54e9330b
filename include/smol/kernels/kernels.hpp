// Kernel entry points: matrix x activations for every weight type smol
// computes with, activation quantization, and the float helpers of the forward
// pass. This is the API the model calls; which instruction set runs behind it
// is decided at run time: every call goes through a KernelSet
// (kernels/kernel_set.hpp) chosen by kernels/dispatch.hpp from what the CPU
// supports (or SMOL_CPU / LoadOptions::cpu), never by the consumer's flags.
//
// Which kernel runs, from a model's matmul_batch to a tile:
//   1. the set: the level (kernels/dispatch.hpp: kernel_set(level, params),
//      built by the level's make_kernel_set(params) and completed with the
//      scalar spec where the level has no tiles; the load log's "kernels"
//      line prints what it has per type) and its tuning (KernelParams: which
//      one-token tile candidates, how many decode chunks; same bits for all);
//   2. the plan (kernels/matmul_plan.hpp): per matrix and per sequence of the
//      input, the row layout: converted rows from the type's
//      convert_min_tokens tokens (where the set has them), packed rows from
//      packed.min_tokens, interleaved tiles where the matrix was interleaved at
//      load and the set reads it so, else the rows as stored; then the chunks;
//   3. the run (run_batch): each chunk's rows through that layout's TileRow,
//      tokens in groups of at most kMaxTileCols (tiles[n - 1] for n tokens;
//      16 where a packed or converted layout has wide tiles, the amx level's),
//      i.e. for a decode token tiles[0] of the stored or interleaved layout.
//
// Public API (namespace smol):
//
//   struct WeightMatrix   the host view of one matrix (quant/weight_matrix.hpp):
//       type, data, rows = output features, cols = input features (= GGUF dims[0]),
//       row_bytes, name; row r is row_bytes bytes at data + r * row_bytes, any alignment.
//   WeightMatrix make_weight_matrix(GGMLType type, const void* data, size_t rows, size_t cols,
//                                   std::string_view name = {});
//       checks the type is supported and cols fits its block size (Error names `name`);
//       the result keeps `name`, so it must outlive the matrix like the bytes.
//   bool is_supported_weight_type(GGMLType);   // the WeightTypes list (quant/types.hpp)
//   ActivationType activation_type_for(GGMLType weight_type);
//       Q8_0 for Q8_0, F32 for F32/F16/BF16, Q8_K32 for the other quantized types
//       (formats and the BlockQ8K32 layout: activations.hpp).
//
//   class QuantizedInput   activations quantized once, read by every matrix using them
//     explicit QuantizedInput(const kernels::KernelSet& k = kernels::default_kernels());
//     void quantize(GGMLType weight_type, const float* x, size_t n_tokens, size_t cols,
//                   ThreadPool* pool = nullptr, size_t x_stride = 0);
//         x: n_tokens rows of cols floats, row t at x + t * x_stride (0 = cols).
//         Stores them in activation_type_for(weight_type), with the set's kernels.
//     void set_sequences(const size_t* sizes, size_t n);
//         which rows belong to which sequence (sizes[i] rows of sequence i, in order):
//         each sequence's results are then the bits it gets alone (see matmul).
//     bool in_format_for(GGMLType weight_type) const;   // already in the format that type wants
//     const kernels::KernelSet& kernels() const; // the set matmul will use on it
//     ActivationType type() const; size_t n_tokens() const; size_t cols() const;
//     size_t row_bytes() const;
//     const uint8_t* row(size_t token) const;          // as the quantizer wrote it
//     const uint8_t* kernel_row(size_t token) const;   // in the order the set's tiles read
//
//   void matmul(const WeightMatrix& w, const QuantizedInput& x, float* y, size_t y_stride,
//               ThreadPool& pool);
//       y[t * y_stride + r] = dot(row r of w, token t of x) for t < x.n_tokens(), r < w.rows,
//       with x.kernels(). One token: a mat-vec, rows split over threads, each weight
//       byte read once. Several: tiles of rows x up to 8 tokens, each weight block
//       unpacked once per 8 tokens. Results do not depend on the pool size. A
//       sequence of at least WeightTraits::convert_min_tokens tokens multiplies
//       K-quant rows converted to 8 bits where the set has that (KernelSet::converts;
//       the golden engine's rule, kernels/scalar.hpp "long batches"). How rows
//       and tokens are split: kernels/matmul_plan.hpp.
//   struct MatmulJob { WeightMatrix w; float* y; size_t y_stride; };
//   void matmul_batch(const MatmulJob* jobs, size_t n_jobs, const QuantizedInput& x,
//                     ThreadPool& pool, MatmulScratch& scratch);
//       several matrices reading the same input (q/k/v, gate/up) in one pool job;
//       each job as matmul(job.w, x, job.y, job.y_stride, pool), same results.
//       A plan (kernels::plan_batch: rows and tokens split as matmul_plan.hpp
//       says, in `scratch`) and its run (kernels::run_batch). `scratch` is the
//       caller's, kept across calls so warm steps allocate nothing; the
//       overload without it allocates its own.
//       w may have interleaved rows (quant/weight_matrix.hpp): same results; the
//       set's interleaved tiles read them where it has them, else each chunk is
//       put back as stored first.
//   void matmul_reference(const WeightMatrix& w, const QuantizedInput& x, float* y,
//                         size_t y_stride);   // scalar kernels, one thread: the spec
//
//   float dot_f32(a, b, n); void rmsnorm(x, weight, out, n, eps); void swiglu(gate, up, out, n);
//   void softmax(x, n);   with default_kernels() (the model uses its own set's pointers).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "../core/threadpool.hpp"
#include "../detail/aligned.hpp"
#include "../error.hpp"
#include "../quant/blocks.hpp"
#include "../quant/types.hpp"
#include "../quant/weight_matrix.hpp"
#include "activations.hpp"
#include "dispatch.hpp"
#include "kernel_set.hpp"
#include "matmul_plan.hpp"
#include "scalar.hpp"
#include "weight_types.hpp"

SMOL_NAMESPACE_BEGIN

// The format activations must be in to meet a weight of this type.
inline ActivationType activation_type_for(GGMLType weight_type) {
    const WeightTypeInfo* info = weight_type_info(weight_type);
    if (info == nullptr)
        smol::detail::fail(ErrorKind::unsupported,
                           "matmul: weight type " + type_name(weight_type) + " is not supported");
    return info->activation;
}

inline WeightMatrix make_weight_matrix(GGMLType type, const void* data, size_t rows, size_t cols,
                                       std::string_view name = {}) {
    const std::string what =
        name.empty() ? std::string("weight matrix") : "tensor '" + std::string(name) + "'";
    if (!is_supported_weight_type(type)) {
        smol::detail::fail(ErrorKind::unsupported,
                           what + ": type " + type_name(type) + " has no matmul kernel");
    }
    // The activations' blocks too: a 32-weight format meets Q8_K32 (256 values).
    const size_t block = std::max<size_t>(type_traits(type).block_size,
                                          activation_block_size(activation_type_for(type)));
    if (cols == 0 || cols % block != 0) {
        smol::detail::fail(ErrorKind::shape, what + ": " + std::to_string(cols) +
                                                 " columns is not a multiple of the " +
                                                 type_name(type) + " block size " +
                                                 std::to_string(block));
    }
    if (data == nullptr && rows != 0)
        smol::detail::fail(ErrorKind::invalid_argument, what + ": no data");
    return WeightMatrix{type, static_cast<const uint8_t*>(data), rows,
                        cols, smol::row_bytes(type, cols),       name};
}

// One matrix of a matmul_batch: y[t * y_stride + r] = dot(row r of w, token t).
struct MatmulJob {
    WeightMatrix w;
    float* y = nullptr;
    size_t y_stride = 0;
};

// The reusable memory of matmul_batch: grown on demand and never shrunk, so a
// caller that keeps one across calls (the forward pass's Workspace) plans and
// runs a warm decode step or prompt chunk without allocating. One call at a
// time may use it.
struct MatmulScratch {
    std::vector<kernels::TokenRange> ranges;  // [sequences of the input]
    std::vector<kernels::MatmulPlan> plans;   // [jobs]
    std::vector<kernels::MatmulRun> runs;     // [jobs][sequences]: the plans' runs
    std::vector<size_t> first_chunk;          // [jobs + 1]: job j's first chunk, all jobs numbered
    smol::detail::AlignedArray<uint8_t> bytes;  // [threads][stride]: the tiles' per-chunk buffers
    size_t byte_capacity = 0;

    uint8_t* reserve_bytes(size_t n) {
        if (n > byte_capacity) {
            bytes.reset(static_cast<uint8_t*>(smol::detail::aligned_allocate(n)));
            byte_capacity = n;
        }
        return bytes.get();
    }
};

// ---- float helpers with the default kernel set ------------------------------------

inline float dot_f32(const float* a, const float* b, size_t n) {
    return kernels::default_kernels().dot_f32(a, b, n);
}
inline void rmsnorm(const float* x, const float* weight, float* out, size_t n, float eps) {
    kernels::default_kernels().rmsnorm(x, weight, out, n, eps);
}
inline void swiglu(const float* gate, const float* up, float* out, size_t n) {
    kernels::default_kernels().swiglu(gate, up, out, n);
}
inline void softmax(float* x, size_t n) {
    kernels::default_kernels().softmax(x, n);
}

// ---- quantized activations --------------------------------------------------------

class QuantizedInput {
public:
    explicit QuantizedInput(
        const kernels::KernelSet& kernel_set = kernels::default_kernels()) noexcept
        : kernels_(&kernel_set) {}

    const kernels::KernelSet& kernels() const noexcept { return *kernels_; }

    void quantize(GGMLType weight_type, const float* x, size_t n_tokens, size_t cols,
                  ThreadPool* pool = nullptr, size_t x_stride = 0) {
        const ActivationType type = activation_type_for(weight_type);
        const size_t block = activation_block_size(type);
        if (cols % block != 0) {
            smol::detail::fail(ErrorKind::shape, "QuantizedInput: " + std::to_string(cols) +
                                                     " values per token is not a multiple of the " +
                                                     activation_type_name(type) + " block size");
        }
        if (x_stride == 0) x_stride = cols;
        type_ = type;
        n_tokens_ = n_tokens;
        cols_ = cols;
        row_bytes_ = activation_row_bytes(type, cols);
        const size_t bytes = n_tokens * row_bytes_;
        if (buffer_.size() < bytes) buffer_.resize(bytes);

        auto quantize_tokens = [&](size_t begin, size_t end) {
            for (size_t t = begin; t < end; ++t) {
                const float* src = x + t * x_stride;
                uint8_t* dst = buffer_.data() + t * row_bytes_;
                switch (type_) {
                    case ActivationType::Q8_K32:
                        kernels_->quantize_q8_k32(src, reinterpret_cast<BlockQ8K32*>(dst), cols);
                        break;
                    case ActivationType::Q8_0:
                        kernels_->quantize_q8_0(src, reinterpret_cast<BlockQ8_0*>(dst), cols);
                        break;
                    case ActivationType::Q8_K:
                        kernels_->quantize_q8_k(src, reinterpret_cast<BlockQ8K*>(dst), cols);
                        break;
                    case ActivationType::F32:
                        std::memcpy(dst, src, cols * sizeof(float));
                        break;
                }
            }
        };
        // Some kernels read a permuted copy (x86 Q8_K32, see
        // kernels::avx2::interleave_q8k32); row() keeps the order the quantizer wrote.
        const bool permuted = type_ == ActivationType::Q8_K32 && kernels_->layout_q8_k32 != nullptr;
        if (permuted && kernel_buffer_.size() < bytes) kernel_buffer_.resize(bytes);
        kernel_layout_ = permuted ? kernel_buffer_.data() : buffer_.data();
        auto quantize_range = [&](size_t begin, size_t end) {
            quantize_tokens(begin, end);
            if (!permuted) return;
            for (size_t t = begin; t < end; ++t) {
                kernels_->layout_q8_k32(
                    reinterpret_cast<const BlockQ8K32*>(buffer_.data() + t * row_bytes_),
                    reinterpret_cast<BlockQ8K32*>(kernel_buffer_.data() + t * row_bytes_),
                    cols / QK_K);
            }
        };
        if (pool && pool->size() > 1 && n_tokens > 1) {
            pool->parallel_for(n_tokens,
                               [&](size_t begin, size_t end, int) { quantize_range(begin, end); });
        } else {
            quantize_range(0, n_tokens);
        }
    }

    // Which rows belong to which sequence: sizes[i] rows of sequence i, in
    // order (a batched step holds several conversations' rows). matmul gives
    // each sequence's rows the bits they would get alone: the kernels' choices
    // that change results (the long-batch rule, KernelSet::converts) go by a
    // sequence's own length. Empty (the default): all rows are one sequence.
    // Kept across quantize() calls; matmul checks that the sizes add up.
    void set_sequences(const size_t* sizes, size_t n) {
        // Element by element: GCC 12 sees a null destination in assign()'s memmove
        // on some inlinings and warns (-Wnonnull), which -Werror builds refuse.
        sequences_.resize(n);
        for (size_t i = 0; i < n; ++i) sequences_[i] = sizes[i];
    }
    const std::vector<size_t>& sequences() const noexcept { return sequences_; }

    // Whether the input holds tokens in the activation format that matrices of
    // weight_type read (activation_type_for).
    bool in_format_for(GGMLType weight_type) const {
        return is_supported_weight_type(weight_type) && n_tokens_ > 0 &&
               activation_type_for(weight_type) == type_;
    }
    ActivationType type() const noexcept { return type_; }
    size_t n_tokens() const noexcept { return n_tokens_; }
    size_t cols() const noexcept { return cols_; }
    size_t row_bytes() const noexcept { return row_bytes_; }
    const uint8_t* row(size_t token) const noexcept { return buffer_.data() + token * row_bytes_; }
    const uint8_t* data() const noexcept { return buffer_.data(); }
    // Row `token` in the layout the set's tiles read (row_bytes() apart): the
    // same bytes as row() except where the set permutes Q8_K32 values.
    const uint8_t* kernel_row(size_t token) const noexcept {
        return kernel_layout_ + token * row_bytes_;
    }

private:
    const kernels::KernelSet* kernels_;
    smol::detail::AlignedBuffer buffer_;  // n_tokens rows of row_bytes_, as quantized, grows only
    smol::detail::AlignedBuffer kernel_buffer_;  // the permuted copy, when the kernels want one
    const uint8_t* kernel_layout_ = nullptr;
    std::vector<size_t> sequences_;
    ActivationType type_ = ActivationType::F32;
    size_t n_tokens_ = 0;
    size_t cols_ = 0;
    size_t row_bytes_ = 0;
};

namespace kernels {

inline void check_matmul_args(const WeightMatrix& w, const QuantizedInput& x, float* y) {
    if (!is_supported_weight_type(w.type)) {
        smol::detail::fail(ErrorKind::unsupported,
                           "matmul: weight type " + type_name(w.type) + " is not supported");
    }
    if (w.cols != x.cols()) {
        smol::detail::fail(ErrorKind::shape, "matmul: weight has " + std::to_string(w.cols) +
                                                 " columns but the input has " +
                                                 std::to_string(x.cols()) + " values per token");
    }
    if (x.n_tokens() > 0 && !x.in_format_for(w.type)) {
        smol::detail::fail(ErrorKind::invalid_argument,
                           "matmul: " + type_name(w.type) + " weights need " +
                               activation_type_name(activation_type_for(w.type)) +
                               " activations, the input holds " + activation_type_name(x.type()));
    }
    if (w.row_bytes < smol::row_bytes(w.type, w.cols)) {
        smol::detail::fail(ErrorKind::shape, "matmul: row_bytes " + std::to_string(w.row_bytes) +
                                                 " is shorter than one row of " +
                                                 std::to_string(w.cols) + " " + type_name(w.type) +
                                                 " values");
    }
    if ((w.data == nullptr && w.rows > 0) || (y == nullptr && w.rows > 0 && x.n_tokens() > 0)) {
        smol::detail::fail(ErrorKind::invalid_argument, "matmul: null weight or output pointer");
    }
    if (w.interleaved_rows > 0 && (w.interleaved_rows % kInterleaveRows != 0 ||
                                   w.interleaved_rows > w.rows || !can_interleave(w.row_bytes))) {
        smol::detail::fail(ErrorKind::shape, "matmul: " + std::to_string(w.interleaved_rows) +
                                                 " interleaved rows do not make whole groups of " +
                                                 std::to_string(kInterleaveRows) + " rows of " +
                                                 std::to_string(w.row_bytes) + " bytes within " +
                                                 std::to_string(w.rows) + " rows");
    }
    if (!x.sequences().empty()) {
        size_t total = 0;
        for (const size_t n : x.sequences()) total += n;
        if (total != x.n_tokens())
            smol::detail::fail(ErrorKind::invalid_argument,
                               "matmul: the input's sequences hold " + std::to_string(total) +
                                   " tokens, the input " + std::to_string(x.n_tokens()));
    }
}

// The input's sequences as token ranges into `out`: one per sequence, or the
// whole input.
inline void token_ranges(const QuantizedInput& x, std::vector<TokenRange>& out) {
    const std::vector<size_t>& sizes = x.sequences();
    out.resize(sizes.empty() ? 1 : sizes.size());
    if (sizes.empty()) {
        out[0] = TokenRange{0, x.n_tokens()};
        return;
    }
    for (size_t i = 0, begin = 0; i < out.size(); begin += sizes[i], ++i)
        out[i] = {begin, sizes[i]};
}

// Rows [r0, r0 + n_rows) of a job, all in interleaved groups (`grouped`) or all
// stored, for every run of its plan: the executor's part of matmul_batch.
// Each chunk is put back as stored, packed and converted at most once, into
// the thread's buffers.
struct ChunkBuffers {
    uint8_t* stored;
    uint8_t* packed;
    uint8_t* converted;
};
inline void multiply_rows(const MatmulPlan& plan, const MatmulJob& job, const QuantizedInput& x,
                          size_t r0, size_t n_rows, bool grouped, const ChunkBuffers& buffers) {
    const WeightMatrix& w = job.w;
    const TypeKernels& kernels = x.kernels().of(w.type);
    const uint8_t* bytes = w.data + r0 * w.row_bytes;  // an interleaved group starts there too
    const uint8_t* stored = grouped ? nullptr : bytes;
    // The chunk's rows as stored: interleaved groups put back once, when a run needs them.
    auto stored_rows = [&] {
        if (!stored) {
            deinterleave_rows(bytes, w.row_bytes, n_rows / kInterleaveRows, buffers.stored);
            stored = buffers.stored;
        }
        return stored;
    };
    bool packed_ready = false, converted_ready = false;
    for (size_t r = 0; r < plan.n_runs; ++r) {
        const MatmulRun& run = plan.runs[r];
        const TileKernel* tiles = kernels.tiles.data();
        const PackedTiles* layout = nullptr;  // packed or converted: its tiles instead
        const uint8_t* w_rows = bytes;
        size_t w_row_bytes = w.row_bytes;
        bool quantizer_order = kernels.tiles_read_quantizer_order;  // x.row(), not x.kernel_row()
        if (run.layout == RowLayout::stored) {
            if (grouped && plan.interleaved_tiles) {
                tiles = kernels.interleaved.data();
                quantizer_order = true;
            } else {
                w_rows = stored_rows();
            }
        } else {
            const bool converted = run.layout == RowLayout::converted;
            const PackedTiles& p = *packing_of(kernels, run.layout);
            uint8_t* buffer = converted ? buffers.converted : buffers.packed;
            bool& ready = converted ? converted_ready : packed_ready;
            if (!ready && grouped && p.pack_interleaved)
                p.pack_interleaved(bytes, w.row_bytes, n_rows, w.cols, buffer);
            else if (!ready)
                p.pack(stored_rows(), w.row_bytes, n_rows, w.cols, buffer);
            ready = true;
            w_rows = buffer;
            w_row_bytes = p.row_bytes(w.cols);
            quantizer_order = p.reads_quantizer_order;
            layout = &p;
        }
        const size_t max_cols = layout ? layout->max_cols() : size_t(kMaxTileCols);
        for (size_t g = 0, token0 = run.begin; g < token_groups(run.n, max_cols); ++g) {
            const size_t n = token_group_size(run.n, g, max_cols);
            const TileKernel tile = layout ? layout->tile(n) : tiles[n - 1];
            tile(w_rows, w_row_bytes, n_rows,
                 quantizer_order ? x.row(token0) : x.kernel_row(token0), x.row_bytes(), w.cols,
                 job.y + token0 * job.y_stride + r0, job.y_stride);
            token0 += n;
        }
    }
}

// A planned matmul_batch: every job's plan, the chunks of all jobs numbered
// one after another, and each thread's buffers (in scratch: [threads][stride],
// a packing, a converting and a put-back-as-stored buffer of about 64-256 KiB
// each, in L2, on their own cache lines).
struct BatchPlan {
    const MatmulPlan* plans = nullptr;    // [jobs]
    const size_t* first_chunk = nullptr;  // [jobs + 1]
    size_t n_chunks = 0;
    uint8_t* scratch = nullptr;
    size_t stride = 0, packed_offset = 0, converted_offset = 0, stored_offset = 0;
};

// Plans n_jobs matrices reading x, on n_threads threads, in `memory`.
inline BatchPlan plan_batch(const MatmulJob* jobs, size_t n_jobs, const QuantizedInput& x,
                            size_t n_threads, MatmulScratch& memory) {
    token_ranges(x, memory.ranges);
    const size_t n_ranges = memory.ranges.size();
    memory.plans.resize(n_jobs);
    memory.runs.resize(n_jobs * n_ranges);
    memory.first_chunk.resize(n_jobs + 1);
    size_t stored = 0, packed = 0, converted = 0;
    memory.first_chunk[0] = 0;
    for (size_t j = 0; j < n_jobs; ++j) {
        const WeightMatrix& w = jobs[j].w;
        check_matmul_args(w, x, jobs[j].y);
        const MatrixShape shape{w.type, w.rows, w.cols, w.row_bytes, w.interleaved_rows};
        const MatmulPlan& plan = memory.plans[j] =
            plan_matmul(x.kernels(), shape, x.n_tokens(), memory.ranges.data(), n_ranges, n_threads,
                        memory.runs.data() + j * n_ranges);
        memory.first_chunk[j + 1] = memory.first_chunk[j] + plan.n_chunks;
        stored = std::max(stored, plan.stored_bytes);
        packed = std::max(packed, plan.packed_bytes);
        converted = std::max(converted, plan.converted_bytes);
    }
    auto aligned = [](size_t bytes) {
        return (bytes + smol::detail::kAlignment - 1) / smol::detail::kAlignment *
               smol::detail::kAlignment;
    };
    BatchPlan plan;
    plan.plans = memory.plans.data();
    plan.first_chunk = memory.first_chunk.data();
    plan.n_chunks = memory.first_chunk[n_jobs];
    plan.converted_offset = aligned(packed);
    plan.stored_offset = plan.converted_offset + aligned(converted);
    plan.stride = plan.stored_offset + aligned(stored);
    if (plan.stride > 0) plan.scratch = memory.reserve_bytes(n_threads * plan.stride);
    return plan;
}

// Chunk `chunk` of a plan: its job (searched from job `from`: a thread's
// chunks only grow) and its rows [row0, row0 + n_rows) of that job's matrix.
struct ChunkRows {
    size_t job, row0, n_rows;
};
inline ChunkRows chunk_rows(const BatchPlan& plan, const MatmulJob* jobs, size_t n_jobs,
                            size_t from, size_t chunk) noexcept {
    size_t j = from;
    while (j + 1 < n_jobs && chunk >= plan.first_chunk[j + 1]) ++j;
    const size_t row0 = (chunk - plan.first_chunk[j]) * plan.plans[j].chunk_rows;
    return ChunkRows{j, row0, std::min(plan.plans[j].chunk_rows, jobs[j].w.rows - row0)};
}

// The weight bytes of chunk `chunk` (rows as stored or interleaved: the same
// bytes) on their way to this core's caches, for a long batch: a thread asks
// for the chunk it will most likely take next (threads take chunks in turn),
// so that the misses overlap the current chunk's tiles, which are compute
// bound. Without it the first pass over a chunk (putting interleaved rows back
// as stored, or converting) waits on memory: 5 % of the samples of an avx2
// Q5_1 prefill; with it that prefill is 1-2 % faster. (Spreading the
// prefetches over the chunk's last token groups instead measured the same.)
inline void prefetch_chunk(const BatchPlan& plan, const MatmulJob* jobs, size_t n_jobs, size_t j,
                           size_t chunk) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    if (chunk >= plan.n_chunks) return;
    const ChunkRows c = chunk_rows(plan, jobs, n_jobs, j, chunk);
    const WeightMatrix& w = jobs[c.job].w;
    const uint8_t* begin = w.data + c.row0 * w.row_bytes;
    for (size_t offset = 0; offset < c.n_rows * w.row_bytes; offset += 64)
        __builtin_prefetch(begin + offset, 0, 2);
#else
    (void)plan, (void)jobs, (void)n_jobs, (void)j, (void)chunk;
#endif
}

// Runs a plan: the pool's threads take chunks in order, each multiplying its
// rows for every run of its job.
inline void run_batch(const BatchPlan& plan, const MatmulJob* jobs, size_t n_jobs,
                      const QuantizedInput& x, ThreadPool& pool) {
    std::atomic<size_t> next_chunk{0};
    const bool long_batch = x.n_tokens() > size_t(kMaxTileCols);
    const size_t n_threads = size_t(pool.size());
    pool.run_dynamic([&](int thread, int) {
        ChunkBuffers buffers{nullptr, nullptr, nullptr};
        if (plan.scratch != nullptr) {
            uint8_t* mine = plan.scratch + size_t(thread) * plan.stride;
            buffers = ChunkBuffers{mine + plan.stored_offset, mine + plan.packed_offset,
                                   mine + plan.converted_offset};
        }
        size_t j = 0;
        for (size_t chunk = next_chunk.fetch_add(1, std::memory_order_relaxed);
             chunk < plan.n_chunks; chunk = next_chunk.fetch_add(1, std::memory_order_relaxed)) {
            const ChunkRows c = chunk_rows(plan, jobs, n_jobs, j, chunk);
            j = c.job;
            const MatmulPlan& job_plan = plan.plans[j];
            const WeightMatrix& w = jobs[j].w;
            if (long_batch) prefetch_chunk(plan, jobs, n_jobs, j, chunk + n_threads);
            const size_t row0 = c.row0, n_rows = c.n_rows;
            // Chunks hold whole interleaved groups, so only a chunk reaching
            // past the interleaved rows has two parts.
            const size_t n_grouped =
                row0 < w.interleaved_rows ? std::min(n_rows, w.interleaved_rows - row0) : 0;
            if (n_grouped > 0) multiply_rows(job_plan, jobs[j], x, row0, n_grouped, true, buffers);
            if (n_grouped < n_rows)
                multiply_rows(job_plan, jobs[j], x, row0 + n_grouped, n_rows - n_grouped, false,
                              buffers);
        }
    });
}

}  // namespace kernels

// Several matrices that read the same input (q/k/v, gate/up) in one pool job:
// one wake-up and one barrier instead of one per matrix, and threads that
// finish one matrix early move straight on to the next. Each matrix is planned
// (kernels/matmul_plan.hpp), then the chunks of all of them are multiplied.
// The plan and the run of a matmul_batch (kernels::plan_batch, run_batch).
inline void matmul_batch(const MatmulJob* jobs, size_t n_jobs, const QuantizedInput& x,
                         ThreadPool& pool, MatmulScratch& scratch) {
    if (x.n_tokens() == 0 || n_jobs == 0) return;
    const kernels::BatchPlan plan =
        kernels::plan_batch(jobs, n_jobs, x, size_t(pool.size()), scratch);
    kernels::run_batch(plan, jobs, n_jobs, x, pool);
}

// The same with memory of its own (allocates: for one-off calls, the tuner, tests).
inline void matmul_batch(const MatmulJob* jobs, size_t n_jobs, const QuantizedInput& x,
                         ThreadPool& pool) {
    MatmulScratch scratch;
    matmul_batch(jobs, n_jobs, x, pool, scratch);
}

inline void matmul(const WeightMatrix& w, const QuantizedInput& x, float* y, size_t y_stride,
                   ThreadPool& pool) {
    const MatmulJob job{w, y, y_stride};
    matmul_batch(&job, 1, x, pool);
}

inline void matmul_reference(const WeightMatrix& w, const QuantizedInput& x, float* y,
                             size_t y_stride) {
    kernels::check_matmul_args(w, x, y);
    // The spec of matmul with x's kernel set: a long sequence (batch) multiplies
    // converted rows.
    const WeightTypeInfo& info = *weight_type_info(w.type);
    std::vector<kernels::TokenRange> ranges;
    kernels::token_ranges(x, ranges);
    std::vector<uint8_t> stored_row(w.interleaved_rows > 0 ? w.row_bytes : 0);
    for (size_t i = 0; i < ranges.size(); ++i) {
        const ReferenceDot reference = x.kernels().converts(w.type, ranges[i].n)
                                           ? info.converted_dot_reference
                                           : info.dot_reference;
        for (size_t t = ranges[i].begin; t < ranges[i].begin + ranges[i].n; ++t)
            for (size_t r = 0; r < w.rows; ++r) {
                const uint8_t* row = w.row(r);
                if (r < w.interleaved_rows) {
                    w.copy_row(r, stored_row.data());
                    row = stored_row.data();
                }
                y[t * y_stride + r] = reference(row, x.row(t), w.cols);
            }
    }
}

SMOL_NAMESPACE_END
