// The CUDA kernels of smol's GPU backend and their launchers, but for the
// quantized mat-vec / mat-mat (matmul.cu): embedding lookup, fused RMSNorm +
// activation quantization, SwiGLU + quantization, RoPE + KV-cache store, and
// causal GQA attention over the F16 cache. Shapes and contracts are in
// kernels.cuh; the block decoding is in blocks.cuh.
#include <smol/detail/abi.hpp>
#include "kernels.cuh"
#include "env.hpp"
#include "launch.cuh"

#include <cmath>
#include <cstdlib>

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

namespace {

// One warp quantizes one block of 32 values, lane i holding value i (the same
// arithmetic as quantize_act_block_host).
__device__ __forceinline__ void quantize_block_warp(float v, int lane, ActBlock* out,
                                                    ActRule rule) {
    const ActScale scale = act_scale(warp_max(fabsf(v)), rule);
    const float inverse = scale.compute != 0.0f ? 1.0f / scale.compute : 0.0f;
    const int q = act_code(v, inverse);
    const int sum = warp_sum_int(q);
    out->q[lane] = int8_t(q);
    if (lane == 0) {
        out->d = scale.stored;
        out->s = scale.stored * float(sum);
    }
}

// ---------------------------------------------------------------------------
// Embedding: one block per token, threads stride over the row.
template <class Format>
__global__ void embed_kernel(const uint8_t* table, size_t row_bytes, int cols,
                             const int32_t* tokens, float* x) {
    await_previous_kernel();
    const int t = blockIdx.x;
    const uint8_t* row = table + size_t(tokens[t]) * row_bytes;
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        x[size_t(t) * cols + i] = Format::element(row, i);
}

template <class Format>
void embed_for(const DeviceMatrix& table, const int32_t* tokens, int n_tokens, float* x,
               cudaStream_t stream) {
    launch(embed_kernel<Format>, n_tokens, 256, stream, table.data, table.row_bytes, table.cols,
           tokens, x);
}

// ---------------------------------------------------------------------------
// Quantizing kernels. RMSNorm needs its whole row first: one block of
// kNormThreads per row (a decode step has one row: the block is wide so that
// each warp has few activation blocks to quantize one after another), warp w
// quantizing activation blocks w, w + warps, ... The elementwise ones spread a
// row over blocks of kRowWarps activation blocks (grid: row chunks x tokens),
// so a single decode token still fills the GPU.
constexpr int kRowThreads = 256;
constexpr int kRowWarps = kRowThreads / 32;
constexpr int kNormThreads = 1024;
constexpr int kNormWarps = kNormThreads / 32;

__device__ float norm_block_sum(float v) {
    __shared__ float partial[kNormWarps];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    float total = 0;
    for (int w = 0; w < kNormWarps; ++w) total += partial[w];
    return total;
}

__global__ void __launch_bounds__(kNormThreads)
    rmsnorm_quantize_kernel(const float* x, const float* weight, const int* rows, int cols,
                            float eps, ActBlock* act, float* out_float, ActRule rule) {
    await_previous_kernel();
    const int t = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float* row = x + size_t(rows ? rows[t] : t) * cols;
    float squares = 0;
    for (int i = threadIdx.x; i < cols; i += kNormThreads) squares += row[i] * row[i];
    const float mean = norm_block_sum(squares) / float(cols);
    const float scale = 1.0f / sqrtf(mean + eps);
    const int blocks = cols / kActBlock;
    for (int b = warp; b < blocks; b += kNormWarps) {
        const int i = b * kActBlock + lane;
        const float v = (row[i] * scale) * weight[i];
        if (out_float) out_float[size_t(t) * cols + i] = v;
        quantize_block_warp(v, lane, act + size_t(t) * blocks + b, rule);
    }
}

__global__ void __launch_bounds__(kRowThreads)
    quantize_kernel(const float* x, int cols, ActBlock* act, ActRule rule) {
    await_previous_kernel();
    const int t = blockIdx.y, lane = threadIdx.x % 32;
    const int blocks = cols / kActBlock;
    const int b = blockIdx.x * kRowWarps + int(threadIdx.x) / 32;
    if (b >= blocks) return;  // whole warps
    quantize_block_warp(x[size_t(t) * cols + b * kActBlock + lane], lane,
                        act + size_t(t) * blocks + b, rule);
}

__global__ void __launch_bounds__(kRowThreads)
    swiglu_quantize_kernel(const float* gate, const float* up, int cols, ActBlock* act,
                           float* out_float, ActRule rule) {
    await_previous_kernel();
    const int t = blockIdx.y, lane = threadIdx.x % 32;
    const int blocks = cols / kActBlock;
    const int b = blockIdx.x * kRowWarps + int(threadIdx.x) / 32;
    if (b >= blocks) return;  // whole warps
    const size_t i = size_t(t) * cols + b * kActBlock + lane;
    const float g = gate[i];
    const float v = g / (1.0f + expf(-g)) * up[i];
    if (out_float) out_float[i] = v;
    quantize_block_warp(v, lane, act + size_t(t) * blocks + b, rule);
}

// The grid of the elementwise quantizing kernels for n_tokens rows of cols values.
dim3 row_chunks(int n_tokens, int cols) {
    const int blocks = cols / kActBlock;
    return dim3(unsigned((blocks + kRowWarps - 1) / kRowWarps), unsigned(n_tokens));
}

__global__ void dequantize_act_kernel(const ActBlock* act, int n_blocks, float* out) {
    await_previous_kernel();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_blocks * kActBlock) return;
    const ActBlock& b = act[i / kActBlock];
    out[i] = b.d * float(b.q[i % kActBlock]);
}

