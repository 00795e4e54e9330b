// Strings of a JSON Schema as grammar: one rule per decoded code point, so
// minLength / maxLength count what JSON Schema counts, and the formats date,
// time, date-time and uuid.
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

inline const std::string& SchemaConverter::char_rule() {
    return shared("char", [] {
        return std::string(
            "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] "
            "[0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )");
    });
}

inline const std::string& SchemaConverter::string_rule() {
    const std::string& c = char_rule();
    return shared("string", [&] { return "\"\\\"\" " + c + "* \"\\\"\""; });
}

inline Expected<SchemaConverter::Expr> SchemaConverter::visit_string(const json::Value& schema,
                                                                     const std::string& pointer) {
    SMOL_TRY_ASSIGN(const auto counts, read_counts(schema, "minLength", "maxLength", pointer));
    if (const json::Value* format = schema.find("format"))
        return formatted_string(*format, counts, pointer);
    const std::string& c = char_rule();
    if (counts.first == 0 && counts.second < 0) return Expr{string_rule()};
    return Expr{"\"\\\"\" " + c + schema_detail::repeat(counts.first, counts.second) + " \"\\\"\""};
}

inline Expected<SchemaConverter::Expr> SchemaConverter::formatted_string(
    const json::Value& format, const std::pair<int64_t, int64_t>& counts,
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

inline const std::string& SchemaConverter::date_rule() {
    return shared("date", [] {
        return std::string(
            "( [1-9] [0-9]{3} | \"0\" ( [1-9] [0-9]{2} | \"0\" ( [1-9] [0-9] | \"0\" [1-9] ) ) "
            ") \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" "
            "[01] ) | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
            "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )");
    });
}

inline const std::string& SchemaConverter::time_rule() {
    return shared("time", [] {
        const std::string hour = "( [01] [0-9] | \"2\" [0-3] )", minute = "[0-5] [0-9]";
        return hour + " \":\" " + minute + " \":\" " + minute +
               " ( \".\" [0-9]{1,9} )? ( \"Z\" | [+-] " + hour + " \":\" " + minute + " )";
    });
}

inline const std::string& SchemaConverter::date_time_rule() {
    const std::string date = date_rule(), time = time_rule();
    return shared("date-time", [&] { return date + " \"T\" " + time; });
}

inline const std::string& SchemaConverter::uuid_rule() {
    return shared("uuid", [] {
        return std::string(
            "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} "
            "\"-\" "
            "[0-9a-fA-F]{12}");
    });
}

}  // namespace detail

SMOL_NAMESPACE_END
