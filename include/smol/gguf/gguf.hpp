// GGUF reader: parses the header, metadata and tensor table of a GGUF file
// held in memory (a read-only mapping of a path, or a caller's buffer) and
// hands out zero-copy views (value.hpp). Every count, length and offset is
// checked against the bytes that remain before anything is allocated or
// dereferenced, so a truncated or hostile file gives an error (a value from
// the try_* calls, smol::Error from the others), never a crash.
//
// Byte format (all integers little-endian; versions 2 and 3 are accepted, they
// differ only in that v3 declares endianness explicitly, which we require):
//
//   header:
//     u32  magic            "GGUF" = 0x46554747
//     u32  version          2 or 3
//     u64  tensor_count
//     u64  metadata_kv_count
//   metadata_kv_count x key/value:
//     string key            (u64 length, then that many bytes, no terminator)
//     u32    value_type     0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
//                           8 string, 9 array, 10 u64, 11 i64, 12 f64
//     value                 scalars in their natural size (bool is one byte);
//                           array = u32 element_type, u64 count, then count values
//                           (arrays of strings and nested arrays allowed)
//   tensor_count x tensor info:
//     string name
//     u32    n_dims         1..4
//     u64    dims[n_dims]   innermost first: a weight matrix of shape (out, in)
//                           is stored as dims [in, out], rows of `in` elements
//     u32    type           ggml type id (see quant/types.hpp)
//     u64    offset         from the start of the data section; a multiple of
//                           the alignment
//   padding to `general.alignment` (u32, default 32, a power of two)
//   data section: tensor bytes at their offsets
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../core/mmap.hpp"
#include "../detail/bytes.hpp"
#include "../detail/checked.hpp"
#include "../error.hpp"
#include "../quant/types.hpp"
#include "value.hpp"

SMOL_NAMESPACE_BEGIN
namespace gguf {

constexpr uint32_t kMagic = 0x46554747u;  // "GGUF" read as a little-endian u32
constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
// Table sizes smol accepts. Real files hold tens of metadata keys and a few
// hundred tensors (SmolLM3-3B: 326); the limits keep what the tables cost in
// memory (about 200 bytes an entry) bounded whatever a file declares.
constexpr uint64_t kMaxMetadataKeys = uint64_t(1) << 18;
constexpr uint64_t kMaxTensors = uint64_t(1) << 18;

namespace detail {
// A name read from the file, as it appears in an error message: at most 96
// bytes, so that a forged multi-megabyte key cannot make the message (an
// allocation) as large as the file.
inline std::string clip_name(std::string_view name) {
    constexpr size_t kMaxShown = 96;
    if (name.size() <= kMaxShown) return std::string(name);
    return std::string(name.substr(0, kMaxShown)) + "...(" + std::to_string(name.size()) +
           " bytes)";
}
}  // namespace detail

// A parsed GGUF file. Owns (or borrows) the bytes; every view it hands out is
// valid while it lives. Each fallible call comes in two forms: try_* returns
// the error as a value (Expected / Status, error.hpp), the plain form throws
// it as smol::Error.
class File {
public:
    // Maps `path` read-only and parses it.
    static Expected<std::shared_ptr<File>> try_open(const std::string& path) {
        auto file = std::shared_ptr<File>(new File());
        SMOL_TRY_ASSIGN(file->mapping_, MappedFile::try_open(path));
        file->source_ = path;
        SMOL_TRY(file->parse(file->mapping_.data(), file->mapping_.size()));
        return file;
    }
    static std::shared_ptr<File> open(const std::string& path) {
        return smol::detail::value_or_fail(try_open(path));
    }

