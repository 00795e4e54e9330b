// smol::Weights: the SmolLM3 tensors of a GGUF file bound by name, each
// checked for presence, type and shape against the Config. Matrices stay in
// the file's bytes: each is a WeightMatrix (quant/weight_matrix.hpp), the view
// the kernels and the CUDA upload take as it is; only the tiny norm vectors are
// converted to float at bind time so the kernels read them directly.
//
// Names and shapes (GGUF dims, innermost first: a matrix [in, out] has `out`
// rows of `in` elements; y = W x reads one row per output):
//   token_embd.weight           [hidden, vocab]       embedding rows; also the LM head when tied
//   output.weight (optional)    [hidden, vocab]       untied LM head
//   output_norm.weight          [hidden]
//   blk.N.attn_norm.weight      [hidden]
//   blk.N.attn_q.weight         [hidden, heads * head_dim]
//   blk.N.attn_k.weight         [hidden, kv_heads * head_dim]
//   blk.N.attn_v.weight         [hidden, kv_heads * head_dim]
//   blk.N.attn_output.weight    [heads * head_dim, hidden]
//   blk.N.ffn_norm.weight       [hidden]
//   blk.N.ffn_gate.weight       [hidden, ffn]
//   blk.N.ffn_up.weight         [hidden, ffn]
//   blk.N.ffn_down.weight       [ffn, hidden]
// Errors: a missing tensor is ErrorKind::missing, a wrong shape ErrorKind::shape
// ("tensor 'blk.3.attn_k.weight': expected [256, 64], found [256, 128]"), a type
// smol cannot compute with ErrorKind::unsupported; each names the tensor.
#pragma once

#include "../detail/abi.hpp"
#include "../detail/unit_vector.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../error.hpp"
#include "../gguf/gguf.hpp"
#include "../quant/reference.hpp"
#include "../quant/types.hpp"
#include "../quant/weight_matrix.hpp"
#include "config.hpp"

SMOL_NAMESPACE_BEGIN

struct LayerWeights {
    detail::UnitVector<float> attn_norm;  // [hidden]
    WeightMatrix attn_q;                  // [q_dim rows][hidden]
    WeightMatrix attn_k;                  // [kv_dim rows][hidden]
    WeightMatrix attn_v;                  // [kv_dim rows][hidden]
    WeightMatrix attn_output;             // [hidden rows][q_dim]
    detail::UnitVector<float> ffn_norm;   // [hidden]
    WeightMatrix ffn_gate;                // [ffn rows][hidden]
    WeightMatrix ffn_up;                  // [ffn rows][hidden]
    WeightMatrix ffn_down;                // [hidden rows][ffn]
};

struct Weights {
    WeightMatrix token_embd;  // [vocab rows][hidden]
    WeightMatrix lm_head;     // output.weight, or token_embd when tied
    bool tied_embeddings = true;
    detail::UnitVector<float> output_norm;  // [hidden]
    std::vector<LayerWeights> layers;

