// Kernel entry points: matrix x activations for every weight type smol
// computes with, activation quantization, and the float helpers of the forward
// pass. This is the API the model calls; which instruction set runs behind it
// is decided at run time: every call goes through a KernelSet
// (kernels/kernel_set.hpp) chosen by kernels/dispatch.hpp from what the CPU
// supports (or SMOL_CPU / LoadOptions::cpu), never by the consumer's flags.
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
//   bool is_supported_weight_type(GGMLType);   // the kWeightTypes table (weight_types.hpp)
//   ActivationType activation_type_for(GGMLType weight_type);
//       Q8_K32 for Q4_K/Q5_K/Q6_K, Q8_0 for Q8_0, F32 for F32/F16/BF16
//       (formats and the BlockQ8K32 layout: activations.hpp).
//
//   class QuantizedInput   activations quantized once, read by every matrix using them
//     explicit QuantizedInput(const kernels::KernelSet& k = kernels::default_kernels());
//     void quantize(GGMLType weight_type, const float* x, size_t n_tokens, size_t cols,
//                   ThreadPool* pool = nullptr, size_t x_stride = 0);
//         x: n_tokens rows of cols floats, row t at x + t * x_stride (0 = cols).
//         Stores them in activation_type_for(weight_type), with the set's kernels.
//     bool suits(GGMLType weight_type) const;   // already in the format that type wants
//     const kernels::KernelSet& kernels() const; // the set matmul will use on it
//     ActivationType type() const; size_t n_tokens() const; size_t cols() const;
//     size_t row_bytes() const; const uint8_t* row(size_t token) const;   // natural layout
//     const uint8_t* kernel_row(size_t token) const;   // what the set's tiles read
//
//   void matmul(const WeightMatrix& w, const QuantizedInput& x, float* y, size_t y_stride,
//               ThreadPool& pool);
//       y[t * y_stride + r] = dot(row r of w, token t of x) for t < x.n_tokens(), r < w.rows,
//       with x.kernels(). One token: a mat-vec, rows split over threads, each weight
//       byte read once. Several: tiles of rows x up to 8 tokens, each weight block
//       unpacked once per 8 tokens. Results do not depend on the pool size. From
//       WeightTypeInfo::convert_min_tokens tokens on, K-quant rows are multiplied
//       converted to 8 bits where the set has that (KernelSet::converts; the
//       golden engine's rule, kernels/scalar.hpp "long batches").
//   struct MatmulJob { WeightMatrix w; float* y; size_t y_stride; };
//   void matmul_batch(const MatmulJob* jobs, size_t n_jobs, const QuantizedInput& x,
//                     ThreadPool& pool);
//       several matrices reading the same input (q/k/v, gate/up) in one pool job;
//       each job as matmul(job.w, x, job.y, job.y_stride, pool), same results.
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
    const size_t block = type_traits(type).block_size;
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
                    case ActivationType::F32:
                        std::memcpy(dst, src, cols * sizeof(float));
                        break;
                }
            }
        };
        // Some kernels read a permuted copy (x86 Q8_K32, see
        // kernels::avx2::interleave_q8k32); row() keeps the natural order.
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

    // The rows belong to independent sequences of these many tokens, in order
    // (a batched step: several conversations' rows in one input). Each
    // sequence's product follows the long-batch rule by its own length
    // (KernelSet::converts), so a conversation's result does not depend on
    // who shares its step. Empty (the default): one sequence of n_tokens().
    // Kept across quantize() calls; matmul checks that the sizes add up.
    void set_sequences(const size_t* sizes, size_t n) {
        // Element by element: GCC 12 sees a null destination in assign()'s memmove
        // on some inlinings and warns (-Wnonnull), which -Werror builds refuse.
        sequences_.resize(n);
        for (size_t i = 0; i < n; ++i) sequences_[i] = sizes[i];
    }
    void clear_sequences() noexcept { sequences_.clear(); }
    const std::vector<size_t>& sequences() const noexcept { return sequences_; }

    bool suits(GGMLType weight_type) const {
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
    smol::detail::AlignedBuffer buffer_;  // n_tokens rows of row_bytes_, natural layout, grows only
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
    if (x.n_tokens() > 0 && !x.suits(w.type)) {
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

// The input's sequences as token ranges [begin, begin + n): one per sequence,
// or the whole input. `inline_ranges` serves up to its size without allocating.
struct TokenRange {
    size_t begin, n;
};
inline const TokenRange* token_ranges(const QuantizedInput& x, TokenRange (&inline_ranges)[16],
                                      std::vector<TokenRange>& heap, size_t& count) {
    const std::vector<size_t>& sizes = x.sequences();
    count = sizes.empty() ? 1 : sizes.size();
    TokenRange* out = inline_ranges;
    if (count > 16) {
        heap.resize(count);
        out = heap.data();
    }
    if (sizes.empty()) {
        out[0] = TokenRange{0, x.n_tokens()};
        return out;
    }
    for (size_t i = 0, begin = 0; i < count; begin += sizes[i], ++i) out[i] = {begin, sizes[i]};
    return out;
}

}  // namespace kernels

// Several matrices that read the same input (q/k/v, gate/up) in one pool job:
// one wake-up and one barrier instead of one per matrix, and threads that
// finish one matrix early move straight on to the next.
inline void matmul_batch(const MatmulJob* jobs, size_t n_jobs, const QuantizedInput& x,
                         ThreadPool& pool) {
    const size_t n_tokens = x.n_tokens();
    if (n_tokens == 0 || n_jobs == 0) return;
    const kernels::KernelSet& set = x.kernels();
    // Each of the input's sequences (token ranges) reads the job's rows as
    // stored (or packed: the same bits) or converted, as its own length says
    // (KernelSet::converts).
    kernels::TokenRange inline_ranges[16];
    std::vector<kernels::TokenRange> heap_ranges;
    size_t n_ranges = 0;
    const kernels::TokenRange* ranges =
        kernels::token_ranges(x, inline_ranges, heap_ranges, n_ranges);
    // Consecutive ranges that read the rows the same way (converted, or
    // exactly: stored and packed give the same bits) run as one: a batched
    // decode step of N one-token sequences is still one N-column tile.
    struct Run {
        size_t begin, n;
        const kernels::PackedTiles* packing;  // null: the rows as stored
    };
    struct Plan {
        const uint8_t* weights;
        size_t chunk_rows;
        size_t first_chunk;  // index of this job's first chunk in the shared numbering
        const Run* runs;
        size_t n_runs;
        // A chunk is packed and converted at most once, into the thread's buffers.
        const kernels::PackedTiles* packed;     // the job's packing, if a run uses it
        const kernels::PackedTiles* converted;  // its converted rows, if a run uses them
        // Interleaved rows (WeightMatrix::interleaved_rows): the set's tiles
        // over them, or null when a run must have them back as stored (put
        // back once per chunk into the thread's buffer, then as above).
        const kernels::TileKernel* interleaved;
        bool destores;  // some run reads interleaved rows as stored
    };
    constexpr size_t kInlinePlans = 8;
    Plan inline_plans[kInlinePlans];
    std::vector<Plan> heap_plans;
    Plan* plans = inline_plans;
    if (n_jobs > kInlinePlans) {
        heap_plans.resize(n_jobs);
        plans = heap_plans.data();
    }
    Run inline_runs[kInlinePlans * 4];
    std::vector<Run> heap_runs;
    Run* runs = inline_runs;
    if (n_jobs * n_ranges > kInlinePlans * 4) {
        heap_runs.resize(n_jobs * n_ranges);
        runs = heap_runs.data();
    }
    const size_t n_threads = size_t(pool.size());
    size_t n_chunks = 0, packed_scratch = 0, converted_scratch = 0, stored_scratch = 0;
    for (size_t j = 0; j < n_jobs; ++j) {
        const WeightMatrix& w = jobs[j].w;
        kernels::check_matmul_args(w, x, jobs[j].y);
        Plan& plan = plans[j];
        Run* job_runs = runs + j * n_ranges;
        plan = Plan{w.data, 0, n_chunks, job_runs, 0, nullptr, nullptr, nullptr, false};
        const int index = weight_type_index(w.type);
        const bool interleaved = w.interleaved_rows > 0;
        if (interleaved && set.interleaves(w.type)) plan.interleaved = set.interleaved[index];
        bool last_converts = false;
        for (size_t r = 0; r < n_ranges; ++r) {
            const bool converts = set.converts(w.type, ranges[r].n);
            if (plan.n_runs > 0 && converts == last_converts)
                job_runs[plan.n_runs - 1].n += ranges[r].n;
            else
                job_runs[plan.n_runs++] = Run{ranges[r].begin, ranges[r].n, nullptr};
            if (converts) job_runs[plan.n_runs - 1].packing = &set.converted[index];
            last_converts = converts;
        }
        for (size_t r = 0; r < plan.n_runs; ++r) {
            Run& run = job_runs[r];
            if (run.packing) {
                plan.converted = run.packing;
            } else if (set.packed[index].pack != nullptr && run.n >= set.packed[index].min_tokens &&
                       !plan.interleaved) {  // interleaved tiles unpack next to nothing
                run.packing = plan.packed = &set.packed[index];
            }
            if (interleaved && (run.packing || !plan.interleaved)) plan.destores = true;
        }
        // Rows go out in chunks from a shared counter, so a thread slowed down
        // by the OS simply takes fewer. Mat-vec: ~8 chunks per thread, in
        // multiples of 4 rows. Mat-mat: chunks whose weights (~48 KiB) stay in
        // L2 while every token group streams past them.
        size_t chunk_rows;
        // One group of columns (a decode step of up to kMaxTileCols sequences)
        // streams each weight row once, like a mat-vec: chunk it the same way,
        // but with ~4 chunks per thread from 2 columns on, whose tiles take
        // several times longer per row (a batched step of the 3B file, 2 threads,
        // Zen 5 VM, alternated runs: 4 and 8 sequences 1-3 % faster than with 8
        // chunks, 16 and 32 chunks slower; one token keeps 8, which it is faster with).
        if (n_tokens <= size_t(kernels::kMaxTileCols)) {
            const size_t per_thread = n_tokens == 1 ? 8 : 4;
            chunk_rows = std::max<size_t>(4, (w.rows / (n_threads * per_thread) + 3) / 4 * 4);
        } else {
            chunk_rows = std::max<size_t>(4, (48 * 1024 / w.row_bytes) / 4 * 4);
            chunk_rows =
                std::min(chunk_rows, std::max<size_t>(4, (w.rows / n_threads + 3) / 4 * 4));
        }
        for (const kernels::PackedTiles* p : {plan.packed, plan.converted})
            if (p)  // whole groups of rows per chunk (the last chunk may end in a short group)
                chunk_rows = (chunk_rows + p->row_group - 1) / p->row_group * p->row_group;
        if (interleaved)  // whole interleaved groups (kInterleaveRows is a multiple of the above)
            chunk_rows = (chunk_rows + kInterleaveRows - 1) / kInterleaveRows * kInterleaveRows;
        plan.chunk_rows = chunk_rows;
        if (plan.destores) stored_scratch = std::max(stored_scratch, chunk_rows * w.row_bytes);
        if (plan.packed)
            packed_scratch = std::max(packed_scratch, chunk_rows * plan.packed->row_bytes(w.cols));
        if (plan.converted)
            converted_scratch =
                std::max(converted_scratch, chunk_rows * plan.converted->row_bytes(w.cols));
        n_chunks += (w.rows + chunk_rows - 1) / chunk_rows;
    }
    // Per thread a packing buffer and a converting one (each about 64-256 KiB,
    // in L2), on their own cache lines.
    auto aligned = [](size_t bytes) {
        return (bytes + smol::detail::kAlignment - 1) / smol::detail::kAlignment *
               smol::detail::kAlignment;
    };
    const size_t scratch_stride =
        aligned(packed_scratch) + aligned(converted_scratch) + aligned(stored_scratch);
    smol::detail::AlignedArray<uint8_t> scratch;
    if (scratch_stride) {
        scratch.reset(
            static_cast<uint8_t*>(smol::detail::aligned_allocate(n_threads * scratch_stride)));
    }

    std::atomic<size_t> next_chunk{0};
    pool.run_dynamic([&](int thread, int) {
        uint8_t* packed_buffer = scratch.get() + size_t(thread) * scratch_stride;
        uint8_t* converted_buffer = packed_buffer + aligned(packed_scratch);
        uint8_t* stored_buffer = converted_buffer + aligned(converted_scratch);
        size_t j = 0;
        for (size_t chunk = next_chunk.fetch_add(1, std::memory_order_relaxed); chunk < n_chunks;
             chunk = next_chunk.fetch_add(1, std::memory_order_relaxed)) {
            while (j + 1 < n_jobs && chunk >= plans[j + 1].first_chunk) ++j;  // chunks only grow
            const Plan& plan = plans[j];
            const WeightMatrix& w = jobs[j].w;
            float* y = jobs[j].y;
            const size_t y_stride = jobs[j].y_stride;
            const size_t row0 = (chunk - plan.first_chunk) * plan.chunk_rows;
            const size_t n_rows = std::min(plan.chunk_rows, w.rows - row0);
            const size_t index = size_t(weight_type_index(w.type));
            // Rows [r0, r0 + n): all in interleaved groups, or all stored.
            auto multiply = [&](size_t r0, size_t n_part, bool grouped) {
                const uint8_t* bytes = plan.weights + r0 * w.row_bytes;  // a group starts there too
                const uint8_t* stored = grouped ? nullptr : bytes;
                bool packed_ready = false, converted_ready = false;
                for (size_t r = 0; r < plan.n_runs; ++r) {
                    const Run& run = plan.runs[r];
                    const kernels::PackedTiles* p = run.packing;
                    const kernels::TileKernel* tiles = set.tiles[index];
                    const uint8_t* w_rows = bytes;
                    size_t w_row_bytes = w.row_bytes;
                    bool natural = false;
                    if (grouped && !p && plan.interleaved) {
                        tiles = plan.interleaved;
                        natural = true;
                    } else {
                        if (!stored) {
                            deinterleave_rows(bytes, w.row_bytes, n_part / kInterleaveRows,
                                              stored_buffer);
                            stored = stored_buffer;
                        }
                        w_rows = stored;
                    }
                    if (p) {
                        const bool converted = p == plan.converted;
                        uint8_t* buffer = converted ? converted_buffer : packed_buffer;
                        bool& ready = converted ? converted_ready : packed_ready;
                        if (!ready) p->pack(stored, w.row_bytes, n_part, w.cols, buffer);
                        ready = true;
                        w_rows = buffer;
                        w_row_bytes = p->row_bytes(w.cols);
                        natural = p->natural_activations;
                        tiles = p->tiles;
                    }
                    // The run's tokens in as few tile groups as fit, of even sizes (9 as
                    // 5 + 4, not 8 + 1): a token's bits do not depend on its group, and a
                    // lone column runs the slowest tile per token (one token is paced).
                    // A 9-row decode step of the 3B file, 2 threads: 96-100 ms instead
                    // of 116-132 (8 rows: 79-85).
                    const size_t max_cols = size_t(kernels::kMaxTileCols);
                    const size_t n_groups = (run.n + max_cols - 1) / max_cols;
                    for (size_t g = 0, token0 = run.begin; g < n_groups; ++g) {
                        const size_t n = run.n / n_groups + (g < run.n % n_groups ? 1 : 0);
                        tiles[n - 1](w_rows, w_row_bytes, n_part,
                                     natural ? x.row(token0) : x.kernel_row(token0), x.row_bytes(),
                                     w.cols, y + token0 * y_stride + r0, y_stride);
                        token0 += n;
                    }
                }
            };
            // Chunks hold whole groups, so only a chunk reaching past the
            // interleaved rows has two parts.
            const size_t n_grouped =
                row0 < w.interleaved_rows ? std::min(n_rows, w.interleaved_rows - row0) : 0;
            if (n_grouped > 0) multiply(row0, n_grouped, true);
            if (n_grouped < n_rows) multiply(row0 + n_grouped, n_rows - n_grouped, false);
        }
    });
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
    kernels::TokenRange inline_ranges[16];
    std::vector<kernels::TokenRange> heap_ranges;
    size_t n_ranges = 0;
    const kernels::TokenRange* ranges =
        kernels::token_ranges(x, inline_ranges, heap_ranges, n_ranges);
    std::vector<uint8_t> stored_row(w.interleaved_rows > 0 ? w.row_bytes : 0);
    for (size_t i = 0; i < n_ranges; ++i) {
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
