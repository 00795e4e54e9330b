// A schema to an expression, by the keyword that decides its shape: $ref
// (local JSON pointers, converted after the schema that names them), allOf
// with one subschema, anyOf / oneOf (alternatives), enum / const (literals),
// else "type" or the types its keywords imply, each kind handed to its
// header (schema_containers.hpp, schema_strings.hpp, schema_numbers.hpp).
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

inline Expected<SchemaConverter::Expr> SchemaConverter::visit(const json::Value& schema,
                                                              const std::string& pointer,
                                                              const std::string& hint,
                                                              size_t depth) {
    if (depth > schema_detail::kMaxSchemaDepth)
        return invalid(
            "schema nested deeper than " + std::to_string(schema_detail::kMaxSchemaDepth), pointer);
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
inline Status SchemaConverter::check_alone(const json::Value& schema, std::string_view keyword,
                                           const std::string& pointer,
                                           std::initializer_list<std::string_view> also_allowed) {
    for (const auto& member : schema.members) {
        const std::string& key = member.first;
        if (key == keyword || schema_detail::is_one_of(key, also_allowed)) continue;
        if (schema_detail::is_constraint_keyword(key))
            return unsupported_keyword(key, pointer, " beside \"" + std::string(keyword) + "\"");
    }
    return {};
}

inline Expected<SchemaConverter::Expr> SchemaConverter::visit_ref(const json::Value& schema,
                                                                  const std::string& pointer) {
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
inline Expected<std::string> SchemaConverter::decode_fragment(const std::string& ref,
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

inline const json::Value* SchemaConverter::resolve(const std::string& pointer) {
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
inline const json::Value* SchemaConverter::child(const json::Value& node,
                                                 const std::string& token) {
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
inline Status SchemaConverter::convert_pending_refs() {
    while (!pending_.empty()) {
        const PendingRef ref = pending_.back();
        pending_.pop_back();
        SMOL_TRY_ASSIGN(const Expr expr, visit(*ref.target, ref.pointer, ref.rule, 0));
        if (expr.never) return no_value(ref.pointer);
        SMOL_TRY(set_body(ref.rule, expr.text));
    }
    return {};
}

inline Expected<SchemaConverter::Expr> SchemaConverter::visit_all_of(const json::Value& schema,
                                                                     const std::string& pointer,
                                                                     const std::string& hint,
                                                                     size_t depth) {
    const json::Value& all = *schema.find("allOf");
    if (!all.is_array() || all.items.empty())
        return invalid("\"allOf\" must be a non-empty array", pointer);
    if (all.items.size() > 1)
        return unsupported_keyword("allOf", pointer, " (with more than one subschema)");
    SMOL_TRY(check_alone(schema, "allOf", pointer));
    return visit(all.items[0], schema_detail::pointer_append(pointer, "allOf") + "/0", hint,
                 depth + 1);
}

inline Expected<SchemaConverter::Expr> SchemaConverter::visit_any_of(const json::Value& schema,
                                                                     const std::string& pointer,
                                                                     const std::string& hint,
                                                                     size_t depth) {
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

inline Expected<SchemaConverter::TypeSet> SchemaConverter::read_types(const json::Value& schema,
                                                                      const std::string& pointer) {
    TypeSet types;
    const json::Value* type = schema.find("type");
    if (!type) return infer_types(schema);
    std::vector<const json::Value*> names;
    if (type->is_string()) names.push_back(type);
    if (type->is_array())
        for (const json::Value& item : type->items) names.push_back(&item);
    if (names.empty()) return invalid("\"type\" must be a string or a non-empty array", pointer);
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
inline SchemaConverter::TypeSet SchemaConverter::infer_types(const json::Value& schema) {
    TypeSet types;
    for (const auto& member : schema.members) {
        const std::string& k = member.first;
        using schema_detail::is_one_of;
        if (is_one_of(k, {"properties", "required", "additionalProperties"})) types.object = true;
        if (is_one_of(k, {"items", "minItems", "maxItems"})) types.array = true;
        if (is_one_of(k, {"minLength", "maxLength", "format"})) types.string = true;
        if (is_one_of(k, {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}))
            types.number = true;
    }
    return types;
}

inline Expected<SchemaConverter::Expr> SchemaConverter::visit_types(const json::Value& schema,
                                                                    const std::string& pointer,
                                                                    const std::string& hint,
                                                                    size_t depth) {
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

inline bool SchemaConverter::has_type(const TypeSet& types, const json::Value& v) {
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
            return types.number || (types.integer && schema_detail::is_integral_literal(v.text));
    }
    return false;
}

inline Expected<SchemaConverter::Expr> SchemaConverter::visit_enum(const json::Value& schema,
                                                                   const std::string& pointer) {
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
        values.erase(std::remove_if(values.begin(), values.end(),
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

}  // namespace detail

SMOL_NAMESPACE_END
