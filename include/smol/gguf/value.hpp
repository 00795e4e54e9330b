// The values a GGUF file holds, as gguf::File (gguf.hpp) hands them out:
// metadata values (Value, with strings and arrays as views of the file's
// bytes), numeric and string arrays (ArrayView), and the tensor table's
// entries (TensorInfo). The byte format is described in gguf.hpp.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../detail/bytes.hpp"
#include "../detail/unit_vector.hpp"
#include "../error.hpp"
#include "../quant/types.hpp"

SMOL_NAMESPACE_BEGIN
namespace gguf {

enum class ValueType : uint32_t {
    u8 = 0,
    i8 = 1,
    u16 = 2,
    i16 = 3,
    u32 = 4,
    i32 = 5,
    f32 = 6,
    boolean = 7,
    string = 8,
    array = 9,
    u64 = 10,
    i64 = 11,
    f64 = 12,
};

inline const char* value_type_name(ValueType t) noexcept {
    switch (t) {
        case ValueType::u8:
            return "u8";
        case ValueType::i8:
            return "i8";
        case ValueType::u16:
            return "u16";
        case ValueType::i16:
            return "i16";
        case ValueType::u32:
            return "u32";
        case ValueType::i32:
            return "i32";
        case ValueType::f32:
            return "f32";
        case ValueType::boolean:
            return "bool";
        case ValueType::string:
            return "string";
        case ValueType::array:
            return "array";
        case ValueType::u64:
            return "u64";
        case ValueType::i64:
            return "i64";
        case ValueType::f64:
            return "f64";
    }
    return "invalid";
}

// Size in bytes of a fixed-size value type, 0 for string/array/invalid.
inline size_t scalar_size(ValueType t) noexcept {
    switch (t) {
        case ValueType::u8:
        case ValueType::i8:
        case ValueType::boolean:
            return 1;
        case ValueType::u16:
        case ValueType::i16:
            return 2;
        case ValueType::u32:
        case ValueType::i32:
        case ValueType::f32:
            return 4;
        case ValueType::u64:
        case ValueType::i64:
        case ValueType::f64:
            return 8;
        default:
            return 0;
    }
}

inline bool is_integer(ValueType t) noexcept {
    return t == ValueType::u8 || t == ValueType::i8 || t == ValueType::u16 || t == ValueType::i16 ||
           t == ValueType::u32 || t == ValueType::i32 || t == ValueType::u64 || t == ValueType::i64;
}

// An array value: a view of `count` elements of `element_type` in the file.
// Each read comes in two forms: try_* returns the error as a value, the plain
// form throws it (ErrorKind::type for elements that do not convert).
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
    Expected<std::vector<std::string_view>> try_strings(uint64_t max_count = ~uint64_t(0)) const {
        if (element_type_ != ValueType::string)
            return ErrorInfo{ErrorKind::type,
                             std::string("gguf: expected an array of string, found an array of ") +
                                 value_type_name(element_type_)};
        // Built in this unit's own vector type, then copied once: reserve and
        // emplace_back on a std::vector<std::string_view> are weak standard
        // code shared with units built with other -m flags (detail/unit_vector.hpp).
        smol::detail::UnitVector<std::string_view> views;
        const uint64_t n = std::min(count_, max_count);
        views.reserve(size_t(n));
        size_t at = 0;
        for (uint64_t i = 0; i < n; ++i) {
            // Lengths were validated during parsing.
            const uint64_t len = smol::detail::read_le<uint64_t>(data_, at);
            views.emplace_back(reinterpret_cast<const char*>(data_ + at + 8), size_t(len));
            at += 8 + size_t(len);
        }
        return std::vector<std::string_view>(views.begin(), views.end());
    }
    std::vector<std::string_view> strings(uint64_t max_count = ~uint64_t(0)) const {
        return smol::detail::value_or_fail(try_strings(max_count));
    }

