// Objects and arrays of a JSON Schema as grammar: properties in schema order
// (required ones always, optional ones optional, commas only between members
// present), maps of additionalProperties, arrays of one item schema with
// minItems / maxItems.
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

inline Expected<SchemaConverter::Expr> SchemaConverter::visit_array(const json::Value& schema,
                                                                    const std::string& pointer,
                                                                    const std::string& hint,
                                                                    size_t depth) {
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

inline Status SchemaConverter::read_shape(const json::Value* properties,
                                          const json::Value* required, const std::string& pointer,
                                          ObjectShape& shape) {
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

inline Expected<SchemaConverter::Expr> SchemaConverter::visit_object(const json::Value& schema,
                                                                     const std::string& pointer,
                                                                     const std::string& hint,
                                                                     size_t depth) {
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
inline Status SchemaConverter::declared_members(const ObjectShape& shape,
                                                const std::string& pointer, const std::string& hint,
                                                size_t depth, std::vector<Member>& members) {
    const std::string base = schema_detail::pointer_append(pointer, "properties");
    for (const std::string_view key : shape.declared) {
        const std::string name(key);
        SMOL_TRY_ASSIGN(const Expr expr,
                        visit(*shape.schema_of.at(key), schema_detail::pointer_append(base, key),
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
inline Status SchemaConverter::undeclared_required(const ObjectShape& shape,
                                                   const json::Value* additional,
                                                   const std::string& pointer,
                                                   const std::string& hint, size_t depth,
                                                   std::vector<Member>& members) {
    for (const std::string_view key : shape.required) {
        if (shape.schema_of.count(key)) continue;
        const std::string name(key);
        Expr expr{any_value(options_.max_any_depth)};
        if (additional) {
            SMOL_TRY_ASSIGN(
                expr,
                visit(*additional, schema_detail::pointer_append(pointer, "additionalProperties"),
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

inline Expected<SchemaConverter::Expr> SchemaConverter::map_object(const json::Value* additional,
                                                                   const std::string& pointer,
                                                                   const std::string& hint,
                                                                   size_t depth) {
    Expr value{any_value(options_.max_any_depth)};
    if (additional) {
        SMOL_TRY_ASSIGN(value, visit(*additional,
                                     schema_detail::pointer_append(pointer, "additionalProperties"),
                                     hint + "-value", depth + 1));
    }
    if (value.never) return Expr{"\"{\" " + ws_rule() + " \"}\""};
    SMOL_TRY_ASSIGN(const std::string value_rule, named(value, hint + "-value"));
    return Expr{map_of(value_rule)};
}

inline std::string SchemaConverter::key_value(const Member& m) {
    const std::string& ws = ws_rule();
    return schema_detail::literal(json::quote(m.key)) + " " + ws + " \":\" " + ws + " " +
           m.value_rule;
}

// "{" members "}": required members always, optional ones optional, in
// order, commas only between members present.
inline Expected<SchemaConverter::Expr> SchemaConverter::object_body(
    const std::vector<Member>& members, const std::string& hint) {
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
inline Expected<std::string> SchemaConverter::optional_chain(const std::vector<Member>& members,
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

}  // namespace detail

SMOL_NAMESPACE_END