    // Parses a caller-owned buffer that must outlive the File (asset packs,
    // embedded resources). No copy is made.
    static Expected<std::shared_ptr<File>> try_from_buffer(const void* data, size_t size,
                                                           std::string source = "<memory>") {
        if (data == nullptr && size > 0)  // (nullptr, 0) is an empty file: "too small" below
            return ErrorInfo{
                ErrorKind::invalid_argument,
                source + ": no buffer (null pointer, " + std::to_string(size) + " bytes claimed)"};
        auto file = std::shared_ptr<File>(new File());
        file->source_ = std::move(source);
        SMOL_TRY(file->parse(static_cast<const uint8_t*>(data), size));
        return file;
    }
    static std::shared_ptr<File> from_buffer(const void* data, size_t size,
                                             std::string source = "<memory>") {
        return smol::detail::value_or_fail(try_from_buffer(data, size, std::move(source)));
    }

    // Parses bytes that the File takes ownership of.
    static Expected<std::shared_ptr<File>> try_from_bytes(std::vector<uint8_t> bytes,
                                                          std::string source = "<memory>") {
        auto file = std::shared_ptr<File>(new File());
        file->owned_ = std::move(bytes);
        file->source_ = std::move(source);
        SMOL_TRY(file->parse(file->owned_.data(), file->owned_.size()));
        return file;
    }
    static std::shared_ptr<File> from_bytes(std::vector<uint8_t> bytes,
                                            std::string source = "<memory>") {
        return smol::detail::value_or_fail(try_from_bytes(std::move(bytes), std::move(source)));
    }

    const std::string& source() const noexcept { return source_; }
    uint32_t version() const noexcept { return version_; }
    uint32_t alignment() const noexcept { return alignment_; }
    const uint8_t* bytes() const noexcept { return bytes_; }
    size_t size() const noexcept { return size_; }
    size_t data_offset() const noexcept { return data_offset_; }
    const MappedFile& mapping() const noexcept { return mapping_; }

    const std::vector<KeyValue>& metadata() const noexcept { return metadata_; }
    const std::vector<TensorInfo>& tensors() const noexcept { return tensors_; }

    const Value* find_value(std::string_view key) const {
        auto it = key_index_.find(key);
        return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
    }
    bool has(std::string_view key) const { return find_value(key) != nullptr; }

    // Typed lookup; ErrorKind::missing or ErrorKind::type naming the key.
    // T: bool, any integer type (the stored integer must fit), float, double,
    // std::string, std::string_view, ArrayView, or std::vector<T> of those.
    template <class T>
    Expected<T> try_get(std::string_view key) const {
        const Value* v = find_value(key);
        if (!v)
            return ErrorInfo{ErrorKind::missing, "gguf: " + source_ + ": missing metadata key '" +
                                                     std::string(key) + "'"};
        return convert<T>(key, *v);
    }
    template <class T>
    T get(std::string_view key) const {
        return smol::detail::value_or_fail(try_get<T>(key));
    }

    // As get<T>, but an absent key gives std::nullopt (a wrong type is still an error).
    template <class T>
    Expected<std::optional<T>> try_find(std::string_view key) const {
        const Value* v = find_value(key);
        if (!v) return std::optional<T>();
        SMOL_TRY_ASSIGN(T value, convert<T>(key, *v));
        return std::optional<T>(std::move(value));
    }
    template <class T>
    std::optional<T> find(std::string_view key) const {
        return smol::detail::value_or_fail(try_find<T>(key));
    }

    const TensorInfo* find_tensor(std::string_view name) const {
        auto it = tensor_index_.find(name);
        return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
    }
    const TensorInfo& tensor(std::string_view name) const {
        const TensorInfo* t = find_tensor(name);
        if (!t)
            smol::detail::fail(ErrorKind::missing,
                               "gguf: " + source_ + ": missing tensor '" + std::string(name) + "'");
        return *t;
    }

    // Views (tensor data, index keys) point into the bytes: a copy would
    // share them with a File that may die first.
    File(const File&) = delete;
    File& operator=(const File&) = delete;

private:
    File() = default;

