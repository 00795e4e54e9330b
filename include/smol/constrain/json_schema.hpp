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
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../detail/json.hpp"
#include "../error.hpp"

SMOL_NAMESPACE_BEGIN

struct JsonSchemaOptions {
    int max_indent = 16;  // whitespace between tokens: "" | " " | "\n" then up to this many [ \t]
    int max_integer_digits = 15;   // digits of a number's integer part
    int max_fraction_digits = 15;  // 1..n digits after "." (0 = no fraction)
    int max_exponent_digits = 3;   // 0 = no exponent
    int max_any_depth = 3;         // container nesting of free-form values
};

namespace detail {
namespace schema_detail {

constexpr size_t kMaxGrammarBytes = size_t(4) << 20;
constexpr size_t kMaxSchemaDepth = 256;
constexpr uint64_t kMaxRepeat = 10000;            // Grammar's repetition limit
constexpr int64_t kBeyond = 1000000000000000000;  // 10^18: past every bounded integer

// A GBNF string literal matching exactly the UTF-8 text.
inline std::string literal(std::string_view utf8) {
    static const char* hex = "0123456789ABCDEF";
    std::string out = "\"";
    for (const char c : utf8) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (byte < 0x20 || byte == 0x7F) {
            out += "\\x";
            out += hex[byte >> 4];
            out += hex[byte & 15];
        } else {
            out += c;
        }
    }
    return out + "\"";
}

// Postfix repetition of an element: {lo,hi}, hi < 0 meaning unbounded.
inline std::string repeat(int64_t lo, int64_t hi) {
    if (hi < 0) {
        if (lo == 0) return "*";
        if (lo == 1) return "+";
        return "{" + std::to_string(lo) + ",}";
    }
    if (lo == 0 && hi == 1) return "?";
    if (lo == hi) return "{" + std::to_string(lo) + "}";
    return "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

inline std::string group(const std::vector<std::string>& alternatives) {
    if (alternatives.size() == 1) return alternatives[0];
    std::string out = "(";
    for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : " ") + alternatives[i];
    return out + " )";
}

inline std::string digit_class(char lo, char hi) {
    if (lo == hi) return std::string("\"") + lo + "\"";
    return std::string("[") + lo + "-" + hi + "]";
}

inline std::string any_digits(size_t n) {
    if (n == 0) return "";
    return " [0-9]" + (n == 1 ? std::string() : "{" + std::to_string(n) + "}");
}

// Digit strings of one length in [lo, hi] (same length, lo <= hi).
inline std::string same_length_range(const std::string& lo, const std::string& hi) {
    if (lo.empty()) return "";
    if (lo == hi) return literal(lo);
    const size_t rest = lo.size() - 1;
    if (lo[0] == hi[0])
        return digit_class(lo[0], lo[0]) + " " + same_length_range(lo.substr(1), hi.substr(1));
    const bool lo_full = lo.find_first_not_of('0', 1) == std::string::npos;
    const bool hi_full = hi.find_first_not_of('9', 1) == std::string::npos;
    std::vector<std::string> alternatives;
    char first = lo[0], last = hi[0];
    if (!lo_full) {
        alternatives.push_back(digit_class(lo[0], lo[0]) + " " +
                               group({same_length_range(lo.substr(1), std::string(rest, '9'))}));
        ++first;
    }
    std::string tail;
    if (!hi_full) {
        tail = digit_class(hi[0], hi[0]) + " " +
               group({same_length_range(std::string(rest, '0'), hi.substr(1))});
        --last;
    }
    if (first <= last) alternatives.push_back(digit_class(first, last) + any_digits(rest));
    if (!tail.empty()) alternatives.push_back(tail);
    return group(alternatives);
}

inline uint64_t power10(size_t n) {
    uint64_t p = 1;
    while (n--) p *= 10;
    return p;
}

// Decimal integers in [lo, hi] (lo <= hi < 10^18), without leading zeros.
inline std::string integer_range(uint64_t lo, uint64_t hi) {
    std::vector<std::string> alternatives;
    const size_t lo_len = std::to_string(lo).size(), hi_len = std::to_string(hi).size();
    for (size_t len = lo_len; len <= hi_len; ++len) {
        const uint64_t first = std::max(lo, len == 1 ? 0 : power10(len - 1));
        const uint64_t last = std::min(hi, power10(len) - 1);
        alternatives.push_back(same_length_range(std::to_string(first), std::to_string(last)));
    }
    return group(alternatives);
}

// A schema number, exactly enough for bounds on 18-digit integer parts:
// floor(value) clamped to +-10^18, and whether the value is an integer.
struct Num {
    int64_t floor = 0;
    bool integral = true;
    int64_t ceil() const { return integral ? floor : floor + 1; }
    Num negated() const { return Num{-ceil(), integral}; }
};

inline Num to_num(std::string_view text) {
    const bool negative = !text.empty() && text[0] == '-';
    const json::repr_detail::Decimal d = json::repr_detail::literal_decimal(text);
    if (d.digits.empty()) return Num{};
    uint64_t magnitude = 0;
    bool fraction = false;
    if (d.exponent >= 18) {
        magnitude = uint64_t(kBeyond);
    } else if (d.exponent < 0) {
        fraction = true;  // digits are nonzero from the first
    } else {
        const auto int_digits = size_t(d.exponent + 1);
        for (size_t i = 0; i < int_digits; ++i)
            magnitude = magnitude * 10 + uint64_t(i < d.digits.size() ? d.digits[i] - '0' : 0);
        for (size_t i = int_digits; i < d.digits.size(); ++i) fraction |= d.digits[i] != '0';
    }
    const auto m = int64_t(magnitude);
    if (!negative) return Num{m, !fraction};
    return Num{fraction ? -m - 1 : -m, !fraction};
}

// A lower or upper bound of a number.
struct Bound {
    bool present = false;
    bool exclusive = false;
    Num value;
    Bound negated() const { return Bound{present, exclusive, value.negated()}; }
};

// Whether a number literal is an integer (1.0 and 1e20 are; JSON Schema
// counts values, not spellings).
inline bool is_integral_literal(std::string_view text) {
    json::repr_detail::Decimal d = json::repr_detail::literal_decimal(text);
    while (!d.digits.empty() && d.digits.back() == '0') d.digits.pop_back();
    return d.digits.empty() || long(d.digits.size()) <= d.exponent + 1;
}

inline std::string pointer_append(const std::string& pointer, std::string_view key) {
    std::string out = pointer + "/";
    for (const char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

inline std::string shown_pointer(const std::string& pointer) {
    return pointer.empty() ? "/" : pointer;
}

inline bool is_one_of(std::string_view key, std::initializer_list<std::string_view> set) {
    return std::find(set.begin(), set.end(), key) != set.end();
}

// Keywords JSON Schema defines that this file does not implement.
inline bool is_unsupported_keyword(std::string_view key) {
    return is_one_of(key, {"pattern",
                           "not",
                           "if",
                           "then",
                           "else",
                           "patternProperties",
                           "propertyNames",
                           "dependentRequired",
                           "dependentSchemas",
                           "dependencies",
                           "uniqueItems",
                           "prefixItems",
                           "additionalItems",
                           "contains",
                           "minContains",
                           "maxContains",
                           "multipleOf",
                           "minProperties",
                           "maxProperties",
                           "unevaluatedProperties",
                           "unevaluatedItems",
                           "$dynamicRef",
                           "$recursiveRef"});
}

// Keywords that constrain a value and that this file implements.
inline bool is_constraint_keyword(std::string_view key) {
    return is_one_of(key, {"type",
                           "properties",
                           "required",
                           "additionalProperties",
                           "items",
                           "minItems",
                           "maxItems",
                           "minLength",
                           "maxLength",
                           "format",
                           "minimum",
                           "maximum",
                           "exclusiveMinimum",
                           "exclusiveMaximum",
                           "enum",
                           "const",
                           "anyOf",
                           "oneOf",
                           "allOf",
                           "$ref"});
}

}  // namespace schema_detail

// Converts schemas into rules of one grammar (the tool-call grammar puts each
// tool's arguments schema under its own rule). Shared rules (ws, string,
// number, ...) are defined once for all schemas. After an error from add(),
// grammar() may hold rules that refer to undefined ones: discard the
// converter.
class SchemaConverter {
public:
    explicit SchemaConverter(JsonSchemaOptions options = {}) : options_(options) {}

    // Defines a rule (rule_name, sanitized and made unique) matching the values
    // valid under `schema`; returns the rule's name.
    Expected<std::string> add(const json::Value& schema, std::string_view rule_name) {
        SMOL_TRY(check_options());
        document_ = &schema;
        refs_.clear();
        pending_.clear();
        member_index_.clear();
        const std::string name = reserve(rule_name);
        refs_[""] = name;
        SMOL_TRY_ASSIGN(const Expr top, visit(schema, "", name, 0));
        if (top.never) return no_value("");
        SMOL_TRY(set_body(name, top.text));
        SMOL_TRY(convert_pending_refs());
        document_ = nullptr;
        member_index_.clear();
        return name;
    }

    // The whitespace rule's name (defined on first use).
    const std::string& ws_rule() {
        return shared("ws", [&] {
            const int indent = std::max(0, options_.max_indent);
            if (indent == 0) return std::string("( \" \" | \"\\n\" )?");
            return "( \" \" | \"\\n\" [ \\t]" + schema_detail::repeat(0, indent) + " )?";
        });
    }

    // Every rule defined so far, one per line.
    std::string grammar() const {
        std::string out;
        for (const Rule& rule : rules_)
            if (!rule.body.empty()) out += rule.name + " ::= " + rule.body + "\n";
        return out;
    }

private:
    using Bound = schema_detail::Bound;

    // An expression of the grammar, or "no value can satisfy this schema".
    struct Expr {
        std::string text;
        bool never = false;
    };
    struct Rule {
        std::string name;
        std::string body;
    };
    struct PendingRef {
        const json::Value* target;
        std::string pointer;
        std::string rule;
    };

    JsonSchemaOptions options_;
    std::vector<Rule> rules_;
    std::unordered_map<std::string, size_t> rule_index_;
    std::unordered_map<std::string, int> next_suffix_;
    std::map<std::string, std::string> shared_;  // key -> rule name (stable references)
    size_t total_bytes_ = 0;
    const json::Value* document_ = nullptr;
    std::unordered_map<std::string, std::string> refs_;  // pointer -> rule name
    std::vector<PendingRef> pending_;
    using MemberIndex = std::unordered_map<std::string_view, const json::Value*>;
    std::unordered_map<const json::Value*, MemberIndex> member_index_;  // of document_'s objects

    // --- errors ---

    static ErrorInfo invalid(const std::string& what, const std::string& pointer) {
        return ErrorInfo{ErrorKind::invalid_argument,
                         "json schema: " + what + " at " + schema_detail::shown_pointer(pointer)};
    }
    static ErrorInfo unsupported(const std::string& what, const std::string& pointer) {
        return ErrorInfo{ErrorKind::unsupported,
                         "json schema: " + what + " at " + schema_detail::shown_pointer(pointer)};
    }
    static ErrorInfo unsupported_keyword(std::string_view key, const std::string& pointer,
                                         const std::string& detail = "") {
        return unsupported("unsupported keyword \"" + std::string(key) + "\"" + detail, pointer);
    }
    static ErrorInfo no_value(const std::string& pointer) {
        return invalid("no value satisfies the schema", pointer);
    }

    Status check_options() const {
        const auto check = [](int value, int lo, int hi, const char* name) -> Status {
            if (value >= lo && value <= hi) return {};
            return ErrorInfo{ErrorKind::invalid_argument,
                             std::string("json schema: JsonSchemaOptions::") + name + " must be " +
                                 std::to_string(lo) + ".." + std::to_string(hi)};
        };
        SMOL_TRY(check(options_.max_indent, 0, 1000, "max_indent"));
        SMOL_TRY(check(options_.max_integer_digits, 1, 300, "max_integer_digits"));
        SMOL_TRY(check(options_.max_fraction_digits, 0, 1000, "max_fraction_digits"));
        SMOL_TRY(check(options_.max_exponent_digits, 0, 1000, "max_exponent_digits"));
        return check(options_.max_any_depth, 0, 64, "max_any_depth");
    }

    // --- rules ---

    static std::string sanitize(std::string_view hint) {
        std::string name;
        for (const char c : hint.substr(0, 40)) {
            const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '_';
            name += ok ? c : '-';
        }
        return name.empty() ? "rule" : name;
    }

    // A fresh rule name based on hint; its body comes later (set_body).
    std::string reserve(std::string_view hint) {
        const std::string base = sanitize(hint);
        std::string name = base;
        int& suffix = next_suffix_[base];
        if (suffix == 0) suffix = 1;  // the second rule of a name gets "-2"
        while (rule_index_.count(name)) name = base + "-" + std::to_string(++suffix);
        rule_index_[name] = rules_.size();
        rules_.push_back(Rule{name, ""});
        return name;
    }

    Status set_body(const std::string& name, std::string body) {
        total_bytes_ += name.size() + body.size() + 6;
        if (total_bytes_ > schema_detail::kMaxGrammarBytes)
            return ErrorInfo{ErrorKind::resource,
                             "json schema: grammar larger than " +
                                 std::to_string(schema_detail::kMaxGrammarBytes) + " bytes"};
        rules_[rule_index_.at(name)].body = std::move(body);
        return {};
    }

    // A rule named after hint for expr, unless expr is already a rule name.
    Expected<std::string> named(const Expr& expr, std::string_view hint) {
        const bool is_name =
            !expr.text.empty() && expr.text.find_first_of(" \"[(|") == std::string::npos;
        if (is_name) return expr.text;
        const std::string name = reserve(hint);
        SMOL_TRY(set_body(name, expr.text));
        return name;
    }

    // A rule shared by every schema (defined once, on first use). Its body is
    // small and fixed, so the size check can not fail for it.
    template <class MakeBody>
    const std::string& shared(const std::string& key, MakeBody make_body) {
        auto it = shared_.find(key);
        if (it != shared_.end()) return it->second;
        const std::string name = reserve(key);
        it = shared_.emplace(key, name).first;
        std::string body = make_body();
        total_bytes_ += name.size() + body.size() + 6;
        rules_[rule_index_.at(name)].body = std::move(body);
        return it->second;
    }

    // --- shared primitives ---

    const std::string& char_rule() {
        return shared("char", [] {
            return std::string(
                "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] "
                "[0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )");
        });
    }
    const std::string& string_rule() {
        const std::string& c = char_rule();
        return shared("string", [&] { return "\"\\\"\" " + c + "* \"\\\"\""; });
    }
    std::string integer_part() const {
        const int digits = options_.max_integer_digits;
        return "( \"0\" | [1-9]" +
               (digits > 1 ? " [0-9]" + schema_detail::repeat(0, digits - 1) : "") + " )";
    }
    std::string fraction(int most = 1000) const {
        const int digits = std::min(options_.max_fraction_digits, most);
        if (digits <= 0) return "";
        return " ( \".\" [0-9]" + schema_detail::repeat(1, digits) + " )?";
    }
    // "." then 1..digits digits, not all zero (split by the leading zeros, so
    // it stays unambiguous).
    static std::string nonzero_fraction(int digits) {
        std::vector<std::string> alternatives;
        for (int zeros = 0; zeros < digits; ++zeros) {
            std::string a =
                zeros ? schema_detail::literal(std::string(size_t(zeros), '0')) + " " : "";
            a += "[1-9]";
            if (digits - 1 - zeros > 0)
                a += " [0-9]" + schema_detail::repeat(0, digits - 1 - zeros);
            alternatives.push_back(std::move(a));
        }
        return "\".\" " + schema_detail::group(alternatives);
    }
    const std::string& integer_rule() {
        return shared("integer", [&] { return "\"-\"? " + integer_part(); });
    }
    const std::string& number_rule() {
        return shared("number", [&] {
            std::string body = "\"-\"? " + integer_part() + fraction();
            // The exponent keeps every value below 1e308, a finite double:
            // most JSON readers reject (or turn into inf) numbers past that.
            const int most = 307 - options_.max_integer_digits;
            if (options_.max_exponent_digits > 0 && most > 0) {
                const uint64_t top = std::min<uint64_t>(
                    uint64_t(most),
                    schema_detail::power10(size_t(std::min(options_.max_exponent_digits, 3))) - 1);
                body += " ( [eE] [+-]? " + schema_detail::integer_range(0, top) + " )?";
            }
            return body;
        });
    }
    const std::string& boolean_rule() {
        return shared("boolean", [] { return std::string("\"true\" | \"false\""); });
    }
    const std::string& null_rule() {
        return shared("null", [] { return std::string("\"null\""); });
    }

    // Any JSON value with at most `depth` nested containers.
    std::string any_value(int depth) {
        const std::string key = "value-" + std::to_string(depth);
        if (shared_.count(key)) return shared_[key];
        std::string inner;
        if (depth > 0) inner = any_value(depth - 1);
        const std::string& s = string_rule();
        const std::string& n = number_rule();
        const std::string& b = boolean_rule();
        const std::string& z = null_rule();
        return shared(key, [&] {
            std::string body = s + " | " + n + " | " + b + " | " + z;
            if (depth > 0) body += " | " + array_of(inner, 0, -1) + " | " + map_of(inner);
            return body;
        });
    }

    std::string sep() { return ws_rule() + " \",\" " + ws_rule(); }

    // "[" ... "]" of item (a rule name), count in [lo, hi] (hi < 0: unbounded).
    std::string array_of(const std::string& item, int64_t lo, int64_t hi) {
        const std::string& ws = ws_rule();
        if (hi == 0) return "\"[\" " + ws + " \"]\"";
        const int64_t more_lo = lo > 0 ? lo - 1 : 0, more_hi = hi < 0 ? -1 : hi - 1;
        std::string items = item;
        if (more_hi != 0)
            items += " ( " + sep() + " " + item + " )" + schema_detail::repeat(more_lo, more_hi);
        if (lo == 0) return "\"[\" " + ws + " ( " + items + " " + ws + " )? \"]\"";
        return "\"[\" " + ws + " " + items + " " + ws + " \"]\"";
    }

    // "{" ... "}" with string keys and values of `value` (a rule name).
    std::string map_of(const std::string& value) {
        const std::string& ws = ws_rule();
        const std::string kv = string_rule() + " " + ws + " \":\" " + ws + " " + value;
        return "\"{\" " + ws + " ( " + kv + " ( " + sep() + " " + kv + " )* " + ws + " )? \"}\"";
    }

    // --- schemas ---

    Expected<Expr> visit(const json::Value& schema, const std::string& pointer,
                         const std::string& hint, size_t depth) {
        if (depth > schema_detail::kMaxSchemaDepth)
            return invalid(
                "schema nested deeper than " + std::to_string(schema_detail::kMaxSchemaDepth),
                pointer);
        if (schema.is_bool())
            return schema.boolean ? Expr{any_value(options_.max_any_depth)} : Expr{"", true};
        if (!schema.is_object()) return invalid("a schema must be an object or a boolean", pointer);
        for (const auto& member : schema.members)
            if (schema_detail::is_unsupported_keyword(member.first))
                return unsupported_keyword(member.first, pointer);
        if (schema.find("$ref")) return visit_ref(schema, pointer);
        if (schema.find("allOf")) return visit_all_of(schema, pointer, hint, depth);
        if (schema.find("anyOf") || schema.find("oneOf"))
            return visit_any_of(schema, pointer, hint, depth);
        if (schema.find("enum") || schema.find("const")) return visit_enum(schema, pointer);
        return visit_types(schema, pointer, hint, depth);
    }

    // Only annotations may stand beside `keyword` (others would need an intersection).
    static Status check_alone(const json::Value& schema, std::string_view keyword,
                              const std::string& pointer,
                              std::initializer_list<std::string_view> also_allowed = {}) {
        for (const auto& member : schema.members) {
            const std::string& key = member.first;
            if (key == keyword || schema_detail::is_one_of(key, also_allowed)) continue;
            if (schema_detail::is_constraint_keyword(key))
                return unsupported_keyword(key, pointer,
                                           " beside \"" + std::string(keyword) + "\"");
        }
        return {};
    }

    Expected<Expr> visit_ref(const json::Value& schema, const std::string& pointer) {
        SMOL_TRY(check_alone(schema, "$ref", pointer));
        const json::Value& ref = *schema.find("$ref");
        if (!ref.is_string()) return invalid("\"$ref\" must be a string", pointer);
        if (ref.text.empty() || ref.text[0] != '#')
            return unsupported("unsupported $ref \"" + ref.text + "\" (only local refs, \"#...\")",
                               pointer);
        SMOL_TRY_ASSIGN(const std::string target_pointer, decode_fragment(ref.text, pointer));
        auto known = refs_.find(target_pointer);
        if (known != refs_.end()) return Expr{known->second};
        const json::Value* target = resolve(target_pointer);
        if (!target) return invalid("$ref \"" + ref.text + "\" does not resolve", pointer);
        const size_t slash = target_pointer.rfind('/');
        const std::string name = reserve(target_pointer.substr(slash + 1));
        refs_[target_pointer] = name;
        pending_.push_back(PendingRef{target, target_pointer, name});
        return Expr{name};
    }

    // "#/a~1b/%25" -> the JSON pointer "/a~1b/%" (percent-decoded, ~ escapes kept).
    static Expected<std::string> decode_fragment(const std::string& ref,
                                                 const std::string& pointer) {
        std::string out;
        for (size_t i = 1; i < ref.size(); ++i) {
            if (ref[i] != '%') {
                out += ref[i];
                continue;
            }
            const int hi = i + 2 < ref.size() ? json::parse_detail::hex_value(ref[i + 1]) : -1;
            const int lo = i + 2 < ref.size() ? json::parse_detail::hex_value(ref[i + 2]) : -1;
            if (hi < 0 || lo < 0) return ErrorInfo(invalid("bad %-escape in $ref", pointer));
            out += static_cast<char>(hi * 16 + lo);
            i += 2;
        }
        if (!out.empty() && out[0] != '/')
            return ErrorInfo(unsupported("unsupported $ref \"" + ref + "\" (anchors)", pointer));
        return out;
    }

    const json::Value* resolve(const std::string& pointer) {
        const json::Value* node = document_;
        size_t pos = 0;
        while (node && pos < pointer.size()) {
            const size_t next = std::min(pointer.find('/', pos + 1), pointer.size());
            std::string token;
            for (size_t i = pos + 1; i < next; ++i) {
                if (pointer[i] == '~' && i + 1 < next &&
                    (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
                    token += pointer[++i] == '0' ? '~' : '/';
                } else {
                    token += pointer[i];
                }
            }
            node = child(*node, token);
            pos = next;
        }
        return node;
    }

    // Objects are indexed on first use: $defs may hold thousands of schemas,
    // and Value::find is a linear scan.
    const json::Value* child(const json::Value& node, const std::string& token) {
        if (node.is_object()) {
            auto index = member_index_.find(&node);
            if (index == member_index_.end()) {
                index = member_index_.emplace(&node, MemberIndex{}).first;
                for (const auto& member : node.members)
                    index->second[member.first] = &member.second;  // the last one wins
            }
            auto found = index->second.find(token);
            return found == index->second.end() ? nullptr : found->second;
        }
        if (!node.is_array() || token.empty() || token.size() > 9 ||
            token.find_first_not_of("0123456789") != std::string::npos)
            return nullptr;
        size_t index = 0;
        for (const char c : token) index = index * 10 + size_t(c - '0');
        return index < node.items.size() ? &node.items[index] : nullptr;
    }

    // Converted after the schema that refers to them, so a chain of refs does
    // not deepen the recursion.
    Status convert_pending_refs() {
        while (!pending_.empty()) {
            const PendingRef ref = pending_.back();
            pending_.pop_back();
            SMOL_TRY_ASSIGN(const Expr expr, visit(*ref.target, ref.pointer, ref.rule, 0));
            if (expr.never) return no_value(ref.pointer);
            SMOL_TRY(set_body(ref.rule, expr.text));
        }
        return {};
    }

    Expected<Expr> visit_all_of(const json::Value& schema, const std::string& pointer,
                                const std::string& hint, size_t depth) {
        const json::Value& all = *schema.find("allOf");
        if (!all.is_array() || all.items.empty())
            return invalid("\"allOf\" must be a non-empty array", pointer);
        if (all.items.size() > 1)
            return unsupported_keyword("allOf", pointer, " (with more than one subschema)");
        SMOL_TRY(check_alone(schema, "allOf", pointer));
        return visit(all.items[0], schema_detail::pointer_append(pointer, "allOf") + "/0", hint,
                     depth + 1);
    }

    Expected<Expr> visit_any_of(const json::Value& schema, const std::string& pointer,
                                const std::string& hint, size_t depth) {
        const char* keyword = schema.find("anyOf") ? "anyOf" : "oneOf";
        SMOL_TRY(check_alone(schema, keyword, pointer));
        const json::Value& list = *schema.find(keyword);
        if (!list.is_array() || list.items.empty())
            return invalid("\"" + std::string(keyword) + "\" must be a non-empty array", pointer);
        std::vector<std::string> alternatives;
        std::unordered_set<std::string> seen;
        for (size_t i = 0; i < list.items.size(); ++i) {
            const std::string at =
                schema_detail::pointer_append(pointer, keyword) + "/" + std::to_string(i);
            SMOL_TRY_ASSIGN(const Expr expr,
                            visit(list.items[i], at, hint + "-" + std::to_string(i), depth + 1));
            if (expr.never) continue;
            SMOL_TRY_ASSIGN(const std::string name, named(expr, hint + "-" + std::to_string(i)));
            if (seen.insert(name).second) alternatives.push_back(name);
        }
        if (alternatives.empty()) return Expr{"", true};
        return Expr{join_alternatives(alternatives)};
    }

    static std::string join_alternatives(const std::vector<std::string>& alternatives) {
        std::string out;
        for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
        return out;
    }

    // --- types ---

    struct TypeSet {
        bool object = false, array = false, string = false, number = false, integer = false,
             boolean = false, null = false;
        bool any() const {
            return object || array || string || number || integer || boolean || null;
        }
    };

    static Expected<TypeSet> read_types(const json::Value& schema, const std::string& pointer) {
        TypeSet types;
        const json::Value* type = schema.find("type");
        if (!type) return infer_types(schema);
        std::vector<const json::Value*> names;
        if (type->is_string()) names.push_back(type);
        if (type->is_array())
            for (const json::Value& item : type->items) names.push_back(&item);
        if (names.empty())
            return invalid("\"type\" must be a string or a non-empty array", pointer);
        for (const json::Value* name : names) {
            const std::string& t = name->text;
            if (!name->is_string()) return invalid("\"type\" names must be strings", pointer);
            bool* flag = t == "object"    ? &types.object
                         : t == "array"   ? &types.array
                         : t == "string"  ? &types.string
                         : t == "number"  ? &types.number
                         : t == "integer" ? &types.integer
                         : t == "boolean" ? &types.boolean
                         : t == "null"    ? &types.null
                                          : nullptr;
            if (!flag) return invalid("unknown type \"" + t + "\"", pointer);
            *flag = true;
        }
        if (types.number) types.integer = false;  // numbers include the integers
        return types;
    }

    // No "type": the types the keywords apply to, or none (any value).
    static TypeSet infer_types(const json::Value& schema) {
        TypeSet types;
        for (const auto& member : schema.members) {
            const std::string& k = member.first;
            using schema_detail::is_one_of;
            if (is_one_of(k, {"properties", "required", "additionalProperties"}))
                types.object = true;
            if (is_one_of(k, {"items", "minItems", "maxItems"})) types.array = true;
            if (is_one_of(k, {"minLength", "maxLength", "format"})) types.string = true;
            if (is_one_of(k, {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}))
                types.number = true;
        }
        return types;
    }

    Expected<Expr> visit_types(const json::Value& schema, const std::string& pointer,
                               const std::string& hint, size_t depth) {
        SMOL_TRY_ASSIGN(const TypeSet types, read_types(schema, pointer));
        if (!types.any()) return Expr{any_value(options_.max_any_depth)};
        std::vector<Expr> parts;
        if (types.object) {
            SMOL_TRY_ASSIGN(Expr e, visit_object(schema, pointer, hint, depth));
            parts.push_back(std::move(e));
        }
        if (types.array) {
            SMOL_TRY_ASSIGN(Expr e, visit_array(schema, pointer, hint, depth));
            parts.push_back(std::move(e));
        }
        if (types.string) {
            SMOL_TRY_ASSIGN(Expr e, visit_string(schema, pointer));
            parts.push_back(std::move(e));
        }
        if (types.number || types.integer) {
            SMOL_TRY_ASSIGN(Expr e, visit_number(schema, pointer, types.integer));
            parts.push_back(std::move(e));
        }
        if (types.boolean) parts.push_back(Expr{boolean_rule()});
        if (types.null) parts.push_back(Expr{null_rule()});
        std::vector<std::string> alternatives;
        for (size_t i = 0; i < parts.size(); ++i) {
            if (parts[i].never) continue;
            if (parts.size() == 1) return parts[i];
            SMOL_TRY_ASSIGN(std::string name, named(parts[i], hint));
            alternatives.push_back(std::move(name));
        }
        if (alternatives.empty()) return Expr{"", true};
        return Expr{join_alternatives(alternatives)};
    }

    // A non-negative integer keyword, or `fallback` when absent.
    static Expected<int64_t> read_count(const json::Value& schema, const char* key,
                                        int64_t fallback, const std::string& pointer) {
        const json::Value* v = schema.find(key);
        if (!v) return fallback;
        const bool ok =
            v->is_number() && v->text[0] != '-' && schema_detail::is_integral_literal(v->text);
        if (!ok)
            return invalid("\"" + std::string(key) + "\" must be a non-negative integer", pointer);
        return std::min<int64_t>(schema_detail::to_num(v->text).floor, schema_detail::kBeyond);
    }

    // minX / maxX counts: (min, max or -1); max clamped to the repetition limit.
    static Expected<std::pair<int64_t, int64_t>> read_counts(const json::Value& schema,
                                                             const char* min_key,
                                                             const char* max_key,
                                                             const std::string& pointer) {
        SMOL_TRY_ASSIGN(const int64_t lo, read_count(schema, min_key, 0, pointer));
        SMOL_TRY_ASSIGN(int64_t hi, read_count(schema, max_key, -1, pointer));
        if (hi >= 0 && lo > hi)
            return invalid("\"" + std::string(min_key) + "\" > \"" + max_key + "\"", pointer);
        if (lo > int64_t(schema_detail::kMaxRepeat))
            return unsupported("\"" + std::string(min_key) + "\" above " +
                                   std::to_string(schema_detail::kMaxRepeat),
                               pointer);
        hi = std::min<int64_t>(hi, int64_t(schema_detail::kMaxRepeat));
        return std::make_pair(lo, hi);
    }

    Expected<Expr> visit_array(const json::Value& schema, const std::string& pointer,
                               const std::string& hint, size_t depth) {
        SMOL_TRY_ASSIGN(const auto counts, read_counts(schema, "minItems", "maxItems", pointer));
        const json::Value* items = schema.find("items");
        if (items && items->is_array())
            return unsupported_keyword("items", pointer, " (array form; use one schema)");
        Expr item{any_value(options_.max_any_depth)};
        if (items) {
            SMOL_TRY_ASSIGN(item, visit(*items, schema_detail::pointer_append(pointer, "items"),
                                        hint + "-item", depth + 1));
        }
        if (item.never) {
            if (counts.first > 0) return Expr{"", true};
            return Expr{array_of("", 0, 0)};
        }
        SMOL_TRY_ASSIGN(const std::string item_rule, named(item, hint + "-item"));
        return Expr{array_of(item_rule, counts.first, counts.second)};
    }

    // --- objects ---

    struct Member {
        std::string key;
        std::string value_rule;
        bool required = false;
    };

    // An object's declared properties: names in order of first appearance,
    // each with its last schema (as Value::find), and the required names.
    struct ObjectShape {
        std::vector<std::string_view> declared;
        std::unordered_map<std::string_view, const json::Value*> schema_of;
        std::vector<std::string_view> required;
        std::unordered_set<std::string_view> is_required;
    };

    static Status read_shape(const json::Value* properties, const json::Value* required,
                             const std::string& pointer, ObjectShape& shape) {
        if (properties && !properties->is_object())
            return invalid("\"properties\" must be an object", pointer);
        if (required && !required->is_array())
            return invalid("\"required\" must be an array of strings", pointer);
        if (properties) {
            for (const auto& property : properties->members) {
                auto inserted = shape.schema_of.emplace(property.first, &property.second);
                if (inserted.second)
                    shape.declared.push_back(property.first);
                else
                    inserted.first->second = &property.second;
            }
        }
        if (required) {
            for (const json::Value& name : required->items) {
                if (!name.is_string())
                    return invalid("\"required\" must be an array of strings", pointer);
                if (shape.is_required.insert(name.text).second) shape.required.push_back(name.text);
            }
        }
        return {};
    }

    Expected<Expr> visit_object(const json::Value& schema, const std::string& pointer,
                                const std::string& hint, size_t depth) {
        const json::Value* additional = schema.find("additionalProperties");
        if (additional && !additional->is_object() && !additional->is_bool())
            return invalid("\"additionalProperties\" must be a schema", pointer);
        ObjectShape shape;
        SMOL_TRY(read_shape(schema.find("properties"), schema.find("required"), pointer, shape));
        if (shape.declared.empty() && shape.required.empty())
            return map_object(additional, pointer, hint, depth);
        std::vector<Member> members;
        SMOL_TRY(declared_members(shape, pointer, hint, depth, members));
        SMOL_TRY(undeclared_required(shape, additional, pointer, hint, depth, members));
        for (const Member& m : members)
            if (m.required && m.value_rule.empty()) return Expr{"", true};
        members.erase(std::remove_if(members.begin(), members.end(),
                                     [](const Member& m) { return m.value_rule.empty(); }),
                      members.end());
        return object_body(members, hint);
    }

    // Declared properties in schema order; a property no value can satisfy
    // gets an empty value_rule.
    Status declared_members(const ObjectShape& shape, const std::string& pointer,
                            const std::string& hint, size_t depth, std::vector<Member>& members) {
        const std::string base = schema_detail::pointer_append(pointer, "properties");
        for (const std::string_view key : shape.declared) {
            const std::string name(key);
            SMOL_TRY_ASSIGN(const Expr expr, visit(*shape.schema_of.at(key),
                                                   schema_detail::pointer_append(base, key),
                                                   hint + "-" + name, depth + 1));
            Member m;
            m.key = name;
            m.required = shape.is_required.count(key) > 0;
            if (!expr.never) {
                SMOL_TRY_ASSIGN(m.value_rule, named(expr, hint + "-" + name));
            }
            members.push_back(std::move(m));
        }
        return {};
    }

    // Required names without a property schema: additionalProperties' schema.
    Status undeclared_required(const ObjectShape& shape, const json::Value* additional,
                               const std::string& pointer, const std::string& hint, size_t depth,
                               std::vector<Member>& members) {
        for (const std::string_view key : shape.required) {
            if (shape.schema_of.count(key)) continue;
            const std::string name(key);
            Expr expr{any_value(options_.max_any_depth)};
            if (additional) {
                SMOL_TRY_ASSIGN(
                    expr, visit(*additional,
                                schema_detail::pointer_append(pointer, "additionalProperties"),
                                hint + "-" + name, depth + 1));
            }
            Member m;
            m.key = name;
            m.required = true;
            if (!expr.never) {
                SMOL_TRY_ASSIGN(m.value_rule, named(expr, hint + "-" + name));
            }
            members.push_back(std::move(m));
        }
        return {};
    }

    Expected<Expr> map_object(const json::Value* additional, const std::string& pointer,
                              const std::string& hint, size_t depth) {
        Expr value{any_value(options_.max_any_depth)};
        if (additional) {
            SMOL_TRY_ASSIGN(
                value,
                visit(*additional, schema_detail::pointer_append(pointer, "additionalProperties"),
                      hint + "-value", depth + 1));
        }
        if (value.never) return Expr{"\"{\" " + ws_rule() + " \"}\""};
        SMOL_TRY_ASSIGN(const std::string value_rule, named(value, hint + "-value"));
        return Expr{map_of(value_rule)};
    }

    std::string key_value(const Member& m) {
        const std::string& ws = ws_rule();
        return schema_detail::literal(json::quote(m.key)) + " " + ws + " \":\" " + ws + " " +
               m.value_rule;
    }

    // "{" members "}": required members always, optional ones optional, in
    // order, commas only between members present.
    Expected<Expr> object_body(const std::vector<Member>& members, const std::string& hint) {
        const std::string& ws = ws_rule();
        if (members.empty()) return Expr{"\"{\" " + ws + " \"}\""};
        size_t first_required = members.size();
        for (size_t i = 0; i < members.size() && first_required == members.size(); ++i)
            if (members[i].required) first_required = i;
        if (first_required == members.size()) {
            SMOL_TRY_ASSIGN(const std::string all_optional, optional_chain(members, hint));
            return Expr{"\"{\" " + ws + " ( " + all_optional + " " + ws + " )? \"}\""};
        }
        std::string body = "\"{\" " + ws + " ";
        for (size_t i = 0; i < first_required; ++i)
            body += "( " + key_value(members[i]) + " " + sep() + " )? ";
        body += key_value(members[first_required]);
        for (size_t i = first_required + 1; i < members.size(); ++i) {
            const std::string next = sep() + " " + key_value(members[i]);
            body += members[i].required ? " " + next : " ( " + next + " )?";
        }
        return Expr{body + " " + ws + " \"}\""};
    }

    // A non-empty in-order selection of optional members, comma separated:
    // tail_i ::= kv_i ( sep tail_{i+1} )? | tail_{i+1}. Linear in the members.
    Expected<std::string> optional_chain(const std::vector<Member>& members,
                                         const std::string& hint) {
        std::string next;
        for (size_t i = members.size(); i-- > 0;) {
            const std::string name = reserve(hint + "-tail-" + std::to_string(i));
            std::string body = key_value(members[i]);
            if (!next.empty()) body += " ( " + sep() + " " + next + " )? | " + next;
            SMOL_TRY(set_body(name, std::move(body)));
            next = name;
        }
        return next;
    }

    // --- strings ---

    Expected<Expr> visit_string(const json::Value& schema, const std::string& pointer) {
        SMOL_TRY_ASSIGN(const auto counts, read_counts(schema, "minLength", "maxLength", pointer));
        if (const json::Value* format = schema.find("format"))
            return formatted_string(*format, counts, pointer);
        const std::string& c = char_rule();
        if (counts.first == 0 && counts.second < 0) return Expr{string_rule()};
        return Expr{"\"\\\"\" " + c + schema_detail::repeat(counts.first, counts.second) +
                    " \"\\\"\""};
    }

    Expected<Expr> formatted_string(const json::Value& format,
                                    const std::pair<int64_t, int64_t>& counts,
                                    const std::string& pointer) {
        if (!format.is_string()) return invalid("\"format\" must be a string", pointer);
        const std::string& f = format.text;
        int64_t shortest = 0, longest = 0;
        std::string rule;
        if (f == "date") {
            shortest = longest = 10;
            rule = date_rule();
        } else if (f == "time") {
            shortest = 9;
            longest = 24;
            rule = time_rule();
        } else if (f == "date-time") {
            shortest = 20;
            longest = 35;
            rule = date_time_rule();
        } else if (f == "uuid") {
            shortest = longest = 36;
            rule = uuid_rule();
        } else {
            return unsupported("unsupported format \"" + f + "\"", pointer);
        }
        if (counts.first > shortest || (counts.second >= 0 && counts.second < longest))
            return unsupported_keyword(counts.first > shortest ? "minLength" : "maxLength", pointer,
                                       " beside format \"" + f + "\"");
        return Expr{"\"\\\"\" " + rule + " \"\\\"\""};
    }

    const std::string& date_rule() {
        return shared("date", [] {
            return std::string(
                "( [1-9] [0-9]{3} | \"0\" ( [1-9] [0-9]{2} | \"0\" ( [1-9] [0-9] | \"0\" [1-9] ) ) "
                ") \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" "
                "[01] ) | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
                "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )");
        });
    }
    const std::string& time_rule() {
        return shared("time", [] {
            const std::string hour = "( [01] [0-9] | \"2\" [0-3] )", minute = "[0-5] [0-9]";
            return hour + " \":\" " + minute + " \":\" " + minute +
                   " ( \".\" [0-9]{1,9} )? ( \"Z\" | [+-] " + hour + " \":\" " + minute + " )";
        });
    }
    const std::string& date_time_rule() {
        const std::string date = date_rule(), time = time_rule();
        return shared("date-time", [&] { return date + " \"T\" " + time; });
    }
    const std::string& uuid_rule() {
        return shared("uuid", [] {
            return std::string(
                "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} "
                "\"-\" "
                "[0-9a-fA-F]{12}");
        });
    }

    // --- numbers ---

    static Expected<Bound> read_bound(const json::Value& schema, const char* inclusive_key,
                                      const char* exclusive_key, bool lower,
                                      const std::string& pointer) {
        Bound bound;
        const json::Value* inclusive = schema.find(inclusive_key);
        const json::Value* exclusive = schema.find(exclusive_key);
        bool draft4_exclusive = false;
        if (exclusive && exclusive->is_bool()) {
            draft4_exclusive = exclusive->boolean;
            exclusive = nullptr;
        }
        if (inclusive) {
            if (!inclusive->is_number())
                return invalid("\"" + std::string(inclusive_key) + "\" must be a number", pointer);
            bound = Bound{true, draft4_exclusive, schema_detail::to_num(inclusive->text)};
        }
        if (exclusive) {
            if (!exclusive->is_number())
                return invalid("\"" + std::string(exclusive_key) + "\" must be a number", pointer);
            const Bound other{true, true, schema_detail::to_num(exclusive->text)};
            if (!bound.present || tighter(other, bound, lower)) bound = other;
        }
        return bound;
    }

    // Whether a is at least as strict as b (both present). Bounds are compared
    // as (floor, has a fraction): everything the grammar uses depends on that
    // alone, so 0.3 and 0.7 may compare equal. Of equal values the exclusive
    // one is stricter.
    static bool tighter(const Bound& a, const Bound& b, bool lower) {
        const auto key = [](const Bound& x) {
            return std::make_pair(x.value.floor, x.value.integral ? 0 : 1);
        };
        if (key(a) == key(b)) return a.exclusive || !b.exclusive;
        return lower ? key(b) < key(a) : key(a) < key(b);
    }

    int64_t max_bounded_magnitude() const {
        return int64_t(schema_detail::power10(size_t(std::min(options_.max_integer_digits, 18)))) -
               1;
    }

    Expected<Expr> visit_number(const json::Value& schema, const std::string& pointer,
                                bool integer) {
        SMOL_TRY_ASSIGN(const Bound lower,
                        read_bound(schema, "minimum", "exclusiveMinimum", true, pointer));
        SMOL_TRY_ASSIGN(const Bound upper,
                        read_bound(schema, "maximum", "exclusiveMaximum", false, pointer));
        if (!lower.present && !upper.present) return Expr{integer ? integer_rule() : number_rule()};
        if (integer) return bounded_integer(lower, upper);
        std::vector<std::string> alternatives;
        const std::string positive = magnitudes(lower, upper);
        if (!positive.empty()) alternatives.push_back(positive);
        const std::string negative = magnitudes(upper.negated(), lower.negated());
        if (!negative.empty()) alternatives.push_back("\"-\" ( " + negative + " )");
        if (alternatives.empty()) return Expr{"", true};
        return Expr{join_alternatives(alternatives)};
    }

    Expr bounded_integer(const Bound& lower, const Bound& upper) {
        const int64_t limit = max_bounded_magnitude();
        int64_t lo = -limit, hi = limit;
        if (lower.present)
            lo = std::max(lo, lower.exclusive ? lower.value.floor + 1 : lower.value.ceil());
        if (upper.present)
            hi = std::min(hi, upper.exclusive ? upper.value.ceil() - 1 : upper.value.floor);
        if (lo > hi) return Expr{"", true};
        std::vector<std::string> alternatives;
        if (hi >= 0)
            alternatives.push_back(
                schema_detail::integer_range(uint64_t(std::max<int64_t>(lo, 0)), uint64_t(hi)));
        if (lo < 0)
            alternatives.push_back(
                "\"-\" " +
                schema_detail::integer_range(uint64_t(std::max<int64_t>(1, -hi)), uint64_t(-lo)));
        return Expr{join_alternatives(alternatives)};
    }

    // Unsigned numbers (no exponent) whose value w is within [lower, upper]
    // for every fraction: integer parts I with [I, I+1) inside take any
    // fraction; the largest integer inside is also written bare.
    std::string magnitudes(const Bound& lower, const Bound& upper) {
        const int64_t limit = max_bounded_magnitude();
        int64_t lo = 0;
        if (lower.present)
            lo = std::max(lo, lower.exclusive ? lower.value.floor + 1 : lower.value.ceil());
        int64_t hi_fraction = limit, hi_bare = limit;
        if (upper.present) {
            hi_fraction = std::min(limit, upper.value.floor - 1);
            hi_bare = std::min(limit, upper.exclusive ? upper.value.ceil() - 1 : upper.value.floor);
        }
        std::vector<std::string> alternatives;
        // At most 15 significant digits: such decimals stay distinct and
        // ordered as doubles, so a validator that compares doubles agrees.
        const auto fraction_digits = [&](int64_t integer_part) {
            return std::min(options_.max_fraction_digits,
                            15 - int(std::to_string(integer_part).size()));
        };
        for (int64_t first = lo; first <= hi_fraction;) {  // one run per digit count
            const int64_t last = std::min(
                hi_fraction, int64_t(schema_detail::power10(std::to_string(first).size())) - 1);
            alternatives.push_back(schema_detail::integer_range(uint64_t(first), uint64_t(last)) +
                                   fraction(fraction_digits(first)));
            first = last + 1;
        }
        // Just above an exclusive integer bound (0 of exclusiveMinimum 0): a
        // nonzero fraction.
        const int64_t floor = lower.value.floor;
        if (lower.present && lower.exclusive && lower.value.integral && floor >= 0 &&
            floor <= hi_fraction && fraction_digits(floor) > 0)
            alternatives.push_back(schema_detail::literal(std::to_string(floor)) + " " +
                                   nonzero_fraction(fraction_digits(floor)));
        if (hi_bare > hi_fraction && hi_bare >= lo)
            alternatives.push_back(schema_detail::literal(std::to_string(hi_bare)));
        if (alternatives.empty()) return "";
        return join_alternatives(alternatives);
    }

    // --- enum / const ---

    static bool has_type(const TypeSet& types, const json::Value& v) {
        switch (v.type) {
            case json::Type::null:
                return types.null;
            case json::Type::boolean:
                return types.boolean;
            case json::Type::string:
                return types.string;
            case json::Type::array:
                return types.array;
            case json::Type::object:
                return types.object;
            case json::Type::number:
                return types.number ||
                       (types.integer && schema_detail::is_integral_literal(v.text));
        }
        return false;
    }

    Expected<Expr> visit_enum(const json::Value& schema, const std::string& pointer) {
        SMOL_TRY(check_alone(schema, schema.find("enum") ? "enum" : "const", pointer,
                             {"enum", "const", "type"}));
        std::vector<const json::Value*> values;
        const json::Value* list = schema.find("enum");
        if (list && !list->is_array()) return invalid("\"enum\" must be an array", pointer);
        if (list)
            for (const json::Value& v : list->items) values.push_back(&v);
        if (const json::Value* c = schema.find("const")) {
            const std::string text = json::dump(*c);
            if (!list) values.push_back(c);
            values.erase(
                std::remove_if(values.begin(), values.end(),
                               [&](const json::Value* v) { return json::dump(*v) != text; }),
                values.end());
        }
        TypeSet types;
        if (schema.find("type")) {
            SMOL_TRY_ASSIGN(types, read_types(schema, pointer));
            if (types.number) types.integer = true;
        }
        std::vector<std::string> alternatives;
        std::unordered_set<std::string> seen;
        for (const json::Value* v : values) {
            if (schema.find("type") && !has_type(types, *v)) continue;
            std::string text = schema_detail::literal(json::dump(*v));
            if (seen.insert(text).second) alternatives.push_back(std::move(text));
        }
        if (alternatives.empty()) return Expr{"", true};
        return Expr{join_alternatives(alternatives)};
    }
};

}  // namespace detail

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
