// smol::Config: the SmolLM3 hyper-parameters, read from a GGUF file's
// metadata (`smollm3.*` keys) and validated before anything is allocated.
//
// Keys read (prefix "smollm3."):
//   block_count, embedding_length, feed_forward_length, attention.head_count,
//   context_length, attention.layer_norm_rms_epsilon, rope.freq_base    required
//   attention.head_count_kv        optional, default head_count (no GQA)
//   attention.key_length           optional, default embedding_length / head_count
//   attention.value_length         optional, must equal key_length when present
//   rope.dimension_count           optional, default head_dim
//   vocab_size                     optional, default the tokenizer's token count
//   rope.scaling.type              optional: "none" (default) or "yarn"; others are
//                                  ErrorKind::unsupported naming the type
//   rope.scaling.factor            yarn: context stretch, finite and >= 1 (default 1)
//   rope.scaling.original_context_length
//                                  yarn: the context the model was trained at before
//                                  scaling (default context_length)
//   rope.scaling.attn_factor       yarn: extra attention scale (default 1)
// With YaRN the model runs up to original_context_length x factor positions
// (context_length becomes the larger of that and the file's context_length;
// trained_context_length keeps the key's value), and RoPE follows YaRN's
// frequency ramp and magnitude scale (model/rope.hpp).
// A missing required key is ErrorKind::missing, an impossible value (zero,
// heads not dividing, odd head_dim, ...) is ErrorKind::format, another
// architecture is ErrorKind::unsupported; every message names the key.
// try_from_gguf returns these errors as values.
//
// SmolLM3 facts that are implied by the architecture rather than stored:
// every 4th layer (index 3, 7, 11, ...) uses no positional encoding (NoPE),
// the others use RoPE on adjacent pairs (x[2i], x[2i+1]).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "../error.hpp"
#include "../gguf/gguf.hpp"

SMOL_NAMESPACE_BEGIN

struct Config;
namespace detail {
inline Status read_rope_scaling(const gguf::File& file, const std::string& p, Config& c);
}  // namespace detail

struct Config {
    std::string architecture = "smollm3";
    size_t n_layers = 0;    // transformer blocks
    size_t hidden = 0;      // embedding_length: width of the residual stream
    size_t ffn = 0;         // feed_forward_length: width of the SwiGLU hidden layer
    size_t n_heads = 0;     // query heads
    size_t n_kv_heads = 0;  // key/value heads (grouped-query attention: n_heads % n_kv_heads == 0)
    size_t head_dim = 0;    // key_length
    size_t rope_dims = 0;   // leading dims of each head that RoPE rotates (<= head_dim, even)
    float rope_freq_base = 0;   // theta_i = pos * rope_freq_base^(-2i / rope_dims)
    float rms_eps = 0;          // RMSNorm: x * w / sqrt(mean(x^2) + rms_eps)
    size_t context_length = 0;  // positions the model was trained for
    size_t vocab_size = 0;      // rows of the LM head = logits per position
    size_t nope_interval = 4;   // layer i has no RoPE when (i + 1) % nope_interval == 0
    // RoPE scaling (top of this file): YaRN or none.
    bool rope_yarn = false;
    float rope_scaling_factor = 1.0f;   // YaRN's stretch of the original context
    size_t rope_original_context = 0;   // YaRN's original context length
    float rope_attn_factor = 1.0f;      // rope.scaling.attn_factor
    size_t trained_context_length = 0;  // the file's context_length key

    size_t q_dim() const noexcept {
        return n_heads * head_dim;
    }  // width of Q (and of the attention output)
    size_t kv_dim() const noexcept {
        return n_kv_heads * head_dim;
    }  // width of K and of V per position
    size_t heads_per_kv() const noexcept { return n_heads / n_kv_heads; }
    bool layer_uses_rope(size_t layer) const noexcept {
        return nope_interval == 0 || (layer + 1) % nope_interval != 0;
    }