    // Binds every tensor of `file` against `config`. The File must outlive the
    // Weights, the error as a value.
    static Expected<Weights> try_bind(const gguf::File& file, const Config& config) {
        Weights w;
        const size_t vocab = config.vocab_size, hidden = config.hidden;
        SMOL_TRY_ASSIGN(w.token_embd, matrix(file, "token_embd.weight", hidden, vocab));
        if (file.find_tensor("output.weight")) {
            SMOL_TRY_ASSIGN(w.lm_head, matrix(file, "output.weight", hidden, vocab));
            w.tied_embeddings = false;
        } else {
            w.lm_head = w.token_embd;
            w.tied_embeddings = true;
        }
        SMOL_TRY_ASSIGN(w.output_norm, vector(file, "output_norm.weight", hidden));
        // A layer's record is added only once its tensors are found, so a
        // block_count larger than the tensor table (a count from the file)
        // fails at the first missing tensor, never after allocating a record
        // per claimed layer. Reserve no more than the table can hold.
        constexpr size_t kTensorsPerLayer = 9;
        w.layers.reserve(std::min(config.n_layers, file.tensors().size() / kTensorsPerLayer));
        for (size_t i = 0; i < config.n_layers; ++i) {
            const std::string b = "blk." + std::to_string(i) + ".";
            LayerWeights l;
            SMOL_TRY_ASSIGN(l.attn_norm, vector(file, b + "attn_norm.weight", hidden));
            SMOL_TRY_ASSIGN(l.attn_q, matrix(file, b + "attn_q.weight", hidden, config.q_dim()));
            SMOL_TRY_ASSIGN(l.attn_k, matrix(file, b + "attn_k.weight", hidden, config.kv_dim()));
            SMOL_TRY_ASSIGN(l.attn_v, matrix(file, b + "attn_v.weight", hidden, config.kv_dim()));
            SMOL_TRY_ASSIGN(l.attn_output,
                            matrix(file, b + "attn_output.weight", config.q_dim(), hidden));
            SMOL_TRY_ASSIGN(l.ffn_norm, vector(file, b + "ffn_norm.weight", hidden));
            SMOL_TRY_ASSIGN(l.ffn_gate, matrix(file, b + "ffn_gate.weight", hidden, config.ffn));
            SMOL_TRY_ASSIGN(l.ffn_up, matrix(file, b + "ffn_up.weight", hidden, config.ffn));
            SMOL_TRY_ASSIGN(l.ffn_down, matrix(file, b + "ffn_down.weight", config.ffn, hidden));
            w.layers.push_back(std::move(l));
        }
        return w;
    }

    // Dequantizes the embedding row of `token` into out[hidden].
    void embed(int32_t token, float* out) const {
        if (token < 0 || size_t(token) >= token_embd.rows)
            detail::fail(ErrorKind::invalid_argument, "model: token id " + std::to_string(token) +
                                                          " is outside the vocabulary of " +
                                                          std::to_string(token_embd.rows));
        dequantize_row(token_embd.type, token_embd.row(size_t(token)), out, token_embd.cols);
    }

private:
    static std::string shape_string(const std::vector<uint64_t>& dims) {
        std::string s = "[";
        for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
        return s + "]";
    }

    static Expected<const gguf::TensorInfo*> find(const gguf::File& file, const std::string& name,
                                                  const std::vector<uint64_t>& expected) {
        const gguf::TensorInfo* t = file.find_tensor(name);
        if (!t)
            return ErrorInfo{ErrorKind::missing, "model: " + file.source() + ": missing tensor '" +
                                                     name + "' (expected " +
                                                     shape_string(expected) + ")"};
        if (t->dims != expected)
            return ErrorInfo{ErrorKind::shape, "model: " + file.source() + ": tensor '" + name +
                                                   "': expected " + shape_string(expected) +
                                                   ", found " + shape_string(t->dims)};
        return t;
    }

    // The reader already checked that cols is a whole number of the type's
    // blocks and that the bytes lie inside the file.
    static Expected<WeightMatrix> matrix(const gguf::File& file, const std::string& name,
                                         size_t cols, size_t rows) {
        SMOL_TRY_ASSIGN(const gguf::TensorInfo* found,
                        find(file, name, {uint64_t(cols), uint64_t(rows)}));
        const gguf::TensorInfo& t = *found;
        if (!is_supported_weight_type(t.type))
            return ErrorInfo{ErrorKind::unsupported, "model: " + file.source() + ": tensor '" +
                                                         name + "' has type " + type_name(t.type) +
                                                         ", which smol cannot compute with (" +
                                                         weight_type_names() + ")"};
        return WeightMatrix{t.type, t.data, rows, cols, smol::row_bytes(t.type, cols), t.name};
    }

    static Expected<detail::UnitVector<float>> vector(const gguf::File& file,
                                                      const std::string& name, size_t n) {
        SMOL_TRY_ASSIGN(const gguf::TensorInfo* found, find(file, name, {uint64_t(n)}));
        const gguf::TensorInfo& t = *found;
        if (t.type != GGMLType::F32 && t.type != GGMLType::F16 && t.type != GGMLType::BF16)
            return ErrorInfo{ErrorKind::unsupported,
                             "model: " + file.source() + ": tensor '" + name + "' has type " +
                                 type_name(t.type) + " (norm weights must be F32, F16 or BF16)"};
        detail::UnitVector<float> out(n);
        dequantize_row(t.type, t.data, out.data(), n);
        return out;
    }
};

SMOL_NAMESPACE_END
