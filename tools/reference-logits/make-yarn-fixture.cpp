// Writes the YaRN fixture that tests/data/yarn/'s goldens were taken on: a copy
// of tiny-q4km.gguf with the rope.scaling.* keys of
// tests/support/yarn_fixture.hpp (the same bytes test_context builds in memory).
//
//   make-yarn-fixture SRC.gguf OUT.gguf
#include <cstdio>

#include "support/yarn_fixture.hpp"

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: make-yarn-fixture SRC.gguf OUT.gguf\n");
        return 2;
    }
    const auto src = smol::gguf::File::try_open(argv[1]);
    if (!src) {
        std::fprintf(stderr, "make-yarn-fixture: %s\n", src.error().message.c_str());
        return 1;
    }
    const auto bytes = smol_test::with_rope_scaling(*src.value(), smol_test::golden_yarn_keys());
    std::FILE* out = std::fopen(argv[2], "wb");
    if (!out || std::fwrite(bytes.data(), 1, bytes.size(), out) != bytes.size() ||
        std::fclose(out) != 0) {
        std::fprintf(stderr, "make-yarn-fixture: cannot write %s\n", argv[2]);
        return 1;
    }
    return 0;
}
