// Host-callable launchers of the CUDA backend's kernels (src/cuda/kernels.cu).
// Every launcher enqueues on `stream` and returns at once; shapes in the
// comments are row-major, t = token of the chunk.
//
// Positions are read from device memory (`start`: the chunk's first position)
// so that a captured decode graph stays valid from one token to the next.
#pragma once

#include <smol/detail/abi.hpp>

#include <cstddef>
#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <smol/quant/types.hpp>

#include "blocks.cuh"

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

// A weight matrix in device memory, packed as in the file.
struct DeviceMatrix {
    const uint8_t* data = nullptr;
    GGMLType type = GGMLType::F32;
    int rows = 0, cols = 0;
    size_t row_bytes = 0;
};

// True for the matrix types launch_matmul handles.
bool matmul_supports(GGMLType type);
// True for the table types launch_embed handles.
bool embed_supports(GGMLType type);

// y[t][r] (+)= W[r] . x[t], t < n_tokens; act: [n_tokens][cols / 32] blocks of x.
void launch_matmul(const DeviceMatrix& w, const ActBlock* act, int n_tokens, float* y,
                   bool accumulate, cudaStream_t stream);
// x[t][:] = row tokens[t] of the table, dequantized.
void launch_embed(const DeviceMatrix& table, const int32_t* tokens, int n_tokens, float* x,
                  cudaStream_t stream);
// act[t] = int8 blocks of rmsnorm(x[t]) * weight; out_float (optional) gets the float values.
void launch_rmsnorm_quantize(const float* x, const float* weight, int n_tokens, int cols, float eps,
                             ActBlock* act, float* out_float, cudaStream_t stream);
// act[t] = int8 blocks of x[t].
void launch_quantize(const float* x, int n_tokens, int cols, ActBlock* act, cudaStream_t stream);
// act[t] = int8 blocks of silu(gate[t]) * up[t]; out_float (optional) gets the float values.
void launch_swiglu_quantize(const float* gate, const float* up, int n_tokens, int cols,
                            ActBlock* act, float* out_float, cudaStream_t stream);
// out[n_blocks * 32] = d * q of each block (tests).
void launch_dequantize_act(const ActBlock* act, int n_blocks, float* out, cudaStream_t stream);

// For each token t at position *start + t: RoPE (when use_rope) on q [n][n_heads][head_dim]
// in place and on k [n][n_kv_heads][head_dim]; then k (rotated) and v [n][n_kv_heads][head_dim]
// are written as F16 to the cache rows k_cache/v_cache + head * head_stride + pos * head_dim.
// k_out (optional) receives the rotated k in float (tests).
void launch_rope_store(float* q, const float* k, const float* v, int n_tokens, const int* start,
                       const double* inverse_frequency, int rope_pairs, bool use_rope, int n_heads,
                       int n_kv_heads, int head_dim, __half* k_cache, __half* v_cache,
                       size_t head_stride, float* k_out, cudaStream_t stream);
// out[t][h][:] = causal softmax(q[t][h] . K[h / group][p] / sqrt(head_dim)) V over
// positions p <= *start + t; head_dim a multiple of 32, at most 256.
void launch_attention(const float* q, const __half* k_cache, const __half* v_cache,
                      size_t head_stride, const int* start, int n_tokens, int n_heads,
                      int n_kv_heads, int head_dim, float* out, cudaStream_t stream);

bool attention_supports(int head_dim);

}  // namespace cuda_detail
SMOL_NAMESPACE_END
