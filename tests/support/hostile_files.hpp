// Builders for hostile GGUF files, shared by test_hostile.cpp and the
// hostile_rss check: RawGguf writes what the library's Writer refuses to make
// (tensors sharing one range of bytes, dims whose byte size wraps, counts past
// the limits), so each failure class can be rebuilt at test time from the
// fixtures instead of being stored in the repository.
#pragma once

#include <smol/detail/bytes.hpp>
#include <smol/smol.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace smol_test {

using Bytes = std::vector<uint8_t>;
using smol::GGMLType;
using smol::gguf::File;
using smol::gguf::Value;
using smol::gguf::ValueType;

using smol::detail::append_le;
inline void put_string(Bytes& out, std::string_view s) {
    append_le<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}

// A GGUF file assembled field by field, for what the Writer refuses to make:
// many tensors sharing one range of bytes, dims whose byte size wraps.
class RawGguf {
public:
    RawGguf& u32(std::string_view key, uint32_t v) {
        return value(key, ValueType::u32, [&](Bytes& b) { append_le(b, v); });
    }
    RawGguf& f32(std::string_view key, float v) {
        return value(key, ValueType::f32, [&](Bytes& b) { append_le(b, v); });
    }
    RawGguf& str(std::string_view key, std::string_view v) {
        return value(key, ValueType::string, [&](Bytes& b) { put_string(b, v); });
    }
    // A value of a parsed file, re-encoded byte for byte.
    RawGguf& copy(std::string_view key, const Value& v) {
        return value(key, v.type(), [&](Bytes& b) {
            switch (v.type()) {
                case ValueType::string:
                    put_string(b, v.as_string());
                    break;
                case ValueType::array: {
                    const auto& a = v.as_array();
                    append_le<uint32_t>(b, uint32_t(a.element_type()));
                    append_le<uint64_t>(b, a.size());
                    b.insert(b.end(), a.data(), a.data() + a.bytes());
                    break;
                }
                case ValueType::f32:
                    append_le(b, float(v.as_f64()));
                    break;
                case ValueType::f64:
                    append_le(b, v.as_f64());
                    break;
                default: {
                    // The low bytes of the two's complement value are the narrower types'
                    // encodings.
                    Bytes raw;
                    append_le<uint64_t>(raw, v.as_u64());
                    b.insert(b.end(), raw.begin(),
                             raw.begin() + long(smol::gguf::scalar_size(v.type())));
                }
            }
        });
    }
    // A value given as its encoded bytes (after the type).
    RawGguf& raw(std::string_view key, ValueType type, const Bytes& payload) {
        return value(key, type,
                     [&](Bytes& b) { b.insert(b.end(), payload.begin(), payload.end()); });
    }
    // An array of `count` u8 elements, all `fill`.
    RawGguf& u8_array(std::string_view key, uint64_t count, uint8_t fill = 0) {
        return value(key, ValueType::array, [&](Bytes& b) {
            append_le<uint32_t>(b, uint32_t(ValueType::u8));
            append_le<uint64_t>(b, count);
            b.resize(b.size() + size_t(count), fill);
        });
    }
    RawGguf& tensor(std::string_view name, GGMLType type, std::vector<uint64_t> dims,
                    uint64_t offset = 0) {
        Bytes& b = tensors_;
        put_string(b, name);
        append_le<uint32_t>(b, uint32_t(dims.size()));
        for (uint64_t d : dims) append_le(b, d);
        append_le<uint32_t>(b, uint32_t(type));
        append_le(b, offset);
        ++n_tensors_;
        return *this;
    }
    // The file: header, metadata, tensor table, padding to 32, then `data`.
    Bytes build(const Bytes& data = {}) const {
        Bytes out;
        append_le<uint32_t>(out, smol::gguf::kMagic);
        append_le<uint32_t>(out, 3);
        append_le<uint64_t>(out, n_tensors_);
        append_le<uint64_t>(out, n_keys_);
        out.insert(out.end(), keys_.begin(), keys_.end());
        out.insert(out.end(), tensors_.begin(), tensors_.end());
        out.resize((out.size() + 31) / 32 * 32, 0);
        out.insert(out.end(), data.begin(), data.end());
        return out;
    }

private:
    template <class F>
    RawGguf& value(std::string_view key, ValueType type, F&& payload) {
        put_string(keys_, key);
        append_le<uint32_t>(keys_, uint32_t(type));
        payload(keys_);
        ++n_keys_;
        return *this;
    }
    Bytes keys_, tensors_;
    uint64_t n_keys_ = 0, n_tensors_ = 0;
};

