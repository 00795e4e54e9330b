// The JSON value tree of smol's JSON reader (detail/json.hpp): a Value is a
// null, boolean, number, string, array or object, with a number kept as its
// exact source text (a schema's "maximum": 1e400 or a 30-digit id must not be
// rounded on the way through) and an object's members in source order,
// duplicates kept (find() returns the last, as most JSON readers do).
#pragma once

#include "abi.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

SMOL_NAMESPACE_BEGIN
namespace detail {
namespace json {

enum class Type { null, boolean, number, string, array, object };

struct Value {
    Type type = Type::null;
    bool boolean = false;
    std::string text;          // number: its exact source text; string: the decoded UTF-8
    std::vector<Value> items;  // array
    std::vector<std::pair<std::string, Value>>
        members;  // object, in source order (duplicates kept)

    // The last member with that key, or nullptr (also for a non-object).
    const Value* find(std::string_view key) const noexcept {
        for (size_t i = members.size(); i > 0; --i)
            if (members[i - 1].first == key) return &members[i - 1].second;
        return nullptr;
    }
    bool is_null() const noexcept { return type == Type::null; }
    bool is_bool() const noexcept { return type == Type::boolean; }
    bool is_number() const noexcept { return type == Type::number; }
    bool is_string() const noexcept { return type == Type::string; }
    bool is_array() const noexcept { return type == Type::array; }
    bool is_object() const noexcept { return type == Type::object; }
};

}  // namespace json
}  // namespace detail
SMOL_NAMESPACE_END
