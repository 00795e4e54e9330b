// GGUF writer: builds a version-3 GGUF file (metadata + tensors of any ggml
// type, each at an offset aligned to general.alignment) into a byte buffer or
// a file. Used by tests, the demo model, the random-model maker and the
// hostile-input tests; the byte format is documented in gguf.hpp.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/bytes.hpp"
#include "../error.hpp"
#include "../quant/types.hpp"
#include "gguf.hpp"

SMOL_NAMESPACE_BEGIN
namespace gguf {

class Writer {
public:
    explicit Writer(uint32_t alignment = kDefaultAlignment) : alignment_(alignment) {
        if (alignment == 0 || (alignment & (alignment - 1)) != 0)
            smol::detail::fail(ErrorKind::invalid_argument,
                               "gguf writer: alignment must be a power of two");
        if (alignment != kDefaultAlignment) set_u32("general.alignment", alignment);
    }

    // --- metadata (a key set twice keeps its last value) ---
    void set_u8(std::string_view k, uint8_t v) { scalar(k, ValueType::u8, v); }
    void set_i8(std::string_view k, int8_t v) { scalar(k, ValueType::i8, v); }
    void set_u16(std::string_view k, uint16_t v) { scalar(k, ValueType::u16, v); }
    void set_i16(std::string_view k, int16_t v) { scalar(k, ValueType::i16, v); }
    void set_u32(std::string_view k, uint32_t v) { scalar(k, ValueType::u32, v); }
    void set_i32(std::string_view k, int32_t v) { scalar(k, ValueType::i32, v); }
    void set_u64(std::string_view k, uint64_t v) { scalar(k, ValueType::u64, v); }
    void set_i64(std::string_view k, int64_t v) { scalar(k, ValueType::i64, v); }
    void set_f32(std::string_view k, float v) { scalar(k, ValueType::f32, v); }
    void set_f64(std::string_view k, double v) { scalar(k, ValueType::f64, v); }
    void set_bool(std::string_view k, bool v) { scalar(k, ValueType::boolean, uint8_t(v ? 1 : 0)); }
    void set_string(std::string_view k, std::string_view v) {
        std::vector<uint8_t> bytes;
        put_string(bytes, v);
        set_raw(k, ValueType::string, std::move(bytes));
    }
    void set_strings(std::string_view k, const std::vector<std::string>& v) {
        std::vector<uint8_t> bytes;
        smol::detail::append_le<uint32_t>(bytes, uint32_t(ValueType::string));
        smol::detail::append_le<uint64_t>(bytes, v.size());
        for (const auto& s : v) put_string(bytes, s);
        set_raw(k, ValueType::array, std::move(bytes));
    }
    void set_strings(std::string_view k, const std::vector<std::string_view>& v) {
        std::vector<uint8_t> bytes;
        smol::detail::append_le<uint32_t>(bytes, uint32_t(ValueType::string));
        smol::detail::append_le<uint64_t>(bytes, v.size());
        for (const auto& s : v) put_string(bytes, s);
        set_raw(k, ValueType::array, std::move(bytes));
    }
    // Numeric array; the element type follows T (int32_t -> i32, float -> f32, ...).
    template <class T>
    void set_array(std::string_view k, const std::vector<T>& v) {
        std::vector<uint8_t> bytes;
        smol::detail::append_le<uint32_t>(bytes, uint32_t(value_type_of<T>()));
        smol::detail::append_le<uint64_t>(bytes, v.size());
        for (const T& x : v) smol::detail::append_le<T>(bytes, x);
        set_raw(k, ValueType::array, std::move(bytes));
    }
    // Copies a value (of any type, arrays included) from a parsed file.
    void copy_value(std::string_view k, const Value& v) {
        std::vector<uint8_t> bytes;
        switch (v.type()) {
            case ValueType::string:
                put_string(bytes, v.as_string());
                break;
            case ValueType::array: {
                const ArrayView& a = v.as_array();
                smol::detail::append_le<uint32_t>(bytes, uint32_t(a.element_type()));
                smol::detail::append_le<uint64_t>(bytes, a.size());
                bytes.insert(bytes.end(), a.data(), a.data() + a.bytes());
                break;
            }
            case ValueType::f32:
                smol::detail::append_le<float>(bytes, float(v.as_f64()));
                break;
            case ValueType::f64:
                smol::detail::append_le<double>(bytes, v.as_f64());
                break;
            default: {
                const uint64_t raw = v.as_u64();
                bytes.resize(scalar_size(v.type()));
                std::memcpy(bytes.data(), &raw, bytes.size());
            }
        }
        set_raw(k, v.type(), std::move(bytes));
    }

    // --- tensors ---
    // dims innermost first; bytes must be exactly the size the type and dims imply.
    void add_tensor(std::string_view name, GGMLType type, std::vector<uint64_t> dims,
                    const void* data, size_t n_bytes) {
        const TypeTraits traits = type_traits(type);
        if (!traits.name)
            smol::detail::fail(ErrorKind::unsupported,
                               "gguf writer: unknown type for tensor '" + std::string(name) + "'");
        if (dims.empty() || dims.size() > kMaxDims)
            smol::detail::fail(ErrorKind::shape,
                               "gguf writer: tensor '" + std::string(name) + "' needs 1..4 dims");
        uint64_t n = 1;
        for (uint64_t d : dims) n *= d;
        if (dims[0] % traits.block_size != 0 || n / traits.block_size * traits.type_size != n_bytes)
            smol::detail::fail(ErrorKind::shape,
                               "gguf writer: tensor '" + std::string(name) + "' has " +
                                   std::to_string(n_bytes) +
                                   " bytes, which its type and dims do not imply");
        PendingTensor t;
        t.name = std::string(name);
        t.type = type;
        t.dims = std::move(dims);
        t.bytes.assign(static_cast<const uint8_t*>(data),
                       static_cast<const uint8_t*>(data) + n_bytes);
        tensors_.push_back(std::move(t));
    }