    template <class T>
    Expected<T> convert(std::string_view key, const Value& v) const {
        auto wrong = [&](const char* wanted) {
            return ErrorInfo{ErrorKind::type, "gguf: " + source_ + ": key '" + std::string(key) +
                                                  "' has type " + value_type_name(v.type()) +
                                                  ", expected " + wanted};
        };
        if constexpr (std::is_same_v<T, bool>) {
            if (v.type() != ValueType::boolean) return wrong("bool");
            return v.as_bool();
        } else if constexpr (std::is_integral_v<T>) {
            if (!v.is_integer()) return wrong("an integer");
            const bool fits =
                v.negative()
                    ? std::is_signed_v<T> && v.as_i64() >= int64_t(std::numeric_limits<T>::min())
                    : v.as_u64() <= uint64_t(std::numeric_limits<T>::max());
            if (!fits)
                return ErrorInfo{ErrorKind::type,
                                 "gguf: key '" + std::string(key) + "' value out of range"};
            return v.negative() ? T(v.as_i64()) : T(v.as_u64());
        } else if constexpr (std::is_floating_point_v<T>) {
            if (v.is_float()) return T(v.as_f64());
            if (v.is_integer()) return v.negative() ? T(v.as_i64()) : T(v.as_u64());
            return wrong("a number");
        } else if constexpr (std::is_same_v<T, std::string_view>) {
            if (v.type() != ValueType::string) return wrong("string");
            return v.as_string();
        } else if constexpr (std::is_same_v<T, std::string>) {
            if (v.type() != ValueType::string) return wrong("string");
            return std::string(v.as_string());
        } else if constexpr (std::is_same_v<T, ArrayView>) {
            if (v.type() != ValueType::array) return wrong("array");
            return v.as_array();
        } else if constexpr (std::is_same_v<T, std::vector<std::string_view>>) {
            if (v.type() != ValueType::array || v.as_array().element_type() != ValueType::string)
                return wrong("array of string");
            return v.as_array().try_strings();
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            if (v.type() != ValueType::array || v.as_array().element_type() != ValueType::string)
                return wrong("array of string");
            SMOL_TRY_ASSIGN(const std::vector<std::string_view> views, v.as_array().try_strings());
            return std::vector<std::string>(views.begin(), views.end());
        } else {
            using E = typename T::value_type;
            static_assert(std::is_arithmetic_v<E>, "unsupported get<T> type");
            if (v.type() != ValueType::array) return wrong("array");
            const ValueType et = v.as_array().element_type();
            if (scalar_size(et) == 0) return wrong("numeric array");
            if (std::is_integral_v<E> && (et == ValueType::f32 || et == ValueType::f64))
                return wrong("integer array");
            return v.as_array().try_to_vector<E>();
        }
    }

    // Cursor over [base, base + size): a read past the end is a format error.
    struct Reader {
        const uint8_t* base;
        size_t size;
        size_t pos;
        const std::string* source;

        ErrorInfo truncated(const char* what) const {
            return ErrorInfo{ErrorKind::format, "gguf: " + *source + ": truncated file (reading " +
                                                    what + " at byte " + std::to_string(pos) +
                                                    " of " + std::to_string(size) + ")"};
        }
        size_t remaining() const noexcept { return size - pos; }
        Status need(uint64_t n, const char* what) const {
            if (n > remaining()) return truncated(what);
            return {};
        }
        template <class T>
        Expected<T> read(const char* what) {
            SMOL_TRY(need(sizeof(T), what));
            const T v = smol::detail::read_le<T>(base, pos);
            pos += sizeof(T);
            return v;
        }
        Expected<std::string_view> read_string(const char* what) {
            SMOL_TRY_ASSIGN(const uint64_t len, read<uint64_t>(what));
            SMOL_TRY(need(len, what));
            const std::string_view s(reinterpret_cast<const char*>(base + pos), size_t(len));
            pos += size_t(len);
            return s;
        }
    };

    static bool valid_value_type(uint32_t t) noexcept { return t <= 12; }

    ErrorInfo format_error(const std::string& what) const {
        return ErrorInfo{ErrorKind::format, "gguf: " + source_ + ": " + what};
    }

