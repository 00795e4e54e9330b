// Test-only float reference of the SmolLM3 forward pass, written with Eigen
// over fully dequantized weights: plain, obviously correct and slow. It shares
// nothing with the fast path but the GGUF reader, Config and dequantize_row
// (each tested on its own). It must itself match the fixture goldens; then it
// checks the fast path on small models the tests generate.
//
// Per position t (pos = start + t), per layer:
//   a   = rmsnorm(x) * attn_norm
//   q   = Wq a [heads][head_dim]; k = Wk a, v = Wv a [kv_heads][head_dim]
//   RoPE on q and k (adjacent pairs, theta_i = pos * base^(-2i/rope_dims)) unless NoPE layer
//   o_h = sum_{p <= pos} softmax_p(q_h . k_{h/group, p} / sqrt(head_dim)) v_{h/group, p}
//   x  += Wo o
//   f   = rmsnorm(x) * ffn_norm;  x += Wdown (silu(Wgate f) * Wup f)
// logits = lm_head (rmsnorm(x) * output_norm)
//
// Activation rounding: a quantized-weight engine feeds each matrix its input
// quantized to 8 bits (ours: Q8_K32 for Q4_K/Q5_K/Q6_K, i.e. per 32 values a
// bf16-rounded scale max|x| / 127; Q8_0 for Q8_0). By default the reference
// stays in float (it meets the goldens' tolerances). With round_activations =
// true it rounds each matrix input the way our kernels do (written out here
// for the K-quants, following the rule in kernels/activations.hpp; the
// reference quantizer for Q8_0), which makes it a tight cross-check of the
// fast path's arithmetic on generated models.
#pragma once

#include <Eigen/Dense>

#include <smol/gguf/gguf.hpp>
#include <smol/model/config.hpp>
#include <smol/quant/reference.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace smol_test {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

class ReferenceModel {
public:
    // The keys and values of every position run so far: per layer, [positions][kv_dim] (F32).
    struct Cache {
        std::vector<RowMatrix> keys, values;
        size_t size = 0;
    };

    explicit ReferenceModel(const smol::gguf::File& file, bool round_activations = false)
        : config_(smol::detail::value_or_fail(smol::Config::try_from_gguf(file))),
          round_activations_(round_activations) {
        const smol::Config& c = config_;
        token_embd_ = matrix(file, "token_embd.weight");
        tied_ = file.find_tensor("output.weight") == nullptr;
        if (!tied_) output_ = matrix(file, "output.weight");
        output_norm_ = dequantized(file, "output_norm.weight");
        for (size_t i = 0; i < c.n_layers; ++i) {
            const std::string b = "blk." + std::to_string(i) + ".";
            Layer l;
            l.attn_norm = dequantized(file, b + "attn_norm.weight");
            l.wq = matrix(file, b + "attn_q.weight");
            l.wk = matrix(file, b + "attn_k.weight");
            l.wv = matrix(file, b + "attn_v.weight");
            l.wo = matrix(file, b + "attn_output.weight");
            l.ffn_norm = dequantized(file, b + "ffn_norm.weight");
            l.w_gate = matrix(file, b + "ffn_gate.weight");
            l.w_up = matrix(file, b + "ffn_up.weight");
            l.w_down = matrix(file, b + "ffn_down.weight");
            layers_.push_back(std::move(l));
        }
    }

    const smol::Config& config() const { return config_; }

    Cache make_cache() const {
        Cache cache;
        cache.keys.resize(config_.n_layers);
        cache.values.resize(config_.n_layers);
        return cache;
    }

