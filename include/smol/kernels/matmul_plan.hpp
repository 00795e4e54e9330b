// The planner of matmul_batch (kernels/kernels.hpp): which rows each matrix is
// read as, in which chunks, for which tokens. Pure: it looks at shapes and at
// the kernel set, never at weights or activations, so its rules are testable
// alone (tests/test_kernels.cpp, "matmul plan"); the executor in kernels.hpp
// only carries the plan out. The plan never changes a result's bits except by
// the one rule that is meant to (converted rows for long sequences); every
// other choice here is about speed.
//
// The rules, each applied by one function below:
//
//   1. Sequences (plan_runs). The input's tokens belong to sequences (one, or
//      QuantizedInput::set_sequences). A sequence of at least the weight
//      table's convert_min_tokens tokens reads the matrix's rows converted
//      (TypeKernels::converted, where the set has them); shorter ones read
//      the rows exactly (as stored, interleaved or packed: the same bits).
//      Consecutive sequences read the same way run as one run, so a batched
//      decode step of N one-token sequences is one N-column tile.
//   2. Packing (plan_runs). An exact run of at least packed.min_tokens tokens
//      reads packed rows where the set packs the type, unless the matrix is
//      read through interleaved tiles (those unpack next to nothing).
//   3. Chunks (chunk_rows). Rows go out to threads in chunks from a shared
//      counter, so a thread slowed down by the OS simply takes fewer:
//        - one column group (n_tokens <= kMaxTileCols: decode, a batched
//          step) streams each row once, like a mat-vec: ~8 chunks per thread
//          for one token (KernelParams::decode_chunks, which the tuner may
//          change: a row's result does not depend on its chunk), ~4 from 2
//          tokens on (their tiles take several times
//          longer per row, and fewer, larger chunks measured faster);
//        - more tokens: chunks of ~48 KiB of weights, which stay in L2 while
//          every token group streams past them, but no more than one
//          thread's share of the rows;
//      in multiples of 4 rows (at least 4), then rounded up to whole row
//      groups of the packed / converted layouts the runs use, and to whole
//      interleaved groups (kInterleaveRows) for an interleaved matrix.
//   4. Token groups (token_group_size, used by the executor). A run's tokens
//      go through the tiles in as few groups of at most kMaxTileCols (or the
//      layout's wide tiles' kMaxWideTileCols, PackedTiles::max_cols) as
//      possible, of near-equal sizes (9 as 5 + 4, not 8 + 1): a token's bits do
//      not depend on its group, and a lone column runs the slowest tile per token.
// Rules 3 and 4 follow measurements (benchmarks/RESULTS.md and the log have
// them); the rules themselves stand as written.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../quant/types.hpp"
#include "../quant/weight_matrix.hpp"
#include "kernel_set.hpp"