// Every tokenizer.* key of a parsed file (a real vocabulary for a forged model).
inline void copy_tokenizer(RawGguf& raw, const File& from) {
    for (const auto& kv : from.metadata())
        if (kv.key.rfind("tokenizer.", 0) == 0) raw.copy(kv.key, kv.value);
}

// `real` (a parsed fixture) rebuilt with its tensors at their offsets in
// its own data section; `edit` may write a key itself (returning true) in
// place of copying it.
inline Bytes rebuild(const File& real,
                     const std::function<bool(RawGguf&, const smol::gguf::KeyValue&)>& edit) {
    RawGguf raw;
    for (const auto& kv : real.metadata())
        if (!edit(raw, kv)) raw.copy(kv.key, kv.value);
    for (const auto& t : real.tensors()) raw.tensor(t.name, t.type, t.dims, t.offset);
    return raw.build(Bytes(real.bytes() + real.data_offset(), real.bytes() + real.size()));
}

// `real` with one u32 key set to `value`.
inline Bytes with_u32(const File& real, std::string_view key, uint32_t value) {
    return rebuild(real, [&](RawGguf& raw, const smol::gguf::KeyValue& kv) {
        if (kv.key != key) return false;
        raw.u32(kv.key, value);
        return true;
    });
}

// A legal SmolLM3 file (the vocabulary of `vocab`) whose KV cache size wraps
// 64 bits: 2048 layers x 2^20 head dims x a 2^31-position context. Every
// layer's nine tensors share one 8 MiB range, so the file stays small.
inline Bytes kv_wrap_model(const File& vocab) {
    const uint64_t n_vocab = vocab.get<smol::gguf::ArrayView>("tokenizer.ggml.tokens").size();
    constexpr uint32_t kLayers = 2048, kHeadDim = 1u << 20, kHidden = 2;
    RawGguf raw;
    raw.str("general.architecture", "smollm3")
        .u32("smollm3.block_count", kLayers)
        .u32("smollm3.embedding_length", kHidden)
        .u32("smollm3.feed_forward_length", 2)
        .u32("smollm3.attention.head_count", 1)
        .u32("smollm3.attention.head_count_kv", 1)
        .u32("smollm3.attention.key_length", kHeadDim)
        .u32("smollm3.context_length", 1u << 31)
        .f32("smollm3.rope.freq_base", 10000.0f)
        .f32("smollm3.attention.layer_norm_rms_epsilon", 1e-6f);
    copy_tokenizer(raw, vocab);
    raw.tensor("token_embd.weight", GGMLType::F32, {kHidden, n_vocab});
    raw.tensor("output_norm.weight", GGMLType::F32, {kHidden});
    for (uint32_t l = 0; l < kLayers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        raw.tensor(b + "attn_norm.weight", GGMLType::F32, {kHidden});
        raw.tensor(b + "attn_q.weight", GGMLType::F32, {kHidden, kHeadDim});
        raw.tensor(b + "attn_k.weight", GGMLType::F32, {kHidden, kHeadDim});
        raw.tensor(b + "attn_v.weight", GGMLType::F32, {kHidden, kHeadDim});
        raw.tensor(b + "attn_output.weight", GGMLType::F32, {kHeadDim, kHidden});
        raw.tensor(b + "ffn_norm.weight", GGMLType::F32, {kHidden});
        raw.tensor(b + "ffn_gate.weight", GGMLType::F32, {kHidden, 2});
        raw.tensor(b + "ffn_up.weight", GGMLType::F32, {kHidden, 2});
        raw.tensor(b + "ffn_down.weight", GGMLType::F32, {2, kHidden});
    }
    return raw.build(Bytes(size_t(kHidden) * kHeadDim * 4, 0));
}

}  // namespace smol_test
