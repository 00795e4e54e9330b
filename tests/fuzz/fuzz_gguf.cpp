// libFuzzer target for the GGUF reader: parse the input as a GGUF file, then
// touch every metadata value, array element and tensor byte range it hands out,
// and try the typed lookups a model loader makes. The only acceptable outcomes
// are a parsed file or smol::Error; sanitizers (address, undefined) catch the rest.
//   tools/fuzz.sh fuzz_gguf 600
#include <smol/gguf/gguf.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {

volatile uint64_t g_sink;  // keeps the reads below from being optimized away

void touch_bytes(const uint8_t* p, size_t n) {
    if (n == 0) return;
    uint64_t acc = p[0];
    acc += p[n - 1];
    acc += p[n / 2];
    g_sink = g_sink + acc;
}

void touch_array(const smol::gguf::ArrayView& a) {
    using smol::gguf::ValueType;
    touch_bytes(a.data(), a.bytes());
    if (a.element_type() == ValueType::string) {
        for (std::string_view s : a.strings())
            touch_bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    } else if (smol::gguf::scalar_size(a.element_type()) != 0) {
        double sum = 0;
        for (double x : a.to_vector<double>()) sum += x;
        try {  // integer views refuse float arrays and out-of-range values with smol::Error
            for (int64_t x : a.to_vector<int64_t>()) g_sink = g_sink + uint64_t(x);
            for (int32_t x : a.to_vector<int32_t>()) g_sink = g_sink + uint64_t(x);
        } catch (const smol::Error&) {
        }
        g_sink = g_sink + uint64_t(sum == sum);
    }
}

template <class T>
void try_get(const smol::gguf::File& f, const std::string& key) {
    try {
        (void)f.get<T>(key);
    } catch (const smol::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::shared_ptr<smol::gguf::File> file;
    try {
        file = smol::gguf::File::from_buffer(data, size, "fuzz.gguf");
    } catch (const smol::Error&) {
        return 0;
    }
    const smol::gguf::File& f = *file;
    for (const auto& kv : f.metadata()) {
        const auto& v = kv.value;
        touch_bytes(reinterpret_cast<const uint8_t*>(kv.key.data()), kv.key.size());
        switch (v.type()) {
            case smol::gguf::ValueType::string:
                touch_bytes(reinterpret_cast<const uint8_t*>(v.as_string().data()),
                            v.as_string().size());
                break;
            case smol::gguf::ValueType::array:
                touch_array(v.as_array());
                break;
            default:
                g_sink = g_sink + v.as_u64() + uint64_t(v.as_f64() == 0);
        }
        // Every typed view of every key: right types succeed, wrong ones throw.
        try_get<uint32_t>(f, kv.key);
        try_get<int8_t>(f, kv.key);
        try_get<uint64_t>(f, kv.key);
        try_get<int64_t>(f, kv.key);
        try_get<float>(f, kv.key);
        try_get<bool>(f, kv.key);
        try_get<std::string>(f, kv.key);
        try_get<std::vector<std::string>>(f, kv.key);
        try_get<std::vector<int32_t>>(f, kv.key);
        try_get<std::vector<float>>(f, kv.key);
    }
    for (const auto& t : f.tensors()) {
        // The reader promises [data, data + n_bytes) lies inside the input.
        touch_bytes(t.data, size_t(t.n_bytes));
        g_sink = g_sink + t.rows() + t.dim(3) + smol::row_bytes(t.type, size_t(t.dims[0]));
        if (f.find_tensor(t.name) == nullptr) __builtin_trap();
        if (t.data < data || t.data + t.n_bytes > data + size) __builtin_trap();
    }
    try {
        (void)f.tensor("token_embd.weight");
    } catch (const smol::Error&) {
    }
    return 0;
}
