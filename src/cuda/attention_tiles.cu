// The prefill's attention: query rows in blocks of 32 against tiles of 64
// cached keys and values in shared memory (contract in kernels.cuh,
// launch_attention_tiles). The decode step's one-token attention is
// kernels.cu's attention_kernel.
//
// Per block (256 threads; thread (tr, tp) = (tid / 16, tid % 16)):
//   rows r = t * group + h (t < 32 / group tokens, h < group query heads of the
//   block's kv head), Q in shared memory as float [32][D];
//   per key tile of 64 positions p: scores s[r][p] = (q_r . k_p) * scale, each
//   thread 2 rows (2 tr, 2 tr + 1) x 4 positions (tp + 16 j), summed over d in
//   order; masked to the row's sequence and p <= its position; the row's
//   running max m and sum l (16 lanes share a row pair: shuffles within the
//   half-warp), weights w = exp(s - m) to shared memory, then
//   o[r][:] = o[r][:] * exp(m_old - m) + sum_p w[r][p] v_p, each thread the
//   same 2 rows x D / 16 dims;
//   out[r] = o[r] / l[r].
// A row's result depends on its own sequence and position only: a tile of
// keys all masked for it leaves its state exactly as it was.
#include <smol/detail/abi.hpp>
#include "kernels.cuh"
#include "launch.cuh"

#include <cmath>

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

namespace {

constexpr int kAttnRows = 32, kAttnKeys = 64, kAttnThreads = 256;
constexpr int kAttnPStride = kAttnRows + 4;  // floats per key of the weights

template <int D>
struct AttnLayout {
    static constexpr int kQStride = D + 4;   // floats
    static constexpr int kKVStride = D + 8;  // halves: rows 16-byte aligned, banks spread
    static constexpr size_t kQBytes = size_t(kAttnRows) * kQStride * sizeof(float);
    static constexpr size_t kKVBytes = size_t(kAttnKeys) * kKVStride * sizeof(__half);
    static constexpr size_t kPBytes = size_t(kAttnKeys) * kAttnPStride * sizeof(float);
    static constexpr size_t kBytes = kQBytes + 2 * kKVBytes + kPBytes;
};

// Four consecutive halves of shared memory (8-byte aligned) as floats.
__device__ __forceinline__ float4 load_half4(const __half* p) {
    const uint2 bits = *reinterpret_cast<const uint2*>(p);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&bits.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&bits.y));
    return make_float4(a.x, a.y, b.x, b.y);
}

