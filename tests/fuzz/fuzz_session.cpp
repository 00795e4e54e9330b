// libFuzzer target for session restore: the input is the bytes handed to
// Generator::try_restore_session on a generator of a micro model. A restore
// either succeeds (and the generator then continues from the restored state
// for two tokens) or fails with a typed error and leaves the generator as it
// was; the sanitizers catch anything else. Each input is tried twice: as it
// is (the checksum check itself), and with its CRC-32C field recomputed, so
// that mutations reach the parsing behind the checksum (a fuzzer cannot forge
// a CRC by chance).
//   tools/fuzz.sh fuzz_session 600
#include <smol/smol.hpp>
#include <smol/detail/bytes.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include <cstring>
#include <vector>

#include "micro_model.hpp"

namespace {

smol::Generator& generator() {
    static const std::vector<uint8_t> bytes = smol_fuzz::micro_model(smol_tools::Recipe::q8_0);
    static smol::Generator gen = [] {
        smol::LoadOptions load;
        load.n_threads = 1;
        smol::GeneratorOptions options;
        options.n_ctx = 64;
        return smol::Generator(smol::Model::load_from_memory(bytes.data(), bytes.size(), load),
                               options);
    }();
    return gen;
}

void try_restore(const uint8_t* data, size_t size) {
    smol::Generator& gen = generator();
    const std::vector<int32_t> before = gen.history();
    const size_t cached_before = gen.n_cached();
    smol::ErrorInfo error;
    if (!gen.try_restore_session(data, size, &error)) {
        if (gen.history() != before || gen.n_cached() != cached_before)
            std::abort();  // state must survive
        return;
    }
    if (gen.n_cached() > gen.history().size()) std::abort();
    smol::GenerateParams params;
    params.max_tokens = 2;
    params.temperature = 0;
    try {
        gen.generate("", params, nullptr);
    } catch (const smol::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try_restore(data, size);
    if (size >= smol::detail::kSessionHeaderBytes) {
        std::vector<uint8_t> fixed(data, data + size);
        const uint32_t crc = smol::detail::session_checksum(fixed.data(), fixed.size());
        smol::detail::write_le<uint32_t>(fixed.data(), smol::detail::kSessionCrcOffset, crc);
        try_restore(fixed.data(), fixed.size());
    }
    return 0;
}
