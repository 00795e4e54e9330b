// The CUDA kernels of smol's GPU backend and their launchers: quantized
// mat-vec / mat-mat with int8 dot products (__dp4a), embedding lookup, fused
// RMSNorm + activation quantization, SwiGLU + quantization, RoPE + KV-cache
// store, and causal GQA attention over the F16 cache. Shapes and contracts are
// in kernels.cuh; the block decoding is in blocks.cuh.
#include <smol/detail/abi.hpp>
#include "kernels.cuh"

#include <cmath>

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

namespace {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}
__device__ __forceinline__ int warp_sum_int(int v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
    return v;
}

// One warp quantizes one block of 32 values, lane i holding value i (the same
// arithmetic as quantize_act_block_host).
__device__ __forceinline__ void quantize_block_warp(float v, int lane, ActBlock* out) {
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const int q = d > 0 ? __float2int_rn(v / d) : 0;
    const int sum = warp_sum_int(q);
    out->q[lane] = int8_t(q);
    if (lane == 0) {
        out->d = d;
        out->s = d * float(sum);
    }
}

// ---------------------------------------------------------------------------
// Quantized mat-vec / mat-mat. One warp per output row; lane l handles units
// l, l + 32, ... of the row (each unit's weight bytes are read once) and applies
// each decoded unit to the NT tokens of its column tile. Grid: (rows / warps,
// tokens / NT).
constexpr int kMatmulWarps = 4;

template <class Format, int NT>
__global__ void __launch_bounds__(32 * kMatmulWarps)
    matmul_kernel(const uint8_t* weights, size_t row_bytes, int rows, int units,
                  const ActBlock* act, int act_stride, int n_tokens, float* y, int accumulate) {
    const int row = blockIdx.x * kMatmulWarps + threadIdx.y;
    if (row >= rows) return;  // whole warps leave together: no barrier follows
    const int token0 = blockIdx.y * NT;
    const int count = min(NT, n_tokens - token0);
    const uint8_t* weight_row = weights + size_t(row) * row_bytes;
    const ActBlock* act0 = act + size_t(token0) * act_stride;
    float sum[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) sum[t] = 0.0f;
    for (int unit = threadIdx.x; unit < units; unit += 32) {
        const typename Format::Unit u = Format::load(weight_row, unit);
#pragma unroll
        for (int t = 0; t < NT; ++t)
            if (t < count) sum[t] += Format::dot(u, act0 + size_t(t) * act_stride);
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float total = warp_sum(sum[t]);
        if (threadIdx.x == 0 && t < count) {
            float* out = y + size_t(token0 + t) * rows + row;
            *out = accumulate ? *out + total : total;
        }
    }
}

template <class Format>
void matmul_for(const DeviceMatrix& w, const ActBlock* act, int n_tokens, float* y, bool accumulate,
                cudaStream_t stream) {
    const int units = (w.cols / Format::kBlockWeights) * Format::kUnits;
    const int act_stride = w.cols / kActBlock;
    const dim3 block(32, kMatmulWarps);
    const unsigned row_blocks = unsigned((w.rows + kMatmulWarps - 1) / kMatmulWarps);
    if (n_tokens == 1) {
        matmul_kernel<Format, 1><<<dim3(row_blocks, 1), block, 0, stream>>>(
            w.data, w.row_bytes, w.rows, units, act, act_stride, 1, y, accumulate ? 1 : 0);
    } else {
        constexpr int kTile = 8;
        const unsigned token_blocks = unsigned((n_tokens + kTile - 1) / kTile);
        matmul_kernel<Format, kTile><<<dim3(row_blocks, token_blocks), block, 0, stream>>>(
            w.data, w.row_bytes, w.rows, units, act, act_stride, n_tokens, y, accumulate ? 1 : 0);
    }
}

// ---------------------------------------------------------------------------
// Embedding: one block per token, threads stride over the row.
template <class Format>
__global__ void embed_kernel(const uint8_t* table, size_t row_bytes, int cols,
                             const int32_t* tokens, float* x) {
    const int t = blockIdx.x;
    const uint8_t* row = table + size_t(tokens[t]) * row_bytes;
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        x[size_t(t) * cols + i] = Format::element(row, i);
}