    // The whole file as bytes.
    std::vector<uint8_t> to_bytes() const {
        std::vector<uint8_t> out = header_bytes();
        out.reserve(out.size() + size_t(data_bytes()));
        for (const auto& t : tensors_) {
            out.insert(out.end(), t.bytes.begin(), t.bytes.end());
            out.resize(size_t(align(out.size())), 0);
        }
        if (!tensors_.empty())
            out.resize(out.size() -
                       size_t(align(tensors_.back().bytes.size()) - tensors_.back().bytes.size()));
        return out;
    }

    // Streams the file to disk: the header, then each tensor, so a multi-GB
    // model is never held twice in memory.
    void write_file(const std::string& path) const {
        std::FILE* f = std::fopen(path.c_str(), "wb");
        if (!f) smol::detail::fail(ErrorKind::io, "gguf writer: cannot create '" + path + "'");
        bool ok = true;
        auto write = [&](const void* p, size_t n) {
            if (ok && n) ok = std::fwrite(p, 1, n, f) == n;
        };
        const std::vector<uint8_t> header = header_bytes();
        write(header.data(), header.size());
        static const uint8_t zeros[64] = {};
        for (size_t i = 0; i < tensors_.size(); ++i) {
            const auto& bytes = tensors_[i].bytes;
            write(bytes.data(), bytes.size());
            if (i + 1 < tensors_.size()) {
                size_t pad = size_t(align(bytes.size()) - bytes.size());
                while (pad > 0) {
                    const size_t n = pad < sizeof zeros ? pad : sizeof zeros;
                    write(zeros, n);
                    pad -= n;
                }
            }
        }
        const bool closed = std::fclose(f) == 0;
        if (!ok || !closed)
            smol::detail::fail(ErrorKind::io, "gguf writer: cannot write '" + path + "'");
    }

private:
    struct PendingKV {
        std::string key;
        ValueType type;
        std::vector<uint8_t> bytes;
    };
    struct PendingTensor {
        std::string name;
        GGMLType type;
        std::vector<uint64_t> dims;
        std::vector<uint8_t> bytes;
    };

    template <class T>
    static constexpr ValueType value_type_of() {
        if constexpr (std::is_same_v<T, uint8_t>)
            return ValueType::u8;
        else if constexpr (std::is_same_v<T, int8_t>)
            return ValueType::i8;
        else if constexpr (std::is_same_v<T, uint16_t>)
            return ValueType::u16;
        else if constexpr (std::is_same_v<T, int16_t>)
            return ValueType::i16;
        else if constexpr (std::is_same_v<T, uint32_t>)
            return ValueType::u32;
        else if constexpr (std::is_same_v<T, int32_t>)
            return ValueType::i32;
        else if constexpr (std::is_same_v<T, uint64_t>)
            return ValueType::u64;
        else if constexpr (std::is_same_v<T, int64_t>)
            return ValueType::i64;
        else if constexpr (std::is_same_v<T, float>)
            return ValueType::f32;
        else if constexpr (std::is_same_v<T, double>)
            return ValueType::f64;
        else
            static_assert(sizeof(T) == 0, "unsupported array element type");
    }

    static void put_string(std::vector<uint8_t>& out, std::string_view s) {
        smol::detail::append_le<uint64_t>(out, s.size());
        out.insert(out.end(), s.begin(), s.end());
    }
    template <class T>
    void scalar(std::string_view k, ValueType t, T v) {
        std::vector<uint8_t> bytes;
        smol::detail::append_le<T>(bytes, v);
        set_raw(k, t, std::move(bytes));
    }
    void set_raw(std::string_view k, ValueType t, std::vector<uint8_t> bytes) {
        for (auto& kv : metadata_) {
            if (kv.key == k) {
                kv.type = t;
                kv.bytes = std::move(bytes);
                return;
            }
        }
        metadata_.push_back({std::string(k), t, std::move(bytes)});
    }
    // Header, metadata, tensor table and the padding up to the data section.
    std::vector<uint8_t> header_bytes() const {
        std::vector<uint8_t> out;
        smol::detail::append_le<uint32_t>(out, kMagic);
        smol::detail::append_le<uint32_t>(out, 3);
        smol::detail::append_le<uint64_t>(out, tensors_.size());
        smol::detail::append_le<uint64_t>(out, metadata_.size());
        for (const auto& kv : metadata_) {
            put_string(out, kv.key);
            smol::detail::append_le<uint32_t>(out, uint32_t(kv.type));
            out.insert(out.end(), kv.bytes.begin(), kv.bytes.end());
        }
        uint64_t offset = 0;
        for (const auto& t : tensors_) {
            put_string(out, t.name);
            smol::detail::append_le<uint32_t>(out, uint32_t(t.dims.size()));
            for (uint64_t d : t.dims) smol::detail::append_le<uint64_t>(out, d);
            smol::detail::append_le<uint32_t>(out, uint32_t(t.type));
            smol::detail::append_le<uint64_t>(out, offset);
            offset = align(offset + t.bytes.size());
        }
        if (!tensors_.empty()) out.resize(size_t(align(out.size())), 0);
        return out;
    }
    uint64_t data_bytes() const {
        uint64_t n = 0;
        for (const auto& t : tensors_) n = align(n + t.bytes.size());
        return n;
    }
    uint64_t align(uint64_t x) const { return (x + alignment_ - 1) / alignment_ * alignment_; }

    uint32_t alignment_;
    std::vector<PendingKV> metadata_;
    std::vector<PendingTensor> tensors_;
};

}  // namespace gguf
SMOL_NAMESPACE_END
