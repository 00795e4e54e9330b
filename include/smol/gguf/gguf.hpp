// GGUF reader: parses the header, metadata and tensor table of a GGUF file
// held in memory (a read-only mapping of a path, or a caller's buffer) and
// hands out zero-copy views. Every count, length and offset is checked against
// the bytes that remain before anything is allocated or dereferenced, so a
// truncated or hostile file gives smol::Error, never a crash.
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
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "../core/mmap.hpp"
#include "../detail/checked.hpp"
#include "../error.hpp"
#include "../quant/types.hpp"

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

enum class ValueType : uint32_t {
    u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
    string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

inline const char* value_type_name(ValueType t) noexcept {
    switch (t) {
        case ValueType::u8: return "u8";
        case ValueType::i8: return "i8";
        case ValueType::u16: return "u16";
        case ValueType::i16: return "i16";
        case ValueType::u32: return "u32";
        case ValueType::i32: return "i32";
        case ValueType::f32: return "f32";
        case ValueType::boolean: return "bool";
        case ValueType::string: return "string";
        case ValueType::array: return "array";
        case ValueType::u64: return "u64";
        case ValueType::i64: return "i64";
        case ValueType::f64: return "f64";
    }
    return "invalid";
}

// Size in bytes of a fixed-size value type, 0 for string/array/invalid.
inline size_t scalar_size(ValueType t) noexcept {
    switch (t) {
        case ValueType::u8: case ValueType::i8: case ValueType::boolean: return 1;
        case ValueType::u16: case ValueType::i16: return 2;
        case ValueType::u32: case ValueType::i32: case ValueType::f32: return 4;
        case ValueType::u64: case ValueType::i64: case ValueType::f64: return 8;
        default: return 0;
    }
}

inline bool is_integer(ValueType t) noexcept {
    return t == ValueType::u8 || t == ValueType::i8 || t == ValueType::u16 || t == ValueType::i16 ||
           t == ValueType::u32 || t == ValueType::i32 || t == ValueType::u64 || t == ValueType::i64;
}

namespace detail {
template <class T>
inline T load_le(const uint8_t* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof v);  // smol targets little-endian hosts only (x86-64, aarch64)
    return v;
}
// A name read from the file, as it appears in an error message: at most 96
// bytes, so that a forged multi-megabyte key cannot make the message (an
// allocation) as large as the file.
inline std::string clip_name(std::string_view name) {
    constexpr size_t kMaxShown = 96;
    if (name.size() <= kMaxShown) return std::string(name);
    return std::string(name.substr(0, kMaxShown)) + "...(" + std::to_string(name.size()) + " bytes)";
}
}  // namespace detail

// An array value: a view of `count` elements of `element_type` in the file.
class ArrayView {
public:
    ArrayView() = default;
    ArrayView(ValueType element_type, uint64_t count, const uint8_t* data, size_t bytes)
        : element_type_(element_type), count_(count), data_(data), bytes_(bytes) {}

    ValueType element_type() const noexcept { return element_type_; }
    uint64_t size() const noexcept { return count_; }
    const uint8_t* data() const noexcept { return data_; }
    size_t bytes() const noexcept { return bytes_; }

    // The elements of a string array as views into the file (no string copies);
    // at most `max_count` of them, the leading ones (a preview need not build
    // a table as long as the array).
    std::vector<std::string_view> strings(uint64_t max_count = ~uint64_t(0)) const {
        require(ValueType::string, "string");
        std::vector<std::string_view> out;
        const uint64_t n = std::min(count_, max_count);
        out.reserve(size_t(n));
        const uint8_t* p = data_;
        for (uint64_t i = 0; i < n; ++i) {
            // Lengths were validated during parsing.
            const uint64_t len = detail::load_le<uint64_t>(p);
            out.emplace_back(reinterpret_cast<const char*>(p + 8), size_t(len));
            p += 8 + len;
        }
        return out;
    }