    // The elements of a numeric array converted to T. An integer T must hold
    // every value exactly: float elements, or integers out of T's range, are
    // ErrorKind::type (converting them would be undefined behaviour or a
    // silent wrap). A floating T takes any numeric element as C++ converts it.
    template <class T>
    Expected<std::vector<T>> try_to_vector() const {
        SMOL_TRY_ASSIGN(const size_t width, numeric_width<T>());
        std::vector<T> out(static_cast<size_t>(count_));
        for (size_t i = 0; i < out.size(); ++i) {
            SMOL_TRY_ASSIGN(out[i], element<T>(i * width));
        }
        return out;
    }
    template <class T>
    std::vector<T> to_vector() const {
        return smol::detail::value_or_fail(try_to_vector<T>());
    }

    // Element i of a numeric array as T (same conversion rules as to_vector),
    // without converting the rest; an index past the end is ErrorKind::out_of_range.
    template <class T>
    Expected<T> try_at(uint64_t i) const {
        SMOL_TRY_ASSIGN(const size_t width, numeric_width<T>());
        if (i >= count_)
            return ErrorInfo{ErrorKind::out_of_range, "gguf: array index " + std::to_string(i) +
                                                          " of " + std::to_string(count_)};
        return element<T>(size_t(i) * width);
    }
    template <class T>
    T at(uint64_t i) const {
        return smol::detail::value_or_fail(try_at<T>(i));
    }

private:
    // The element width, once the elements are known to convert to T: numeric,
    // and not float when T is an integer.
    template <class T>
    Expected<size_t> numeric_width() const {
        static_assert(std::is_arithmetic_v<T>, "numeric array reads need an arithmetic T");
        const size_t width = scalar_size(element_type_);
        if (width == 0)
            return ErrorInfo{ErrorKind::type, std::string("gguf: array of ") +
                                                  value_type_name(element_type_) +
                                                  " is not numeric"};
        if (std::is_integral_v<T> &&
            (element_type_ == ValueType::f32 || element_type_ == ValueType::f64))
            return ErrorInfo{ErrorKind::type, std::string("gguf: array of ") +
                                                  value_type_name(element_type_) +
                                                  " cannot be read as integers"};
        return width;
    }
    // One element converted to T; integer targets are range-checked.
    template <class T, class S>
    static Expected<T> narrow(S v) {
        if constexpr (std::is_integral_v<T> && std::is_integral_v<S>) {
            bool fits = true;
            if constexpr (std::is_signed_v<S>) {
                if (v < 0)
                    fits =
                        std::is_signed_v<T> && int64_t(v) >= int64_t(std::numeric_limits<T>::min());
                else
                    fits = uint64_t(v) <= uint64_t(std::numeric_limits<T>::max());
            } else {
                fits = uint64_t(v) <= uint64_t(std::numeric_limits<T>::max());
            }
            if (!fits)
                return ErrorInfo{ErrorKind::type,
                                 "gguf: array element " + std::to_string(v) + " is out of range"};
        }
        return T(v);
    }
    // The element at byte `at` of the array's data.
    template <class T>
    Expected<T> element(size_t at) const {
        using smol::detail::read_le;
        switch (element_type_) {
            case ValueType::u8:
                return narrow<T>(read_le<uint8_t>(data_, at));
            case ValueType::i8:
                return narrow<T>(read_le<int8_t>(data_, at));
            case ValueType::u16:
                return narrow<T>(read_le<uint16_t>(data_, at));
            case ValueType::i16:
                return narrow<T>(read_le<int16_t>(data_, at));
            case ValueType::u32:
                return narrow<T>(read_le<uint32_t>(data_, at));
            case ValueType::i32:
                return narrow<T>(read_le<int32_t>(data_, at));
            case ValueType::f32:
                return T(read_le<float>(data_, at));  // T is floating (checked above)
            case ValueType::boolean:
                return T(data_[at] != 0);
            case ValueType::u64:
                return narrow<T>(read_le<uint64_t>(data_, at));
            case ValueType::i64:
                return narrow<T>(read_le<int64_t>(data_, at));
            case ValueType::f64:
                return T(read_le<double>(data_, at));
            default:
                return T{};
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
    std::vector<uint64_t> dims;  // innermost first, as stored
    GGMLType type = GGMLType::F32;
    uint64_t offset = 0;  // from the start of the data section
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

}  // namespace gguf
SMOL_NAMESPACE_END