// ---------------------------------------------------------------------------
// RoPE on adjacent pairs, theta = pos * inverse_frequency[i] in double (as the
// CPU path), and the K/V store as F16. Grid: (tokens, n_heads + n_kv_heads):
// block y < n_heads rotates query head y in place; the others rotate key head
// y - n_heads and store its key and value rows.
__device__ __forceinline__ void rotate_pair(float& x0, float& x1, int pos,
                                            double inverse_frequency) {
    double sin_theta, cos_theta;
    sincos(double(pos) * inverse_frequency, &sin_theta, &cos_theta);
    const float c = float(cos_theta), s = float(sin_theta);
    const float r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
    x0 = r0;
    x1 = r1;
}

__global__ void rope_store_kernel(float* q, const float* k, const float* v, const TokenSlot* slots,
                                  const SeqCache* seqs, int layer, const double* inverse_frequency,
                                  int rope_pairs, float mscale, int use_rope, int n_heads,
                                  int n_kv_heads, int head_dim, float* k_out) {
    await_previous_kernel();
    const int t = blockIdx.x, y = blockIdx.y;
    const TokenSlot slot = slots[t];
    const int pos = slot.pos;
    const int half_dim = head_dim / 2;
    const int q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim;
    if (y < n_heads) {
        if (!use_rope) return;
        float* head_q = q + size_t(t) * q_dim + y * head_dim;
        for (int pair = threadIdx.x; pair < min(half_dim, rope_pairs); pair += blockDim.x) {
            rotate_pair(head_q[2 * pair], head_q[2 * pair + 1], pos, inverse_frequency[pair]);
            if (mscale != 1.0f) {  // YaRN (model/rope.hpp)
                head_q[2 * pair] *= mscale;
                head_q[2 * pair + 1] *= mscale;
            }
        }
        return;
    }
    const int head = y - n_heads;
    const SeqCache seq = seqs[slot.seq];
    const float* head_k = k + size_t(t) * kv_dim + head * head_dim;
    __half* k_row = cache_rows(seq, layer, 0, head, n_kv_heads, head_dim) + size_t(pos) * head_dim;
    for (int pair = threadIdx.x; pair < half_dim; pair += blockDim.x) {
        float x0 = head_k[2 * pair], x1 = head_k[2 * pair + 1];
        if (use_rope && pair < rope_pairs) {
            rotate_pair(x0, x1, pos, inverse_frequency[pair]);
            if (mscale != 1.0f) {
                x0 *= mscale;
                x1 *= mscale;
            }
        }
        if (k_out) {
            k_out[size_t(t) * kv_dim + head * head_dim + 2 * pair] = x0;
            k_out[size_t(t) * kv_dim + head * head_dim + 2 * pair + 1] = x1;
        }
        k_row[2 * pair] = __float2half_rn(x0);
        k_row[2 * pair + 1] = __float2half_rn(x1);
    }
    const float* head_v = v + size_t(t) * kv_dim + head * head_dim;
    __half* v_row = cache_rows(seq, layer, 1, head, n_kv_heads, head_dim) + size_t(pos) * head_dim;
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) v_row[d] = __float2half_rn(head_v[d]);
}

// ---------------------------------------------------------------------------
// Attention: one block per (query head, token). Each warp walks positions
// warp, warp + warps, ... with an online softmax (running max m, sum l and
// weighted values acc; lane holds head dims lane * DL .. lane * DL + DL - 1),
// then the warps' partial results are merged. Works for any context length.
constexpr int kAttentionWarps = 8;