template <class Format>
void embed_for(const DeviceMatrix& table, const int32_t* tokens, int n_tokens, float* x,
               cudaStream_t stream) {
    embed_kernel<Format>
        <<<n_tokens, 256, 0, stream>>>(table.data, table.row_bytes, table.cols, tokens, x);
}

// ---------------------------------------------------------------------------
// Elementwise-then-quantize kernels: one block of kRowThreads per token; warp w
// quantizes activation blocks w, w + warps, ...
constexpr int kRowThreads = 256;
constexpr int kRowWarps = kRowThreads / 32;

__device__ float block_sum(float v) {
    __shared__ float partial[kRowWarps];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    float total = 0;
    for (int w = 0; w < kRowWarps; ++w) total += partial[w];
    return total;
}

__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_quantize_kernel(const float* x, const float* weight, int cols, float eps, ActBlock* act,
                            float* out_float) {
    const int t = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float* row = x + size_t(t) * cols;
    float squares = 0;
    for (int i = threadIdx.x; i < cols; i += kRowThreads) squares += row[i] * row[i];
    const float mean = block_sum(squares) / float(cols);
    const float scale = 1.0f / sqrtf(mean + eps);
    const int blocks = cols / kActBlock;
    for (int b = warp; b < blocks; b += kRowWarps) {
        const int i = b * kActBlock + lane;
        const float v = (row[i] * scale) * weight[i];
        if (out_float) out_float[size_t(t) * cols + i] = v;
        quantize_block_warp(v, lane, act + size_t(t) * blocks + b);
    }
}

__global__ void __launch_bounds__(kRowThreads)
    quantize_kernel(const float* x, int cols, ActBlock* act) {
    const int t = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int blocks = cols / kActBlock;
    for (int b = warp; b < blocks; b += kRowWarps)
        quantize_block_warp(x[size_t(t) * cols + b * kActBlock + lane], lane,
                            act + size_t(t) * blocks + b);
}

__global__ void __launch_bounds__(kRowThreads)
    swiglu_quantize_kernel(const float* gate, const float* up, int cols, ActBlock* act,
                           float* out_float) {
    const int t = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int blocks = cols / kActBlock;
    for (int b = warp; b < blocks; b += kRowWarps) {
        const size_t i = size_t(t) * cols + b * kActBlock + lane;
        const float g = gate[i];
        const float v = g / (1.0f + expf(-g)) * up[i];
        if (out_float) out_float[i] = v;
        quantize_block_warp(v, lane, act + size_t(t) * blocks + b);
    }
}

__global__ void dequantize_act_kernel(const ActBlock* act, int n_blocks, float* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_blocks * kActBlock) return;
    const ActBlock& b = act[i / kActBlock];
    out[i] = b.d * float(b.q[i % kActBlock]);
}

