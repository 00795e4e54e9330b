// A small strict JSON reader and writer for the parts of smol that take JSON
// from a caller: JSON Schemas (constrain/json_schema.hpp) and tool-call
// arguments (text/tool_calls.hpp). smol must not depend on a JSON library, and
// these callers need little: a tree of values, exact number text (a schema's
// "maximum": 1e400 or a 30-digit id must not be rounded on the way through),
// and two ways to print a value back. Include this header; its parts:
//   - json_value.hpp: Value, the tree (numbers as their exact source text,
//     object members in source order with duplicates kept).
//   - json_parse.hpp: try_parse, RFC 8259 exactly, nesting bounded by
//     ParseLimits::max_depth.
//   - json_write.hpp: quote / dump, compact JSON text.
//   - json_python_repr.hpp: python_repr, what Python 3 prints for
//     str(json.loads(text)) (chat templates show it to a model).
#pragma once

#include "json_parse.hpp"
#include "json_python_repr.hpp"
#include "json_value.hpp"
#include "json_write.hpp"