template <int DL>
__global__ void __launch_bounds__(32 * kAttentionWarps)
    attention_kernel(const float* q, const TokenSlot* slots, const SeqCache* seqs, int layer,
                     int n_heads, int n_kv_heads, int group, float scale, float* out) {
    await_previous_kernel();
    constexpr int kHeadDim = 32 * DL;
    const int head = blockIdx.x, t = blockIdx.y;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const TokenSlot slot = slots[t];
    const SeqCache seq = seqs[slot.seq];
    const int positions = slot.pos + 1;  // causal: this token sees 0 .. its own position
    const int kv_head = head / group;
    const float* q_row = q + (size_t(t) * n_heads + head) * kHeadDim + lane * DL;
    float q_reg[DL], acc[DL];
#pragma unroll
    for (int j = 0; j < DL; ++j) {
        q_reg[j] = q_row[j];
        acc[j] = 0.0f;
    }
    const __half* keys = cache_rows(seq, layer, 0, kv_head, n_kv_heads, kHeadDim) + lane * DL;
    const __half* values = cache_rows(seq, layer, 1, kv_head, n_kv_heads, kHeadDim) + lane * DL;
    float running_max = -INFINITY, running_sum = 0.0f;
    for (int p = warp; p < positions; p += kAttentionWarps) {
        const __half* key = keys + size_t(p) * kHeadDim;
        float partial = 0.0f;
#pragma unroll
        for (int j = 0; j < DL; ++j) partial += q_reg[j] * __half2float(key[j]);
        const float score = warp_sum(partial) * scale;
        const float new_max = fmaxf(running_max, score);
        const float correction = expf(running_max - new_max);  // 0 on the first position
        const float weight = expf(score - new_max);
        running_sum = running_sum * correction + weight;
        const __half* value = values + size_t(p) * kHeadDim;
#pragma unroll
        for (int j = 0; j < DL; ++j) acc[j] = acc[j] * correction + weight * __half2float(value[j]);
        running_max = new_max;
    }
    __shared__ float warp_max_score[kAttentionWarps], warp_sum_weight[kAttentionWarps];
    __shared__ float warp_acc[kAttentionWarps][kHeadDim];
    if (lane == 0) {
        warp_max_score[warp] = running_max;
        warp_sum_weight[warp] = running_sum;
    }
#pragma unroll
    for (int j = 0; j < DL; ++j) warp_acc[warp][lane * DL + j] = acc[j];
    __syncthreads();
    float overall_max = -INFINITY;
    for (int w = 0; w < kAttentionWarps; ++w) overall_max = fmaxf(overall_max, warp_max_score[w]);
    float total = 0.0f;
    float factor[kAttentionWarps];
    for (int w = 0; w < kAttentionWarps; ++w) {
        factor[w] = expf(warp_max_score[w] - overall_max);  // 0 for warps that saw no position
        total += warp_sum_weight[w] * factor[w];
    }
    const float inverse_total = 1.0f / total;
    float* out_row = out + (size_t(t) * n_heads + head) * kHeadDim;
    for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x) {
        float o = 0.0f;
        for (int w = 0; w < kAttentionWarps; ++w) o += warp_acc[w][d] * factor[w];
        out_row[d] = o * inverse_total;
    }
}

}  // namespace

ActRule act_rule_for(const DeviceMatrix* const* readers, int n_readers) {
    for (int i = 0; i < n_readers; ++i)
        if (act_rule_of(readers[i]->type) != ActRule::q8_0) return ActRule::kquant;
    return n_readers > 0 ? ActRule::q8_0 : ActRule::kquant;
}

bool embed_supports(GGMLType type) {
    bool embeds = false;
    visit_weight_type<Format>(type, [&](auto format) { embeds = decltype(format)::embeds; });
    return embeds;
}