    // Reads a value of type t. Arrays nest at most a few levels deep (a hostile
    // file could otherwise recurse until the stack overflows).
    Expected<Value> read_value(Reader& r, ValueType t, int depth) const {
        switch (t) {
            case ValueType::u8:
                return scalar<uint8_t>(r, t, "u8 value");
            case ValueType::i8:
                return scalar<int8_t>(r, t, "i8 value");
            case ValueType::u16:
                return scalar<uint16_t>(r, t, "u16 value");
            case ValueType::i16:
                return scalar<int16_t>(r, t, "i16 value");
            case ValueType::u32:
                return scalar<uint32_t>(r, t, "u32 value");
            case ValueType::i32:
                return scalar<int32_t>(r, t, "i32 value");
            case ValueType::u64:
                return scalar<uint64_t>(r, t, "u64 value");
            case ValueType::i64:
                return scalar<int64_t>(r, t, "i64 value");
            case ValueType::f32:
                return scalar<float>(r, t, "f32 value");
            case ValueType::f64:
                return scalar<double>(r, t, "f64 value");
            case ValueType::boolean: {
                SMOL_TRY_ASSIGN(const uint8_t b, r.read<uint8_t>("bool value"));
                if (b > 1)
                    return format_error("bool value " + std::to_string(b) + " at byte " +
                                        std::to_string(r.pos - 1));
                return Value::make_unsigned(t, b);
            }
            case ValueType::string: {
                SMOL_TRY_ASSIGN(const std::string_view s, r.read_string("string value"));
                return Value::make_string(s);
            }
            case ValueType::array:
                return read_array(r, depth);
        }
        return format_error("invalid value type");
    }
    template <class T>
    static Expected<Value> scalar(Reader& r, ValueType t, const char* what) {
        SMOL_TRY_ASSIGN(const T v, r.read<T>(what));
        if constexpr (std::is_floating_point_v<T>)
            return Value::make_float(t, v);
        else if constexpr (std::is_signed_v<T>)
            return Value::make_signed(t, v);
        else
            return Value::make_unsigned(t, v);
    }

    Expected<Value> read_array(Reader& r, int depth) const {
        if (depth >= 4) return format_error("arrays nested too deeply");
        SMOL_TRY_ASSIGN(const uint32_t et_raw, r.read<uint32_t>("array type"));
        if (!valid_value_type(et_raw))
            return format_error("invalid array element type " + std::to_string(et_raw));
        const ValueType et = ValueType(et_raw);
        SMOL_TRY_ASSIGN(const uint64_t count, r.read<uint64_t>("array length"));
        const size_t start = r.pos;
        if (const size_t width = scalar_size(et)) {
            // count * width must fit in what remains: divide, never multiply.
            if (count > r.remaining() / width) return r.truncated("array data");
            r.pos += size_t(count) * width;
        } else if (et == ValueType::string) {
            // Every string takes at least its 8-byte length.
            if (count > r.remaining() / 8) return r.truncated("array of strings");
            for (uint64_t i = 0; i < count; ++i) SMOL_TRY(r.read_string("array string"));
        } else {
            // Nested arrays: each takes at least 12 bytes.
            if (count > r.remaining() / 12) return r.truncated("nested array");
            for (uint64_t i = 0; i < count; ++i)
                SMOL_TRY(read_value(r, ValueType::array, depth + 1));
        }
        return Value::make_array(ArrayView(et, count, r.base + start, r.pos - start));
    }

