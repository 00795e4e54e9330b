// Writes the weight-type fixtures of tests/data/types/ with
// tests/support/type_fixture.hpp (the same bytes the tests build in memory):
//
//   type-fixture extract MODEL.gguf OUT.layers.gguf [RECIPE]
//       the blk.* tensors of MODEL (+ general.architecture, and the recipe's
//       name under smol_test.recipe when RECIPE is given)
//   type-fixture splice BASE.gguf LAYERS.gguf OUT.gguf
//       BASE with each tensor of LAYERS put in place of its namesake
//   type-fixture list MODEL.gguf
//       each tensor's name, type and dims, then the count of each type
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/type_fixture.hpp"

namespace {

std::shared_ptr<smol::gguf::File> open_or_die(const char* path) {
    auto f = smol::gguf::File::try_open(path);
    if (!f) {
        std::fprintf(stderr, "type-fixture: %s\n", f.error().message.c_str());
        std::exit(1);
    }
    return f.value();
}

int write_or_die(const std::vector<uint8_t>& bytes, const std::string& error, const char* path) {
    if (bytes.empty()) {
        std::fprintf(stderr, "type-fixture: %s\n", error.c_str());
        return 1;
    }
    std::FILE* out = std::fopen(path, "wb");
    if (!out || std::fwrite(bytes.data(), 1, bytes.size(), out) != bytes.size() ||
        std::fclose(out) != 0) {
        std::fprintf(stderr, "type-fixture: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

int usage() {
    std::fprintf(stderr,
                 "usage: type-fixture extract MODEL.gguf OUT.layers.gguf [RECIPE]\n"
                 "       type-fixture splice BASE.gguf LAYERS.gguf OUT.gguf\n"
                 "       type-fixture list MODEL.gguf\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return usage();
    const std::string cmd = argv[1];
    std::string error;
    if (cmd == "extract" && (argc == 4 || argc == 5)) {
        const auto model = open_or_die(argv[2]);
        return write_or_die(smol_test::extract_layers(*model, argc == 5 ? argv[4] : "", &error),
                            error, argv[3]);
    }
    if (cmd == "splice" && argc == 5) {
        const auto base = open_or_die(argv[2]);
        const auto layers = open_or_die(argv[3]);
        return write_or_die(smol_test::splice_layers(*base, *layers, &error), error, argv[4]);
    }
    if (cmd == "list" && argc == 3) {
        const auto model = open_or_die(argv[2]);
        std::map<std::string, int> counts;
        for (const auto& t : model->tensors()) {
            const char* type = smol::type_traits(t.type).name;
            std::string dims;
            for (size_t i = 0; i < t.dims.size(); ++i)
                dims += (i ? " x " : "") + std::to_string(t.dims[i]);
            std::printf("%-28s %-7s %s\n", t.name.c_str(), type, dims.c_str());
            ++counts[type];
        }
        std::printf("types:");
        for (const auto& [type, n] : counts) std::printf(" %s %d", type.c_str(), n);
        std::printf("\n");
        return 0;
    }
    return usage();
}