bool attention_supports(int head_dim) {
    return head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

void launch_embed(const DeviceMatrix& table, const int32_t* tokens, int n_tokens, float* x,
                  cudaStream_t stream) {
    // Other types are rejected at upload (embed_supports).
    visit_weight_type<Format>(table.type, [&](auto format) {
        using F = decltype(format);
        if constexpr (F::embeds) embed_for<typename F::type>(table, tokens, n_tokens, x, stream);
    });
}

void launch_rmsnorm_quantize(const float* x, const float* weight, const int* rows, int n_rows,
                             int cols, float eps, ActBlock* act, float* out_float, ActRule rule,
                             cudaStream_t stream) {
    launch(rmsnorm_quantize_kernel, n_rows, kNormThreads, stream, x, weight, rows, cols, eps, act,
           out_float, rule);
}

void launch_quantize(const float* x, int n_tokens, int cols, ActBlock* act, ActRule rule,
                     cudaStream_t stream) {
    launch(quantize_kernel, row_chunks(n_tokens, cols), kRowThreads, stream, x, cols, act, rule);
}

void launch_swiglu_quantize(const float* gate, const float* up, int n_tokens, int cols,
                            ActBlock* act, float* out_float, ActRule rule, cudaStream_t stream) {
    launch(swiglu_quantize_kernel, row_chunks(n_tokens, cols), kRowThreads, stream, gate, up, cols,
           act, out_float, rule);
}

void launch_dequantize_act(const ActBlock* act, int n_blocks, float* out, cudaStream_t stream) {
    const int n = n_blocks * kActBlock;
    launch(dequantize_act_kernel, (n + 255) / 256, 256, stream, act, n_blocks, out);
}

void launch_rope_store(float* q, const float* k, const float* v, int n_tokens,
                       const TokenSlot* slots, const SeqCache* seqs, int layer,
                       const double* inverse_frequency, int rope_pairs, float mscale, bool use_rope,
                       int n_heads, int n_kv_heads, int head_dim, float* k_out,
                       cudaStream_t stream) {
    const dim3 grid(unsigned(n_tokens), unsigned(n_heads + n_kv_heads));
    launch(rope_store_kernel, grid, 64, stream, q, k, v, slots, seqs, layer, inverse_frequency,
           rope_pairs, mscale, use_rope ? 1 : 0, n_heads, n_kv_heads, head_dim, k_out);
}

// Thread i: one pair of one row of one block of `rows` (the moved rows of
// every [layer][K, V][kv head] block, n_rows each); rotates it when the block
// holds the keys of a RoPE layer (shift_pair, blocks.cuh).
__global__ void shift_keys_kernel(__half* rows, long long n_blocks, int n_rows, int head_dim,
                                  KeyShift shift, int n_kv_heads, int nope_interval) {
    await_previous_kernel();
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long per_block = (long long)n_rows * shift.pairs;
    if (i >= n_blocks * per_block) return;
    const long long block = i / per_block;
    if (!shift_block_rotates(block, n_kv_heads, nope_interval)) return;
    const long long row = (i % per_block) / shift.pairs;
    const int pair = int(i % shift.pairs);
    shift_pair(rows + (block * n_rows + row) * head_dim, pair, shift);
}

void launch_shift_keys(__half* rows, size_t n_blocks, size_t n_rows, int head_dim,
                       const KeyShift& shift, int n_kv_heads, int nope_interval,
                       cudaStream_t stream) {
    const long long total = (long long)(n_blocks * n_rows) * shift.pairs;
    if (total == 0) return;
    const int threads = 256;
    launch(shift_keys_kernel, unsigned((total + threads - 1) / threads), threads, stream, rows,
           (long long)n_blocks, int(n_rows), head_dim, shift, n_kv_heads, nope_interval);
}

void launch_attention(const float* q, const TokenSlot* slots, const SeqCache* seqs, int layer,
                      int n_tokens, int n_heads, int n_kv_heads, int head_dim, float* out,
                      cudaStream_t stream) {
    const dim3 grid{unsigned(n_heads), unsigned(n_tokens)};
    const int group = n_heads / n_kv_heads;
    const float scale = 1.0f / sqrtf(float(head_dim));
    const int threads = 32 * kAttentionWarps;
    switch (head_dim) {
        case 32:
            launch(attention_kernel<1>, grid, threads, stream, q, slots, seqs, layer, n_heads,
                   n_kv_heads, group, scale, out);
            break;
        case 64:
            launch(attention_kernel<2>, grid, threads, stream, q, slots, seqs, layer, n_heads,
                   n_kv_heads, group, scale, out);
            break;
        case 128:
            launch(attention_kernel<4>, grid, threads, stream, q, slots, seqs, layer, n_heads,
                   n_kv_heads, group, scale, out);
            break;
        case 256:
            launch(attention_kernel<8>, grid, threads, stream, q, slots, seqs, layer, n_heads,
                   n_kv_heads, group, scale, out);
            break;
        default:
            break;  // rejected at upload (attention_supports)
    }
}

void launch_attention_runs(const float* q, const TokenSlot* slots, const SeqCache* seqs, int layer,
                           const TokenRun* runs, int n_runs, int n_heads, int n_kv_heads,
                           int head_dim, float* out, cudaStream_t stream) {
    // SMOL_CUDA_ATTN_TILES=0: the one-token kernel throughout (tuning runs).
    static const bool allowed = !env_off("SMOL_CUDA_ATTN_TILES");
    const bool tiles = allowed && attention_tiles_supports(n_heads, n_kv_heads, head_dim);
    for (int r = 0; r < n_runs; ++r) {
        const TokenRun& run = runs[r];
        if (run.count <= 0) continue;
        const size_t offset = size_t(run.begin) * size_t(n_heads) * size_t(head_dim);
        if (run.tiles && tiles)
            launch_attention_tiles(q + offset, slots + run.begin, seqs, layer, run.count, n_heads,
                                   n_kv_heads, head_dim, out + offset, stream);
        else
            launch_attention(q + offset, slots + run.begin, seqs, layer, run.count, n_heads,
                             n_kv_heads, head_dim, out + offset, stream);
    }
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
