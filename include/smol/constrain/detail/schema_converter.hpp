// The JSON Schema converter's state and the rules every kind shares: the
// grammar being built (rules, unique names, the 4 MiB cap), the error
// messages (each naming a JSON pointer), whitespace, free-form values,
// "[...]" and "{...}". What each schema kind becomes lives beside it, one
// header per kind, as definitions of the members declared below:
//   schema_dispatch.hpp    which keyword decides: $ref, allOf, anyOf / oneOf,
//                          enum / const, type (and the types a schema admits)
//   schema_containers.hpp  objects and arrays
//   schema_strings.hpp     strings and their formats (date, time, uuid)
//   schema_numbers.hpp     integers and numbers, with their bounds
// Include constrain/json_schema.hpp, which brings all of them.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../../detail/json.hpp"
#include "../../error.hpp"
#include "../json_schema_options.hpp"
#include "schema_keywords.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

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

    // The JSON types a schema admits ("type", or inferred from its keywords).
    struct TypeSet {
        bool object = false, array = false, string = false, number = false, integer = false,
             boolean = false, null = false;
        bool any() const {
            return object || array || string || number || integer || boolean || null;
        }
    };
    // An object member as generated: its key, its value's rule (empty: no
    // value satisfies it) and whether it is required.
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

    // --- shared by several kinds: alternatives, minX / maxX counts ---

    static std::string join_alternatives(const std::vector<std::string>& alternatives) {
        std::string out;
        for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
        return out;
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

    // --- schemas by keyword: $ref, allOf, anyOf / oneOf, enum / const, type
    // (schema_dispatch.hpp) ---

    Expected<Expr> visit(const json::Value& schema, const std::string& pointer,
                         const std::string& hint, size_t depth);
    static Status check_alone(const json::Value& schema, std::string_view keyword,
                              const std::string& pointer,
                              std::initializer_list<std::string_view> also_allowed = {});
    Expected<Expr> visit_ref(const json::Value& schema, const std::string& pointer);
    static Expected<std::string> decode_fragment(const std::string& ref,
                                                 const std::string& pointer);
    const json::Value* resolve(const std::string& pointer);
    const json::Value* child(const json::Value& node, const std::string& token);
    Status convert_pending_refs();
    Expected<Expr> visit_all_of(const json::Value& schema, const std::string& pointer,
                                const std::string& hint, size_t depth);
    Expected<Expr> visit_any_of(const json::Value& schema, const std::string& pointer,
                                const std::string& hint, size_t depth);
    static Expected<TypeSet> read_types(const json::Value& schema, const std::string& pointer);
    static TypeSet infer_types(const json::Value& schema);
    Expected<Expr> visit_types(const json::Value& schema, const std::string& pointer,
                               const std::string& hint, size_t depth);
    static bool has_type(const TypeSet& types, const json::Value& v);
    Expected<Expr> visit_enum(const json::Value& schema, const std::string& pointer);

    // --- objects and arrays (schema_containers.hpp) ---

    Expected<Expr> visit_array(const json::Value& schema, const std::string& pointer,
                               const std::string& hint, size_t depth);
    static Status read_shape(const json::Value* properties, const json::Value* required,
                             const std::string& pointer, ObjectShape& shape);
    Expected<Expr> visit_object(const json::Value& schema, const std::string& pointer,
                                const std::string& hint, size_t depth);
    Status declared_members(const ObjectShape& shape, const std::string& pointer,
                            const std::string& hint, size_t depth, std::vector<Member>& members);
    Status undeclared_required(const ObjectShape& shape, const json::Value* additional,
                               const std::string& pointer, const std::string& hint, size_t depth,
                               std::vector<Member>& members);
    Expected<Expr> map_object(const json::Value* additional, const std::string& pointer,
                              const std::string& hint, size_t depth);
    std::string key_value(const Member& m);
    Expected<Expr> object_body(const std::vector<Member>& members, const std::string& hint);
    Expected<std::string> optional_chain(const std::vector<Member>& members,
                                         const std::string& hint);

    // --- strings and formats (schema_strings.hpp) ---

    const std::string& char_rule();
    const std::string& string_rule();
    Expected<Expr> visit_string(const json::Value& schema, const std::string& pointer);
    Expected<Expr> formatted_string(const json::Value& format,
                                    const std::pair<int64_t, int64_t>& counts,
                                    const std::string& pointer);
    const std::string& date_rule();
    const std::string& time_rule();
    const std::string& date_time_rule();
    const std::string& uuid_rule();

    // --- numbers (schema_numbers.hpp) ---

    std::string integer_part() const;
    std::string fraction(int most = 1000) const;
    static std::string nonzero_fraction(int digits);
    const std::string& integer_rule();
    const std::string& number_rule();
    static Expected<Bound> read_bound(const json::Value& schema, const char* inclusive_key,
                                      const char* exclusive_key, bool lower,
                                      const std::string& pointer);
    static bool tighter(const Bound& a, const Bound& b, bool lower);
    int64_t max_bounded_magnitude() const;
    Expected<Expr> visit_number(const json::Value& schema, const std::string& pointer,
                                bool integer);
    Expr bounded_integer(const Bound& lower, const Bound& upper);
    std::string magnitudes(const Bound& lower, const Bound& upper);
};

}  // namespace detail

SMOL_NAMESPACE_END
