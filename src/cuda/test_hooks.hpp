// Test hooks of the CUDA backend: each runs one GPU kernel (or its host
// emulation) on host data, so tests/test_cuda.cpp can compare it with the CPU
// reference. Not part of the public headers: only the tests include it.
#pragma once

#include <smol/cuda/backend.hpp>

SMOL_NAMESPACE_BEGIN

namespace cuda_detail {

// ---- GPU kernels on host data. All need a device. ----

// y[t][r] = W[r] . x[t] for n_tokens tokens (1: the decode mat-vec, more: the
// prefill mat-mat), with x quantized to int8 blocks of 32 on the device.
// W: rows x cols of `type` (Q4_K, Q5_K, Q6_K, Q8_0), x: [n_tokens][cols].
void run_matmul(GGMLType type, const void* weights, size_t rows, size_t cols, const float* x,
                size_t n_tokens, float* y);
// The same for `count` matrices of one type and width in one grouped launch
// (launch_matmuls): matrix i (rows[i] x cols) writes y[i] [n_tokens][rows[i]],
// adding to what y[i] holds when accumulate[i].
void run_matmul_group(GGMLType type, const void* const* weights, const size_t* rows, size_t count,
                      size_t cols, const float* x, size_t n_tokens, float* const* y,
                      const bool* accumulate);
// out[t] = dequantized row tokens[t] of the table (any type dequantize_row_device handles).
void run_embed(GGMLType type, const void* table, size_t rows, size_t cols, const int32_t* tokens,
               size_t n_tokens, float* out);
// out[t] = rmsnorm(x[t]) * weight, and the int8 blocks of that dequantized into out_quantized.
void run_rmsnorm(const float* x, const float* weight, size_t n_tokens, size_t cols, float eps,
                 float* out, float* out_quantized);
// out = silu(gate) * up elementwise over n values (n a multiple of 32).
void run_swiglu(const float* gate, const float* up, size_t n, float* out);
// RoPE (adjacent pairs, theta = pos * base^(-2i/rope_dims)) on q [n][heads][head_dim] and
// k [n][kv_heads][head_dim] in place for positions start_pos.. (use_rope false: only copies).
void run_rope(float* q, float* k, size_t n_tokens, size_t n_heads, size_t n_kv_heads,
              size_t head_dim, size_t rope_dims, float freq_base, size_t start_pos, bool use_rope);
// Causal GQA attention of n_tokens queries at positions start_pos.. over keys/values
// [n_kv_heads][start_pos + n_tokens][head_dim] (rounded to F16 as the cache stores them):
// out [n_tokens][n_heads][head_dim].
void run_attention(const float* q, const float* keys, const float* values, size_t n_tokens,
                   size_t start_pos, size_t n_heads, size_t n_kv_heads, size_t head_dim,
                   float* out);

// ---- Host emulation (no device needed): the very per-thread code the matmul
// and embedding kernels run, executed on the CPU, so the block decoding can be
// checked on any machine. ----

// W_row . x with x quantized to int8 blocks of 32 as the GPU does (cols % 256 == 0
// for the k-quants, % 32 for Q8_0).
float emulate_dot(GGMLType type, const void* row, size_t cols, const float* x);
// The chunk length from which run_matmul multiplies on the tensor-core tiles
// (kernels.cuh: TokenRun).
int tile_min_tokens();
// y[t][r] = W[r] . x[t] by the prefill's tensor-core tiles (tiles.cuh): every
// thread block's loads, fragments and epilogue, the warp's mma by the PTX
// fragment layout (W: rows x cols of a type with tiles, cols % 256 == 0).
void emulate_matmul_tiles(GGMLType type, const void* weights, size_t rows, size_t cols,
                          const float* x, size_t n_tokens, float* y);
// The device's dequantization of one row.
void emulate_dequantize_row(GGMLType type, const void* row, size_t cols, float* out);
// The device's quantization of activations read by `weight_type` matrices:
// codes q[n] and one scale per 32 values, d[n / 32] (n a multiple of 32).
void emulate_quantize_activations(GGMLType weight_type, const float* x, size_t n, int8_t* q,
                                  float* d);

// Backend::erase's rotation of one stored F16 key row (pairs <= 128), as the
// device runs it: rows[2i], rows[2i+1] rotated by cos[i], sin[i].
void emulate_shift_row(uint16_t* row, const float* cos, const float* sin, size_t pairs);

}  // namespace cuda_detail

SMOL_NAMESPACE_END