// ---------------------------------------------------------------------------
// RoPE on adjacent pairs, theta = pos * inverse_frequency[i] in double (as the
// CPU path), and the K/V store as F16. One block per token.
__global__ void rope_store_kernel(float* q, const float* k, const float* v, const int* start,
                                  const double* inverse_frequency, int rope_pairs, int use_rope,
                                  int n_heads, int n_kv_heads, int head_dim, __half* k_cache,
                                  __half* v_cache, size_t head_stride, float* k_out) {
    const int t = blockIdx.x;
    const int pos = *start + t;
    const int half_dim = head_dim / 2;
    const int q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim;
    for (int i = threadIdx.x; i < n_heads * half_dim; i += blockDim.x) {
        const int head = i / half_dim, pair = i % half_dim;
        if (!use_rope || pair >= rope_pairs) continue;
        double sin_theta, cos_theta;
        sincos(double(pos) * inverse_frequency[pair], &sin_theta, &cos_theta);
        const float c = float(cos_theta), s = float(sin_theta);
        float* p = q + size_t(t) * q_dim + head * head_dim + 2 * pair;
        const float x0 = p[0], x1 = p[1];
        p[0] = x0 * c - x1 * s;
        p[1] = x0 * s + x1 * c;
    }
    for (int i = threadIdx.x; i < n_kv_heads * half_dim; i += blockDim.x) {
        const int head = i / half_dim, pair = i % half_dim;
        const float* p = k + size_t(t) * kv_dim + head * head_dim + 2 * pair;
        float x0 = p[0], x1 = p[1];
        if (use_rope && pair < rope_pairs) {
            double sin_theta, cos_theta;
            sincos(double(pos) * inverse_frequency[pair], &sin_theta, &cos_theta);
            const float c = float(cos_theta), s = float(sin_theta);
            const float r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
            x0 = r0;
            x1 = r1;
        }
        if (k_out) {
            k_out[size_t(t) * kv_dim + head * head_dim + 2 * pair] = x0;
            k_out[size_t(t) * kv_dim + head * head_dim + 2 * pair + 1] = x1;
        }
        __half* dst = k_cache + head * head_stride + size_t(pos) * head_dim + 2 * pair;
        dst[0] = __float2half_rn(x0);
        dst[1] = __float2half_rn(x1);
    }
    for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
        const int head = i / head_dim, d = i % head_dim;
        v_cache[head * head_stride + size_t(pos) * head_dim + d] =
            __float2half_rn(v[size_t(t) * kv_dim + i]);
    }
}

// ---------------------------------------------------------------------------
// Attention: one block per (query head, token). Each warp walks positions
// warp, warp + warps, ... with an online softmax (running max m, sum l and
// weighted values acc; lane holds head dims lane * DL .. lane * DL + DL - 1),
// then the warps' partial results are merged. Works for any context length.
constexpr int kAttentionWarps = 8;

