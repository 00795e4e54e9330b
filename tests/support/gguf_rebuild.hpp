// Rewriting a parsed GGUF file through the writer, for tests that change one
// entry of a real file (test_reliability's catalogue, and the same catalogue in
// the -fno-exceptions consumer). Uses no exceptions itself.
#pragma once

#include <smol/gguf/gguf.hpp>
#include <smol/gguf/writer.hpp>
#include <smol/quant/types.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace smol_test::gguf_edit {

using Bytes = std::vector<uint8_t>;

// Copies `src` into a new file, letting the callbacks replace or drop entries:
// each returns true when it handled the entry itself (wrote something else or
// nothing), false to copy it unchanged. `extra` adds entries at the end.
inline Bytes rebuild(
    const smol::gguf::File& src,
    const std::function<bool(smol::gguf::Writer&, const smol::gguf::KeyValue&)>& on_key,
    const std::function<bool(smol::gguf::Writer&, const smol::gguf::TensorInfo&)>& on_tensor =
        nullptr,
    const std::function<void(smol::gguf::Writer&)>& extra = nullptr) {
    smol::gguf::Writer w(src.alignment());
    for (const auto& kv : src.metadata())
        if (!on_key || !on_key(w, kv)) w.copy_value(kv.key, kv.value);
    for (const auto& t : src.tensors())
        if (!on_tensor || !on_tensor(w, t))
            w.add_tensor(t.name, t.type, t.dims, t.data, size_t(t.n_bytes));
    if (extra) extra(w);
    return w.to_bytes();
}

// Adds tensor `name` of `type` and `dims` filled with zero bytes.
inline void add_zero_tensor(smol::gguf::Writer& w, const std::string& name, smol::GGMLType type,
                            std::vector<uint64_t> dims) {
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    const auto traits = smol::type_traits(type);
    const Bytes zeros(size_t(n / traits.block_size * traits.type_size), 0);
    w.add_tensor(name, type, std::move(dims), zeros.data(), zeros.size());
}

}  // namespace smol_test::gguf_edit
