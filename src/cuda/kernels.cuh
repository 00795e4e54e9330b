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
#include "tiles.cuh"

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
// Where layer `layer`'s keys (kind 0) or values (kind 1) of kv head `head` start
// in a sequence's cache.
SMOL_HD __half* cache_rows(const SeqCache& seq, int layer, int kind, int head, int n_kv_heads,
                           int head_dim) {
    return seq.kv + ((size_t(layer) * 2 + size_t(kind)) * size_t(n_kv_heads) + size_t(head)) *
                        size_t(seq.n_ctx) * size_t(head_dim);
}

// A weight matrix in device memory, packed as in the file.
struct DeviceMatrix {
    const uint8_t* data = nullptr;
    GGMLType type = GGMLType::F32;
    int rows = 0, cols = 0;
    size_t row_bytes = 0;
};

// True for the matrix types launch_matmuls handles.
bool matmul_supports(GGMLType type);
// True for the table types launch_embed handles.
bool embed_supports(GGMLType type);

// y[t][r] (+)= W[r] . x[t], t < n_tokens, for each target's matrix W and output
// y; act: [n_tokens][cols / 32] blocks of x. Several matrices that read the
// same activations (q, k, v; gate, up): consecutive ones of one type and
// width, up to kMaxMatmulParts, run as one launch (fewer, fuller waves in a
// decode step). On the mat-vec each gives the same bits as alone; the tiles
// split k by the launch's row tiles (tiles.cuh), so there a matrix's bits
// follow its group, which a forward pass never changes.
constexpr int kMaxMatmulParts = 3;
struct MatmulTarget {
    const DeviceMatrix* w;
    float* y;  // [n_tokens][w->rows]
    bool accumulate;
};
// Which kernels take which tokens. A chunk of at least tile_min_tokens()
// tokens (32; SMOL_CUDA_TILE_MIN overrides it for tuning runs, 0 for never,
// one value per process) multiplies on the tensor-core tiles
// (matmul_tiles.cu) and attends by tiles of keys (attention_tiles.cu), a
// shorter one takes the decode step's kernels. The two differ in float
// rounding only (the order sums are added in), so the choice is made per
// chunk, never per step: a chunk's results are the same whatever other
// sequences share its batched step. 32 lies above lookup decoding's longest
// verify chunk (LookupParams::kMaxDrafts + 1 = 17 rows), so drafts are checked
// with the decode step's arithmetic and lookup decoding's output stays the
// plain one bit for bit. A step's tokens come as runs of consecutive tokens of
// one path.
struct TokenRun {
    int begin, count;
    bool tiles;
};
int tile_min_tokens();
// The run of a chunk of `count` tokens starting at token `begin` of its step:
// the tiles from tile_min_tokens() tokens on (the one rule every caller uses).
inline TokenRun chunk_run(int begin, int count) {
    return TokenRun{begin, count, count >= tile_min_tokens()};
}
// The matmuls over each run: a run with `tiles` uses them where the type has
// tiles and cols is a multiple of 256 (tiles_support), else the mat-vec.
// scratch: the tiles' split-K partial sums, kSplitScratchPerToken floats per
// token of the longest tiles run (tiles.cuh); unused (may be null) otherwise.
void launch_matmuls(const MatmulTarget* targets, int count, const ActBlock* act,
                    const TokenRun* runs, int n_runs, float* scratch, cudaStream_t stream);
bool tiles_support(GGMLType type, int cols);
// The tiles' launch for up to kMaxMatmulParts matrices of one type and width
// (tiles_support true) over n_tokens tokens.
void launch_matmul_tiles(const MatmulTarget* targets, int count, const ActBlock* act, int n_tokens,
                         float* scratch, cudaStream_t stream);
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

// The same attention for the tokens of a tiles run (TokenRun: chunks of at
// least tile_min_tokens() tokens; attention_tiles.cu): a block takes 32 query
// rows (32 / group tokens of the `group` query heads that share a kv head) and
// walks their sequence's positions in tiles of 64 keys and values held in
// shared memory, with an online softmax per row. The rows of a block may
// belong to several sequences (chunks meet inside it): it walks each one's
// positions for its rows in turn. Each row's arithmetic follows from its own
// position alone. attention_tiles_supports: head_dim 64 or 128, group 1, 2, 4
// or 8 (else launch_attention).
bool attention_tiles_supports(int n_heads, int n_kv_heads, int head_dim);
void launch_attention_tiles(const float* q, const TokenSlot* slots, const SeqCache* seqs, int layer,
                            int n_tokens, int n_heads, int n_kv_heads, int head_dim, float* out,
                            cudaStream_t stream);
// The attention of a step's tokens by runs (TokenRun): the tiles for a tiles
// run where attention_tiles_supports, else launch_attention.
void launch_attention_runs(const float* q, const TokenSlot* slots, const SeqCache* seqs, int layer,
                           const TokenRun* runs, int n_runs, int n_heads, int n_kv_heads,
                           int head_dim, float* out, cudaStream_t stream);

}  // namespace cuda_detail
SMOL_NAMESPACE_END