template <int DL>
__global__ void __launch_bounds__(32 * kAttentionWarps)
    attention_kernel(const float* q, const __half* k_cache, const __half* v_cache,
                     size_t head_stride, const int* start, int n_heads, int group, float scale,
                     float* out) {
    constexpr int kHeadDim = 32 * DL;
    const int head = blockIdx.x, t = blockIdx.y;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int positions = *start + t + 1;  // causal: this token sees 0 .. start + t
    const int kv_head = head / group;
    const float* q_row = q + (size_t(t) * n_heads + head) * kHeadDim + lane * DL;
    float q_reg[DL], acc[DL];
#pragma unroll
    for (int j = 0; j < DL; ++j) {
        q_reg[j] = q_row[j];
        acc[j] = 0.0f;
    }
    const __half* keys = k_cache + kv_head * head_stride + lane * DL;
    const __half* values = v_cache + kv_head * head_stride + lane * DL;
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

bool matmul_supports(GGMLType type) {
    return type == GGMLType::Q4_K || type == GGMLType::Q5_K || type == GGMLType::Q6_K ||
           type == GGMLType::Q8_0;
}

bool embed_supports(GGMLType type) {
    return matmul_supports(type) || type == GGMLType::F32 || type == GGMLType::F16 ||
           type == GGMLType::BF16;
}

bool attention_supports(int head_dim) {
    return head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

void launch_matmul(const DeviceMatrix& w, const ActBlock* act, int n_tokens, float* y,
                   bool accumulate, cudaStream_t stream) {
    switch (w.type) {
        case GGMLType::Q4_K:
            matmul_for<FormatQ4K>(w, act, n_tokens, y, accumulate, stream);
            break;
        case GGMLType::Q5_K:
            matmul_for<FormatQ5K>(w, act, n_tokens, y, accumulate, stream);
            break;
        case GGMLType::Q6_K:
            matmul_for<FormatQ6K>(w, act, n_tokens, y, accumulate, stream);
            break;
        case GGMLType::Q8_0:
            matmul_for<FormatQ8_0>(w, act, n_tokens, y, accumulate, stream);
            break;
        default:
            break;  // rejected at upload (matmul_supports)
    }
}

void launch_embed(const DeviceMatrix& table, const int32_t* tokens, int n_tokens, float* x,
                  cudaStream_t stream) {
    switch (table.type) {
        case GGMLType::Q4_K:
            embed_for<FormatQ4K>(table, tokens, n_tokens, x, stream);
            break;
        case GGMLType::Q5_K:
            embed_for<FormatQ5K>(table, tokens, n_tokens, x, stream);
            break;
        case GGMLType::Q6_K:
            embed_for<FormatQ6K>(table, tokens, n_tokens, x, stream);
            break;
        case GGMLType::Q8_0:
            embed_for<FormatQ8_0>(table, tokens, n_tokens, x, stream);
            break;
        case GGMLType::F32:
            embed_for<FormatF32>(table, tokens, n_tokens, x, stream);
            break;
        case GGMLType::F16:
            embed_for<FormatF16>(table, tokens, n_tokens, x, stream);
            break;
        case GGMLType::BF16:
            embed_for<FormatBF16>(table, tokens, n_tokens, x, stream);
            break;
        default:
            break;  // rejected at upload (embed_supports)
    }
}

void launch_rmsnorm_quantize(const float* x, const float* weight, int n_tokens, int cols, float eps,
                             ActBlock* act, float* out_float, cudaStream_t stream) {
    rmsnorm_quantize_kernel<<<n_tokens, kRowThreads, 0, stream>>>(x, weight, cols, eps, act,
                                                                  out_float);
}

void launch_quantize(const float* x, int n_tokens, int cols, ActBlock* act, cudaStream_t stream) {
    quantize_kernel<<<n_tokens, kRowThreads, 0, stream>>>(x, cols, act);
}

void launch_swiglu_quantize(const float* gate, const float* up, int n_tokens, int cols,
                            ActBlock* act, float* out_float, cudaStream_t stream) {
    swiglu_quantize_kernel<<<n_tokens, kRowThreads, 0, stream>>>(gate, up, cols, act, out_float);
}

void launch_dequantize_act(const ActBlock* act, int n_blocks, float* out, cudaStream_t stream) {
    const int n = n_blocks * kActBlock;
    dequantize_act_kernel<<<(n + 255) / 256, 256, 0, stream>>>(act, n_blocks, out);
}

void launch_rope_store(float* q, const float* k, const float* v, int n_tokens, const int* start,
                       const double* inverse_frequency, int rope_pairs, bool use_rope, int n_heads,
                       int n_kv_heads, int head_dim, __half* k_cache, __half* v_cache,
                       size_t head_stride, float* k_out, cudaStream_t stream) {
    rope_store_kernel<<<n_tokens, 128, 0, stream>>>(q, k, v, start, inverse_frequency, rope_pairs,
                                                    use_rope ? 1 : 0, n_heads, n_kv_heads, head_dim,
                                                    k_cache, v_cache, head_stride, k_out);
}

void launch_attention(const float* q, const __half* k_cache, const __half* v_cache,
                      size_t head_stride, const int* start, int n_tokens, int n_heads,
                      int n_kv_heads, int head_dim, float* out, cudaStream_t stream) {
    const dim3 grid{unsigned(n_heads), unsigned(n_tokens)};
    const int group = n_heads / n_kv_heads;
    const float scale = 1.0f / sqrtf(float(head_dim));
    const int threads = 32 * kAttentionWarps;
    switch (head_dim) {
        case 32:
            attention_kernel<1><<<grid, threads, 0, stream>>>(q, k_cache, v_cache, head_stride,
                                                              start, n_heads, group, scale, out);
            break;
        case 64:
            attention_kernel<2><<<grid, threads, 0, stream>>>(q, k_cache, v_cache, head_stride,
                                                              start, n_heads, group, scale, out);
            break;
        case 128:
            attention_kernel<4><<<grid, threads, 0, stream>>>(q, k_cache, v_cache, head_stride,
                                                              start, n_heads, group, scale, out);
            break;
        case 256:
            attention_kernel<8><<<grid, threads, 0, stream>>>(q, k_cache, v_cache, head_stride,
                                                              start, n_heads, group, scale, out);
            break;
        default:
            break;  // rejected at upload (attention_supports)
    }
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
