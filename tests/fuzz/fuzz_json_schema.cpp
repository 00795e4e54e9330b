// libFuzzer target for JSON Schemas from elsewhere (a tool definition, a
// plugin's output format) all the way to decoding: the converter
// (constrain/json_schema.hpp) with options from byte 0, the grammar compiler
// with its default limits, then up to 16 decoding steps over the real
// vocabulary (constraint_driver.hpp).
//   byte 0:  options: bits 0-1 max_indent (0-3), bits 2-3 max_any_depth (0-3),
//            bit 4 no exponent, bit 5 no fraction
//   rest:    the schema text, then optionally a 0x00 byte and choice bytes
//            that pick the tokens
// Must hold: no crash, hang or unbounded memory; a schema the converter
// accepts gives grammar text with no syntax error; every error on the way,
// typed (constraint_driver.hpp's checks).
#include <smol/constrain/json_schema.hpp>

#include <string>
#include <string_view>

#include "constraint_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t flags = data[0];
    const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    const size_t split = body.find('\0');
    const std::string_view text = body.substr(0, split);
    const std::string_view choices =
        split == std::string_view::npos ? std::string_view() : body.substr(split + 1);

    smol::JsonSchemaOptions options;
    options.max_indent = flags & 3;
    options.max_any_depth = (flags >> 2) & 3;
    if (flags & 16) options.max_exponent_digits = 0;
    if (flags & 32) options.max_fraction_digits = 0;
    auto converted = smol::try_json_schema_to_grammar(text, options);
    if (!converted) {
        const smol::ErrorKind kind = converted.error().kind;
        if (kind != smol::ErrorKind::invalid_argument && kind != smol::ErrorKind::unsupported &&
            kind != smol::ErrorKind::resource)
            __builtin_trap();
        return 0;
    }
    auto grammar = smol::Grammar::try_parse(converted.value());
    if (!grammar) {
        const std::string& message = grammar.error().message;
        // The converter must never write a grammar with a syntax error.
        if (message.find(" at line ") != std::string::npos) __builtin_trap();
        return 0;
    }
    fuzz_constraint::drive(grammar.value(), choices, 16);
    return 0;
}