    // Reads and validates the config of a SmolLM3 GGUF file, the error as a value.
    static Expected<Config> try_from_gguf(const gguf::File& file) {
        const std::string& source = file.source();
        SMOL_TRY_ASSIGN(const auto arch, file.try_get<std::string>("general.architecture"));
        if (arch != "smollm3")
            return ErrorInfo{ErrorKind::unsupported, "model: " + source +
                                                         ": general.architecture is '" + arch +
                                                         "', smol runs only 'smollm3'"};
        Config c;
        c.architecture = arch;
        const std::string p = arch + ".";
        auto required = [&](const std::string& key) -> Expected<uint64_t> {
            SMOL_TRY_ASSIGN(const uint64_t v, file.try_get<uint64_t>(p + key));
            if (v == 0 || v > (uint64_t(1) << 31))
                return ErrorInfo{ErrorKind::format, "model: " + source + ": key '" + p + key +
                                                        "' = " + std::to_string(v) +
                                                        " is out of range"};
            return v;
        };
        auto optional = [&](const std::string& key, uint64_t fallback) -> Expected<uint64_t> {
            if (!file.has(p + key)) return fallback;
            return required(key);
        };
        SMOL_TRY_ASSIGN(c.n_layers, required("block_count"));
        SMOL_TRY_ASSIGN(c.hidden, required("embedding_length"));
        SMOL_TRY_ASSIGN(c.ffn, required("feed_forward_length"));
        SMOL_TRY_ASSIGN(c.n_heads, required("attention.head_count"));
        SMOL_TRY_ASSIGN(c.context_length, required("context_length"));
        SMOL_TRY_ASSIGN(c.n_kv_heads, optional("attention.head_count_kv", c.n_heads));
        if (!file.has(p + "attention.key_length") && c.hidden % c.n_heads != 0)
            return ErrorInfo{ErrorKind::format, "model: " + source + ": key '" + p +
                                                    "embedding_length' " +
                                                    std::to_string(c.hidden) +
                                                    " is not divisible by attention.head_count " +
                                                    std::to_string(c.n_heads)};
        SMOL_TRY_ASSIGN(c.head_dim, optional("attention.key_length", c.hidden / c.n_heads));
        if (file.has(p + "attention.value_length")) {
            SMOL_TRY_ASSIGN(const uint64_t value_length, required("attention.value_length"));
            if (value_length != c.head_dim)
                return ErrorInfo{ErrorKind::unsupported,
                                 "model: " + source + ": key '" + p +
                                     "attention.value_length' differs from the key length"};
        }
        SMOL_TRY_ASSIGN(c.rope_dims, optional("rope.dimension_count", c.head_dim));
        SMOL_TRY_ASSIGN(c.rope_freq_base, file.try_get<float>(p + "rope.freq_base"));
        SMOL_TRY_ASSIGN(c.rms_eps, file.try_get<float>(p + "attention.layer_norm_rms_epsilon"));

        // The vocabulary: the explicit key, else the tokenizer's token list; when both
        // exist they must agree (logit i is token i).
        std::optional<uint64_t> token_count;
        if (const gguf::Value* tokens = file.find_value("tokenizer.ggml.tokens")) {
            if (tokens->type() != gguf::ValueType::array)
                return ErrorInfo{
                    ErrorKind::type,
                    "model: " + source + ": key 'tokenizer.ggml.tokens' is not an array"};
            token_count = tokens->as_array().size();
        }
        if (file.has(p + "vocab_size")) {
            SMOL_TRY_ASSIGN(c.vocab_size, required("vocab_size"));
            if (token_count && *token_count != c.vocab_size)
                return ErrorInfo{ErrorKind::shape,
                                 "model: " + source + ": key '" + p +
                                     "vocab_size' = " + std::to_string(c.vocab_size) +
                                     " but 'tokenizer.ggml.tokens' has " +
                                     std::to_string(*token_count) + " tokens"};
        } else if (token_count && *token_count > 0) {
            c.vocab_size = size_t(*token_count);
        } else {
            return ErrorInfo{ErrorKind::missing,
                             "model: " + source + ": missing metadata key '" + p +
                                 "vocab_size' (and no 'tokenizer.ggml.tokens')"};
        }

        c.trained_context_length = c.context_length;
        SMOL_TRY(detail::read_rope_scaling(file, p, c));
        SMOL_TRY(c.try_validate(source));
        return c;
    }
    // Checks the relations between the fields; `source` names the file in messages.
    Status try_validate(const std::string& source = "<config>") const {
        auto bad = [&](const std::string& what) {
            return Status(ErrorKind::format, "model: " + source + ": " + what);
        };
        const std::string p = architecture + ".";
        if (n_layers == 0) return bad("key '" + p + "block_count' must be positive");
        if (hidden == 0) return bad("key '" + p + "embedding_length' must be positive");
        if (ffn == 0) return bad("key '" + p + "feed_forward_length' must be positive");
        if (n_heads == 0) return bad("key '" + p + "attention.head_count' must be positive");
        if (n_kv_heads == 0 || n_heads % n_kv_heads != 0)
            return bad("key '" + p + "attention.head_count_kv' = " + std::to_string(n_kv_heads) +
                       " must divide attention.head_count = " + std::to_string(n_heads));
        if (head_dim == 0 || head_dim % 2 != 0)
            return bad("key '" + p + "attention.key_length' (head dim) = " +
                       std::to_string(head_dim) + " must be positive and even");
        if (rope_dims == 0 || rope_dims % 2 != 0 || rope_dims > head_dim)
            return bad("key '" + p + "rope.dimension_count' = " + std::to_string(rope_dims) +
                       " must be even and at most the head dim " + std::to_string(head_dim));
        if (!(rope_freq_base > 0.0f) || !std::isfinite(rope_freq_base))
            return bad("key '" + p + "rope.freq_base' must be a positive number");
        if (!(rms_eps > 0.0f) || !std::isfinite(rms_eps) || rms_eps > 1.0f)
            return bad("key '" + p + "attention.layer_norm_rms_epsilon' must be in (0, 1]");
        if (context_length == 0) return bad("key '" + p + "context_length' must be positive");
        if (vocab_size == 0 || vocab_size > (size_t(1) << 31))
            return bad("key '" + p + "vocab_size' is out of range");
        return {};
    }
};