template <int D>
__global__ void __launch_bounds__(kAttnThreads)
    attention_tiles_kernel(const float* q, const TokenSlot* slots, const SeqCache* seqs, int layer,
                           int n_tokens, int n_heads, int n_kv_heads, int group, float scale,
                           float* out) {
    await_previous_kernel();
    using L = AttnLayout<D>;
    constexpr int kDims = D / 16;  // output dims per thread
    extern __shared__ float4 shared_words[];
    float* qs = reinterpret_cast<float*>(shared_words);
    __half* ks = reinterpret_cast<__half*>(reinterpret_cast<char*>(qs) + L::kQBytes);
    __half* vs = reinterpret_cast<__half*>(reinterpret_cast<char*>(ks) + L::kKVBytes);
    float* ps = reinterpret_cast<float*>(reinterpret_cast<char*>(vs) + L::kKVBytes);

    const int tokens_per_block = kAttnRows / group;
    const int kv_head = int(blockIdx.x);
    const int token0 = int(blockIdx.y) * tokens_per_block;
    const int block_tokens = min(tokens_per_block, n_tokens - token0);
    const int tid = int(threadIdx.x), tr = tid / 16, tp = tid % 16;

    // Q rows into shared memory (zeros past the last token).
    for (int i = tid; i < kAttnRows * (D / 4); i += kAttnThreads) {
        const int r = i / (D / 4), c = i % (D / 4);
        const int t = r / group, head = kv_head * group + r % group;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (t < block_tokens)
            v = reinterpret_cast<const float4*>(q + (size_t(token0 + t) * n_heads + head) * D)[c];
        reinterpret_cast<float4*>(qs + r * L::kQStride)[c] = v;
    }
    // This thread's two rows.
    int row_pos[2], row_seq[2];
    float m[2], l[2], o[2][kDims];
    for (int i = 0; i < 2; ++i) {
        const int t = (2 * tr + i) / group;
        const bool valid = t < block_tokens;
        const TokenSlot slot = valid ? slots[token0 + t] : TokenSlot{-1, -1};
        row_pos[i] = slot.pos;
        row_seq[i] = slot.seq;
        m[i] = -INFINITY;
        l[i] = 0.0f;
        for (int k = 0; k < kDims; ++k) o[i][k] = 0.0f;
    }

    // One pass per sequence among the block's tokens (consecutive: a step
    // stages each chunk's tokens together).
    for (int first = 0; first < block_tokens;) {
        const int seq = slots[token0 + first].seq;
        int last = first, kv_end = 0;
        while (last < block_tokens && slots[token0 + last].seq == seq) {
            kv_end = max(kv_end, slots[token0 + last].pos + 1);
            ++last;
        }
        first = last;
        const SeqCache cache = seqs[seq];
        const __half* keys = cache_rows(cache, layer, 0, kv_head, n_kv_heads, D);
        const __half* values = cache_rows(cache, layer, 1, kv_head, n_kv_heads, D);
        for (int kv0 = 0; kv0 < kv_end; kv0 += kAttnKeys) {
            const int tile_keys = min(kAttnKeys, kv_end - kv0);
            __syncthreads();  // the previous tile's reads (and Q's stores) are done
            for (int i = tid; i < kAttnKeys * (D / 8); i += kAttnThreads) {
                const int p = i / (D / 8), c = i % (D / 8);
                int4 kbits = make_int4(0, 0, 0, 0), vbits = kbits;
                if (p < tile_keys) {
                    kbits = reinterpret_cast<const int4*>(keys + size_t(kv0 + p) * D)[c];
                    vbits = reinterpret_cast<const int4*>(values + size_t(kv0 + p) * D)[c];
                }
                reinterpret_cast<int4*>(ks + p * L::kKVStride)[c] = kbits;
                reinterpret_cast<int4*>(vs + p * L::kKVStride)[c] = vbits;
            }
            __syncthreads();
            // Scores of rows 2 tr, 2 tr + 1 at keys tp + 16 j.
            float s[2][4];
            for (int i = 0; i < 2; ++i)
                for (int j = 0; j < 4; ++j) s[i][j] = 0.0f;
            const float* q0 = qs + (2 * tr) * L::kQStride;
            const float* q1 = q0 + L::kQStride;
#pragma unroll 4
            for (int d = 0; d < D; d += 4) {
                const float4 a = *reinterpret_cast<const float4*>(q0 + d);
                const float4 b = *reinterpret_cast<const float4*>(q1 + d);
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const float4 k = load_half4(ks + (tp + 16 * j) * L::kKVStride + d);
                    s[0][j] = fmaf(a.x, k.x, s[0][j]);
                    s[0][j] = fmaf(a.y, k.y, s[0][j]);
                    s[0][j] = fmaf(a.z, k.z, s[0][j]);
                    s[0][j] = fmaf(a.w, k.w, s[0][j]);
                    s[1][j] = fmaf(b.x, k.x, s[1][j]);
                    s[1][j] = fmaf(b.y, k.y, s[1][j]);
                    s[1][j] = fmaf(b.z, k.z, s[1][j]);
                    s[1][j] = fmaf(b.w, k.w, s[1][j]);
                }
            }
            for (int i = 0; i < 2; ++i) {
                float top = -INFINITY;
                for (int j = 0; j < 4; ++j) {
                    const int p = kv0 + tp + 16 * j;
                    const bool seen = row_seq[i] == seq && p <= row_pos[i];
                    s[i][j] = seen ? s[i][j] * scale : -INFINITY;
                    top = fmaxf(top, s[i][j]);
                }
                for (int offset = 8; offset > 0; offset >>= 1)
                    top = fmaxf(top, __shfl_xor_sync(kFullMask, top, offset));
                const float new_max = fmaxf(m[i], top);
                // A row that sees no key of this tile keeps its state exactly.
                const float correction = new_max == -INFINITY ? 1.0f : expf(m[i] - new_max);
                float sum = 0.0f;
                for (int j = 0; j < 4; ++j) {
                    const float w = s[i][j] == -INFINITY ? 0.0f : expf(s[i][j] - new_max);
                    ps[(tp + 16 * j) * kAttnPStride + 2 * tr + i] = w;
                    sum += w;
                }
                for (int offset = 8; offset > 0; offset >>= 1)
                    sum += __shfl_xor_sync(kFullMask, sum, offset);
                l[i] = l[i] * correction + sum;
                m[i] = new_max;
                for (int k = 0; k < kDims; ++k) o[i][k] *= correction;
            }
            __syncthreads();  // every row's weights are in shared memory
            for (int p = 0; p < tile_keys; ++p) {
                const float2 w = *reinterpret_cast<const float2*>(ps + p * kAttnPStride + 2 * tr);
                const __half* v = vs + p * L::kKVStride + tp * kDims;
#pragma unroll
                for (int k = 0; k < kDims; k += 4) {
                    const float4 x = load_half4(v + k);
                    o[0][k] = fmaf(w.x, x.x, o[0][k]);
                    o[0][k + 1] = fmaf(w.x, x.y, o[0][k + 1]);
                    o[0][k + 2] = fmaf(w.x, x.z, o[0][k + 2]);
                    o[0][k + 3] = fmaf(w.x, x.w, o[0][k + 3]);
                    o[1][k] = fmaf(w.y, x.x, o[1][k]);
                    o[1][k + 1] = fmaf(w.y, x.y, o[1][k + 1]);
                    o[1][k + 2] = fmaf(w.y, x.z, o[1][k + 2]);
                    o[1][k + 3] = fmaf(w.y, x.w, o[1][k + 3]);
                }
            }
        }
    }
    for (int i = 0; i < 2; ++i) {
        const int r = 2 * tr + i, t = r / group;
        if (t >= block_tokens) continue;
        const int head = kv_head * group + r % group;
        const float inverse = 1.0f / l[i];
        float* row = out + (size_t(token0 + t) * n_heads + head) * D + tp * kDims;
        for (int k = 0; k < kDims; ++k) row[k] = o[i][k] * inverse;
    }
}