    // The elements of a numeric array converted to T. An integer T must hold
    // every value exactly: float elements, or integers out of T's range, throw
    // ErrorKind::type (converting them would be undefined behaviour or a silent
    // wrap). A floating T takes any numeric element as C++ converts it.
    template <class T>
    std::vector<T> to_vector() const {
        const size_t width = numeric_width<T>();
        std::vector<T> out(static_cast<size_t>(count_));
        for (size_t i = 0; i < out.size(); ++i) out[i] = element<T>(data_ + i * width);
        return out;
    }

    // Element i of a numeric array as T (same conversion rules as to_vector),
    // without converting the rest.
    template <class T>
    T at(uint64_t i) const {
        const size_t width = numeric_width<T>();
        if (i >= count_)
            smol::detail::fail(ErrorKind::out_of_range, "gguf: array index " + std::to_string(i) + " of " +
                                                            std::to_string(count_));
        return element<T>(data_ + size_t(i) * width);
    }

private:
    // The element width, once the elements are known to convert to T: numeric,
    // and not float when T is an integer (that conversion would be undefined
    // behaviour or a silent wrap); ErrorKind::type otherwise.
    template <class T>
    size_t numeric_width() const {
        static_assert(std::is_arithmetic_v<T>, "numeric array reads need an arithmetic T");
        const size_t width = scalar_size(element_type_);
        if (width == 0)
            smol::detail::fail(ErrorKind::type, std::string("gguf: array of ") +
                                                    value_type_name(element_type_) + " is not numeric");
        if (std::is_integral_v<T> && (element_type_ == ValueType::f32 || element_type_ == ValueType::f64))
            smol::detail::fail(ErrorKind::type, std::string("gguf: array of ") +
                                                    value_type_name(element_type_) +
                                                    " cannot be read as integers");
        return width;
    }
    void require(ValueType t, const char* what) const {
        if (element_type_ != t)
            smol::detail::fail(ErrorKind::type, std::string("gguf: expected an array of ") + what +
                                                    ", found an array of " +
                                                    value_type_name(element_type_));
    }
    // One element converted to T; integer targets are range-checked.
    template <class T, class S>
    static T narrow(S v) {
        if constexpr (std::is_integral_v<T> && std::is_integral_v<S>) {
            bool fits = true;
            if constexpr (std::is_signed_v<S>) {
                if (v < 0)
                    fits = std::is_signed_v<T> && int64_t(v) >= int64_t(std::numeric_limits<T>::min());
                else
                    fits = uint64_t(v) <= uint64_t(std::numeric_limits<T>::max());
            } else {
                fits = uint64_t(v) <= uint64_t(std::numeric_limits<T>::max());
            }
            if (!fits)
                smol::detail::fail(ErrorKind::type,
                                   "gguf: array element " + std::to_string(v) + " is out of range");
        }
        return T(v);
    }
    template <class T>
    T element(const uint8_t* p) const {
        switch (element_type_) {
            case ValueType::u8: return narrow<T>(detail::load_le<uint8_t>(p));
            case ValueType::i8: return narrow<T>(detail::load_le<int8_t>(p));
            case ValueType::u16: return narrow<T>(detail::load_le<uint16_t>(p));
            case ValueType::i16: return narrow<T>(detail::load_le<int16_t>(p));
            case ValueType::u32: return narrow<T>(detail::load_le<uint32_t>(p));
            case ValueType::i32: return narrow<T>(detail::load_le<int32_t>(p));
            case ValueType::f32: return T(detail::load_le<float>(p));  // T is floating (checked above)
            case ValueType::boolean: return T(p[0] != 0);
            case ValueType::u64: return narrow<T>(detail::load_le<uint64_t>(p));
            case ValueType::i64: return narrow<T>(detail::load_le<int64_t>(p));
            case ValueType::f64: return T(detail::load_le<double>(p));
            default: return T{};
        }
    }

