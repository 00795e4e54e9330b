// smol::WeightMatrix: the one host description of a weight matrix, from the
// file's bytes to the kernels. Weights::try_bind (model/weights.hpp) makes one per
// tensor, pointing into the mapped GGUF file; matmul (kernels/kernels.hpp)
// reads it; the CUDA backend (cuda/backend.hpp) uploads from it and builds its
// device form, DeviceMatrix, out of it. gguf::TensorInfo stays the file's own
// record (dims, offset, byte count); this is what computing needs of it.
//
// Layout: `rows` rows (output features) of `cols` values (input features, GGUF
// dims[0]) of `type`; row r is `row_bytes` bytes at data + r * row_bytes, at
// any byte alignment (GGUF allows general.alignment = 1).
//
// Interleaved rows (a load-time layout: Model moves the matrices of the types
// its CPU kernels have interleaved tiles for into it, KernelSet::interleaved).
// A mat-vec reads every weight byte once, so its speed is how well it streams
// and how little it does per byte. With the rows as stored, a SIMD dot works
// along one row and folds its lanes at the end; here one register holds the
// same 32-bit word of 16 rows, one row per lane, so a token's dot is 4 of its
// activation bytes broadcast against 16 rows, with no shuffle and no fold, and
// a thread streams one contiguous run of memory. The first `interleaved_rows`
// rows (a multiple of kInterleaveRows) form groups of 16: group g holds rows
// 16 g .. 16 g + 15 in the 16 * row_bytes bytes at data + 16 g * row_bytes,
// word k of row r at byte 4 * (16 k + r) of the group. Rows from
// interleaved_rows on are stored as above. Only bytes move, so every dot over
// a row is the same; copy_row gives a row's stored bytes in either layout.
//
// Plain data with no dependencies beyond the type ids, so the CUDA side's
// plain-data header can hold it. It owns nothing: the bytes and the name must
// outlive it (both live in the gguf::File for a bound model).
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "types.hpp"

SMOL_NAMESPACE_BEGIN

struct WeightMatrix {
    GGMLType type = GGMLType::F32;
    const uint8_t* data = nullptr;
    size_t rows = 0;              // output features (GGUF dims[1])
    size_t cols = 0;              // input features (GGUF dims[0])
    size_t row_bytes = 0;         // bytes from one row to the next
    std::string_view name;        // the tensor's name, only for messages; empty when it has none
    size_t interleaved_rows = 0;  // leading rows in 16-row groups (see above); 0: all stored

    // Row r as stored; only for r >= interleaved_rows (copy_row serves any row).
    const uint8_t* row(size_t r) const noexcept { return data + r * row_bytes; }
    void copy_row(size_t r, uint8_t* out) const noexcept;
    // All rows as stored: rows * row_bytes bytes.
    void copy_stored(uint8_t* out) const noexcept;
    // The reverse, for a matrix held as stored (interleaved_rows == 0) whose rows
    // can_interleave: its rows * row_bytes bytes written to `out` with the whole
    // 16-row groups interleaved and the tail rows as stored; returns the matrix over
    // `out`. The groups are independent: `for_groups(n_groups, write)` must call
    // write(begin, end) over ranges that cover [0, n_groups) once, serially or on a
    // pool (SmolLM3::interleave_weights); the default does it in one call.
    WeightMatrix interleaved_copy(uint8_t* out) const noexcept {
        return interleaved_copy(out, [](size_t n, auto&& write) { write(size_t(0), n); });
    }
    template <class ForGroups>
    WeightMatrix interleaved_copy(uint8_t* out, ForGroups&& for_groups) const;
};

// Rows per group of the interleaved layout: one per 32-bit lane of a 512-bit
// register.
constexpr size_t kInterleaveRows = 16;

// The layout rule: byte offset, within its group, of word k of the group's row r.
constexpr size_t interleaved_word_offset(size_t k, size_t r) noexcept {
    return 4 * (kInterleaveRows * k + r);
}

// Whether rows of `row_bytes` bytes can be interleaved (whole 32-bit words).
constexpr bool can_interleave(size_t row_bytes) noexcept {
    return row_bytes > 0 && row_bytes % 4 == 0;
}

// n_groups * 16 stored rows (row_bytes apart, any address) into the layout above.
inline void interleave_rows(const uint8_t* rows, size_t row_bytes, size_t n_groups,
                            uint8_t* out) noexcept {
    const size_t words = row_bytes / 4, group_bytes = kInterleaveRows * row_bytes;
    for (size_t g = 0; g < n_groups; ++g) {
        const uint8_t* src = rows + g * group_bytes;
        uint8_t* dst = out + g * group_bytes;
        for (size_t r = 0; r < kInterleaveRows; ++r)
            for (size_t k = 0; k < words; ++k)
                std::memcpy(dst + interleaved_word_offset(k, r), src + r * row_bytes + 4 * k, 4);
    }
}

// The reverse: n_groups groups back to 16 * n_groups stored rows, row_bytes apart.
inline void deinterleave_rows(const uint8_t* groups, size_t row_bytes, size_t n_groups,
                              uint8_t* out) noexcept {
    const size_t words = row_bytes / 4, group_bytes = kInterleaveRows * row_bytes;
    for (size_t g = 0; g < n_groups; ++g) {
        const uint8_t* src = groups + g * group_bytes;
        uint8_t* dst = out + g * group_bytes;
        for (size_t k = 0; k < words; ++k)
            for (size_t r = 0; r < kInterleaveRows; ++r)
                std::memcpy(dst + r * row_bytes + 4 * k, src + interleaved_word_offset(k, r), 4);
    }
}

inline void WeightMatrix::copy_row(size_t r, uint8_t* out) const noexcept {
    if (r >= interleaved_rows) {
        std::memcpy(out, row(r), row_bytes);
        return;
    }
    const uint8_t* group = data + r / kInterleaveRows * kInterleaveRows * row_bytes;
    const size_t lane = r % kInterleaveRows;
    for (size_t k = 0; k < row_bytes / 4; ++k)
        std::memcpy(out + 4 * k, group + interleaved_word_offset(k, lane), 4);
}

inline void WeightMatrix::copy_stored(uint8_t* out) const noexcept {
    const size_t grouped = interleaved_rows * row_bytes;
    deinterleave_rows(data, row_bytes, interleaved_rows / kInterleaveRows, out);
    std::memcpy(out + grouped, data + grouped, rows * row_bytes - grouped);
}

template <class ForGroups>
WeightMatrix WeightMatrix::interleaved_copy(uint8_t* out, ForGroups&& for_groups) const {
    const size_t groups = rows / kInterleaveRows, group_bytes = kInterleaveRows * row_bytes;
    for_groups(groups, [&](size_t begin, size_t end) {
        interleave_rows(data + begin * group_bytes, row_bytes, end - begin,
                        out + begin * group_bytes);
    });
    const size_t grouped = groups * group_bytes;
    std::memcpy(out + grouped, data + grouped, rows * row_bytes - grouped);
    WeightMatrix copy = *this;
    copy.data = out;
    copy.interleaved_rows = groups * kInterleaveRows;
    return copy;
}

SMOL_NAMESPACE_END
