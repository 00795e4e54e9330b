// json_schema_check: a small JSON Schema validator for the tests of
// constrained generation. It implements, independently of
// constrain/json_schema.hpp, the subset that converter supports, with the
// standard's meaning (real calendar dates, oneOf as "exactly one", $ref beside
// other keywords as a conjunction), so a grammar that produces an invalid
// document is caught here. Keywords outside the subset make validate() fail
// with a message, so an unchecked schema never passes silently.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace smol_test {

class SchemaChecker {
public:
    explicit SchemaChecker(const nlohmann::json& root) : root_(root) {}

    bool check(const nlohmann::json& doc, const nlohmann::json& schema, const std::string& at,
               std::string* why, int depth = 0) const {
        if (depth > 200) return fail(why, at, "schema recursion too deep");
        if (schema.is_boolean()) return schema.get<bool>() || fail(why, at, "false schema");
        if (!schema.is_object()) return fail(why, at, "schema is not an object");
        for (auto it = schema.begin(); it != schema.end(); ++it)
            if (!keyword_known(it.key())) return fail(why, at, "validator: keyword " + it.key());
        if (schema.contains("$ref")) {
            const nlohmann::json* target = resolve(schema["$ref"].get<std::string>());
            if (!target) return fail(why, at, "unresolved $ref");
            if (!check(doc, *target, at, why, depth + 1)) return false;
        }
        return check_type(doc, schema, at, why) && check_enum(doc, schema, at, why) &&
               check_combinators(doc, schema, at, why, depth) &&
               check_object(doc, schema, at, why, depth) &&
               check_array(doc, schema, at, why, depth) && check_string(doc, schema, at, why) &&
               check_number(doc, schema, at, why);
    }

    // Code points of UTF-8 text.
    static size_t code_points(const std::string& s) {
        size_t n = 0;
        for (unsigned char c : s) n += (c & 0xC0) != 0x80;
        return n;
    }

    static bool is_date(const std::string& s) {
        if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
        int year, month, day;
        if (!digits(s, 0, 4, year) || !digits(s, 5, 2, month) || !digits(s, 8, 2, day))
            return false;
        if (year < 1 || month < 1 || month > 12 || day < 1) return false;
        static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        return day <= days[month - 1] + (month == 2 && leap ? 1 : 0);
    }

    // RFC 3339 full-time: HH:MM:SS[.frac](Z|+HH:MM|-HH:MM).
    static bool is_time(const std::string& s) {
        int h, m, sec;
        if (s.size() < 9 || s[2] != ':' || s[5] != ':') return false;
        if (!digits(s, 0, 2, h) || !digits(s, 3, 2, m) || !digits(s, 6, 2, sec)) return false;
        if (h > 23 || m > 59 || sec > 59) return false;
        size_t i = 8;
        if (s[i] == '.') {
            const size_t start = ++i;
            while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
            if (i == start) return false;
        }
        if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) return i + 1 == s.size();
        if (i >= s.size() || (s[i] != '+' && s[i] != '-') || s.size() != i + 6) return false;
        int oh, om;
        return s[i + 3] == ':' && digits(s, i + 1, 2, oh) && digits(s, i + 4, 2, om) && oh <= 23 &&
               om <= 59;
    }

    static bool is_date_time(const std::string& s) {
        return s.size() > 11 && (s[10] == 'T' || s[10] == 't') && is_date(s.substr(0, 10)) &&
               is_time(s.substr(11));
    }

    static bool is_uuid(const std::string& s) {
        if (s.size() != 36) return false;
        for (size_t i = 0; i < s.size(); ++i) {
            const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
            if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
        }
        return true;
    }