    ValueType element_type_ = ValueType::u8;
    uint64_t count_ = 0;
    const uint8_t* data_ = nullptr;
    size_t bytes_ = 0;
};

// One metadata value. Strings and arrays are views into the file's bytes and
// live as long as the File they came from.
class Value {
public:
    ValueType type() const noexcept { return type_; }

    bool is_integer() const noexcept { return gguf::is_integer(type_); }
    bool is_float() const noexcept { return type_ == ValueType::f32 || type_ == ValueType::f64; }

    // Integer payload (valid for integer and bool types).
    int64_t as_i64() const noexcept { return is_unsigned_ ? int64_t(u_) : i_; }
    uint64_t as_u64() const noexcept { return u_; }
    bool negative() const noexcept { return !is_unsigned_ && i_ < 0; }
    double as_f64() const noexcept { return f_; }
    bool as_bool() const noexcept { return u_ != 0; }
    std::string_view as_string() const noexcept { return str_; }
    const ArrayView& as_array() const noexcept { return array_; }

    static Value make_unsigned(ValueType t, uint64_t v) {
        Value x;
        x.type_ = t;
        x.u_ = v;
        x.i_ = int64_t(v);
        x.is_unsigned_ = true;
        return x;
    }
    static Value make_signed(ValueType t, int64_t v) {
        Value x;
        x.type_ = t;
        x.i_ = v;
        x.u_ = uint64_t(v);
        x.is_unsigned_ = false;
        return x;
    }
    static Value make_float(ValueType t, double v) {
        Value x;
        x.type_ = t;
        x.f_ = v;
        return x;
    }
    static Value make_string(std::string_view s) {
        Value x;
        x.type_ = ValueType::string;
        x.str_ = s;
        return x;
    }
    static Value make_array(const ArrayView& a) {
        Value x;
        x.type_ = ValueType::array;
        x.array_ = a;
        return x;
    }

private:
    ValueType type_ = ValueType::u8;
    bool is_unsigned_ = true;
    uint64_t u_ = 0;
    int64_t i_ = 0;
    double f_ = 0;
    std::string_view str_;
    ArrayView array_;
};

struct TensorInfo {
    std::string name;
    std::vector<uint64_t> dims;   // innermost first, as stored
    GGMLType type = GGMLType::F32;
    uint64_t offset = 0;          // from the start of the data section
    uint64_t n_elements = 0;
    uint64_t n_bytes = 0;
    const uint8_t* data = nullptr;  // into the file's bytes

    uint64_t dim(size_t i) const noexcept { return i < dims.size() ? dims[i] : 1; }
    // Rows of a matrix: the product of every dim but the innermost.
    uint64_t rows() const noexcept { return dims.empty() ? 0 : n_elements / dims[0]; }
};

struct KeyValue {
    std::string key;
    Value value;
};

// A parsed GGUF file. Owns (or borrows) the bytes; every view it hands out is
// valid while it lives.
class File {
public:
    // Maps `path` read-only and parses it.
    static std::shared_ptr<File> open(const std::string& path) {
        auto file = std::shared_ptr<File>(new File());
        file->mapping_ = MappedFile(path);
        file->source_ = path;
        file->parse(file->mapping_.data(), file->mapping_.size());
        return file;
    }

    // Parses a caller-owned buffer that must outlive the File (asset packs,
    // embedded resources). No copy is made.
    static std::shared_ptr<File> from_buffer(const void* data, size_t size,
                                             std::string source = "<memory>") {
        if (data == nullptr && size > 0)  // (nullptr, 0) is an empty file: "too small" below
            smol::detail::fail(ErrorKind::invalid_argument, source + ": no buffer (null pointer, " + std::to_string(size) +
                                                          " bytes claimed)");
        auto file = std::shared_ptr<File>(new File());
        file->source_ = std::move(source);
        file->parse(static_cast<const uint8_t*>(data), size);
        return file;
    }

