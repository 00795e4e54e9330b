// Host-callable launchers of the CUDA backend's kernels (src/cuda/kernels.cu).
// Every launcher enqueues on `stream` and returns at once; shapes in the
// comments are row-major, t = token of the step.
//
// A step may hold the tokens of several sequences (a batched step: each has its
// own cache and positions), so the kernels that touch the cache read, per
// token, a TokenSlot (its position and sequence) and, per sequence, a SeqCache
// from device memory. That also keeps a captured decode graph valid from one
// token to the next: only the memory it reads changes.
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

// Token t of a step: its position in its sequence, and which sequence.
struct TokenSlot {
    int pos;
    int seq;
};

// One sequence's cache: F16 [layer][K, V][kv head][n_ctx][head_dim] (the CPU
// KVCache's layout), so layer l's keys of head h start at
// kv + ((2 l + 0) * n_kv_heads + h) * n_ctx * head_dim.
struct SeqCache {
    __half* kv;
    long long n_ctx;
};

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
// The same for several matrices that read the same activations (q, k, v; gate,
// up): consecutive ones of one type and width, up to kMaxMatmulParts, run as
// one launch (fewer, fuller waves in a decode step); each gives the same bits
// as launch_matmul alone.
constexpr int kMaxMatmulParts = 3;
struct MatmulTarget {
    const DeviceMatrix* w;
    float* y;  // [n_tokens][w->rows]
    bool accumulate;
};
void launch_matmuls(const MatmulTarget* targets, int count, const ActBlock* act, int n_tokens,
                    cudaStream_t stream);
// x[t][:] = row tokens[t] of the table, dequantized.
void launch_embed(const DeviceMatrix& table, const int32_t* tokens, int n_tokens, float* x,
                  cudaStream_t stream);
// The activation rule of the matrices that read a quantized activation
// (blocks.cuh): q8_0 when all of them are Q8_0, else the K-quants' rule.
ActRule act_rule_for(const DeviceMatrix* const* readers, int n_readers);

// act[r] = int8 blocks of rmsnorm(x[rows[r]]) * weight for r < n_rows (rows null: row r);
// out_float (optional) gets the float values.
void launch_rmsnorm_quantize(const float* x, const float* weight, const int* rows, int n_rows,
                             int cols, float eps, ActBlock* act, float* out_float, ActRule rule,
                             cudaStream_t stream);
// act[t] = int8 blocks of x[t].
void launch_quantize(const float* x, int n_tokens, int cols, ActBlock* act, ActRule rule,
                     cudaStream_t stream);
// act[t] = int8 blocks of silu(gate[t]) * up[t]; out_float (optional) gets the float values.
void launch_swiglu_quantize(const float* gate, const float* up, int n_tokens, int cols,
                            ActBlock* act, float* out_float, ActRule rule, cudaStream_t stream);
// out[n_blocks * 32] = d * q of each block (tests).
void launch_dequantize_act(const ActBlock* act, int n_blocks, float* out, cudaStream_t stream);

// For each token t (slot[t]: position p, sequence s): RoPE (when use_rope) on
// q [n][n_heads][head_dim] in place and on k [n][n_kv_heads][head_dim]; then k
// (rotated) and v [n][n_kv_heads][head_dim] are written as F16 to row p of
// layer `layer` of sequence s's cache. k_out (optional) receives the rotated k
// in float (tests). mscale: YaRN's magnitude scale of rotated pairs
// (model/rope.hpp; 1 for plain RoPE, which then rounds as before).
void launch_rope_store(float* q, const float* k, const float* v, int n_tokens,
                       const TokenSlot* slots, const SeqCache* seqs, int layer,
                       const double* inverse_frequency, int rope_pairs, float mscale, bool use_rope,
                       int n_heads, int n_kv_heads, int head_dim, float* k_out,
                       cudaStream_t stream);
// Backend::erase's rotation: `rows` holds n_rows moved rows of each of the
// n_blocks [layer][K, V][kv head] blocks of a cache (F16 [n_blocks][n_rows]
// [head_dim]); the key rows of RoPE layers are rotated by `shift` in place.
void launch_shift_keys(__half* rows, size_t n_blocks, size_t n_rows, int head_dim,
                       const KeyShift& shift, int n_kv_heads, int nope_interval,
                       cudaStream_t stream);
// out[t][h][:] = causal softmax(q[t][h] . K[h / group][p] / sqrt(head_dim)) V over the
// positions p <= slot[t].pos of layer `layer` of its sequence's cache; head_dim a
// multiple of 32, at most 256.
void launch_attention(const float* q, const TokenSlot* slots, const SeqCache* seqs, int layer,
                      int n_tokens, int n_heads, int n_kv_heads, int head_dim, float* out,
                      cudaStream_t stream);

bool attention_supports(int head_dim);

}  // namespace cuda_detail
SMOL_NAMESPACE_END