private:
    const nlohmann::json& root_;

    static bool fail(std::string* why, const std::string& at, const std::string& what) {
        if (why) *why = what + " at " + (at.empty() ? "/" : at);
        return false;
    }

    static bool digits(const std::string& s, size_t pos, size_t n, int& out) {
        out = 0;
        for (size_t i = pos; i < pos + n; ++i) {
            if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
            out = out * 10 + (s[i] - '0');
        }
        return true;
    }

    static bool keyword_known(const std::string& k) {
        static const std::vector<std::string> known = {"type",
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
                                                       "$ref",
                                                       "$defs",
                                                       "definitions",
                                                       "title",
                                                       "description",
                                                       "examples",
                                                       "default",
                                                       "$schema",
                                                       "$id",
                                                       "$comment",
                                                       "deprecated",
                                                       "readOnly",
                                                       "writeOnly"};
        return std::find(known.begin(), known.end(), k) != known.end() || k.rfind("x-", 0) == 0;
    }

    const nlohmann::json* resolve(const std::string& ref) const {
        if (ref.empty() || ref[0] != '#') return nullptr;
        std::string pointer;  // the fragment, percent-decoded
        for (size_t i = 1; i < ref.size(); ++i) {
            if (ref[i] == '%' && i + 2 < ref.size()) {
                pointer += char(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
                i += 2;
            } else {
                pointer += ref[i];
            }
        }
        try {
            return &root_.at(nlohmann::json::json_pointer(pointer));
        } catch (const nlohmann::json::exception&) {
            return nullptr;
        }
    }

    static bool has_type(const nlohmann::json& doc, const std::string& t) {
        if (t == "object") return doc.is_object();
        if (t == "array") return doc.is_array();
        if (t == "string") return doc.is_string();
        if (t == "boolean") return doc.is_boolean();
        if (t == "null") return doc.is_null();
        if (t == "number") return doc.is_number();
        if (t == "integer") {
            if (doc.is_number_integer()) return true;
            return doc.is_number_float() && std::floor(doc.get<double>()) == doc.get<double>();
        }
        return false;
    }

    bool check_type(const nlohmann::json& doc, const nlohmann::json& schema, const std::string& at,
                    std::string* why) const {
        if (!schema.contains("type")) return true;
        const nlohmann::json& type = schema["type"];
        if (type.is_string()) return has_type(doc, type) || fail(why, at, "type " + type.dump());
        for (const auto& t : type)
            if (has_type(doc, t)) return true;
        return fail(why, at, "type " + type.dump());
    }

    bool check_enum(const nlohmann::json& doc, const nlohmann::json& schema, const std::string& at,
                    std::string* why) const {
        if (schema.contains("const") && !(doc == schema["const"])) return fail(why, at, "const");
        if (!schema.contains("enum")) return true;
        for (const auto& v : schema["enum"])
            if (doc == v) return true;
        return fail(why, at, "enum");
    }

    bool check_combinators(const nlohmann::json& doc, const nlohmann::json& schema,
                           const std::string& at, std::string* why, int depth) const {
        if (schema.contains("allOf"))
            for (const auto& s : schema["allOf"])
                if (!check(doc, s, at, why, depth + 1)) return false;
        if (schema.contains("anyOf")) {
            bool any = false;
            for (const auto& s : schema["anyOf"])
                any = any || check(doc, s, at, nullptr, depth + 1);
            if (!any) return fail(why, at, "anyOf: no match");
        }
        if (schema.contains("oneOf")) {
            int n = 0;
            for (const auto& s : schema["oneOf"]) n += check(doc, s, at, nullptr, depth + 1);
            if (n != 1) return fail(why, at, "oneOf: " + std::to_string(n) + " matches");
        }
        return true;
    }

    bool check_object(const nlohmann::json& doc, const nlohmann::json& schema,
                      const std::string& at, std::string* why, int depth) const {
        if (!doc.is_object()) return true;
        const nlohmann::json empty = nlohmann::json::object();
        const nlohmann::json& properties =
            schema.contains("properties") ? schema["properties"] : empty;
        if (schema.contains("required"))
            for (const auto& name : schema["required"])
                if (!doc.contains(name.get<std::string>()))
                    return fail(why, at, "missing required " + name.dump());
        for (auto it = doc.begin(); it != doc.end(); ++it) {
            const std::string here = at + "/" + it.key();
            if (properties.contains(it.key())) {
                if (!check(it.value(), properties[it.key()], here, why, depth + 1)) return false;
            } else if (schema.contains("additionalProperties")) {
                if (!check(it.value(), schema["additionalProperties"], here, why, depth + 1))
                    return false;
            }
        }
        return true;
    }

    bool check_array(const nlohmann::json& doc, const nlohmann::json& schema, const std::string& at,
                     std::string* why, int depth) const {
        if (!doc.is_array()) return true;
        if (schema.contains("minItems") && doc.size() < schema["minItems"].get<size_t>())
            return fail(why, at, "minItems");
        if (schema.contains("maxItems") && doc.size() > schema["maxItems"].get<size_t>())
            return fail(why, at, "maxItems");
        if (schema.contains("items"))
            for (size_t i = 0; i < doc.size(); ++i)
                if (!check(doc[i], schema["items"], at + "/" + std::to_string(i), why, depth + 1))
                    return false;
        return true;
    }

    bool check_string(const nlohmann::json& doc, const nlohmann::json& schema,
                      const std::string& at, std::string* why) const {
        if (!doc.is_string()) return true;
        const std::string& s = doc.get_ref<const std::string&>();
        if (schema.contains("minLength") && code_points(s) < schema["minLength"].get<size_t>())
            return fail(why, at, "minLength");
        if (schema.contains("maxLength") && code_points(s) > schema["maxLength"].get<size_t>())
            return fail(why, at, "maxLength");
        if (!schema.contains("format")) return true;
        const std::string format = schema["format"];
        bool ok = true;
        if (format == "date") ok = is_date(s);
        if (format == "time") ok = is_time(s);
        if (format == "date-time") ok = is_date_time(s);
        if (format == "uuid") ok = is_uuid(s);
        return ok || fail(why, at, "format " + format);
    }

    // a < b (-1), == (0), > (1); exact for two integers, by double otherwise.
    static int compare(const nlohmann::json& a, const nlohmann::json& b) {
        if (!a.is_number_integer() || !b.is_number_integer()) {
            const double x = a.get<double>(), y = b.get<double>();
            return x < y ? -1 : x > y;
        }
        const auto key = [](const nlohmann::json& v) {  // (non-negative, magnitude)
            if (v.is_number_unsigned()) return std::make_pair(true, v.get<uint64_t>());
            const auto x = v.get<int64_t>();
            return x < 0 ? std::make_pair(false, uint64_t(0) - uint64_t(x))
                         : std::make_pair(true, uint64_t(x));
        };
        const auto ka = key(a), kb = key(b);
        if (ka.first != kb.first) return ka.first ? 1 : -1;
        const int c = ka.second < kb.second ? -1 : ka.second > kb.second;
        return ka.first ? c : -c;
    }

    bool check_number(const nlohmann::json& doc, const nlohmann::json& schema,
                      const std::string& at, std::string* why) const {
        if (!doc.is_number()) return true;
        const auto draft4 = [&](const char* key) {
            return schema.contains(key) && schema[key].is_boolean() && schema[key].get<bool>();
        };
        if (schema.contains("minimum")) {
            const int c = compare(doc, schema["minimum"]);
            if (c < 0 || (c == 0 && draft4("exclusiveMinimum"))) return fail(why, at, "minimum");
        }
        if (schema.contains("maximum")) {
            const int c = compare(doc, schema["maximum"]);
            if (c > 0 || (c == 0 && draft4("exclusiveMaximum"))) return fail(why, at, "maximum");
        }
        if (schema.contains("exclusiveMinimum") && schema["exclusiveMinimum"].is_number() &&
            compare(doc, schema["exclusiveMinimum"]) <= 0)
            return fail(why, at, "exclusiveMinimum");
        if (schema.contains("exclusiveMaximum") && schema["exclusiveMaximum"].is_number() &&
            compare(doc, schema["exclusiveMaximum"]) >= 0)
            return fail(why, at, "exclusiveMaximum");
        return true;
    }
};

// Whether doc is valid under schema (the subset above); *why says where not.
inline bool validate(const nlohmann::json& doc, const nlohmann::json& schema, std::string* why) {
    return SchemaChecker(schema).check(doc, schema, "", why);
}

}  // namespace smol_test