    // Parses bytes that the File takes ownership of.
    static std::shared_ptr<File> from_bytes(std::vector<uint8_t> bytes,
                                            std::string source = "<memory>") {
        auto file = std::shared_ptr<File>(new File());
        file->owned_ = std::move(bytes);
        file->source_ = std::move(source);
        file->parse(file->owned_.data(), file->owned_.size());
        return file;
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

    // Typed lookup; throws smol::Error (missing / type) naming the key.
    // T: bool, any integer type (the stored integer must fit), float, double,
    // std::string, std::string_view, ArrayView, or std::vector<T> of those.
    template <class T>
    T get(std::string_view key) const {
        const Value* v = find_value(key);
        if (!v)
            smol::detail::fail(ErrorKind::missing,
                               "gguf: " + source_ + ": missing metadata key '" + std::string(key) + "'");
        return convert<T>(key, *v);
    }

    // As get<T>, but an absent key gives std::nullopt (a wrong type still throws).
    template <class T>
    std::optional<T> find(std::string_view key) const {
        const Value* v = find_value(key);
        if (!v) return std::nullopt;
        return convert<T>(key, *v);
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
    T convert(std::string_view key, const Value& v) const {
        auto wrong = [&](const char* wanted) {
            smol::detail::fail(ErrorKind::type, "gguf: " + source_ + ": key '" + std::string(key) +
                                                    "' has type " + value_type_name(v.type()) +
                                                    ", expected " + wanted);
        };
        if constexpr (std::is_same_v<T, bool>) {
            if (v.type() != ValueType::boolean) wrong("bool");
            return v.as_bool();
        } else if constexpr (std::is_integral_v<T>) {
            if (!v.is_integer()) wrong("an integer");
            if (v.negative()) {
                if (std::is_unsigned_v<T> || v.as_i64() < int64_t(std::numeric_limits<T>::min()))
                    smol::detail::fail(ErrorKind::type, "gguf: key '" + std::string(key) +
                                                            "' value out of range");
                return T(v.as_i64());
            }
            if (v.as_u64() > uint64_t(std::numeric_limits<T>::max()))
                smol::detail::fail(ErrorKind::type,
                                   "gguf: key '" + std::string(key) + "' value out of range");
            return T(v.as_u64());
        } else if constexpr (std::is_floating_point_v<T>) {
            if (v.is_float()) return T(v.as_f64());
            if (v.is_integer()) return v.negative() ? T(v.as_i64()) : T(v.as_u64());
            wrong("a number");
        } else if constexpr (std::is_same_v<T, std::string_view>) {
            if (v.type() != ValueType::string) wrong("string");
            return v.as_string();
        } else if constexpr (std::is_same_v<T, std::string>) {
            if (v.type() != ValueType::string) wrong("string");
            return std::string(v.as_string());
        } else if constexpr (std::is_same_v<T, ArrayView>) {
            if (v.type() != ValueType::array) wrong("array");
            return v.as_array();
        } else if constexpr (std::is_same_v<T, std::vector<std::string_view>>) {
            if (v.type() != ValueType::array || v.as_array().element_type() != ValueType::string)
                wrong("array of string");
            return v.as_array().strings();
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            if (v.type() != ValueType::array || v.as_array().element_type() != ValueType::string)
                wrong("array of string");
            std::vector<std::string> out;
            for (auto s : v.as_array().strings()) out.emplace_back(s);
            return out;
        } else {
            using E = typename T::value_type;
            static_assert(std::is_arithmetic_v<E>, "unsupported get<T> type");
            if (v.type() != ValueType::array) wrong("array");
            const ValueType et = v.as_array().element_type();
            if (scalar_size(et) == 0) wrong("numeric array");
            if (std::is_integral_v<E> && (et == ValueType::f32 || et == ValueType::f64))
                wrong("integer array");
            return v.as_array().to_vector<E>();
        }
        return T{};
    }

    // Cursor over [begin, end) that throws on any read past the end.
    struct Reader {
        const uint8_t* base;
        size_t size;
        size_t pos;
        const std::string* source;

        [[noreturn]] void truncated(const char* what) const {
            smol::detail::fail(ErrorKind::format, "gguf: " + *source + ": truncated file (reading " +
                                                      what + " at byte " + std::to_string(pos) +
                                                      " of " + std::to_string(size) + ")");
        }
        size_t remaining() const noexcept { return size - pos; }
        void need(uint64_t n, const char* what) const {
            if (n > remaining()) truncated(what);
        }
        template <class T>
        T read(const char* what) {
            need(sizeof(T), what);
            T v = detail::load_le<T>(base + pos);
            pos += sizeof(T);
            return v;
        }
        std::string_view read_string(const char* what) {
            const uint64_t len = read<uint64_t>(what);
            need(len, what);
            std::string_view s(reinterpret_cast<const char*>(base + pos), size_t(len));
            pos += size_t(len);
            return s;
        }
        void skip(uint64_t n, const char* what) {
            need(n, what);
            pos += size_t(n);
        }
    };

    static bool valid_value_type(uint32_t t) noexcept { return t <= 12; }

    // Reads a value of type t. Arrays nest at most a few levels deep (a hostile
    // file could otherwise recurse until the stack overflows).
    Value read_value(Reader& r, ValueType t, int depth) {
        switch (t) {
            case ValueType::u8: return Value::make_unsigned(t, r.read<uint8_t>("u8 value"));
            case ValueType::i8: return Value::make_signed(t, r.read<int8_t>("i8 value"));
            case ValueType::u16: return Value::make_unsigned(t, r.read<uint16_t>("u16 value"));
            case ValueType::i16: return Value::make_signed(t, r.read<int16_t>("i16 value"));
            case ValueType::u32: return Value::make_unsigned(t, r.read<uint32_t>("u32 value"));
            case ValueType::i32: return Value::make_signed(t, r.read<int32_t>("i32 value"));
            case ValueType::u64: return Value::make_unsigned(t, r.read<uint64_t>("u64 value"));
            case ValueType::i64: return Value::make_signed(t, r.read<int64_t>("i64 value"));
            case ValueType::f32: return Value::make_float(t, r.read<float>("f32 value"));
            case ValueType::f64: return Value::make_float(t, r.read<double>("f64 value"));
            case ValueType::boolean: {
                const uint8_t b = r.read<uint8_t>("bool value");
                if (b > 1)
                    smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": bool value " +
                                                              std::to_string(b) + " at byte " +
                                                              std::to_string(r.pos - 1));
                return Value::make_unsigned(t, b);
            }
            case ValueType::string: return Value::make_string(r.read_string("string value"));
            case ValueType::array: {
                if (depth >= 4)
                    smol::detail::fail(ErrorKind::format,
                                       "gguf: " + source_ + ": arrays nested too deeply");
                const uint32_t et_raw = r.read<uint32_t>("array type");
                if (!valid_value_type(et_raw))
                    smol::detail::fail(ErrorKind::format, "gguf: " + source_ +
                                                              ": invalid array element type " +
                                                              std::to_string(et_raw));
                const ValueType et = ValueType(et_raw);
                const uint64_t count = r.read<uint64_t>("array length");
                const size_t start = r.pos;
                if (const size_t width = scalar_size(et)) {
                    // count * width must fit in what remains: divide, never multiply.
                    if (count > r.remaining() / width) r.truncated("array data");
                    r.pos += size_t(count) * width;
                } else if (et == ValueType::string) {
                    // Every string takes at least its 8-byte length.
                    if (count > r.remaining() / 8) r.truncated("array of strings");
                    for (uint64_t i = 0; i < count; ++i) r.read_string("array string");
                } else {
                    // Nested arrays: each takes at least 12 bytes.
                    if (count > r.remaining() / 12) r.truncated("nested array");
                    for (uint64_t i = 0; i < count; ++i) read_value(r, ValueType::array, depth + 1);
                }
                return Value::make_array(ArrayView(et, count, r.base + start, r.pos - start));
            }
        }
        smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": invalid value type");
    }

