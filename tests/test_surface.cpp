// The public surface: smol.hpp's listing names everything a program reaches
// through it outside `detail` (support/surface_scan.hpp says what counts), so
// a new public type, function or member function fails here until the
// listing names it (or it moves into a detail namespace). The scanner itself
// is checked first on a sample header, so a scanner that stopped finding
// names cannot pass the second case by finding nothing.
#include <doctest/doctest.h>

#include <algorithm>
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
}