SMOL_NAMESPACE_BEGIN
namespace kernels {

// Tokens [begin, begin + n) of the input: one sequence.
struct TokenRange {
    size_t begin, n;
};

// How a run reads the matrix's rows.
enum class RowLayout : uint8_t {
    stored,     // as the matrix holds them (stored, or interleaved where the set has tiles for it)
    packed,     // packed once per chunk (TypeKernels::packed): the same bits as stored
    converted,  // converted once per chunk (TypeKernels::converted): long sequences
};

// Consecutive tokens that read the rows the same way.
struct MatmulRun {
    size_t begin, n;
    RowLayout layout;
};

// The shape of a matrix, as far as the plan cares.
struct MatrixShape {
    GGMLType type;
    size_t rows, cols, row_bytes;
    size_t interleaved_rows = 0;  // WeightMatrix::interleaved_rows
};

struct MatmulPlan {
    const MatmulRun* runs = nullptr;  // n_runs runs, in token order (storage: plan_matmul's caller)
    size_t n_runs = 0;
    size_t chunk_rows = 0;  // rows per chunk (the last one may be shorter)
    size_t n_chunks = 0;
    // The matrix's interleaved rows are read by the set's interleaved tiles
    // (else they are put back as stored, per chunk, when a run needs them).
    bool interleaved_tiles = false;
    // Per-thread scratch, in bytes, for one chunk: its rows put back as stored
    // (an interleaved matrix some run reads as stored), packed, converted.
    size_t stored_bytes = 0, packed_bytes = 0, converted_bytes = 0;
};

// The packed or converted rows a run of `layout` reads (null for stored).
inline const PackedTiles* packing_of(const TypeKernels& kernels, RowLayout layout) noexcept {
    return layout == RowLayout::packed      ? &kernels.packed
           : layout == RowLayout::converted ? &kernels.converted
                                            : nullptr;
}

// Rules 1 and 2: the runs of one matrix over the input's sequences. Writes
// at most n_sequences runs to `runs` and returns how many.
inline size_t plan_runs(const KernelSet& set, const MatrixShape& w, const TokenRange* sequences,
                        size_t n_sequences, MatmulRun* runs) noexcept {
    const TypeKernels& kernels = set.of(w.type);
    const bool interleaved_tiles = w.interleaved_rows > 0 && set.interleaves(w.type);
    size_t n_runs = 0;
    for (size_t i = 0; i < n_sequences; ++i) {
        const RowLayout layout =
            set.converts(w.type, sequences[i].n) ? RowLayout::converted : RowLayout::stored;
        if (n_runs > 0 &&
            (runs[n_runs - 1].layout == RowLayout::converted) == (layout == RowLayout::converted))
            runs[n_runs - 1].n += sequences[i].n;
        else
            runs[n_runs++] = MatmulRun{sequences[i].begin, sequences[i].n, layout};
    }
    for (size_t r = 0; r < n_runs; ++r) {
        MatmulRun& run = runs[r];
        if (run.layout == RowLayout::stored && kernels.packed.pack != nullptr &&
            run.n >= kernels.packed.min_tokens && !interleaved_tiles)
            run.layout = RowLayout::packed;
    }
    return n_runs;
}

// Rule 3, before rounding to the layouts' row groups.
// decode_chunks: chunks per thread for one token (KernelParams::decode_chunks).
inline size_t chunk_rows(size_t rows, size_t row_bytes, size_t n_tokens, size_t n_threads,
                         size_t decode_chunks = 8) noexcept {
    auto multiple_of_4 = [](size_t n) { return std::max<size_t>(4, (n + 3) / 4 * 4); };
    if (n_tokens <= size_t(kMaxTileCols)) {
        const size_t chunks_per_thread = n_tokens == 1 ? std::max<size_t>(1, decode_chunks) : 4;
        return multiple_of_4(rows / (n_threads * chunks_per_thread));
    }
    const size_t in_l2 = std::max<size_t>(4, (48 * 1024 / row_bytes) / 4 * 4);
    return std::min(in_l2, multiple_of_4(rows / n_threads));
}

// The plan of one matrix for an input of n_tokens tokens in these sequences,
// on n_threads threads; its runs are written to `runs` (n_sequences of room).
inline MatmulPlan plan_matmul(const KernelSet& set, const MatrixShape& w, size_t n_tokens,
                              const TokenRange* sequences, size_t n_sequences, size_t n_threads,
                              MatmulRun* runs) noexcept {
    MatmulPlan plan;
    plan.runs = runs;
    plan.n_runs = plan_runs(set, w, sequences, n_sequences, runs);
    const TypeKernels& kernels = set.of(w.type);
    const bool interleaved = w.interleaved_rows > 0;
    plan.interleaved_tiles = interleaved && set.interleaves(w.type);
    bool uses_packed = false, uses_converted = false, uses_stored_copy = false;
    for (size_t r = 0; r < plan.n_runs; ++r) {
        const RowLayout layout = runs[r].layout;
        uses_packed |= layout == RowLayout::packed;
        uses_converted |= layout == RowLayout::converted;
        // Interleaved rows are put back as stored for a run that reads them
        // so, or packs them from there (a layout without pack_interleaved).
        const PackedTiles* packing = packing_of(kernels, layout);
        uses_stored_copy |= interleaved && (packing ? packing->pack_interleaved == nullptr
                                                    : !plan.interleaved_tiles);
    }
    size_t rows =
        chunk_rows(w.rows, w.row_bytes, n_tokens, n_threads, size_t(set.params.decode_chunks));
    auto round_up = [](size_t n, size_t group) { return (n + group - 1) / group * group; };
    if (uses_packed) rows = round_up(rows, kernels.packed.row_group);
    if (uses_converted) rows = round_up(rows, kernels.converted.row_group);
    if (interleaved) rows = round_up(rows, kInterleaveRows);  // a multiple of the row groups
    plan.chunk_rows = rows;
    plan.n_chunks = (w.rows + rows - 1) / rows;
    if (uses_stored_copy) plan.stored_bytes = rows * w.row_bytes;
    if (uses_packed) plan.packed_bytes = rows * kernels.packed.row_bytes(w.cols);
    if (uses_converted) plan.converted_bytes = rows * kernels.converted.row_bytes(w.cols);
    return plan;
}

// Rule 4: the size of token group g of a run of n tokens read by tiles of at
// most max_cols columns (groups in order; ceil(n / max_cols) of them).
constexpr size_t token_groups(size_t n, size_t max_cols = kMaxTileCols) noexcept {
    return (n + max_cols - 1) / max_cols;
}
constexpr size_t token_group_size(size_t n, size_t g, size_t max_cols = kMaxTileCols) noexcept {
    return n / token_groups(n, max_cols) + (g < n % token_groups(n, max_cols) ? 1 : 0);
}

}  // namespace kernels
SMOL_NAMESPACE_END