    void parse(const uint8_t* data, size_t size) {
        bytes_ = data;
        size_ = size;
        Reader r{data, size, 0, &source_};
        if (size < 4)
            smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": file too small (" +
                                                      std::to_string(size) + " bytes) to be GGUF");
        const uint32_t magic = r.read<uint32_t>("magic");
        if (magic != kMagic)
            smol::detail::fail(ErrorKind::format,
                               "gguf: " + source_ + ": not a GGUF file (bad magic)");
        version_ = r.read<uint32_t>("version");
        if (version_ != 2 && version_ != 3)
            smol::detail::fail(ErrorKind::unsupported, "gguf: " + source_ + ": unsupported version " +
                                                           std::to_string(version_) +
                                                           " (smol reads versions 2 and 3)");
        const uint64_t tensor_count = r.read<uint64_t>("tensor count");
        const uint64_t kv_count = r.read<uint64_t>("metadata count");
        // A key/value takes at least 8 (key length) + 4 (type) + 1 bytes; a
        // tensor info at least 8 + 4 + 8 + 4 + 8. Check before reserving.
        if (kv_count > r.remaining() / 13)
            smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": metadata count " +
                                                      std::to_string(kv_count) +
                                                      " exceeds the file size (truncated or corrupt?)");
        if (tensor_count > r.remaining() / 32)
            smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": tensor count " +
                                                      std::to_string(tensor_count) +
                                                      " exceeds the file size (truncated or corrupt?)");
        if (kv_count > kMaxMetadataKeys)
            smol::detail::fail(ErrorKind::unsupported, "gguf: " + source_ + ": " + std::to_string(kv_count) +
                                                           " metadata keys (smol reads at most " +
                                                           std::to_string(kMaxMetadataKeys) + ")");
        if (tensor_count > kMaxTensors)
            smol::detail::fail(ErrorKind::unsupported, "gguf: " + source_ + ": " + std::to_string(tensor_count) +
                                                           " tensors (smol reads at most " +
                                                           std::to_string(kMaxTensors) + ")");

        // Reserve no more bytes than the file has left: a forged count that
        // passes the check above must not turn into a large allocation (a
        // KeyValue in memory is ~10x its minimal encoding). Real entries grow
        // the vector as they are parsed.
        metadata_.reserve(size_t(std::min<uint64_t>(kv_count, r.remaining() / sizeof(KeyValue))));
        key_index_.reserve(size_t(kv_count));
        for (uint64_t i = 0; i < kv_count; ++i) {
            const std::string_view key = r.read_string("metadata key");
            const uint32_t type_raw = r.read<uint32_t>("metadata value type");
            if (!valid_value_type(type_raw))
                smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": key '" +
                                                          detail::clip_name(key) + "' has invalid type " +
                                                          std::to_string(type_raw));
            Value value = read_value(r, ValueType(type_raw), 0);
            if (!key_index_.emplace(key, metadata_.size()).second)
                smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": duplicate key '" +
                                                          detail::clip_name(key) + "'");
            metadata_.push_back({std::string(key), value});
        }

        alignment_ = kDefaultAlignment;
        if (const Value* a = find_value("general.alignment")) {
            if (a->type() != ValueType::u32)
                smol::detail::fail(ErrorKind::format,
                                   "gguf: " + source_ + ": general.alignment must be u32");
            const uint64_t al = a->as_u64();
            if (al == 0 || (al & (al - 1)) != 0 || al > (1u << 20))
                smol::detail::fail(ErrorKind::format, "gguf: " + source_ +
                                                          ": general.alignment " +
                                                          std::to_string(al) +
                                                          " is not a power of two up to 1 MiB");
            alignment_ = uint32_t(al);
        }

        tensors_.reserve(size_t(std::min<uint64_t>(tensor_count, r.remaining() / sizeof(TensorInfo))));
        tensor_index_.reserve(size_t(tensor_count));
        for (uint64_t i = 0; i < tensor_count; ++i) {
            TensorInfo info;
            const std::string_view name = r.read_string("tensor name");  // a view of the file, for the index
            info.name = std::string(name);
            const uint32_t n_dims = r.read<uint32_t>("tensor dims");
            if (n_dims == 0 || n_dims > kMaxDims)
                smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": tensor '" + detail::clip_name(info.name) +
                                                          "' has " + std::to_string(n_dims) +
                                                          " dims (1..4 allowed)");
            info.dims.resize(n_dims);
            uint64_t n = 1;
            for (uint32_t d = 0; d < n_dims; ++d) {
                const uint64_t dim = r.read<uint64_t>("tensor dim");
                if (dim == 0)
                    smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": tensor '" +
                                                              detail::clip_name(info.name) + "' has a zero dim");
                if (n > (uint64_t(1) << 62) / dim)
                    smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": tensor '" +
                                                              detail::clip_name(info.name) + "' dims overflow");
                n *= dim;
                info.dims[d] = dim;
            }
            info.n_elements = n;
            const uint32_t type_raw = r.read<uint32_t>("tensor type");
            info.type = GGMLType(type_raw);
            const TypeTraits traits = type_traits(info.type);
            if (!traits.name)
                smol::detail::fail(ErrorKind::unsupported, "gguf: " + source_ + ": tensor '" +
                                                               detail::clip_name(info.name) + "' has unknown type id " +
                                                               std::to_string(type_raw));
            if (info.dims[0] % traits.block_size != 0)
                smol::detail::fail(ErrorKind::format,
                                   "gguf: " + source_ + ": tensor '" + detail::clip_name(info.name) + "' row of " +
                                       std::to_string(info.dims[0]) + " is not a multiple of the " +
                                       traits.name + " block size " +
                                       std::to_string(traits.block_size));
            // n < 2^62 elements, but n / block_size blocks of type_size bytes can
            // still pass 2^64 (F32: 4 bytes an element): a wrapped size would
            // pass the bounds check below and let kernels read past the file.
            if (!smol::detail::mul_fits(n / traits.block_size, traits.type_size, &info.n_bytes))
                smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": tensor '" +
                                                          detail::clip_name(info.name) + "' byte size overflows");
            info.offset = r.read<uint64_t>("tensor offset");
            if (info.offset % alignment_ != 0)
                smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": tensor '" + detail::clip_name(info.name) +
                                                          "' offset " + std::to_string(info.offset) +
                                                          " is not aligned to " +
                                                          std::to_string(alignment_));
            if (!tensor_index_.emplace(name, tensors_.size()).second)
                smol::detail::fail(ErrorKind::format, "gguf: " + source_ + ": duplicate tensor '" +
                                                          detail::clip_name(info.name) + "'");
            tensors_.push_back(std::move(info));
        }

        // The data section starts at the next multiple of the alignment.
        const uint64_t header_end = r.pos;
        uint64_t data_start = (header_end + alignment_ - 1) / alignment_ * alignment_;
        if (tensors_.empty() && data_start > size) data_start = size;  // metadata-only files may end unpadded
        if (data_start > size)
            smol::detail::fail(ErrorKind::format,
                               "gguf: " + source_ + ": truncated file (data section missing)");
        data_offset_ = size_t(data_start);
        const uint64_t data_size = size - data_start;
        for (TensorInfo& t : tensors_) {
            if (t.offset > data_size || t.n_bytes > data_size - t.offset)
                smol::detail::fail(ErrorKind::format,
                                   "gguf: " + source_ + ": tensor '" + detail::clip_name(t.name) + "' (offset " +
                                       std::to_string(t.offset) + ", " + std::to_string(t.n_bytes) +
                                       " bytes) extends past the end of the file (truncated?)");
            t.data = data + data_start + t.offset;
        }
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
