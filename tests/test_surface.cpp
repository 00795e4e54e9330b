// The public surface: smol.hpp's listing names everything a program reaches
// through it outside `detail` (support/surface_scan.hpp says what counts), so
// a new public type, function or member function fails here until the
// listing names it (or it moves into a detail namespace). The scanner itself
// is checked first on a sample header, so a scanner that stopped finding
// names cannot pass the second case by finding nothing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/surface_scan.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_surface {

namespace {

using smol_test::surface::Name;

std::set<std::string> whats(const std::vector<Name>& names) {
    std::set<std::string> out;
    for (const Name& n : names) out.insert(n.what);
    return out;
}

// The words of the comment block that opens the header (before #pragma once).
std::set<std::string> listing_words(const std::string& text) {
    std::set<std::string> words;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line) && line.rfind("#pragma once", 0) != 0) {
        if (line.rfind("//", 0) != 0) continue;
        std::string word;
        for (const char c : line + " ") {
            if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
                word += c;
            } else if (!word.empty()) {
                words.insert(word);
                word.clear();
            }
        }
    }
    return words;
}

// The words of the index block of the top comment (after its "by header:"
// line), header paths left out.
std::vector<std::string> index_words(const std::string& text) {
    std::vector<std::string> words;
    std::istringstream lines(text);
    std::string line;
    bool in_index = false;
    while (std::getline(lines, line) && line.rfind("#pragma once", 0) != 0) {
        if (line.rfind("//", 0) != 0) continue;
        if (!in_index) {
            in_index = line.find("by header:") != std::string::npos;
            continue;
        }
        if (line.find(".hpp") != std::string::npos) continue;  // a header's path
        std::string word;
        for (const char c : line.substr(2) + " ") {
            if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
                word += c;
            } else if (!word.empty()) {
                if (!std::isdigit(static_cast<unsigned char>(word[0]))) words.push_back(word);
                word.clear();
            }
        }
    }
    return words;
}

// The index block for `names`, in the order of their headers: each header's
// namespace-scope names, then each class with its members.
std::string render_index(const std::vector<Name>& names) {
    std::vector<std::string> files;
    std::map<std::string, std::vector<std::string>> free_names;
    std::map<std::string, std::vector<std::pair<std::string, std::vector<std::string>>>> classes;
    for (const Name& n : names) {
        if (std::find(files.begin(), files.end(), n.file) == files.end()) files.push_back(n.file);
        const size_t colon = n.what.rfind("::");
        if (colon == std::string::npos) {
            auto& list = free_names[n.file];
            if (std::find(list.begin(), list.end(), n.what) == list.end()) list.push_back(n.what);
            continue;
        }
        const std::string owner = n.what.substr(0, colon), member = n.what.substr(colon + 2);
        auto& owners = classes[n.file];
        auto it = std::find_if(owners.begin(), owners.end(),
                               [&](const auto& o) { return o.first == owner; });
        if (it == owners.end()) it = owners.insert(owners.end(), {owner, {}});
        if (std::find(it->second.begin(), it->second.end(), member) == it->second.end())
            it->second.push_back(member);
    }
    std::string out;
    auto emit = [&out](const std::string& first, const std::vector<std::string>& words,
                       const char* separator) {
        std::string line = first;
        for (size_t i = 0; i < words.size(); ++i) {
            const std::string word = words[i] + (i + 1 < words.size() ? separator : "");
            if (line.size() + 1 + word.size() > 100) {
                out += line + "\n";
                line = "//      ";
            }
            line += " " + word;
        }
        out += line + "\n";
    };
    for (const std::string& file : files) {
        out += "//   " + file + "\n";
        // Classes are listed by their members; a class name alone (no members)
        // stays among the free names.
        std::vector<std::string> plain;
        for (const std::string& name : free_names[file]) {
            const auto& owners = classes[file];
            if (std::none_of(owners.begin(), owners.end(),
                             [&](const auto& o) { return o.first == name; }))
                plain.push_back(name);
        }
        if (!plain.empty()) emit("//    ", plain, ",");
        for (const auto& owner : classes[file])
            emit("//     " + owner.first + ":", owner.second, "");
    }
    return out;
}

}  // namespace