    Status parse(const uint8_t* data, size_t size) {
        bytes_ = data;
        size_ = size;
        Reader r{data, size, 0, &source_};
        if (size < 4)
            return format_error("file too small (" + std::to_string(size) + " bytes) to be GGUF");
        SMOL_TRY_ASSIGN(const uint32_t magic, r.read<uint32_t>("magic"));
        if (magic != kMagic) return format_error("not a GGUF file (bad magic)");
        SMOL_TRY_ASSIGN(version_, r.read<uint32_t>("version"));
        if (version_ != 2 && version_ != 3)
            return Status(ErrorKind::unsupported, "gguf: " + source_ + ": unsupported version " +
                                                      std::to_string(version_) +
                                                      " (smol reads versions 2 and 3)");
        SMOL_TRY_ASSIGN(const uint64_t tensor_count, r.read<uint64_t>("tensor count"));
        SMOL_TRY_ASSIGN(const uint64_t kv_count, r.read<uint64_t>("metadata count"));
        // A key/value takes at least 8 (key length) + 4 (type) + 1 bytes; a
        // tensor info at least 8 + 4 + 8 + 4 + 8. Check before reserving.
        if (kv_count > r.remaining() / 13)
            return format_error("metadata count " + std::to_string(kv_count) +
                                " exceeds the file size (truncated or corrupt?)");
        if (tensor_count > r.remaining() / 32)
            return format_error("tensor count " + std::to_string(tensor_count) +
                                " exceeds the file size (truncated or corrupt?)");
        if (kv_count > kMaxMetadataKeys)
            return Status(ErrorKind::unsupported, "gguf: " + source_ + ": " +
                                                      std::to_string(kv_count) +
                                                      " metadata keys (smol reads at most " +
                                                      std::to_string(kMaxMetadataKeys) + ")");
        if (tensor_count > kMaxTensors)
            return Status(ErrorKind::unsupported,
                          "gguf: " + source_ + ": " + std::to_string(tensor_count) +
                              " tensors (smol reads at most " + std::to_string(kMaxTensors) + ")");
        SMOL_TRY(parse_metadata(r, kv_count));
        SMOL_TRY(read_alignment());
        SMOL_TRY(parse_tensor_table(r, tensor_count));
        return place_tensors(r.pos);
    }

    Status parse_metadata(Reader& r, uint64_t kv_count) {
        // Reserve no more bytes than the file has left: a forged count that
        // passes the checks in parse() must not turn into a large allocation
        // (a KeyValue in memory is ~10x its minimal encoding). Real entries
        // grow the vector as they are parsed.
        metadata_.reserve(size_t(std::min<uint64_t>(kv_count, r.remaining() / sizeof(KeyValue))));
        key_index_.reserve(size_t(kv_count));
        for (uint64_t i = 0; i < kv_count; ++i) {
            SMOL_TRY_ASSIGN(const std::string_view key, r.read_string("metadata key"));
            SMOL_TRY_ASSIGN(const uint32_t type_raw, r.read<uint32_t>("metadata value type"));
            if (!valid_value_type(type_raw))
                return format_error("key '" + detail::clip_name(key) + "' has invalid type " +
                                    std::to_string(type_raw));
            SMOL_TRY_ASSIGN(const Value value, read_value(r, ValueType(type_raw), 0));
            if (!key_index_.emplace(key, metadata_.size()).second)
                return format_error("duplicate key '" + detail::clip_name(key) + "'");
            metadata_.push_back({std::string(key), value});
        }
        return {};
    }

    Status read_alignment() {
        alignment_ = kDefaultAlignment;
        if (const Value* a = find_value("general.alignment")) {
            if (a->type() != ValueType::u32) return format_error("general.alignment must be u32");
            const uint64_t al = a->as_u64();
            if (al == 0 || (al & (al - 1)) != 0 || al > (1u << 20))
                return format_error("general.alignment " + std::to_string(al) +
                                    " is not a power of two up to 1 MiB");
            alignment_ = uint32_t(al);
        }
        return {};
    }