    // Runs tokens at positions cache.size.. and calls on_logits(index, logits[vocab])
    // for every position (all_logits) or only the last one.
    void forward(const std::vector<int32_t>& tokens, Cache& cache, bool all_logits,
                 const std::function<void(size_t, const float*)>& on_logits) const {
        const smol::Config& c = config_;
        const size_t n = tokens.size(), start = cache.size, hd = c.head_dim;
        RowMatrix x(n, c.hidden);  // residual stream [n][hidden]
        for (size_t t = 0; t < n; ++t) x.row(t) = token_embd_.values.row(tokens[t]);

        for (size_t li = 0; li < c.n_layers; ++li) {
            const Layer& l = layers_[li];
            const RowMatrix a = rmsnorm(x, l.attn_norm);
            RowMatrix q = apply(a, l.wq);  // [n][heads * hd]
            RowMatrix k = apply(a, l.wk);  // [n][kv_heads * hd]
            const RowMatrix v = apply(a, l.wv);
            if (c.layer_uses_rope(li)) {
                for (size_t t = 0; t < n; ++t) {
                    for (size_t h = 0; h < c.n_heads; ++h) rope(&q(t, h * hd), start + t);
                    for (size_t h = 0; h < c.n_kv_heads; ++h) rope(&k(t, h * hd), start + t);
                }
            }
            // Append this chunk's keys and values.
            RowMatrix& keys = cache.keys[li];
            RowMatrix& values = cache.values[li];
            keys.conservativeResize(start + n, c.kv_dim());
            values.conservativeResize(start + n, c.kv_dim());
            keys.bottomRows(n) = k;
            values.bottomRows(n) = v;

            RowMatrix attn(n, c.q_dim());
            const float scale = 1.0f / std::sqrt(float(hd));
            for (size_t t = 0; t < n; ++t) {
                const size_t positions = start + t + 1;  // causal: 0..pos
                for (size_t h = 0; h < c.n_heads; ++h) {
                    const size_t kvh = h / c.heads_per_kv();
                    const auto k_rows = keys.block(0, kvh * hd, positions, hd);  // [positions][hd]
                    const auto v_rows =
                        values.block(0, kvh * hd, positions, hd);  // [positions][hd]
                    const Eigen::VectorXf q_h = q.row(t).segment(h * hd, hd).transpose();
                    const Eigen::VectorXf scores = (k_rows * q_h) * scale;
                    Eigen::VectorXf w = (scores.array() - scores.maxCoeff()).exp();
                    w /= w.sum();
                    attn.row(t).segment(h * hd, hd) = (v_rows.transpose() * w).transpose();
                }
            }
            x += apply(attn, l.wo);

            const RowMatrix f = rmsnorm(x, l.ffn_norm);
            RowMatrix gate = apply(f, l.w_gate);
            const RowMatrix up = apply(f, l.w_up);
            gate = (gate.array() / (1.0f + (-gate.array()).exp())) * up.array();  // silu(gate) * up
            x += apply(gate, l.w_down);
        }
        cache.size = start + n;

        const Matrix& head = tied_ ? token_embd_ : output_;
        const size_t first = all_logits ? 0 : n - 1;
        constexpr size_t kBlock = 32;  // positions per LM-head product (bounded memory)
        for (size_t b = first; b < n; b += kBlock) {
            const size_t m = std::min(kBlock, n - b);
            const RowMatrix h = rmsnorm(x.middleRows(b, m), output_norm_);
            const RowMatrix logits = apply(h, head);  // [m][vocab]
            for (size_t i = 0; i < m; ++i) on_logits(b + i, logits.row(i).data());
        }
    }

    // Convenience: logits of the last position.
    std::vector<float> last_logits(const std::vector<int32_t>& tokens, Cache& cache) const {
        std::vector<float> out(config_.vocab_size);
        forward(tokens, cache, false, [&](size_t, const float* logits) {
            std::copy(logits, logits + config_.vocab_size, out.begin());
        });
        return out;
    }

private:
    // A weight matrix dequantized, with the type it was stored in.
    struct Matrix {
        RowMatrix values;  // [rows = outputs][cols = inputs]
        smol::GGMLType type = smol::GGMLType::F32;
    };
    struct Layer {
        RowMatrix attn_norm, ffn_norm;
        Matrix wq, wk, wv, wo, w_gate, w_up, w_down;
    };