TEST_CASE("surface scanner: what a header declares for programs, and what it hides") {
    const std::string sample = R"(// a comment naming NotAName
#pragma once
#include "x.hpp"
SMOL_NAMESPACE_BEGIN
SMOL_TARGET_BEGIN("avx2")
enum class Kind { a, b };
using Callback = std::function<void(int)>;
struct [[nodiscard]] Options {
    int n = 0;
    std::function<void(int level)> log;
    void (*hook)(int) = nullptr;
    static constexpr size_t kSize = size_t(1);
    bool valid() const { return n > 0; }
};
template <class T>
class Box {
public:
    Box() = default;
    explicit Box(T v) : v_(v) {}
    ~Box() {}
    Box& operator=(const Box&) = default;
    explicit operator bool() const { return true; }
    const T& get() const noexcept;
    template <class F>
    auto map(F f) -> Box<decltype(f(T()))> { return {}; }
    struct Inner { int size() const; };
    friend void swap(Box&, Box&);
private:
    void secret();
    struct Hidden { void nope(); };
    T v_;
};
template <class T>
inline const T& Box<T>::get() const noexcept { return v_; }
inline int free_function(int x = f(1)) {
    const char* text = "void fake() { }";
    if (x) { return 1; }
    return 0;
}
#if defined(A)
inline void only_first_branch() {
#else
inline void only_first_branch() noexcept {
#endif
}
namespace detail {
struct Internal { void work(); };
inline void helper() {}
}  // namespace detail
namespace schema_detail { inline void also_hidden(); }
namespace kernels {
inline float dot(const float* a, const float* b);
}
SMOL_NAMESPACE_END
)";
    const auto names = smol_test::surface::names_in(sample, "sample.hpp");
    const std::set<std::string> expected = {"Kind",
                                            "Callback",
                                            "Options",
                                            "Options::valid",
                                            "Box",
                                            "Box::get",
                                            "Box::map",
                                            "Box::Inner",
                                            "Box::Inner::size",
                                            "free_function",
                                            "only_first_branch",
                                            "dot"};
    CHECK(whats(names) == expected);
}

TEST_CASE("smol.hpp lists every public name a program reaches through it") {
    const std::string include = std::string(SMOL_SOURCE_DIR) + "/include/smol/";
    const std::string top = smol_test::surface::read_text(include + "smol.hpp");
    REQUIRE_MESSAGE(!top.empty(), "cannot read " << include << "smol.hpp");
    const std::set<std::string> listed = listing_words(top);

    const auto headers = smol_test::surface::reachable_headers(include + "smol.hpp");
    std::vector<Name> names;
    size_t scanned = 0;
    for (const std::string& path : headers) {
        if (path.find("/detail/") != std::string::npos) continue;
        const std::string text = smol_test::surface::read_text(path);
        REQUIRE_MESSAGE(!text.empty(), "cannot read " << path);
        const std::string relative = path.substr(path.find("/include/smol/") + 14);
        const auto found = smol_test::surface::names_in(text, relative);
        names.insert(names.end(), found.begin(), found.end());
        ++scanned;
    }
    // The whole library hangs off smol.hpp: far fewer would mean a broken walk.
    CHECK(scanned >= 20);
    CHECK(names.size() >= 100);

    std::map<std::string, std::set<std::string>> missing;  // header -> names
    for (const Name& n : names)
        if (!listed.count(n.word)) missing[n.file].insert(n.what);
    std::ostringstream report;
    for (const auto& header : missing) {
        report << "\n  " << header.first << ":";
        for (const std::string& what : header.second) report << " " << what;
    }
    CHECK_MESSAGE(missing.empty(),
                  "smol.hpp's listing does not name (add them to the list at the "
                  "top of include/smol/smol.hpp, or move them into detail):"
                      << report.str());

    // The index block names nothing that no longer exists (a renamed or
    // removed function must leave the listing too).
    std::set<std::string> found;
    for (const Name& n : names) found.insert(n.word);
    std::set<std::string> stale;
    for (const std::string& word : index_words(top))
        if (!found.count(word)) stale.insert(word);
    std::ostringstream stale_report;
    for (const std::string& word : stale) stale_report << " " << word;
    CHECK_MESSAGE(stale.empty(),
                  "smol.hpp's index names what no header declares:" << stale_report.str());

    // SMOL_SURFACE_PRINT=1 prints the index as the headers have it, to paste
    // over the block in smol.hpp.
    if (const char* print = std::getenv("SMOL_SURFACE_PRINT"); print && *print == '1')
        std::printf("%s", render_index(names).c_str());
}

