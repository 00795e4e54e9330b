// The weight-type fixtures (tests/data/types/README.md): a model's layer
// tensors, quantized by the reference engine with one recipe each (Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q3_K_*, Q2_K), committed as small "layers
// files" that hold only the blk.* tensors; the tied embedding (most of a tiny
// model's bytes) stays in the shared fixture. A test splices a layers file onto
// tiny-q4km.gguf in memory (splice_layers) and compares with the goldens the
// reference took on the same bytes; tools/reference-logits/type-fixture.cpp
// writes layers files (extract) and spliced files (splice) for the reference.
//
// Uses no exceptions: every check is made before the writer is called, and a
// failure is an empty result with the reason in *error.
#pragma once

#include <smol/gguf/gguf.hpp>
#include <smol/gguf/writer.hpp>
#include <smol/quant/types.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace smol_test {

// The key a layers file carries, naming the recipe that made it (optional).
inline constexpr const char* kLayersRecipeKey = "smol_test.recipe";

namespace type_fixture_detail {
inline bool is_layer_tensor(std::string_view name) {
    return name.compare(0, 4, "blk.") == 0;
}
inline std::string dims_string(const std::vector<uint64_t>& dims) {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
}
inline std::vector<uint8_t> failed(std::string* error, std::string why) {
    if (error) *error = "splice_layers: " + std::move(why);
    return {};
}
}  // namespace type_fixture_detail

// `base` with every tensor whose name appears in `layers` replaced by that
// tensor (type, dims, data); every key and every other tensor of `base`
// untouched, the order and the alignment of `base` kept. Returns the file's
// bytes, or an empty vector (the reason in *error when error is given) when a
// tensor of `layers` is not in `base`, its dims differ from the base tensor's,
// or `layers` names a tensor twice (the reader already rejects that).
inline std::vector<uint8_t> splice_layers(const smol::gguf::File& base,
                                          const smol::gguf::File& layers,
                                          std::string* error = nullptr) {
    using type_fixture_detail::dims_string;
    using type_fixture_detail::failed;
    std::unordered_map<std::string_view, const smol::gguf::TensorInfo*> replacement;
    for (const auto& t : layers.tensors()) {
        const smol::gguf::TensorInfo* b = base.find_tensor(t.name);
        if (!b)
            return failed(error, "tensor '" + t.name + "' of the layers file is not in the base");
        if (b->dims != t.dims)
            return failed(error, "tensor '" + t.name + "' has dims " + dims_string(t.dims) +
                                     " in the layers file, " + dims_string(b->dims) +
                                     " in the base");
        replacement[t.name] = &t;
    }
    smol::gguf::Writer w(base.alignment());
    for (const auto& kv : base.metadata())
        if (kv.key != "general.alignment") w.copy_value(kv.key, kv.value);
    for (const auto& t : base.tensors()) {
        auto it = replacement.find(t.name);
        const smol::gguf::TensorInfo& src = it == replacement.end() ? t : *it->second;
        w.add_tensor(src.name, src.type, src.dims, src.data, size_t(src.n_bytes));
    }
    return w.to_bytes();
}

// A layers file: the blk.* tensors of `model` (in its order, its alignment),
// general.architecture copied from it, and kLayersRecipeKey = `recipe` unless
// recipe is empty. Returns an empty vector (the reason in *error) when the
// model has no blk.* tensor or no general.architecture.
inline std::vector<uint8_t> extract_layers(const smol::gguf::File& model,
                                           const std::string& recipe = std::string(),
                                           std::string* error = nullptr) {
    const smol::gguf::Value* arch = model.find_value("general.architecture");
    if (!arch || arch->type() != smol::gguf::ValueType::string) {
        if (error) *error = "extract_layers: the model has no general.architecture string";
        return {};
    }
    smol::gguf::Writer w(model.alignment());
    w.copy_value("general.architecture", *arch);
    if (!recipe.empty()) w.set_string(kLayersRecipeKey, recipe);
    size_t n = 0;
    for (const auto& t : model.tensors())
        if (type_fixture_detail::is_layer_tensor(t.name)) {
            w.add_tensor(t.name, t.type, t.dims, t.data, size_t(t.n_bytes));
            ++n;
        }
    if (n == 0) {
        if (error) *error = "extract_layers: the model has no blk.* tensor";
        return {};
    }
    return w.to_bytes();
}

}  // namespace smol_test
