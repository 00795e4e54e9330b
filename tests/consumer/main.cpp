// A consumer of smol: includes the umbrella header and uses the GGUF writer
// and reader, so a broken include path, export or dependency fails the build.
#include <smol/smol.hpp>

#include <cstdio>

int main() {
    smol::gguf::Writer writer;
    writer.set_string("general.architecture", "smollm3");
    const auto bytes = writer.to_bytes();
    auto file = smol::gguf::File::from_buffer(bytes.data(), bytes.size());
    if (file->get<std::string>("general.architecture") != "smollm3") return 1;
    std::printf("consumer ok: smol %s\n", SMOL_VERSION_STRING);
    return 0;
}
