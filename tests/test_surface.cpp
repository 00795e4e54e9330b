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
