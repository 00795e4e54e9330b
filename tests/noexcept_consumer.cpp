// A consumer built with -fno-exceptions (tests/noexcept.cmake): the whole
// library must compile without exceptions, and its non-throwing entry points
// must report errors as values: try_load_model for a missing file,
// Generator::try_create, StopReason::error from generate() (bad UTF-8, a
// prompt longer than the context), a malformed file through try_call's
// recovery point; and a real model must load and generate.
//   test_noexcept_consumer MODEL.gguf
#include <smol/smol.hpp>
#include <smol/generator.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#if SMOL_HAS_EXCEPTIONS
#error "noexcept_consumer.cpp must be compiled with -fno-exceptions"
#endif

namespace {

int failures = 0;

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "FAILED: %s\n", what);
        ++failures;
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: test_noexcept_consumer MODEL.gguf\n");
        return 2;
    }
    const std::string model_path = argv[1];
    {
        std::FILE* f = std::fopen(model_path.c_str(), "rb");
        if (!f) {
            const char* required = std::getenv("SMOL_REQUIRE_FIXTURES");
            std::fprintf(stderr, "model '%s' not found\n", model_path.c_str());
            return required && std::string(required) == "1" ? 1 : 77;  // 77: skipped
        }
        std::fclose(f);
    }
    std::printf("%s\n", smol::build_info_string().c_str());
    check(!smol::build_info().exceptions, "build_info reports exceptions off");

    // A missing file: an error value, no abort.
    smol::ErrorInfo error;
    auto missing = smol::try_load_model("/nonexistent/dir/model.gguf", &error);
    check(missing == nullptr, "missing file gives null");
    check(error.kind == smol::ErrorKind::io, "missing file is ErrorKind::io");
    check(error.message.find("/nonexistent/dir/model.gguf") != std::string::npos, "message names the file");

    // A file that exists but is not GGUF fails deep inside the parser: the
    // error comes back through try_call's recovery point.
    const std::string junk_path = "noexcept_consumer_junk.gguf";
    if (std::FILE* f = std::fopen(junk_path.c_str(), "wb")) {
        std::fputs("this is not a GGUF file, just some bytes long enough to parse a header from", f);
        std::fclose(f);
    }
    smol::ErrorInfo junk_error;
    auto junk = smol::try_load_model(junk_path, &junk_error);
    std::remove(junk_path.c_str());
    check(junk == nullptr, "junk file gives null");
    check(junk_error.kind == smol::ErrorKind::format, "junk file is ErrorKind::format");

    // A real model loads and generates.
    smol::ErrorInfo load_error;
    auto model = smol::try_load_model(model_path, &load_error);
    if (!model) {
        std::fprintf(stderr, "FAILED: loading %s: %s\n", model_path.c_str(), load_error.message.c_str());
        return 1;
    }
    smol::GeneratorOptions options;
    options.n_ctx = 64;
    smol::ErrorInfo create_error;
    auto bad_generator = smol::Generator::try_create(model, [] {
        smol::GeneratorOptions o;
        o.n_ctx = size_t(1) << 40;
        return o;
    }(), &create_error);
    check(bad_generator == nullptr, "n_ctx past the model's limit gives null");
    check(create_error.kind == smol::ErrorKind::invalid_argument, "n_ctx error is invalid_argument");

    auto gen = smol::Generator::try_create(model, options, &create_error);
    if (!gen) {
        std::fprintf(stderr, "FAILED: creating a generator: %s\n", create_error.message.c_str());
        return 1;
    }
    smol::GenerateParams params;
    params.max_tokens = 4;
    params.temperature = 0;
    params.ignore_eos = true;
    std::string streamed;
    smol::GenerateResult r = gen->generate("Hello there", params, [&](std::string_view piece) {
        streamed.append(piece.data(), piece.size());
        return true;
    });
    check(r.stop_reason == smol::StopReason::max_tokens, "generation ends at max_tokens");
    check(r.tokens.size() == 4, "4 tokens generated");
    check(streamed == r.text, "streamed text equals the result text");
    std::printf("generated %zu tokens: stop %s\n", r.tokens.size(), smol::to_string(r.stop_reason));

    smol::GenerateResult bad = gen->generate("bad \xff byte", params);
    check(bad.stop_reason == smol::StopReason::error, "invalid UTF-8 gives StopReason::error");
    check(bad.error_kind == smol::ErrorKind::invalid_argument, "invalid UTF-8 is invalid_argument");
    check(bad.error.find("offset 4") != std::string::npos, "the error names the byte offset");

    std::string long_prompt;
    for (int i = 0; i < 200; ++i) long_prompt += "word ";
    smol::GenerateResult too_long = gen->generate(long_prompt, params);
    check(too_long.stop_reason == smol::StopReason::error, "a prompt past the context gives StopReason::error");
    check(too_long.error_kind == smol::ErrorKind::out_of_range, "a prompt past the context is out_of_range");

    // Still usable after the errors, and deterministic.
    smol::GenerateResult again = gen->generate("Hello there", params);
    check(again.tokens == r.tokens, "same tokens after errors");

    // Sessions: a round trip, and malformed bytes rejected as a value.
    const std::vector<uint8_t> session = gen->save_session();
    auto other = smol::Generator::try_create(model, options, &create_error);
    check(other && other->try_restore_session(session.data(), session.size()), "session restores");
    check(other && other->history() == gen->history(), "restored history matches");
    const std::vector<uint8_t> junk_session = {'n', 'o', 'p', 'e'};
    smol::ErrorInfo session_error;
    check(other && !other->try_restore_session(junk_session.data(), junk_session.size(), &session_error),
          "junk session is rejected");
    check(session_error.kind == smol::ErrorKind::format, "junk session is ErrorKind::format");

    if (failures) return 1;
    std::printf("noexcept consumer ok\n");
    return 0;
}
