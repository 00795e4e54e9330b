// Integers and numbers of a JSON Schema as grammar: the unbounded shapes
// (digit counts from JsonSchemaOptions, exponents kept below 1e308), exact
// integer ranges, and bounded numbers whose every fraction stays in bounds.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "schema_converter.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

inline std::string SchemaConverter::integer_part() const {
    const int digits = options_.max_integer_digits;
    return "( \"0\" | [1-9]" + (digits > 1 ? " [0-9]" + schema_detail::repeat(0, digits - 1) : "") +
           " )";
}

inline std::string SchemaConverter::fraction(int most) const {
    const int digits = std::min(options_.max_fraction_digits, most);
    if (digits <= 0) return "";
    return " ( \".\" [0-9]" + schema_detail::repeat(1, digits) + " )?";
}

// "." then 1..digits digits, not all zero (split by the leading zeros, so
// it stays unambiguous).
inline std::string SchemaConverter::nonzero_fraction(int digits) {
    std::vector<std::string> alternatives;
    for (int zeros = 0; zeros < digits; ++zeros) {
        std::string a = zeros ? schema_detail::literal(std::string(size_t(zeros), '0')) + " " : "";
        a += "[1-9]";
        if (digits - 1 - zeros > 0) a += " [0-9]" + schema_detail::repeat(0, digits - 1 - zeros);
        alternatives.push_back(std::move(a));
    }
    return "\".\" " + schema_detail::group(alternatives);
}

inline const std::string& SchemaConverter::integer_rule() {
    return shared("integer", [&] { return "\"-\"? " + integer_part(); });
}

inline const std::string& SchemaConverter::number_rule() {
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

inline Expected<SchemaConverter::Bound> SchemaConverter::read_bound(const json::Value& schema,
                                                                    const char* inclusive_key,
                                                                    const char* exclusive_key,
                                                                    bool lower,
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
inline bool SchemaConverter::tighter(const Bound& a, const Bound& b, bool lower) {
    const auto key = [](const Bound& x) {
        return std::make_pair(x.value.floor, x.value.integral ? 0 : 1);
    };
    if (key(a) == key(b)) return a.exclusive || !b.exclusive;
    return lower ? key(b) < key(a) : key(a) < key(b);
}

inline int64_t SchemaConverter::max_bounded_magnitude() const {
    return int64_t(schema_detail::power10(size_t(std::min(options_.max_integer_digits, 18)))) - 1;
}

inline Expected<SchemaConverter::Expr> SchemaConverter::visit_number(const json::Value& schema,
                                                                     const std::string& pointer,
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

inline SchemaConverter::Expr SchemaConverter::bounded_integer(const Bound& lower,
                                                              const Bound& upper) {
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
        alternatives.push_back("\"-\" " + schema_detail::integer_range(
                                              uint64_t(std::max<int64_t>(1, -hi)), uint64_t(-lo)));
    return Expr{join_alternatives(alternatives)};
}

// Unsigned numbers (no exponent) whose value w is within [lower, upper]
// for every fraction: integer parts I with [I, I+1) inside take any
// fraction; the largest integer inside is also written bare.
inline std::string SchemaConverter::magnitudes(const Bound& lower, const Bound& upper) {
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

}  // namespace detail

SMOL_NAMESPACE_END
