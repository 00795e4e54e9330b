// The forward pass's run state, as llama2.c's RunState holds it: the work
// buffers of one pass of SmolLM3 (model/smollm3.hpp), named with their shapes,
// and the pool that keeps them between passes so that a warm decode step
// allocates nothing. SmolLM3 names them Row, Workspace and WorkspacePool.
#pragma once

#include "../../detail/abi.hpp"

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "../../kernels/kernels.hpp"
#include "../forward_zones.hpp"
#include "../kv_cache.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {

// One row of a pass: a token at position `pos` of the sequence whose keys
// and values live in *kv.
struct ForwardRow {
    KVCache* kv;
    size_t pos;
};

// The work buffers of a pass over m rows. They only grow (SmolLM3::grow),
// so a workspace that served a pass serves any smaller one without
// allocating; stale contents are never read (each step writes what it
// reads next).
struct ForwardWorkspace {
    explicit ForwardWorkspace(const kernels::KernelSet& k) : input(k) {}
    std::vector<ForwardRow> rows;        // [m]: each row's cache and position
    std::vector<float> x;                // [m][hidden]: the residual stream
    std::vector<float> normed;           // [m][hidden]: rmsnorm(x) * weight, the next
                                         // matrices' input (the head's: [wanted][hidden])
    std::vector<float> q;                // [m][n_heads][head_dim]
    std::vector<float> k, v;             // [m][n_kv_heads][head_dim]
    std::vector<float> attn;             // [m][n_heads][head_dim]: attention's output, Wo's input
    std::vector<float> out;              // [m][hidden]: Wo attn or Wdown h, added to x
    std::vector<float> gate, up;         // [m][ffn]; gate then holds silu(gate) * up
    std::vector<float> rope_cos;         // [m][rope_dims / 2]: cos(pos_r * frequency_i)
    std::vector<float> rope_sin;         // [m][rope_dims / 2]
    std::vector<float> scores;           // [threads][heads_per_kv][positions]: one softmax row
                                         // per query head of a GQA group (sized for n_ctx)
    std::vector<float> logits;           // [wanted][vocab]: the head's rows when several
                                         // chunks want logits (one chunk: its own buffer)
    std::vector<size_t> sequence_sizes;  // [chunks]: rows per chunk of the pass (or per
                                         // chunk's logits)
    QuantizedInput input;  // the current matrix input [m][cols], quantized to the format
                           // the matrix's type reads
    MatmulScratch matmul;  // matmul_batch's plans and tile buffers, kept so that a warm
                           // step (decode or prompt chunk) allocates nothing
    ForwardZoneTimes* zones = nullptr;  // where this pass's zones add up (null: untimed)

    // Bytes of the buffers that grow with the rows of a pass (all but the
    // scores, which follow the caches' context instead, and the quantized
    // input, about a quarter of gate/up).
    size_t row_bytes_held() const noexcept {
        size_t bytes =
            rows.capacity() * sizeof(ForwardRow) + sequence_sizes.capacity() * sizeof(size_t);
        for (const std::vector<float>* b :
             {&x, &normed, &q, &k, &v, &attn, &out, &gate, &up, &rope_cos, &rope_sin, &logits})
            bytes += b->capacity() * sizeof(float);
        return bytes;
    }
};

// The workspaces of the passes, shared by every thread that runs one: a
// step takes one (or makes one when none is idle: the first step, or more
// steps at once than ever before) and gives it back when done, so a warm
// decode step allocates nothing, while the buffers of a long prefill (a
// 512-row pass of the 3B file needs ~67 MB) are not held after it.
// Rule: at most kIdle workspaces wait here, and one whose row buffers
// exceed kKeepBytes is freed instead of kept (a decode step of 8 sequences
// of the 3B file uses ~5 MB, a prefill chunk of 256 rows ~34 MB); a step
// expected to exceed it gets a new workspace, so the idle ones stay as
// small as the decode steps that use them.
class ForwardWorkspacePool {
public:
    static constexpr size_t kIdle = 4;
    static constexpr size_t kKeepBytes = size_t(32) << 20;

    std::unique_ptr<ForwardWorkspace> take(const kernels::KernelSet& kernel_set, size_t bytes) {
        if (bytes <= kKeepBytes) {
            std::lock_guard<std::mutex> lock(mutex_);
            if (n_idle_ > 0) return std::move(idle_[--n_idle_]);
        }
        return std::unique_ptr<ForwardWorkspace>(new ForwardWorkspace(kernel_set));
    }

    void give_back(std::unique_ptr<ForwardWorkspace> workspace) noexcept {
        if (workspace->row_bytes_held() > kKeepBytes) return;  // freed here, outside the lock
        workspace->zones = nullptr;
        std::lock_guard<std::mutex> lock(mutex_);
        if (n_idle_ < kIdle) idle_[n_idle_++] = std::move(workspace);
    }

private:
    std::mutex mutex_;
    std::unique_ptr<ForwardWorkspace> idle_[kIdle];
    size_t n_idle_ = 0;
};

}  // namespace detail
SMOL_NAMESPACE_END
