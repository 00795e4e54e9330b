// smol-inspect: prints a GGUF file's metadata (arrays abbreviated) and its
// tensor table (name, type, shape innermost first, bytes).
//   smol-inspect [--no-tensors] MODEL.gguf
#include <smol/smol.hpp>

#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>

#include "common/cli.hpp"

namespace {

// At most `max` bytes of s, with quotes, backslashes and control bytes
// escaped: names and strings come from the file, and a terminal must not
// receive its escape sequences (nor a NUL cut the line).
std::string escape(std::string_view s, size_t max) {
    std::string out;
    for (size_t i = 0; i < s.size() && i < max; ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '\n')
            out += "\\n";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\\')
            out += "\\\\";
        else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else
            out += char(c);
    }
    if (s.size() > max) out += "...(" + std::to_string(s.size()) + " bytes)";
    return out;
}

std::string quote(std::string_view s, size_t max = 80) {
    return "\"" + escape(s, max) + "\"";
}

std::string scalar_text(const smol::gguf::Value& v) {
    using smol::gguf::ValueType;
    char buf[64];
    switch (v.type()) {
        case ValueType::f32:
        case ValueType::f64:
            std::snprintf(buf, sizeof buf, "%g", v.as_f64());
            return buf;
        case ValueType::boolean:
            return v.as_bool() ? "true" : "false";
        case ValueType::string:
            return quote(v.as_string());
        default:
            if (v.negative())
                std::snprintf(buf, sizeof buf, "%" PRId64, v.as_i64());
            else
                std::snprintf(buf, sizeof buf, "%" PRIu64, v.as_u64());
            return buf;
    }
}

std::string array_text(const smol::gguf::ArrayView& a) {
    using smol::gguf::ValueType;
    std::string out = std::string("[") + smol::gguf::value_type_name(a.element_type()) + " x " +
                      std::to_string(a.size()) + "]";
    const size_t show = a.size() < 5 ? size_t(a.size()) : 5;
    if (a.element_type() == ValueType::string) {
        auto items = a.strings(show);  // the preview only: arrays can hold millions
        out += " {";
        for (size_t i = 0; i < show; ++i) out += (i ? ", " : "") + quote(items[i], 24);
        out += a.size() > show ? ", ...}" : "}";
    } else if (smol::gguf::scalar_size(a.element_type()) > 0) {
        out += " {";
        for (size_t i = 0; i < show; ++i) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%s%g", i ? ", " : "", a.at<double>(i));
            out += buf;
        }
        out += a.size() > show ? ", ...}" : "}";
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::string path;
    bool show_tensors = true;
    smol_cli::Parser cli("smol-inspect", "Prints a GGUF file's metadata and tensor table.");
    cli.positional("MODEL.gguf", path, "the file");
    cli.flag("--no-tensors", show_tensors, "leave out the table of tensors", false);
    if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
    try {
        auto file = smol::gguf::File::open(path);
        std::printf("%s\n", smol::build_info_string().c_str());
        std::printf("file: %s\nversion: %u  alignment: %u  size: %zu bytes  data offset: %zu\n",
                    path.c_str(), file->version(), file->alignment(), file->size(),
                    file->data_offset());
        std::printf("\nmetadata (%zu keys):\n", file->metadata().size());
        for (const auto& kv : file->metadata()) {
            const auto& v = kv.value;
            std::printf("  %-44s %-7s %s\n", escape(kv.key, 96).c_str(),
                        smol::gguf::value_type_name(v.type()),
                        v.type() == smol::gguf::ValueType::array ? array_text(v.as_array()).c_str()
                                                                 : scalar_text(v).c_str());
        }
        std::map<std::string, int> per_type;
        uint64_t total = 0;
        for (const auto& t : file->tensors()) {
            ++per_type[smol::type_name(t.type)];
            total += t.n_bytes;
        }
        std::printf("\ntensors: %zu, %.2f MiB;", file->tensors().size(), double(total) / (1 << 20));
        for (const auto& [name, n] : per_type) std::printf(" %s %d", name.c_str(), n);
        std::printf("\n");
        if (show_tensors) {
            std::printf("  %-36s %-6s %-24s %12s\n", "name", "type", "shape", "bytes");
            for (const auto& t : file->tensors()) {
                std::string shape = "[";
                for (size_t d = 0; d < t.dims.size(); ++d)
                    shape += (d ? ", " : "") + std::to_string(t.dims[d]);
                shape += "]";
                std::printf("  %-36s %-6s %-24s %12" PRIu64 "\n", escape(t.name, 96).c_str(),
                            smol::type_name(t.type).c_str(), shape.c_str(), t.n_bytes);
            }
        }
    } catch (const smol::Error& e) {
        std::fprintf(stderr, "smol-inspect: %s\n", e.what());
        return 1;
    }
    return 0;
}
