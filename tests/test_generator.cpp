// Tests of the Generator layer: the stop-string matcher and UTF-8 checks (unit),
// then generate / chat / stream / cancel / async end to end on small models
// made in the test and on the fixtures.
#include <doctest/doctest.h>

#include <smol/build_info.hpp>
#include <smol/detail/stop_strings.hpp>
#include <smol/detail/utf8.hpp>
#include <smol/error.hpp>

#include <random>
#include <string>
#include <vector>

#include "fixtures.hpp"

using smol::detail::StopStringMatcher;

namespace {

// Feeds pieces one by one; returns everything emitted (plus finish() when no match).
std::string feed_all(StopStringMatcher& m, const std::vector<std::string>& pieces) {
    std::string out;
    for (const auto& p : pieces) {
        out += m.push(p);
        if (m.matched()) return out;
    }
    return out + m.finish();
}

}  // namespace

TEST_CASE("stop strings: no stops passes everything through at once") {
    StopStringMatcher m(std::vector<std::string>{});
    CHECK(m.push("Hello") == "Hello");
    CHECK(m.push(" world") == " world");
    CHECK(m.finish().empty());
    CHECK_FALSE(m.matched());
}

TEST_CASE("stop strings: a stop string split across pieces is never emitted") {
    StopStringMatcher m({"\nUser:"});
    CHECK(m.push("Hello\nUs") == "Hello");
    CHECK(m.held_size() == 3);
    CHECK(m.push("er") == "");
    CHECK(m.push(": hi") == "");
    CHECK(m.matched());
    CHECK(m.matched_string() == "\nUser:");
    CHECK(m.push("more") == "");
}

TEST_CASE("stop strings: a false start is released once it can no longer match") {
    StopStringMatcher m({"\nUser:"});
    CHECK(m.push("a\nU") == "a");
    CHECK(m.push("nder") == "\nUnder");
    CHECK(m.push("\n") == "");
    CHECK(m.finish() == "\n");
    CHECK_FALSE(m.matched());
}

TEST_CASE("stop strings: earliest match wins, text before it is kept") {
    StopStringMatcher m({"END", "D!"});
    CHECK(feed_all(m, {"abc EN", "D! tail"}) == "abc ");
    CHECK(m.matched_string() == "END");
    StopStringMatcher m2({"xyz", "y"});
    CHECK(feed_all(m2, {"axyz"}) == "a");
    CHECK(m2.matched_string() == "xyz");
}

TEST_CASE("stop strings: overlapping prefixes (aab in aaab)") {
    StopStringMatcher m({"aab"});
    CHECK(feed_all(m, {"a", "a", "a", "b", "c"}) == "a");
    CHECK(m.matched());
}

TEST_CASE("stop strings: matches inside a single piece and at the very start") {
    StopStringMatcher m({"<|stop|>"});
    CHECK(m.push("<|stop|>rest") == "");
    CHECK(m.matched());
}

TEST_CASE("stop strings: empty stop strings are ignored") {
    StopStringMatcher m({"", "zz"});
    CHECK(feed_all(m, {"abc"}) == "abc");
    CHECK_FALSE(m.matched());
}

TEST_CASE("stop strings: property: any split of the text gives the same result") {
    std::mt19937 rng(1234);
    const std::vector<std::string> stops = {"ab", "bca", "\n\n", "cccc"};
    const std::string alphabet = "abc\n ";
    for (int trial = 0; trial < 2000; ++trial) {
        std::string text;
        const int len = int(rng() % 24);
        for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
        // Expected: cut at the earliest occurrence of any stop string.
        size_t cut = std::string::npos;
        for (const auto& s : stops) cut = std::min(cut, text.find(s));
        const std::string expected = cut == std::string::npos ? text : text.substr(0, cut);
        std::vector<std::string> pieces;
        for (size_t i = 0; i < text.size();) {
            const size_t n = std::min<size_t>(text.size() - i, 1 + rng() % 4);
            pieces.push_back(text.substr(i, n));
            i += n;
        }
        StopStringMatcher m(stops);
        std::string got;
        for (const auto& p : pieces) {
            got += m.push(p);
            // Never emits anything that is not part of the final answer.
            REQUIRE(expected.compare(0, got.size(), got) == 0);
            if (m.matched()) break;
        }
        if (!m.matched()) got += m.finish();
        CHECK(got == expected);
        CHECK(m.matched() == (cut != std::string::npos));
    }
}

TEST_CASE("utf8: validation finds the first bad byte") {
    using smol::detail::find_invalid_utf8;
    const size_t ok = std::string_view::npos;
    CHECK(find_invalid_utf8("") == ok);
    CHECK(find_invalid_utf8("plain ascii") == ok);
    CHECK(find_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == ok);
    CHECK(find_invalid_utf8("ab\xC3") == 2);                // truncated
    CHECK(find_invalid_utf8("ab\x80") == 2);                // stray continuation
    CHECK(find_invalid_utf8("\xC0\xAF") == 0);              // overlong
    CHECK(find_invalid_utf8("x\xE0\x80\xAF") == 1);         // overlong 3-byte
    CHECK(find_invalid_utf8("xy\xED\xA0\x80") == 2);        // surrogate
    CHECK(find_invalid_utf8("\xF4\x90\x80\x80") == 0);      // past U+10FFFF
    CHECK(find_invalid_utf8("\xF5\x80\x80\x80") == 0);
    CHECK(find_invalid_utf8("ok\xE2\x82") == 2);
    CHECK(find_invalid_utf8("\xE2\x28\xA1") == 0);
    CHECK(find_invalid_utf8("\xF0\x9F\x98\x80\xFF") == 4);
}

TEST_CASE("utf8: require_utf8 names the byte offset") {
    bool threw = false;
    try {
        smol::detail::require_utf8("hello \xFFworld", "prompt");
    } catch (const smol::Error& e) {
        threw = true;
        CHECK(e.kind() == smol::ErrorKind::invalid_argument);
        CHECK(std::string(e.what()).find("offset 6") != std::string::npos);
        CHECK(std::string(e.what()).find("prompt") != std::string::npos);
        CHECK(std::string(e.what()).find("0xff") != std::string::npos);
    }
    CHECK(threw);
}

TEST_CASE("error: try_call catches smol errors as values") {
    smol::ErrorInfo info;
    CHECK_FALSE(smol::try_call([] { smol::detail::fail(smol::ErrorKind::io, "no such file 'x'"); }, &info));
    CHECK(info.kind == smol::ErrorKind::io);
    CHECK(info.message == "no such file 'x'");
    int ran = 0;
    CHECK(smol::try_call([&] { ++ran; }));
    CHECK(ran == 1);
}

TEST_CASE("build_info reports the compiled ISA") {
    const smol::BuildInfo info = smol::build_info();
    const std::string isa = info.isa;
    CHECK((isa == "avx2" || isa == "neon" || isa == "scalar"));
    CHECK(info.simd == (isa != "scalar"));
    CHECK(info.exceptions);
#if defined(__AVX2__) && defined(__FMA__)
    CHECK(isa == "avx2");
#endif
    CHECK(smol::build_info_string().find(isa) != std::string::npos);
}