    // A tensor as float [rows][cols] (a vector becomes [1][n]).
    static RowMatrix dequantized(const smol::gguf::File& file, const std::string& name) {
        const smol::gguf::TensorInfo& t = file.tensor(name);
        const size_t cols = size_t(t.dims[0]), rows = size_t(t.rows());
        RowMatrix m(rows, cols);
        const size_t row_bytes = smol::row_bytes(t.type, cols);
        for (size_t r = 0; r < rows; ++r)
            smol::dequantize_row(t.type, t.data + r * row_bytes, m.row(r).data(), cols);
        return m;
    }

    static Matrix matrix(const smol::gguf::File& file, const std::string& name) {
        return Matrix{dequantized(file, name), file.tensor(name).type};
    }

    // x [n][cols] times w^T: [n][rows], x first rounded to w's activation format.
    RowMatrix apply(const RowMatrix& x, const Matrix& w) const {
        const bool k_quant = w.type == smol::GGMLType::Q4_K || w.type == smol::GGMLType::Q5_K ||
                             w.type == smol::GGMLType::Q6_K;
        const bool q8_0 = w.type == smol::GGMLType::Q8_0;
        if (!round_activations_ || (!k_quant && !q8_0)) return x * w.values.transpose();
        RowMatrix rounded(x.rows(), x.cols());
        const size_t cols = size_t(x.cols());
        std::vector<uint8_t> packed(smol::row_bytes(smol::GGMLType::Q8_0, cols));
        for (Eigen::Index t = 0; t < x.rows(); ++t) {
            const Eigen::RowVectorXf row = x.row(t);
            float* out = rounded.row(t).data();
            if (q8_0) {
                smol::quantize_row(smol::GGMLType::Q8_0, row.data(), packed.data(), cols);
                smol::dequantize_row(smol::GGMLType::Q8_0, packed.data(), out, cols);
                continue;
            }
            // Q8_K32: per 32 values d = bf16(max|x| / 127), q = round_half_even(x / d) in [-127,
            // 127].
            for (size_t b = 0; b < cols; b += 32) {
                float max_abs = 0.0f;
                for (size_t i = b; i < b + 32; ++i)
                    max_abs = std::max(max_abs, std::fabs(row[Eigen::Index(i)]));
                const float d = smol::bf16_to_fp32(smol::fp32_to_bf16(max_abs / 127.0f));
                const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
                for (size_t i = b; i < b + 32; ++i) {
                    const float q = std::nearbyint(row[Eigen::Index(i)] * inverse);
                    out[i] = d * std::min(127.0f, std::max(-127.0f, q));
                }
            }
        }
        return rounded * w.values.transpose();
    }

    RowMatrix rmsnorm(const RowMatrix& x, const RowMatrix& weight) const {
        RowMatrix out(x.rows(), x.cols());
        for (Eigen::Index t = 0; t < x.rows(); ++t) {
            double sum = 0;
            for (Eigen::Index i = 0; i < x.cols(); ++i) sum += double(x(t, i)) * double(x(t, i));
            const float inv =
                float(1.0 / std::sqrt(sum / double(x.cols()) + double(config_.rms_eps)));
            out.row(t) = x.row(t).cwiseProduct(weight.row(0)) * inv;
        }
        return out;
    }

    // Rotates the pairs (v[2i], v[2i+1]) for i < rope_dims / 2 by pos * base^(-2i/rope_dims).
    void rope(float* v, size_t pos) const {
        const size_t dims = config_.rope_dims;
        for (size_t i = 0; i < dims / 2; ++i) {
            const double theta = double(pos) * std::pow(double(config_.rope_freq_base),
                                                        -2.0 * double(i) / double(dims));
            const double cs = std::cos(theta), sn = std::sin(theta);
            const double x0 = v[2 * i], x1 = v[2 * i + 1];
            v[2 * i] = float(x0 * cs - x1 * sn);
            v[2 * i + 1] = float(x0 * sn + x1 * cs);
        }
    }

    smol::Config config_;
    bool round_activations_ = false;
    Matrix token_embd_, output_;
    RowMatrix output_norm_;
    bool tied_ = true;
    std::vector<Layer> layers_;
};

}  // namespace smol_test
