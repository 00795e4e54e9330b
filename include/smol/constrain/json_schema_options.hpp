// How loose the grammar of a JSON Schema is where the schema says nothing
// (GenerateParams::json_schema_options; constrain/json_schema.hpp converts).
// Apart so that params.hpp names the options without compiling the converter.
#pragma once

#include "../detail/abi.hpp"

SMOL_NAMESPACE_BEGIN

struct JsonSchemaOptions {
    int max_indent = 16;  // whitespace between tokens: "" | " " | "\n" then up to this many [ \t]
    int max_integer_digits = 15;   // digits of a number's integer part
    int max_fraction_digits = 15;  // 1..n digits after "." (0 = no fraction)
    int max_exponent_digits = 3;   // 0 = no exponent
    int max_any_depth = 3;         // container nesting of free-form values
};

SMOL_NAMESPACE_END