template <int D>
void attention_tiles_for(const float* q, const TokenSlot* slots, const SeqCache* seqs, int layer,
                         int n_tokens, int n_heads, int n_kv_heads, float* out,
                         cudaStream_t stream) {
    const int group = n_heads / n_kv_heads;
    const int tokens_per_block = kAttnRows / group;
    const size_t bytes = AttnLayout<D>::kBytes;
    // Past 48 KiB a kernel must be allowed its dynamic shared memory, per device.
    (void)cudaFuncSetAttribute(attention_tiles_kernel<D>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
    const dim3 grid{unsigned(n_kv_heads),
                    unsigned((n_tokens + tokens_per_block - 1) / tokens_per_block)};
    launch_smem(attention_tiles_kernel<D>, grid, kAttnThreads, bytes, stream, q, slots, seqs, layer,
                n_tokens, n_heads, n_kv_heads, group, 1.0f / sqrtf(float(D)), out);
}

}  // namespace

bool attention_tiles_supports(int n_heads, int n_kv_heads, int head_dim) {
    if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0) return false;
    const int group = n_heads / n_kv_heads;
    return (head_dim == 64 || head_dim == 128) &&
           (group == 1 || group == 2 || group == 4 || group == 8);
}

void launch_attention_tiles(const float* q, const TokenSlot* slots, const SeqCache* seqs, int layer,
                            int n_tokens, int n_heads, int n_kv_heads, int head_dim, float* out,
                            cudaStream_t stream) {
    if (head_dim == 128)
        attention_tiles_for<128>(q, slots, seqs, layer, n_tokens, n_heads, n_kv_heads, out, stream);
    else if (head_dim == 64)
        attention_tiles_for<64>(q, slots, seqs, layer, n_tokens, n_heads, n_kv_heads, out, stream);
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