namespace {

// One row of smol.h's parity table.
struct ParityRow {
    std::string type, field;      // the C++ Struct::field
    std::vector<std::string> c;   // smol_struct.field / smol_function()
    std::string nested;           // "nested Struct"
    std::string exempt, not_yet;  // the reasons
    int line = 0;
};

// The rows between "parity-table-begin" and "parity-table-end". A row starts
// three spaces after the comment's '*'; deeper lines continue it.
std::vector<ParityRow> parity_rows(const std::string& header, std::vector<std::string>& errors) {
    std::vector<ParityRow> rows;
    std::istringstream lines(header);
    std::string line;
    bool in_table = false;
    int number = 0;
    while (std::getline(lines, line)) {
        ++number;
        if (line.find("parity-table-begin") != std::string::npos) {
            in_table = true;
            continue;
        }
        if (line.find("parity-table-end") != std::string::npos) break;
        if (!in_table) continue;
        const size_t star = line.find('*');
        if (star == std::string::npos) continue;
        const std::string body = line.substr(star + 1);
        const size_t text = body.find_first_not_of(' ');
        if (text == std::string::npos) continue;
        std::istringstream words(body);
        std::vector<std::string> w;
        for (std::string word; words >> word;) w.push_back(word);
        if (text > 3) {  // a continuation
            if (rows.empty()) {
                errors.push_back("line " + std::to_string(number) + ": continues no row");
                continue;
            }
            ParityRow& row = rows.back();
            if (!row.exempt.empty()) {
                row.exempt += " " + body.substr(text);
            } else if (!row.not_yet.empty()) {
                row.not_yet += " " + body.substr(text);
            } else {
                row.c.insert(row.c.end(), w.begin(), w.end());
            }
            continue;
        }
        ParityRow row;
        row.line = number;
        const size_t colons = w[0].find("::");
        if (text != 3 || colons == std::string::npos) {
            errors.push_back("line " + std::to_string(number) + ": not a row: " + line);
            continue;
        }
        row.type = w[0].substr(0, colons);
        row.field = w[0].substr(colons + 2);
        const std::string rest =
            w.size() > 1 ? body.substr(body.find(w[1], text + w[0].size())) : "";
        if (w.size() > 1 && w[1] == "nested") {
            row.nested = w.size() > 2 ? w[2] : "";
        } else if (w.size() > 1 && w[1] == "exempt:") {
            row.exempt = rest.substr(7) + " ";
        } else if (w.size() > 2 && w[1] == "not" && w[2] == "yet:") {
            row.not_yet = rest.substr(8) + " ";
        } else {
            row.c.assign(w.begin() + 1, w.end());
        }
        rows.push_back(row);
    }
    return rows;
}

// The C++ structs whose every field the C ABI must carry or exempt: what a
// program configures and gets back. A struct missing from the table fails
// here, so dropping its rows cannot pass.
const char* const kParityStructs[] = {"LoadOptions",    "KernelParams",      "GeneratorOptions",
                                      "BatcherOptions", "SamplingParams",    "GenerateParams",
                                      "LookupParams",   "JsonSchemaOptions", "ChatTemplateOptions",
                                      "ToolDefinition", "ChatMessage",       "GenerateResult"};

// The C structs whose every field (but size) a row must name.
const char* const kCStructs[] = {"smol_load_options",    "smol_generator_options",
                                 "smol_batcher_options", "smol_params",
                                 "smol_logit_bias",      "smol_tool",
                                 "smol_message",         "smol_result"};

}  // namespace

TEST_CASE("data member scanner: the fields a struct declares") {
    const std::string sample = R"(
struct Other { int not_this = 0; };
struct [[nodiscard]] Options : Base {
    int n = 0;
    std::vector<std::string> words = {"a", ";", "}"};
    std::function<void(const std::vector<int>& history, size_t n)> hook;
    void (*raw)(int) = nullptr;
    size_t braced{4};
    std::optional<Inner> inner;
    static constexpr size_t kMax = 16;
    using Alias = int;
    enum class Kind { a, b };
    struct Nested { int deep; };
    bool valid() const { return n > 0; }
    Options() = default;
    friend bool operator==(const Options& a, const Options& b) { return a.n == b.n; }
private:
    int hidden = 1;
public:
    double last = 1.5;  // after a private part
};
class Secretive { int x; public: int y; };
)";
    using smol_test::surface::data_members;
    CHECK(data_members(sample, "Options") ==
          std::vector<std::string>{"n", "words", "hook", "raw", "braced", "inner", "last"});
    CHECK(data_members(sample, "Secretive") == std::vector<std::string>{"y"});
    CHECK(data_members(sample, "Missing").empty());
}

