// The public surface of smol as its headers declare it: every header reachable
// from smol.hpp through #include "...", outside detail/ folders, read for the
// names a program can reach outside `detail` namespaces (a namespace named
// detail or NAME_detail): namespace-scope classes, structs, unions, enums,
// type aliases and free functions, and the public member functions and
// public nested types of public classes (constructors, destructors and
// operators are the class's own). test_surface.cpp checks each against the
// listing at the top of smol.hpp.
//
// A reader of declarations, not a C++ parser: comments, string and character
// literals are blanked, preprocessor lines dropped (of #if / #else, the first
// branch is kept, so braces stay balanced), then statements are split at ';',
// '{' and '}' outside parentheses. It relies on the library's own style
// (declarations start at a statement, no macros that open scopes besides
// SMOL_NAMESPACE_BEGIN / _END), and test_surface.cpp runs it on a sample
// header first, so a scanner that stopped finding names fails there.
#pragma once

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace smol_test {
namespace surface {

struct Name {
    std::string word;  // what the listing must hold: a type, function or member name
    std::string what;  // Class::member, for messages
    std::string file;
};

// Comments and literals blanked (newlines kept), preprocessor lines dropped
// except the first branch of each #if.
inline std::string strip(const std::string& text) {
    std::string code;
    code.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const char c = text[i];
        if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
            while (i < text.size() && text[i] != '\n') ++i;
        } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
            i += 2;
            while (i + 1 < text.size() && !(text[i] == '*' && text[i + 1] == '/')) {
                if (text[i] == '\n') code += '\n';
                ++i;
            }
            i += 2;
        } else if (c == 'R' && i + 1 < text.size() && text[i + 1] == '"') {
            const size_t open = text.find('(', i);
            const std::string close = ")" + text.substr(i + 2, open - i - 2) + "\"";
            const size_t end = text.find(close, open);
            i = end == std::string::npos ? text.size() : end + close.size();
            code += "0";
        } else if (c == '"' || c == '\'') {
            ++i;
            while (i < text.size() && text[i] != c) i += text[i] == '\\' ? 2 : 1;
            ++i;
            code += "0";
        } else {
            code += c;
            ++i;
        }
    }
    // Preprocessor lines (with continuations); keep only first branches.
    std::istringstream lines(code);
    std::string line, out;
    std::vector<bool> taking;  // per open #if: whether its current branch is kept
    bool continued = false;
    while (std::getline(lines, line)) {
        const size_t first = line.find_first_not_of(" \t");
        const bool directive = continued || (first != std::string::npos && line[first] == '#');
        continued = directive && !line.empty() && line.back() == '\\';
        if (directive) {
            std::string d = first == std::string::npos ? "" : line.substr(first);
            if (d.rfind("#if", 0) == 0) taking.push_back(true);
            if (d.rfind("#el", 0) == 0 && !taking.empty()) taking.back() = false;
            if (d.rfind("#endif", 0) == 0 && !taking.empty()) taking.pop_back();
            out += '\n';
            continue;
        }
        bool keep = true;
        for (const bool t : taking) keep = keep && t;
        out += (keep ? line : std::string()) + '\n';
    }
    return out;
}