    Status parse_tensor_table(Reader& r, uint64_t tensor_count) {
        tensors_.reserve(
            size_t(std::min<uint64_t>(tensor_count, r.remaining() / sizeof(TensorInfo))));
        tensor_index_.reserve(size_t(tensor_count));
        for (uint64_t i = 0; i < tensor_count; ++i) {
            TensorInfo info;
            // A view of the file, for the index.
            SMOL_TRY_ASSIGN(const std::string_view name, r.read_string("tensor name"));
            info.name = std::string(name);
            const std::string tensor = "tensor '" + detail::clip_name(info.name) + "'";
            SMOL_TRY_ASSIGN(const uint32_t n_dims, r.read<uint32_t>("tensor dims"));
            if (n_dims == 0 || n_dims > kMaxDims)
                return format_error(tensor + " has " + std::to_string(n_dims) +
                                    " dims (1..4 allowed)");
            info.dims.resize(n_dims);
            uint64_t n = 1;
            for (uint32_t d = 0; d < n_dims; ++d) {
                SMOL_TRY_ASSIGN(const uint64_t dim, r.read<uint64_t>("tensor dim"));
                if (dim == 0) return format_error(tensor + " has a zero dim");
                if (n > (uint64_t(1) << 62) / dim) return format_error(tensor + " dims overflow");
                n *= dim;
                info.dims[d] = dim;
            }
            info.n_elements = n;
            SMOL_TRY_ASSIGN(const uint32_t type_raw, r.read<uint32_t>("tensor type"));
            info.type = GGMLType(type_raw);
            const TypeTraits traits = type_traits(info.type);
            if (!traits.name)
                return Status(ErrorKind::unsupported, "gguf: " + source_ + ": " + tensor +
                                                          " has unknown type id " +
                                                          std::to_string(type_raw));
            if (info.dims[0] % traits.block_size != 0)
                return format_error(tensor + " row of " + std::to_string(info.dims[0]) +
                                    " is not a multiple of the " + traits.name + " block size " +
                                    std::to_string(traits.block_size));
            // n < 2^62 elements, but n / block_size blocks of type_size bytes can
            // still pass 2^64 (F32: 4 bytes an element): a wrapped size would
            // pass the bounds check in place_tensors and let kernels read past the file.
            if (!smol::detail::mul_fits(n / traits.block_size, traits.type_size, &info.n_bytes))
                return format_error(tensor + " byte size overflows");
            SMOL_TRY_ASSIGN(info.offset, r.read<uint64_t>("tensor offset"));
            if (info.offset % alignment_ != 0)
                return format_error(tensor + " offset " + std::to_string(info.offset) +
                                    " is not aligned to " + std::to_string(alignment_));
            if (!tensor_index_.emplace(name, tensors_.size()).second)
                return format_error("duplicate " + tensor);
            tensors_.push_back(std::move(info));
        }
        return {};
    }

    // The data section starts at the next multiple of the alignment after the
    // header (which ends at header_end); every tensor must lie inside it.
    Status place_tensors(uint64_t header_end) {
        uint64_t data_start = (header_end + alignment_ - 1) / alignment_ * alignment_;
        if (tensors_.empty() && data_start > size_)
            data_start = size_;  // metadata-only files may end unpadded
        if (data_start > size_) return format_error("truncated file (data section missing)");
        data_offset_ = size_t(data_start);
        const uint64_t data_size = size_ - data_start;
        for (TensorInfo& t : tensors_) {
            if (t.offset > data_size || t.n_bytes > data_size - t.offset)
                return format_error("tensor '" + detail::clip_name(t.name) + "' (offset " +
                                    std::to_string(t.offset) + ", " + std::to_string(t.n_bytes) +
                                    " bytes) extends past the end of the file (truncated?)");
            t.data = bytes_ + data_start + t.offset;
        }
        return {};
    }

    MappedFile mapping_;
    std::vector<uint8_t> owned_;
    std::string source_;
    const uint8_t* bytes_ = nullptr;
    size_t size_ = 0;
    uint32_t version_ = 0;
    uint32_t alignment_ = kDefaultAlignment;
    size_t data_offset_ = 0;
    std::vector<KeyValue> metadata_;
    // Keyed by views of the file's bytes (they live as long as the File).
    std::unordered_map<std::string_view, size_t> key_index_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace gguf
SMOL_NAMESPACE_END
