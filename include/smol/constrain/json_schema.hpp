// JSON Schema -> grammar text (constrain/grammar.hpp's GBNF), so generation
// can be constrained to JSON documents that a schema accepts.
//
// Soundness comes first: every complete text of the grammar is a JSON document
// valid under the schema. Completeness is given up where it would be costly,
// and each such place is listed below. A schema that uses something this file
// does not implement is an error (ErrorKind::unsupported naming the keyword
// and its JSON pointer), never silently loosened: a loosened grammar would let
// the model produce documents the caller's validator rejects.
//
// Shapes emitted (names are uniquified against the caller's rules):
//   ws      ::= ( " " | "\n" [ \t]{0,max_indent} )?   between tokens only, so
//               a value never starts or ends with whitespace
//   char    ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" non-surrogate hex4 )
//               one decoded code point each, so {n,m} of char counts exactly
//               what minLength / maxLength count
//   string  ::= "\"" char* "\""
//   integer ::= "-"? ( "0" | [1-9] [0-9]{0,max_integer_digits-1} )
//   number  ::= integer ( "." [0-9]{1,max_fraction_digits} )?
//               ( [eE] [+-]? <0 .. min(10^max_exponent_digits - 1, 307 - max_integer_digits)> )?
//   objects: "{" ws kv ( ws "," ws kv )* ws "}", properties in schema order;
//   arrays:  "[" ws ( item ( ws "," ws item ){min-1,max-1} ws )? "]".
//
// Supported: type (and type arrays); properties, required,
// additionalProperties; items, minItems, maxItems; minLength, maxLength,
// format (date, time, date-time, uuid); minimum, maximum, exclusiveMinimum,
// exclusiveMaximum (numeric, and draft 4's boolean form); enum, const; anyOf,
// oneOf, allOf with one subschema; $ref to "#" or any local JSON pointer
// ("#/$defs/NAME", "#/definitions/NAME", ...); boolean schemas. Annotations
// (title, description, examples, default, $schema, $id, $comment, deprecated,
// readOnly, writeOnly, ...) and keywords JSON Schema does not define (vendor
// extensions such as "x-order") are ignored, as validators ignore them.
// Keywords JSON Schema defines and this file does not implement (pattern,
// allOf with several subschemas, not, if/then/else, patternProperties,
// propertyNames, dependentRequired, dependentSchemas, dependencies,
// uniqueItems, prefixItems, items as an array, additionalItems, contains,
// minContains, maxContains, multipleOf, minProperties, maxProperties,
// unevaluatedProperties, unevaluatedItems, $dynamicRef, $recursiveRef) are
// errors.
//
// Approximations (all sound):
//   - Objects with declared properties never get extra properties, whatever
//     additionalProperties says; properties come in schema order (required
//     ones always, optional ones optional). An object with neither properties
//     nor required is a map: any string keys, values of additionalProperties
//     (any value when it is true or absent; none when false). A required name
//     without a property schema gets additionalProperties' schema.
//   - A schema without "type" is generated as the types its keywords imply
//     (properties -> object, minLength -> string, ...), or as any value when
//     nothing implies a type; keywords of a type that is not generated are
//     ignored (they do not apply to it). "format" applies to strings only, so
//     {"type": "integer", "format": "int32"} is fine.
//   - Free-form values ({}, true, arrays without items, maps) nest at most
//     max_any_depth containers deep.
//   - Numbers: integer parts have at most max_integer_digits digits (and
//     at most 18 when a bound is given), fractions max_fraction_digits,
//     exponents max_exponent_digits, and the exponent is capped so that every
//     number is below 1e308 (a finite double: most JSON readers fail or give
//     inf past that). Integer bounds are exact. A "number" with bounds has no
//     exponent, and its integer part is restricted so that every fraction
//     keeps the value inside the bounds: for minimum 0.5 the values from 1 up
//     are generated, not 0.7; for maximum 10 the value 10 itself is generated
//     (without a fraction) but 9.x is the last with one; an exclusive integer
//     bound gets its nonzero fractions (0.x for exclusiveMinimum 0). Its
//     integer and fraction digits together stay within 15, so distinct
//     decimals stay distinct doubles and validators that compare doubles
//     agree. "-0" may be generated where 0 is allowed.
//   - oneOf is generated as anyOf: sound only when its alternatives are
//     disjoint (the usual use: a tagged union, or ["string", "null"]).
//   - enum and const values are written as compact JSON (the text dump()
//     gives); const beside enum keeps the values that dump to the same text;
//     enum values of a type outside "type" are dropped. Other keywords beside
//     enum / const / $ref / anyOf / oneOf are errors (they would need an
//     intersection of schemas).
//   - Formats: date is YYYY-MM-DD with years 0001-9999 and days valid for the
//     month (29 February is never generated: it depends on the year); time is
//     HH:MM:SS (no leap second 60), an optional fraction of 1-9 digits, and
//     "Z" or +HH:MM / -HH:MM; date-time joins them with "T"; uuid is 8-4-4-4-12
//     hex digits. minLength / maxLength beside a format must allow every
//     length the format produces, or the schema is an error.
//   - minLength / maxLength / minItems / maxItems: counts above 10000 are not
//     expressible (the grammar's repetition limit): a maximum above is
//     treated as 10000, a minimum above is an error.
//   - A subschema no value satisfies (false, an empty range, an enum whose
//     values all have the wrong type) drops out: an anyOf alternative, an
//     optional property, array items (only [] is left). Where nothing is left
//     the error is invalid_argument "no value satisfies the schema".
//   - Two kinds of $ref cycle are not detected here, and Grammar::try_parse
//     rejects the grammar: one that consumes nothing (anyOf: [{"$ref": "#"},
//     ...]: left recursion), and one that admits no finite document (a
//     required property whose schema is its own object's: "can match no
//     complete text").
//
// Bounds: schemas nest at most 256 deep in the converter (and 64 JSON levels
// when parsed from text), each $ref target is converted once, and the grammar
// text is capped at 4 MiB (ErrorKind::resource past it).
//
// The converter itself: constrain/detail/schema_converter.hpp (its state and
// shared rules), then one header per kind beside it.
#pragma once

#include "../detail/abi.hpp"

#include <string>
#include <string_view>

#include "../detail/json.hpp"
#include "../error.hpp"
#include "json_schema_options.hpp"
#include "detail/schema_converter.hpp"
#include "detail/schema_dispatch.hpp"
#include "detail/schema_containers.hpp"
#include "detail/schema_strings.hpp"
#include "detail/schema_numbers.hpp"

SMOL_NAMESPACE_BEGIN

// A grammar (rule `root`) for the JSON documents valid under the schema.
// Errors: invalid_argument (bad JSON, a malformed or unsatisfiable schema),
// unsupported (a keyword, format or $ref this file does not implement),
// resource (a grammar past 4 MiB); each message names the JSON pointer.
inline Expected<std::string> try_json_schema_to_grammar(std::string_view schema_json,
                                                        const JsonSchemaOptions& options = {}) {
    auto parsed = detail::json::try_parse(schema_json);
    if (!parsed.ok())
        return ErrorInfo{ErrorKind::invalid_argument, "json schema: " + parsed.error().message};
    detail::SchemaConverter converter(options);
    SMOL_TRY(converter.add(parsed.value(), "root"));
    return converter.grammar();
}

inline std::string json_schema_to_grammar(std::string_view schema_json,
                                          const JsonSchemaOptions& options = {}) {
    return detail::value_or_fail(try_json_schema_to_grammar(schema_json, options));
}

SMOL_NAMESPACE_END
