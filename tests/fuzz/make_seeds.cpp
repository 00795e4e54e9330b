// Writes the seed corpus for fuzz_gguf: small but complete GGUF files shaped
// like the fixtures (their metadata with the big tokenizer arrays cut to a few
// entries, their tensor names and types with a single row each), files at other
// alignments and versions, every value type, and the first 4 KiB of each
// fixture (a header the fuzzer can mutate toward the real layout).
//   make_seeds FIXTURES_DIR OUT_DIR
#include <smol/gguf/gguf.hpp>
#include <smol/gguf/writer.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

using smol::gguf::File;
using smol::gguf::ValueType;
using smol::gguf::Writer;

void save(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<uint8_t> miniature(const File& src, size_t keep, uint32_t alignment) {
    Writer w(alignment);
    for (const auto& kv : src.metadata()) {
        const auto& v = kv.value;
        if (kv.key == "general.alignment") continue;
        if (v.type() == ValueType::array && v.as_array().size() > keep) {
            const auto& a = v.as_array();
            if (a.element_type() == ValueType::string) {
                auto all = a.strings();
                all.resize(keep);
                w.set_strings(kv.key, all);
            } else {
                auto ints = a.to_vector<int32_t>();
                ints.resize(keep);
                w.set_array<int32_t>(kv.key, ints);
            }
        } else if (v.type() == ValueType::string && v.as_string().size() > 256) {
            w.set_string(kv.key, v.as_string().substr(0, 256));
        } else {
            w.copy_value(kv.key, v);
        }
    }
    for (const auto& t : src.tensors())
        w.add_tensor(t.name, t.type, {t.dims[0], 1}, t.data,
                     smol::row_bytes(t.type, size_t(t.dims[0])));
    return w.to_bytes();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: make_seeds FIXTURES_DIR OUT_DIR\n");
        return 2;
    }
    const std::string fixtures = argv[1], out = argv[2];
    int written = 0;
    for (const char* name :
         {"tiny-q4km", "small-q4km", "tiny-q8_0", "tiny-gqa-q5km", "vocab-llama-bpe"}) {
        try {
            const auto f = File::open(fixtures + "/" + name + ".gguf");
            save(out + "/" + name + "-mini.gguf", miniature(*f, 8, 32));
            save(out + "/" + name + "-mini-align8.gguf", miniature(*f, 4, 8));
            auto v2 = miniature(*f, 2, 32);
            v2[4] = 2;  // version field
            save(out + "/" + name + "-mini-v2.gguf", v2);
            const size_t head = f->size() < 4096 ? f->size() : 4096;
            save(out + "/" + name + "-head4k.gguf",
                 std::vector<uint8_t>(f->bytes(), f->bytes() + head));
            written += 4;
        } catch (const smol::Error& e) {
            std::fprintf(stderr, "make_seeds: skipping %s: %s\n", name, e.what());
        }
    }
    // Every value type, empty and nested containers, and every tensor type.
    Writer w(64);
    w.set_u8("u8", 1);
    w.set_i8("i8", -1);
    w.set_u16("u16", 2);
    w.set_i16("i16", -2);
    w.set_u32("u32", 3);
    w.set_i32("i32", -3);
    w.set_u64("u64", 4);
    w.set_i64("i64", -4);
    w.set_f32("f32", 0.5f);
    w.set_f64("f64", 0.25);
    w.set_bool("bool", true);
    w.set_string("string", "text");
    w.set_string("empty", "");
    w.set_strings("strings", std::vector<std::string>{"a", "", "bc"});
    w.set_array<float>("floats", {1.0f, 2.0f});
    w.set_array<int32_t>("no.ints", {});
    std::vector<uint8_t> payload(2 * 292 * 2, 0x5a);
    for (uint32_t id = 0; id < 40; ++id) {
        const auto type = smol::GGMLType(id);
        const auto traits = smol::type_traits(type);
        if (!traits.name) continue;
        const size_t bytes = smol::row_bytes(type, traits.block_size) * 2;
        w.add_tensor(std::string("t.") + traits.name, type, {traits.block_size, 2}, payload.data(),
                     bytes);
    }
    save(out + "/all-types.gguf", w.to_bytes());
    ++written;
    std::printf("make_seeds: wrote %d seed files to %s\n", written, out.c_str());
    return 0;
}