inline bool is_ident_start(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
inline bool is_ident(const std::string& t) {
    return !t.empty() && is_ident_start(t[0]);
}

inline std::vector<std::string> tokenize(const std::string& code) {
    std::vector<std::string> tokens;
    for (size_t i = 0; i < code.size();) {
        const char c = code[i];
        if (std::isspace(static_cast<unsigned char>(c))) {
            ++i;
        } else if (is_ident_start(c) || std::isdigit(static_cast<unsigned char>(c))) {
            size_t j = i;
            while (j < code.size() &&
                   (std::isalnum(static_cast<unsigned char>(code[j])) || code[j] == '_'))
                ++j;
            tokens.push_back(code.substr(i, j - i));
            i = j;
        } else if (c == ':' && i + 1 < code.size() && code[i + 1] == ':') {
            tokens.push_back("::");
            i += 2;
        } else {
            tokens.push_back(std::string(1, c));
            ++i;
        }
    }
    return tokens;
}

class Scanner {
public:
    Scanner(std::vector<std::string> tokens, std::string file)
        : t_(std::move(tokens)), file_(std::move(file)) {}

    void run(std::vector<Name>& out) {
        out_ = &out;
        size_t i = 0;
        Scope top;
        block(i, top);
    }

private:
    struct Scope {
        bool is_class = false;
        bool visible = true;  // outside detail and private parts
        bool is_public = true;
        std::string name;  // the class's
        std::string path;  // Outer::Inner, for messages
    };

    std::vector<std::string> t_;
    std::string file_;
    std::vector<Name>* out_ = nullptr;

    static bool hidden_namespace(const std::string& name) {
        return name == "detail" ||
               (name.size() > 7 && name.compare(name.size() - 7, 7, "_detail") == 0);
    }

    void add(const Scope& scope, const std::string& word) {
        out_->push_back(Name{word, scope.path.empty() ? word : scope.path + "::" + word, file_});
    }

    // Past the matching '}' of the '{' at i.
    void skip_braces(size_t& i) {
        int depth = 0;
        for (; i < t_.size(); ++i) {
            if (t_[i] == "{") ++depth;
            if (t_[i] == "}" && --depth == 0) {
                ++i;
                return;
            }
        }
    }

    static bool is_macro(const std::string& t) {
        if (!is_ident(t)) return false;
        for (const char c : t)
            if (std::islower(static_cast<unsigned char>(c))) return false;
        return true;
    }

    // Leading template <...>, [[...]] and macros (SMOL_TARGET_BEGIN(...), SMOL_TARGET_END) removed.
    static std::vector<std::string> trim(std::vector<std::string> s) {
        for (bool again = true; again;) {
            again = false;
            if (!s.empty() && is_macro(s[0]) && (s.size() == 1 || s[1] != "(")) {
                s.erase(s.begin());  // SMOL_TARGET_END
                again = true;
            } else if (s.size() > 1 && is_macro(s[0]) && s[1] == "(") {
                size_t j = 1;
                for (int depth = 0; j < s.size(); ++j) {
                    if (s[j] == "(") ++depth;
                    if (s[j] == ")" && --depth == 0) break;
                }
                s.erase(s.begin(), s.begin() + long(std::min(j + 1, s.size())));
                again = true;
            } else if (s.size() > 1 && s[0] == "template" && s[1] == "<") {
                size_t j = 1;
                for (int depth = 0; j < s.size(); ++j) {
                    if (s[j] == "<") ++depth;
                    if (s[j] == ">" && --depth == 0) break;
                }
                s.erase(s.begin(), s.begin() + long(std::min(j + 1, s.size())));
                again = true;
            } else if (s.size() > 1 && s[0] == "[" && s[1] == "[") {
                size_t j = 2;
                while (j < s.size() && s[j] != "]") ++j;
                s.erase(s.begin(), s.begin() + long(std::min(j + 2, s.size())));
                again = true;
            }
        }
        return s;
    }

    // The name a function declaration or definition declares, or "" when the
    // statement declares no function that needs listing (a variable, an
    // operator, a constructor, a destructor, an out-of-class definition).
    static std::string function_name(const std::vector<std::string>& s, const std::string& cls) {
        int angle = 0;
        for (size_t j = 0; j < s.size(); ++j) {
            const std::string& tok = s[j];
            if (tok == "operator") return "";
            if (tok == "<") ++angle;
            if (tok == ">") --angle;
            if (angle > 0) continue;
            if (tok == "=") return "";
            if (tok != "(") continue;
            if (j == 0 || !is_ident(s[j - 1])) return "";
            if (j + 1 < s.size() && (s[j + 1] == "*" || s[j + 1] == "&")) return "";  // (*fn)
            const std::string& name = s[j - 1];
            static const std::set<std::string> not_names = {"alignas", "decltype",      "noexcept",
                                                            "sizeof",  "static_assert", "alignof"};
            if (not_names.count(name)) return "";
            if (j >= 2 && (s[j - 2] == "~" || s[j - 2] == "::")) return "";
            if (name == cls) return "";
            return name;
        }
        return "";
    }

    void block(size_t& i, const Scope& scope) {
        bool is_public = scope.is_public;
        while (i < t_.size()) {
            std::vector<std::string> s;
            int paren = 0;
            for (; i < t_.size(); ++i) {
                const std::string& tok = t_[i];
                if (paren == 0 && (tok == ";" || tok == "{" || tok == "}")) break;
                if (tok == "(" || tok == "[") ++paren;
                if (tok == ")" || tok == "]") --paren;
                if (tok == "{" || tok == "}") {  // braces inside parentheses
                    s.push_back(tok);
                    continue;
                }
                if (tok == "SMOL_NAMESPACE_BEGIN" || tok == "SMOL_NAMESPACE_END") continue;
                s.push_back(tok);
                // Access specifiers end a statement of their own.
                if (scope.is_class && s.size() == 2 && s[1] == ":" &&
                    (s[0] == "public" || s[0] == "private" || s[0] == "protected")) {
                    is_public = s[0] == "public";
                    s.clear();
                }
            }
            if (i >= t_.size()) return;
            const std::string end = t_[i];
            if (end == "}") {
                ++i;
                return;
            }
            Scope here = scope;
            here.is_public = is_public;
            const bool visible = scope.visible && (!scope.is_class || is_public);
            s = trim(s);
            if (!s.empty() && (s[0] == "namespace" ||
                               (s[0] == "inline" && s.size() > 1 && s[1] == "namespace"))) {
                const std::string name = is_ident(s.back()) ? s.back() : "";
                Scope inner;
                inner.visible = scope.visible && !hidden_namespace(name);
                ++i;
                block(i, inner);
                continue;
            }
            if (end == "{") {
                if (!s.empty() && (s[0] == "class" || s[0] == "struct" || s[0] == "union") &&
                    function_name(s, "").empty()) {
                    size_t j = 1;
                    for (bool again = true; again && j + 1 < s.size();) {  // alignas(..), [[..]]
                        again = s[j] == "alignas" || s[j] == "[";
                        if (s[j] == "alignas") {
                            while (j < s.size() && s[j] != ")") ++j;
                            ++j;
                        } else if (s[j] == "[") {
                            while (j < s.size() && s[j] != "]") ++j;
                            j += 2;
                        }
                    }
                    const std::string name = j < s.size() ? s[j] : "";
                    if (visible && is_ident(name)) add(scope, name);
                    Scope inner;
                    inner.is_class = true;
                    inner.visible = visible;
                    inner.is_public = s[0] != "class";
                    inner.name = name;
                    inner.path = scope.path.empty() ? name : scope.path + "::" + name;
                    ++i;
                    block(i, inner);
                    while (i < t_.size() && t_[i] != ";") ++i;  // `} object;`
                    ++i;
                    continue;
                }
                if (!s.empty() && s[0] == "enum") {
                    size_t j = 1;
                    if (j < s.size() && (s[j] == "class" || s[j] == "struct")) ++j;
                    if (visible && j < s.size() && is_ident(s[j])) add(scope, s[j]);
                    skip_braces(i);
                    continue;
                }
                const std::string fn = function_name(s, scope.name);
                if (visible && !fn.empty() && s[0] != "friend") add(scope, fn);
                skip_braces(i);
                continue;
            }
            ++i;  // ';'
            if (s.empty() || !visible || s[0] == "friend" || s[0] == "static_assert") continue;
            if (s[0] == "using") {
                if (!scope.is_class && s.size() > 2 && is_ident(s[1]) && s[2] == "=")
                    add(scope, s[1]);
                continue;
            }
            if (s[0] == "typedef") {
                if (!scope.is_class && is_ident(s.back())) add(scope, s.back());
                continue;
            }
            const std::string fn = function_name(s, scope.name);
            if (!fn.empty()) add(scope, fn);
        }
    }
};

inline std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// The names a header's text declares (see the top of this file).
inline std::vector<Name> names_in(const std::string& text, const std::string& file) {
    std::vector<Name> out;
    Scanner(tokenize(strip(text)), file).run(out);
    return out;
}

// The public, non-static data members of the struct or class `type` as the
// first definition of it in `text` declares them, in order (a base's members
// are the base's own: scan it separately). For the C ABI's parity
// table (test_surface.cpp): C++17 cannot list a struct's fields, so the
// header's text is the only source. A statement in the body is a data member
// unless it is a function (a '(' outside template arguments that is not a
// function pointer's "(*"), a type, an alias, static, a friend or a
// static_assert; braces after '=' or right after the name are an
// initializer, any other braces a body or a nested type (skipped).
// Empty when `text` does not define `type`.
inline std::vector<std::string> data_members(const std::string& text, const std::string& type) {
    const std::vector<std::string> t = tokenize(strip(text));
    size_t i = 0;
    for (; i + 1 < t.size(); ++i) {
        if (t[i] != "struct" && t[i] != "class") continue;
        if (i > 0 && (t[i - 1] == "friend" || t[i - 1] == "enum")) continue;
        size_t j = i + 1;  // past [[attributes]] and alignas(...)
        while (j < t.size() && (t[j] == "[" || t[j] == "alignas")) {
            const std::string close = t[j] == "[" ? "]" : ")";
            while (j < t.size() && t[j] != close) ++j;
            while (j < t.size() && t[j] == close) ++j;
        }
        if (j >= t.size() || t[j] != type) continue;
        ++j;
        while (j < t.size() && t[j] != "{" && t[j] != ";" && t[j] != "(") ++j;
        if (j < t.size() && t[j] == "{") {
            i = j + 1;
            break;
        }
    }
    std::vector<std::string> out;
    if (i + 1 >= t.size()) return out;
    // `struct` starts public, `class` private: look back at the keyword.
    bool is_public = true;
    for (size_t k = i; k-- > 0;)
        if (t[k] == "struct" || t[k] == "class") {
            is_public = t[k] == "struct";
            break;
        }
    std::vector<std::string> s;
    auto skip_braces = [&](size_t& k) {
        for (int depth = 0; k < t.size(); ++k) {
            if (t[k] == "{") ++depth;
            if (t[k] == "}" && --depth == 0) {
                ++k;
                return;
            }
        }
    };
    auto member_name = [](const std::vector<std::string>& st) -> std::string {
        static const std::set<std::string> not_members = {"using",  "typedef", "friend",
                                                          "static", "struct",  "class",
                                                          "enum",   "union",   "static_assert"};
        if (st.empty() || not_members.count(st[0])) return "";
        int angle = 0;
        std::string last;
        for (size_t k = 0; k < st.size(); ++k) {
            const std::string& tok = st[k];
            if (tok == "<") ++angle;
            if (tok == ">") --angle;
            if (angle > 0) continue;
            if (tok == "=" || tok == "{" || tok == "[" || tok == ":") break;
            if (tok == "(") {
                // A function pointer member: ( * name ) ( ... )
                if (k + 2 < st.size() && st[k + 1] == "*" && is_ident(st[k + 2])) return st[k + 2];
                return "";  // a function
            }
            if (tok == "operator") return "";
            if (is_ident(tok)) last = tok;
        }
        return last;
    };
    while (i < t.size()) {
        const std::string& tok = t[i];
        if (tok == "}") break;
        if (s.empty() && (tok == "public" || tok == "private" || tok == "protected") &&
            i + 1 < t.size() && t[i + 1] == ":") {
            is_public = tok == "public";
            i += 2;
            continue;
        }
        if (tok == "{") {
            // An initializer (after '=' or right after the member's name) stays
            // in the statement; anything else is a body or a nested type.
            const bool initializer =
                !s.empty() &&
                (std::find(s.begin(), s.end(), "=") != s.end() ||
                 (is_ident(s.back()) && std::find(s.begin(), s.end(), "(") == s.end()));
            const bool type_body = !s.empty() && (s[0] == "struct" || s[0] == "class" ||
                                                  s[0] == "enum" || s[0] == "union");
            if (initializer && !type_body) {
                skip_braces(i);
                s.push_back("{");
                continue;
            }
            skip_braces(i);
            if (type_body) {
                while (i < t.size() && t[i] != ";") ++i;  // `} object;` is rare: ignored
                ++i;
            }
            s.clear();
            continue;
        }
        if (tok == ";") {
            const std::string name = member_name(s);
            if (is_public && !name.empty()) out.push_back(name);
            s.clear();
            ++i;
            continue;
        }
        s.push_back(tok);
        ++i;
    }
    return out;
}

// Normalized path: "a/b/../c" -> "a/c".
inline std::string normalize(const std::string& path) {
    std::vector<std::string> parts;
    std::string part;
    std::istringstream in(path);
    while (std::getline(in, part, '/')) {
        if (part == "..") {
            if (!parts.empty()) parts.pop_back();
        } else if (!part.empty() && part != ".") {
            parts.push_back(part);
        }
    }
    std::string out = path.rfind('/', 0) == 0 ? "/" : "";
    for (size_t k = 0; k < parts.size(); ++k) out += (k ? "/" : "") + parts[k];
    return out;
}

// Every header reachable from `root` through #include "..." (relative to the
// including file), `root` first.
inline std::vector<std::string> reachable_headers(const std::string& root) {
    std::vector<std::string> order{normalize(root)};
    std::set<std::string> seen{order[0]};
    for (size_t k = 0; k < order.size(); ++k) {
        const std::string text = read_text(order[k]);
        const std::string dir = order[k].substr(0, order[k].rfind('/') + 1);
        std::istringstream lines(text);
        std::string line;
        while (std::getline(lines, line)) {
            const size_t hash = line.find_first_not_of(" \t");
            if (hash == std::string::npos || line[hash] != '#') continue;
            const size_t inc = line.find("include", hash);
            const size_t open = line.find('"', hash);
            if (inc == std::string::npos || open == std::string::npos || open < inc) continue;
            const size_t close = line.find('"', open + 1);
            if (close == std::string::npos) continue;
            const std::string path = normalize(dir + line.substr(open + 1, close - open - 1));
            if (seen.insert(path).second) order.push_back(path);
        }
    }
    return order;
}

}  // namespace surface
}  // namespace smol_test