namespace detail {

// A number for an error message. snprintf, not std::to_string(double): that
// is a weak standard template, shared with units built with other -m flags
// (detail/unit_vector.hpp).
inline std::string number_text(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return text;
}

// rope.scaling.* (top of this file), into c; context_length grows to
// what YaRN runs.
inline Status read_rope_scaling(const gguf::File& file, const std::string& p, Config& c) {
    const std::string& source = file.source();
    SMOL_TRY_ASSIGN(const auto scaling, file.try_find<std::string>(p + "rope.scaling.type"));
    if (!scaling || *scaling == "none") return {};
    if (*scaling != "yarn")
        return Status(ErrorKind::unsupported, "model: " + source + ": key '" + p +
                                                  "rope.scaling.type' = '" + *scaling +
                                                  "' (smol implements none and yarn)");
    c.rope_yarn = true;
    auto float_key = [&](const std::string& key, float fallback) -> Expected<float> {
        SMOL_TRY_ASSIGN(const auto value, file.try_find<float>(p + key));
        return value ? *value : fallback;
    };
    SMOL_TRY_ASSIGN(c.rope_scaling_factor, float_key("rope.scaling.factor", 1.0f));
    SMOL_TRY_ASSIGN(c.rope_attn_factor, float_key("rope.scaling.attn_factor", 1.0f));
    c.rope_original_context = c.context_length;
    const std::string original = p + "rope.scaling.original_context_length";
    if (file.has(original)) {
        SMOL_TRY_ASSIGN(const uint64_t v, file.try_get<uint64_t>(original));
        if (v == 0 || v > (uint64_t(1) << 31))
            return Status(ErrorKind::format, "model: " + source + ": key '" + original +
                                                 "' = " + std::to_string(v) + " is out of range");
        c.rope_original_context = size_t(v);
    }
    const float f = c.rope_scaling_factor;
    if (!std::isfinite(f) || f < 1.0f || f > 1024.0f)
        return Status(ErrorKind::format, "model: " + source + ": key '" + p +
                                             "rope.scaling.factor' = " + number_text(f) +
                                             " must be a number in [1, 1024]");
    if (!std::isfinite(c.rope_attn_factor) || !(c.rope_attn_factor > 0.0f))
        return Status(ErrorKind::format, "model: " + source + ": key '" + p +
                                             "rope.scaling.attn_factor' must be positive");
    const double stretched = double(c.rope_original_context) * double(f);
    if (stretched > double(uint64_t(1) << 31))
        return Status(ErrorKind::format, "model: " + source + ": YaRN context " +
                                             number_text(stretched) +
                                             " (original_context_length x factor) is out of range");
    c.context_length = std::max(c.context_length, size_t(stretched));
    return {};
}

}  // namespace detail

SMOL_NAMESPACE_END