TEST_CASE("smol.h's parity table: every C++ option and result field has its C counterpart") {
    const std::string include = std::string(SMOL_SOURCE_DIR) + "/include/smol/";
    // The C ABI is smol.h and the per-call structs' smol_params.h, which holds
    // the table; the structs and functions are looked up in both.
    const std::string table = smol_test::surface::read_text(include + "smol_params.h");
    const std::string c_header = smol_test::surface::read_text(include + "smol.h") + table;
    REQUIRE_MESSAGE(table.find("parity-table-begin") != std::string::npos,
                    "cannot read the parity table in " << include << "smol_params.h");
    REQUIRE_MESSAGE(c_header.find("smol_generate(") != std::string::npos,
                    "cannot read " << include << "smol.h");
    std::vector<std::string> errors;
    const std::vector<ParityRow> rows = parity_rows(table, errors);
    REQUIRE(rows.size() >= 50);  // a parser that stopped reading rows cannot pass

    // The C++ structs' fields, from whichever public header defines each.
    std::vector<std::string> texts;
    for (const std::string& path : smol_test::surface::reachable_headers(include + "smol.hpp"))
        if (path.find("/detail/") == std::string::npos)
            texts.push_back(smol_test::surface::read_text(path));
    auto cpp_fields = [&](const std::string& type) {
        for (const std::string& text : texts) {
            std::vector<std::string> fields = smol_test::surface::data_members(text, type);
            if (!fields.empty()) return fields;
        }
        return std::vector<std::string>{};
    };
    std::set<std::string> types(std::begin(kParityStructs), std::end(kParityStructs));
    for (const ParityRow& row : rows) {
        types.insert(row.type);
        if (!row.nested.empty()) types.insert(row.nested);
    }
    std::set<std::string> cpp;  // Struct::field
    for (const std::string& type : types) {
        const std::vector<std::string> fields = cpp_fields(type);
        if (fields.empty()) errors.push_back(type + ": no public header defines it with fields");
        for (const std::string& field : fields) cpp.insert(type + "::" + field);
    }

    // The C side: the structs' fields and the declared functions.
    std::set<std::string> c_fields;  // smol_struct.field
    for (const char* type : kCStructs) {
        const std::vector<std::string> fields = smol_test::surface::data_members(c_header, type);
        if (fields.empty()) errors.push_back(std::string(type) + ": not found in smol.h");
        for (const std::string& field : fields) c_fields.insert(std::string(type) + "." + field);
    }
    std::set<std::string> listed, named_c;
    std::vector<std::string> gaps;
    for (const ParityRow& row : rows) {
        const std::string key = row.type + "::" + row.field;
        const std::string at = "smol_params.h:" + std::to_string(row.line) + ": " + key;
        if (!listed.insert(key).second) errors.push_back(at + ": listed twice");
        if (!cpp.count(key)) errors.push_back(at + ": no such C++ field (renamed or removed?)");
        if (!row.not_yet.empty()) gaps.push_back(key + ": " + row.not_yet);
        if (!row.exempt.empty() && row.exempt.find_first_not_of(' ') == std::string::npos)
            errors.push_back(at + ": an exemption needs its reason");
        if (!row.not_yet.empty() && row.not_yet.find_first_not_of(' ') == std::string::npos)
            errors.push_back(at + ": a gap needs its reason");
        if (row.c.empty() && row.nested.empty() && row.exempt.empty() && row.not_yet.empty())
            errors.push_back(at + ": names no C counterpart");
        for (const std::string& c : row.c) {
            named_c.insert(c);
            const bool function = c.size() > 2 && c.compare(c.size() - 2, 2, "()") == 0;
            if (function) {
                const std::string name = c.substr(0, c.size() - 2);
                if (c_header.find(" " + name + "(") == std::string::npos &&
                    c_header.find("*" + name + "(") == std::string::npos)
                    errors.push_back(at + ": smol.h declares no function " + name);
            } else if (!c_fields.count(c)) {
                errors.push_back(at + ": " + c + " is no field of smol.h's structs");
            }
        }
    }
    for (const std::string& key : cpp)
        if (!listed.count(key))
            errors.push_back(key +
                             ": a C++ field without a row (add its C counterpart, or a row "
                             "with exempt: or not yet: and the reason)");
    for (const std::string& field : c_fields)
        if (!named_c.count(field) && field.substr(field.find('.')) != ".size")
            errors.push_back(field + ": a C field that no row names");

    std::ostringstream report;
    for (const std::string& e : errors) report << "\n  " << e;
    CHECK_MESSAGE(errors.empty(),
                  "the C ABI's parity table (include/smol/smol_params.h):" << report.str());
    // The known gaps, for the log: each one a thing C callers cannot do yet.
    for (const std::string& gap : gaps) MESSAGE("not yet in the C ABI: " << gap);
}

}  // namespace test_surface
