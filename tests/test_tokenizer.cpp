// Tests of text/unicode.hpp, text/tokenizer.hpp and text/detokenizer.hpp:
// UTF-8 codec and code point classes, the Llama-3 pre-tokenizer split on tricky
// inputs, golden token ids from the fixtures (both pre types, both
// parse_special modes), round trips, streaming decode, load-time errors, and
// hostile vocabularies: token texts and merge pairs that collide under the old
// unseeded hashes, a 4 MB special token, and the special-matching rule against
// a brute-force reference.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <smol/smol.hpp>
#include <smol/gguf/writer.hpp>
#include <smol/text/detokenizer.hpp>
#include <smol/text/tokenizer.hpp>
#include <smol/text/unicode.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/fixtures.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_tokenizer {

namespace {

using Pieces = std::vector<std::string>;

Pieces split(std::string_view text) {
    Pieces out;
    for (auto piece : smol::unicode::split_llama3(text)) out.emplace_back(piece);
    return out;
}

std::shared_ptr<const smol::Tokenizer> load_tokenizer(const std::string& name) {
    // Loading the 128k-token vocabulary takes tens of ms; share one per file.
    static std::map<std::string, std::shared_ptr<const smol::Tokenizer>> cache;
    auto it = cache.find(name);
    if (it != cache.end()) return it->second;
    auto path = smol_test::fixture(name);
    if (!path) return nullptr;
    auto tok = std::make_shared<const smol::Tokenizer>(
        smol::Tokenizer::from_gguf(smol::gguf::File::open(*path)));
    cache[name] = tok;
    return tok;
}

std::string hex(std::string_view s) {
    std::string out;
    char buf[8];
    for (unsigned char c : s) {
        std::snprintf(buf, sizeof buf, "%02X ", c);
        out += buf;
    }
    return out;
}

}  // namespace

TEST_CASE("utf8: strict decoding per Table 3-7") {
    using smol::unicode::decode_utf8;
    auto dec = [](std::string_view s) { return decode_utf8(s.data(), s.size()); };
    CHECK(dec("A").codepoint == 'A');
    CHECK(dec("\xC3\xA9").codepoint == 0xE9);
    CHECK(dec("\xC3\xA9").length == 2);
    CHECK(dec("\xE2\x82\xAC").codepoint == 0x20AC);
    CHECK(dec("\xF0\x9F\xA6\x99").codepoint == 0x1F999);
    CHECK(dec("\xF0\x9F\xA6\x99").length == 4);
    CHECK_FALSE(dec("\xC0\x80").valid);          // overlong
    CHECK_FALSE(dec("\xE0\x80\x80").valid);      // overlong
    CHECK_FALSE(dec("\xED\xA0\x80").valid);      // surrogate
    CHECK_FALSE(dec("\xF4\x90\x80\x80").valid);  // > U+10FFFF
    CHECK_FALSE(dec("\x80").valid);              // stray continuation
    CHECK_FALSE(dec("\xFF").valid);
    CHECK_FALSE(dec("\xE2\x82").valid);  // truncated
    CHECK(dec("\xE2\x82").length == 1);

    using smol::unicode::scan_utf8;
    using smol::unicode::Utf8Status;
    const std::string truncated = "\xF0\x9F\xA6";
    CHECK(scan_utf8(truncated.data(), 3).status == Utf8Status::incomplete);
    CHECK(scan_utf8(truncated.data(), 3).length == 3);
    const std::string broken =
        "\xF0\x9F"
        "A";
    CHECK(scan_utf8(broken.data(), 3).status == Utf8Status::invalid);
    CHECK(scan_utf8(broken.data(), 3).length == 2);  // the maximal subpart F0 9F

    CHECK(smol::unicode::is_valid_utf8("h\xC3\xA9llo \xF0\x9F\x98\x81"));
    CHECK_FALSE(smol::unicode::is_valid_utf8("h\xC3llo"));

    std::string enc;
    for (char32_t cp : {char32_t(0x41), char32_t(0xE9), char32_t(0x20AC), char32_t(0x1F999)})
        smol::unicode::append_utf8(enc, cp);
    CHECK(enc == "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99");
}

TEST_CASE("unicode: code point classes") {
    using namespace smol::unicode;
    CHECK(is_letter('a'));
    CHECK(is_letter(0xE9));          // é
    CHECK(is_letter(0x4E2D));        // 中 (inside a CJK First/Last block)
    CHECK(is_letter(0xAC00));        // 가 (Hangul block)
    CHECK(is_letter(0x20000));       // CJK Extension B (above the BMP)
    CHECK(is_letter(0x5D0));         // Hebrew alef
    CHECK_FALSE(is_letter(0x301));   // combining acute: a mark, not a letter
    CHECK_FALSE(is_letter(0x17B6));  // Khmer vowel sign: a mark
    CHECK(is_number('7'));
    CHECK(is_number(0xBD));    // ½ (No)
    CHECK(is_number(0x2167));  // Roman numeral eight (Nl)
    CHECK(is_number(0x663));   // Arabic-Indic three (Nd)
    CHECK(is_whitespace(' '));
    CHECK(is_whitespace('\n'));
    CHECK(is_whitespace(0x0B));            // vertical tab
    CHECK(is_whitespace(0x85));            // NEL
    CHECK(is_whitespace(0xA0));            // no-break space
    CHECK(is_whitespace(0x3000));          // ideographic space
    CHECK_FALSE(is_whitespace(0x200B));    // zero width space is not White_Space
    CHECK(codepoint_flags(0x1F600) == 0);  // emoji: other
    CHECK(codepoint_flags('!') == 0);
    CHECK(codepoint_flags(0x10FFFF) == 0);
}

TEST_CASE("pre-tokenizer: contractions (case-insensitive, tried first)") {
    CHECK(split("I'm here, you'll see. They'd've") ==
          Pieces{"I", "'m", " here", ",", " you", "'ll", " see", ".", " They", "'d", "'ve"});
    CHECK(split("I'M HERE, YOU'LL") == Pieces{"I", "'M", " HERE", ",", " YOU", "'LL"});
    CHECK(split("it'sgood") == Pieces{"it", "'s", "good"});
    // 'N is no contraction: the quote joins the letters; then 'S is one.
    CHECK(split("SALT'N'SPICE") == Pieces{"SALT", "'N", "'S", "PICE"});
    CHECK(split("rock'n'roll") == Pieces{"rock", "'n", "'roll"});  // 'r is no contraction
    CHECK(split("' era") == Pieces{"'", " era"});
    CHECK(split("'") == Pieces{"'"});
    CHECK(split("x'") == Pieces{"x", "'"});
}

TEST_CASE("pre-tokenizer: digits in groups of three") {
    CHECK(split("1234567") == Pieces{"123", "456", "7"});
    CHECK(split("a12") == Pieces{"a", "12"});
    CHECK(split("3.14159") == Pieces{"3", ".", "141", "59"});
    CHECK(split(" 42") == Pieces{" ", "42"});
    CHECK(split("-42") == Pieces{"-", "42"});
    CHECK(split("4\xC2\xBD") == Pieces{"4\xC2\xBD"});  // ½ is a number too
}

TEST_CASE("pre-tokenizer: whitespace runs and newlines") {
    CHECK(split("   Hello") == Pieces{"  ", " Hello"});  // the last space goes to the word
    CHECK(split("   ") == Pieces{"   "});                // at the end: all of it
    CHECK(split("a   ") == Pieces{"a", "   "});
    CHECK(split(" a") == Pieces{" a"});
    CHECK(split("  1") == Pieces{" ", " ", "1"});  // \s+(?!\S) then \s+
    CHECK(split("\n\n\n") == Pieces{"\n\n\n"});
    CHECK(split("\t\n") == Pieces{"\t\n"});
    CHECK(split(" \n \n  x") == Pieces{" \n \n", " ", " x"});
    CHECK(split("a\r\nb") == Pieces{"a", "\r\n", "b"});
    CHECK(split("\tif") == Pieces{"\tif"});      // a tab may lead a word
    CHECK(split("\nif") == Pieces{"\n", "if"});  // a newline may not
    CHECK(split("x  # y") == Pieces{"x", " ", " #", " y"});
    CHECK(split("\xE3\x80\x80word") == Pieces{"\xE3\x80\x80word"});  // U+3000 leads a word
}

TEST_CASE("pre-tokenizer: punctuation runs") {
    CHECK(split("Hello, world!") == Pieces{"Hello", ",", " world", "!"});
    CHECK(split("!!!!!!") == Pieces{"!!!!!!"});
    CHECK(split(" (normal)") == Pieces{" (", "normal", ")"});
    CHECK(split("):\n    return") == Pieces{"):\n", "   ", " return"});
    CHECK(split("a.\n\nb") == Pieces{"a", ".\n\n", "b"});
    CHECK(split("<|im_start|>") == Pieces{"<|", "im", "_start", "|>"});
}

TEST_CASE("pre-tokenizer: CJK, emoji, combining marks") {
    CHECK(split("我想在apple工作") == Pieces{"我想在apple工作"});
    CHECK(split("天～") == Pieces{"天", "～"});
    CHECK(split(" \xF0\x9F\xA6\x99.cpp") == Pieces{" \xF0\x9F\xA6\x99.", "cpp"});
    CHECK(split("\xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F") ==
          Pieces{"\xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F"});
    // e + combining acute: the mark is not a letter, so it ends the word.
    CHECK(split("cafe\xCC\x81s") == Pieces{"cafe", "\xCC\x81s"});
}

// The classes follow Unicode 15.1 (what the reference engine uses), which made
// CJK Unified Ideographs Extension I (U+2EBF0..U+2EE5D) letters. Under 15.0's
// tables such a character was "other", so it swallowed a following quote or
// '<' into a punctuation run.
TEST_CASE("pre-tokenizer: Unicode 15.1 letters (CJK Extension I)") {
    using namespace smol::unicode;
    CHECK(std::string(detail::kUnicodeTablesVersion) == "15.1.0");
    CHECK(is_letter(0x2EBF0));
    CHECK(is_letter(0x2EE5D));
    CHECK_FALSE(is_letter(0x2EE5E));
    CHECK_FALSE(is_letter(0x2EBEF));
    const std::string ext_i = "\xF0\xAE\xAF\xB0";  // U+2EBF0
    CHECK(split(ext_i + "'s") == Pieces{ext_i, "'s"});
    CHECK(split(ext_i + "<x") == Pieces{ext_i, "<x"});
    CHECK(split(ext_i + "\\n") == Pieces{ext_i, "\\n"});
    CHECK(split("a " + ext_i + ext_i + "'LL") == Pieces{"a", " " + ext_i + ext_i, "'LL"});
}

TEST_CASE("pre-tokenizer: invalid UTF-8 bytes are pre-tokens of their own") {
    CHECK(split("ab\xFF"
                "cd") == Pieces{"ab", "\xFF", "cd"});
    CHECK(split("\xE2\x82") == Pieces{"\xE2", "\x82"});
    CHECK(split("  \x80") == Pieces{"  ", "\x80"});  // the run before ends as a text would
    CHECK(split("\xC0\xAF!") == Pieces{"\xC0", "\xAF", "!"});
    // Whatever the bytes, the pieces concatenate back to the text.
    std::mt19937 rng(7);
    for (int round = 0; round < 200; ++round) {
        std::string text(size_t(rng() % 40), '\0');
        for (char& c : text) c = char(rng() % 4 == 0 ? rng() % 256 : " a1\n'\xC3\xA9!"[rng() % 9]);
        std::string joined;
        for (auto& p : split(text)) {
            CHECK_FALSE(p.empty());
            joined += p;
        }
        CHECK(joined == text);
    }
}

TEST_CASE("tokenizer: golden ids from the fixtures, both pre types and modes") {
    for (const char* model : {"tiny-q4km.gguf", "vocab-llama-bpe.gguf"}) {
        CAPTURE(model);
        auto tok = load_tokenizer(model);
        auto golden_path = smol_test::fixture(std::string("tokenizer/") + model + ".json");
        if (!tok || !golden_path) continue;
        std::ifstream in(*golden_path);
        const auto cases = nlohmann::json::parse(in);
        REQUIRE(cases.size() > 0);
        long matched = 0;
        for (const auto& c : cases) {
            const std::string text = c.at("text");
            const bool parse_special = c.at("parse_special");
            const auto want = c.at("ids").get<std::vector<int32_t>>();
            const auto got = tok->encode(text, parse_special);
            CAPTURE(text);
            CAPTURE(parse_special);
            CHECK(got == want);
            CHECK(tok->decode(got) == text);
            if (got == want) ++matched;
            smol_test::count_golden();
        }
        CHECK(matched == long(cases.size()));
    }
}

TEST_CASE("tokenizer: metadata, accessors and special tokens") {
    auto tok = load_tokenizer("tiny-q4km.gguf");
    if (!tok) return;
    CHECK(tok->vocab_size() == 128256);
    CHECK(tok->pre_type() == "smaug-bpe");
    CHECK(tok->bos_id() == 128000);
    CHECK(tok->eos_id() == 128012);
    CHECK(tok->pad_id() == 128012);
    CHECK_FALSE(tok->eot_id().has_value());
    CHECK_FALSE(tok->add_bos());
    CHECK(tok->token_id("<|im_end|>") == 128012);
    CHECK(tok->token_id("<think>") == 128002);
    CHECK(tok->token_id("\xC4\xA0Hello") == 22691);  // " Hello" in byte-level spelling
    CHECK_FALSE(tok->token_id("no such token, surely").has_value());
    CHECK(tok->is_control(128011));
    CHECK_FALSE(tok->is_control(9906));
    CHECK(tok->token_type(9906) == smol::TokenType::normal);
    const auto ends = tok->end_of_generation_ids();
    CHECK(ends ==
          std::vector<int32_t>{128012, 128001, 128009});  // eos, <|end_of_text|>, <|eot_id|>
    CHECK(tok->is_end_of_generation(128009));
    CHECK_FALSE(tok->is_end_of_generation(128011));

    CHECK(tok->token_to_piece(22691) == " Hello");
    CHECK(tok->token_to_piece(128011) == "<|im_start|>");
    CHECK(tok->token_to_piece(198) == "\n");
    CHECK(tok->decode({128011, 882, 198, 9906, 0, 128012}) == "<|im_start|>user\nHello!<|im_end|>");
    CHECK(tok->decode({128011, 882, 198, 9906, 0, 128012}, /*render_special=*/false) ==
          "user\nHello!");
    CHECK_THROWS_AS(tok->decode({0, 128256}), smol::Error);
    CHECK_THROWS_AS(tok->decode({0, 128256}, false), smol::Error);
    CHECK_THROWS_AS(tok->token_to_piece(-1), smol::Error);
    try {
        tok->decode({-5});
    } catch (const smol::Error& e) {
        CHECK(e.kind() == smol::ErrorKind::invalid_argument);
    }

    // Special tokens only with parse_special; adjacent and back to back.
    CHECK(tok->encode("<|im_start|><|im_end|>", true) == std::vector<int32_t>{128011, 128012});
    CHECK(tok->encode("<|im_start|>", false).size() > 1);
    CHECK(tok->encode("<|im_start", true) == tok->encode("<|im_start", false));
    CHECK(tok->encode("", true).empty());

    // Copies and moves keep working (the text index is rebound).
    smol::Tokenizer copy = *tok;
    smol::Tokenizer moved = std::move(copy);
    CHECK(moved.encode(" Hello world", true) == std::vector<int32_t>{22691, 1917});
    CHECK(moved.token_id("<think>") == 128002);
}

TEST_CASE("tokenizer: invalid UTF-8 encodes to byte tokens and round-trips") {
    auto tok = load_tokenizer("tiny-q4km.gguf");
    if (!tok) return;
    const std::string bad =
        "ok\xFF\xFE"
        "then \xE2\x82 and \xC0\xAF end\x80";
    const auto ids = tok->encode(bad, true);
    CHECK(tok->decode(ids) == bad);
    // \xFF alone is the byte token spelled U+00FF.
    CHECK(tok->encode("\xFF", false) == std::vector<int32_t>{*tok->token_id("\xC3\xBF")});
    std::mt19937 rng(11);
    for (int round = 0; round < 300; ++round) {
        std::string text(size_t(rng() % 64), '\0');
        for (char& c : text) c = char(rng() % 256);
        CAPTURE(hex(text));
        CHECK(tok->decode(tok->encode(text, round % 2 == 0)) == text);
    }
}

TEST_CASE("tokenizer: long texts (pre-token cache) encode as their pieces do") {
    // Texts of 4 KiB or more use a per-call cache of pre-token ids; the ids
    // must equal those of each pre-token encoded on its own (no cache).
    for (const char* model : {"tiny-q4km.gguf", "vocab-llama-bpe.gguf"}) {
        auto tok = load_tokenizer(model);
        auto golden_path = smol_test::fixture(std::string("tokenizer/") + model + ".json");
        if (!tok || !golden_path) continue;
        std::ifstream in(*golden_path);
        const auto cases = nlohmann::json::parse(in);
        std::string long_text;
        std::mt19937 rng(9);
        while (long_text.size() < 64 * 1024) {
            long_text += cases[rng() % cases.size()].at("text").get<std::string>();
            long_text += rng() % 2 ? " " : "\n";
        }
        std::vector<int32_t> want;
        for (auto piece : smol::unicode::split_llama3(long_text)) {
            const auto ids = tok->encode(piece, false);
            want.insert(want.end(), ids.begin(), ids.end());
        }
        CHECK(tok->encode(long_text, false) == want);
        CHECK(tok->decode(want) == long_text);
    }
}

TEST_CASE("tokenizer: long words stay correct (heap BPE)") {
    auto tok = load_tokenizer("tiny-q4km.gguf");
    if (!tok) return;
    // 100k letters of one word: quadratic BPE would take seconds here.
    std::string word;
    const char* syllables[] = {"ka", "lo", "min", "tor", "ux", "ve"};
    std::mt19937 rng(3);
    while (word.size() < 100000) word += syllables[rng() % 6];
    const auto ids = tok->encode(word, false);
    CHECK(tok->decode(ids) == word);
    CHECK(ids.size() < word.size() / 2);
}

TEST_CASE("tokenizer: concurrent encode on one const tokenizer") {
    auto tok = load_tokenizer("vocab-llama-bpe.gguf");
    if (!tok) return;
    const std::string text =
        "<|im_start|>user\nThe blacksmith's hammer rang out: 12345 clang!\n<|im_end|>\n";
    const auto want = tok->encode(text, true);
    std::vector<std::thread> threads;
    std::vector<int> ok(4, 0);
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            int good = 0;
            for (int i = 0; i < 200; ++i) good += tok->encode(text, true) == want;
            ok[size_t(t)] = good;
        });
    for (auto& th : threads) th.join();
    for (int good : ok) CHECK(good == 200);
}

TEST_CASE("stream decoder: whole characters only, equal to decode when valid") {
    auto tok = load_tokenizer("tiny-q4km.gguf");
    if (!tok) return;
    smol::StreamDecoder stream(*tok);

    // A four-byte emoji as four byte tokens: nothing until the last one.
    const std::string emoji = "\xF0\x9F\xA6\x99";
    std::vector<int32_t> byte_ids;
    const auto& map = smol::detail::ByteLevelMap::get();
    for (unsigned char c : emoji) byte_ids.push_back(*tok->token_id(map.byte_to_utf8[c]));
    CHECK(stream.push(byte_ids[0]).empty());
    CHECK(stream.push(byte_ids[1]).empty());
    CHECK(stream.push(byte_ids[2]).empty());
    CHECK(stream.pending_bytes() == 3);
    CHECK(stream.push(byte_ids[3]) == emoji);
    CHECK(stream.finish().empty());

    // Interrupted: F0 9F then 'A' can never complete -> U+FFFD then A.
    CHECK(stream.push(byte_ids[0]).empty());
    CHECK(stream.push(byte_ids[1]).empty());
    CHECK(stream.push(*tok->token_id("A")) ==
          "\xEF\xBF\xBD"
          "A");
    // Pending at finish -> U+FFFD.
    CHECK(stream.push(byte_ids[0]).empty());
    CHECK(stream.finish() == "\xEF\xBF\xBD");
    CHECK(stream.pending_bytes() == 0);
    // reset drops pending bytes.
    CHECK(stream.push(byte_ids[0]).empty());
    stream.reset();
    CHECK(stream.push(*tok->token_id("A")) == "A");
    CHECK_THROWS_AS(stream.push(999999), smol::Error);

    // Random id sequences: mostly real text tokens, some lone byte tokens.
    std::mt19937 rng(5);
    const auto text_ids = tok->encode(
        "Emoji \xF0\x9F\xA7\x99\xE2\x80\x8D\xE2\x99\x82\xEF\xB8\x8F and CJK "
        "\xE5\x9F\x8E\xE5\xA0\xA1 "
        "na\xC3\xAFve <|im_end|> \xF0\x9F\x9A\x80",
        true);
    int valid_cases = 0;
    for (int round = 0; round < 500; ++round) {
        std::vector<int32_t> ids;
        const size_t n = 1 + rng() % 24;
        for (size_t i = 0; i < n; ++i) {
            const unsigned pick = rng() % 4;
            if (pick == 0)
                ids.push_back(byte_ids[rng() % 4]);
            else if (pick == 1)
                ids.push_back(int32_t(rng() % 256));  // byte-spelled singles
            else if (pick == 2)
                ids.push_back(text_ids[rng() % text_ids.size()]);
            else
                ids.push_back(int32_t(rng() % 128256));
        }
        // Sometimes, a whole valid text split at random token boundaries.
        if (round % 5 == 0)
            ids = tok->encode("\xF0\x9F\xA6\x99\xF0\x9F\xA6\x99 \xE5\x9F\x8E", false);
        stream.reset();
        std::string streamed;
        for (int32_t id : ids) {
            const std::string part = stream.push(id);
            CHECK(smol::unicode::is_valid_utf8(part));
            streamed += part;
        }
        streamed += stream.finish();
        CHECK(smol::unicode::is_valid_utf8(streamed));
        const std::string whole = tok->decode(ids);
        if (smol::unicode::is_valid_utf8(whole)) {
            ++valid_cases;
            CHECK(streamed == whole);
        }
    }
    CHECK(valid_cases > 100);
}

// ---- load-time validation, on small hand-made vocabularies ----------------

namespace {

// A minimal byte-level vocabulary: the 256 byte tokens, a few merges, two specials.
struct MiniVocab {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<std::string> merges;
    std::string model = "gpt2";
    std::string pre = "smaug-bpe";
    int64_t eos = 0;

    MiniVocab() {
        const auto& map = smol::detail::ByteLevelMap::get();
        for (int b = 0; b < 256; ++b) tokens.push_back(map.byte_to_utf8[size_t(b)]);
        for (const char* t : {"he", "ll", "hell", "hello", "\xC4\xA0w"}) tokens.push_back(t);
        tokens.push_back("<|end|>");
        tokens.push_back("<|end|>x");  // longer special that overlaps the shorter one
        tokens.push_back("[x");        // 263: a shorter special ...
        tokens.push_back("x]]");       // 264: ... that a later, longer one overlaps
        types.assign(tokens.size(), 1);
        for (size_t id = 261; id < tokens.size(); ++id) types[id] = 3;
        merges = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w"};
        eos = 261;
    }

    std::shared_ptr<const smol::gguf::File> file() const {
        smol::gguf::Writer w;
        w.set_string("tokenizer.ggml.model", model);
        w.set_string("tokenizer.ggml.pre", pre);
        w.set_strings("tokenizer.ggml.tokens", tokens);
        w.set_array("tokenizer.ggml.token_type", types);
        w.set_strings("tokenizer.ggml.merges", merges);
        w.set_u32("tokenizer.ggml.eos_token_id", uint32_t(eos));
        return smol::gguf::File::from_bytes(w.to_bytes(), "mini.gguf");
    }
};

smol::ErrorKind load_error(const MiniVocab& v, std::string* message = nullptr) {
    try {
        smol::Tokenizer::from_gguf(v.file());
    } catch (const smol::Error& e) {
        if (message) *message = e.what();
        return e.kind();
    }
    return smol::ErrorKind::internal;  // "no error"
}

}  // namespace

TEST_CASE("tokenizer: hand-made vocabulary, merges and overlapping specials") {
    MiniVocab v;
    const auto tok = smol::Tokenizer::from_gguf(v.file());
    CHECK(tok.encode("hello", false) == std::vector<int32_t>{259});
    CHECK(tok.encode("hell", false) == std::vector<int32_t>{258});
    CHECK(tok.encode(" w", false) == std::vector<int32_t>{260});
    CHECK(tok.encode("helo", false) == std::vector<int32_t>{256, 'l', 'o'});
    // The longer special claims first: "<|end|>x" then plain "<|end|>" later.
    CHECK(tok.encode("<|end|>x<|end|>", true) == std::vector<int32_t>{262, 261});
    // Longest first, wherever it is: "x]]" claims before the earlier "[x".
    CHECK(tok.encode("[x]]", true) == std::vector<int32_t>{'[', 264});
    CHECK(tok.encode("[x]", true) == std::vector<int32_t>{263, ']'});
    CHECK(tok.encode("[x]][x", true) == std::vector<int32_t>{'[', 264, 263});
    CHECK(tok.end_of_generation_ids() == std::vector<int32_t>{261});

    // Many specials in one text: each found once, in order, quickly.
    std::string many;
    std::vector<int32_t> want;
    for (int i = 0; i < 20000; ++i) {
        many += i % 3 ? "<|end|>hello" : "[x]]hello";
        if (i % 3)
            want.push_back(261);
        else
            want.insert(want.end(), {'[', 264});
        want.push_back(259);
    }
    CHECK(tok.encode(many, true) == want);
}

TEST_CASE("tokenizer: load errors name the key") {
    std::string msg;
    {
        MiniVocab v;
        v.model = "llama";
        CHECK(load_error(v, &msg) == smol::ErrorKind::unsupported);
        CHECK(msg.find("llama") != std::string::npos);
    }
    {
        MiniVocab v;
        v.pre = "qwen2";
        CHECK(load_error(v, &msg) == smol::ErrorKind::unsupported);
        CHECK(msg.find("qwen2") != std::string::npos);
    }
    {
        MiniVocab v;
        v.types.pop_back();
        CHECK(load_error(v, &msg) == smol::ErrorKind::format);
        CHECK(msg.find("tokenizer.ggml.token_type") != std::string::npos);
    }
    {
        MiniVocab v;
        v.merges.push_back("nospace");
        CHECK(load_error(v, &msg) == smol::ErrorKind::format);
        CHECK(msg.find("tokenizer.ggml.merges[5]") != std::string::npos);
    }
    {
        MiniVocab v;
        v.eos = int64_t(v.tokens.size());
        CHECK(load_error(v, &msg) == smol::ErrorKind::format);
        CHECK(msg.find("tokenizer.ggml.eos_token_id") != std::string::npos);
    }
    {
        MiniVocab v;
        v.types[3] = 9;
        CHECK(load_error(v, &msg) == smol::ErrorKind::format);
    }
    {
        MiniVocab v;
        CHECK(load_error(v) == smol::ErrorKind::internal);  // the unmodified vocabulary loads
    }
}

// ---- hostile vocabularies ---------------------------------------------------

namespace {

// The attacker's model: the table hashes as they were before seeding (public
// and unkeyed), with the capacities they were used at. Colliding keys are
// computed against these, as a crafted file would be.
uint64_t unseeded_hash_u64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb3fe1a85ec53ull;
    return k ^ (k >> 33);
}
uint64_t unseeded_hash_bytes(std::string_view s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h ^ (h >> 29);
}
size_t unseeded_token_capacity(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;
    return capacity;
}
size_t unseeded_merge_capacity(size_t count) {
    size_t capacity = 16;
    while (capacity * 3 < count * 4) capacity *= 2;
    return capacity;
}

// The longest lookup (occupied run + 1) of a linear-probing table of
// `capacity` slots after inserting keys with these home slots.
size_t longest_probe_of(const std::vector<size_t>& homes, size_t capacity) {
    std::vector<bool> occupied(capacity, false);
    for (size_t home : homes) {
        size_t i = home & (capacity - 1);
        while (occupied[i]) i = (i + 1) & (capacity - 1);
        occupied[i] = true;
    }
    return smol::detail::longest_probe(capacity, [&](size_t i) { return bool(occupied[i]); });
}

// The ids of a text in which no merge applies: its byte tokens (a MiniVocab
// has byte b at id b).
void append_bytes(std::string_view text, std::vector<int32_t>& out) {
    for (unsigned char c : text) out.push_back(int32_t(c));
}

}  // namespace

TEST_CASE("tokenizer: token texts that collide under the unseeded hash") {
    // 2048 texts whose unseeded slots all lie in the first 64 of the table:
    // the old layout is one run of >= 2048 slots, every insert scanning it.
    MiniVocab v;
    v.tokens.resize(256);
    v.types.resize(256);
    v.merges.clear();
    v.eos = 0;
    constexpr size_t kColliding = 2048, kWindow = 64;
    const size_t capacity = unseeded_token_capacity(256 + kColliding);
    for (uint32_t k = 0; v.tokens.size() < 256 + kColliding; ++k) {
        const std::string text = "tok" + std::to_string(k);
        if ((unseeded_hash_bytes(text) & (capacity - 1)) < kWindow) v.tokens.push_back(text);
    }
    v.types.resize(v.tokens.size(), 1);
    std::vector<size_t> homes;
    for (const auto& t : v.tokens) homes.push_back(size_t(unseeded_hash_bytes(t)));
    const size_t unseeded_probe = longest_probe_of(homes, capacity);
    CHECK(unseeded_probe > kColliding);
    CHECK(unseeded_probe > smol::detail::kMaxProbeSlots);

    const auto file = v.file();
    const auto tok = smol::Tokenizer::from_gguf(file);
    const auto stats = tok.detail_table_stats();
    MESSAGE("longest token lookup: unseeded " << unseeded_probe << ", seeded "
                                              << stats.token_index_max_probe);
    CHECK(stats.token_index_max_probe <= smol::detail::kMaxProbeSlots);
    for (size_t id = 0; id < v.tokens.size(); id += 97)
        CHECK(tok.token_id(v.tokens[id]) == int32_t(id));
    CHECK(stats.heap_bytes <= 16 * file->size());
}

TEST_CASE("tokenizer: merge pairs that collide under the unseeded hash") {
    // Two-letter tokens "Ab" (upper then lower: a lower-upper pair is never a
    // token, so "AbCd" can only merge as Ab + Cd) and merges of pairs of them
    // whose unseeded slots lie in the first 32 of the merge table.
    MiniVocab v;
    v.tokens.resize(256);
    v.types.resize(256);
    v.merges.clear();
    v.eos = 0;
    std::vector<std::string> pair_tokens;
    for (char upper = 'A'; upper <= 'Z'; ++upper)
        for (char lower = 'a'; lower <= 'z'; ++lower) {
            pair_tokens.push_back({upper, lower});
            v.tokens.push_back(pair_tokens.back());
            v.merges.push_back({upper, ' ', lower});
        }
    constexpr size_t kColliding = 1536, kWindow = 32;
    const size_t capacity = unseeded_merge_capacity(v.merges.size() + kColliding);
    auto key = [](size_t left, size_t right) { return uint64_t(left) << 32 | right; };
    std::vector<size_t> homes;  // of every merge, in the unseeded table
    for (unsigned char upper = 'A'; upper <= 'Z'; ++upper)
        for (unsigned char lower = 'a'; lower <= 'z'; ++lower)
            homes.push_back(size_t(unseeded_hash_u64(key(upper, lower))));
    std::vector<std::string> merged_texts;
    for (size_t left = 0; left < pair_tokens.size() && merged_texts.size() < kColliding; ++left)
        for (size_t right = 0; right < pair_tokens.size() && merged_texts.size() < kColliding;
             ++right) {
            const uint64_t h = unseeded_hash_u64(key(256 + left, 256 + right));
            if ((h & (capacity - 1)) >= kWindow) continue;
            homes.push_back(size_t(h));
            merged_texts.push_back(pair_tokens[left] + pair_tokens[right]);
            v.merges.push_back(pair_tokens[left] + " " + pair_tokens[right]);
        }
    REQUIRE(merged_texts.size() == kColliding);
    const int32_t first_merged = int32_t(v.tokens.size());
    v.tokens.insert(v.tokens.end(), merged_texts.begin(), merged_texts.end());
    v.types.resize(v.tokens.size(), 1);
    const size_t unseeded_probe = longest_probe_of(homes, capacity);
    CHECK(unseeded_probe > kColliding);
    CHECK(unseeded_probe > smol::detail::kMaxProbeSlots);

    const auto file = v.file();
    const auto tok = smol::Tokenizer::from_gguf(file);
    const auto stats = tok.detail_table_stats();
    MESSAGE("longest merge lookup: unseeded " << unseeded_probe << ", seeded "
                                              << stats.merge_index_max_probe);
    CHECK(stats.merge_index_max_probe <= smol::detail::kMaxProbeSlots);
    CHECK(stats.token_index_max_probe <= smol::detail::kMaxProbeSlots);
    CHECK(stats.heap_bytes <= 16 * file->size());
    // Every merge applies (smaug-bpe: no whole-word lookup, BPE only).
    for (size_t k = 0; k < merged_texts.size(); ++k)
        CHECK(tok.encode(merged_texts[k], false) ==
              std::vector<int32_t>{first_merged + int32_t(k)});
}

TEST_CASE("tokenizer: the real vocabulary's tables are well inside the probe bound") {
    for (const char* model : {"tiny-q4km.gguf", "vocab-llama-bpe.gguf"}) {
        auto tok = load_tokenizer(model);
        if (!tok) continue;
        const auto stats = tok->detail_table_stats();
        MESSAGE(std::string(model)
                << ": longest token lookup " << stats.token_index_max_probe
                << ", longest merge lookup " << stats.merge_index_max_probe << " slots; "
                << stats.special_count << " specials in " << stats.special_matcher_bytes
                << " bytes; all tables " << stats.heap_bytes << " bytes");
        CHECK(stats.token_index_max_probe <= smol::detail::kMaxProbeSlots / 2);
        CHECK(stats.merge_index_max_probe <= smol::detail::kMaxProbeSlots / 2);
        CHECK(stats.special_matcher_bytes <= 2048 + 128 * stats.special_count);
        CHECK(stats.heap_bytes <= 4 * tok->file().size());
    }
}

TEST_CASE("tokenizer: longest_probe counts runs across the end of the table") {
    const std::vector<bool> layout = {true, true, false, true, false, false, true, true};
    auto occupied = [&](size_t i) { return bool(layout[i]); };
    CHECK(smol::detail::longest_probe(8, occupied) == 5);  // slots 6, 7, 0, 1, then empty 2
    const std::vector<bool> sparse = {false, true, false, false};
    CHECK(smol::detail::longest_probe(4, [&](size_t i) { return bool(sparse[i]); }) == 2);
    CHECK(smol::detail::table_hash_seed(0) != smol::detail::table_hash_seed(1));
}

// ---- special-token matching -------------------------------------------------

namespace {

// Byte tokens only (no merges, so plain text encodes to its bytes) plus the
// given special tokens, which get ids 256, 257, ...
MiniVocab specials_vocab(const std::vector<std::pair<std::string, int32_t>>& specials) {
    MiniVocab v;
    v.tokens.resize(256);
    v.types.assign(256, 1);
    v.merges.clear();
    v.eos = 0;
    for (const auto& [text, type] : specials) {
        v.tokens.push_back(text);
        v.types.push_back(type);
    }
    return v;
}

// The matching rule written the slow, obvious way: every occurrence of every
// eligible special, sorted by (priority, start), each claiming its span if
// it overlaps none claimed before. Priority: longer first, then lower id; a
// text listed twice answers as its first id (type included).
std::vector<int32_t> reference_encode(const MiniVocab& v, std::string_view text,
                                      bool parse_special) {
    std::vector<int32_t> order;  // special ids by priority, repeats of a text dropped
    for (int32_t id = 256; id < int32_t(v.tokens.size()); ++id) order.push_back(id);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return v.tokens[size_t(a)].size() > v.tokens[size_t(b)].size();
    });
    std::vector<int32_t> unique;
    for (int32_t id : order) {
        bool repeat = false;
        for (int32_t u : unique) repeat |= v.tokens[size_t(u)] == v.tokens[size_t(id)];
        if (!repeat) unique.push_back(id);
    }
    std::vector<std::pair<size_t, size_t>> claimed;  // (start, priority)
    for (size_t priority = 0; priority < unique.size(); ++priority) {
        const int32_t id = unique[priority];
        if (!parse_special && v.types[size_t(id)] != 4) continue;
        const std::string& special = v.tokens[size_t(id)];
        for (size_t start = 0; start + special.size() <= text.size(); ++start) {
            if (text.substr(start, special.size()) != special) continue;
            bool free = true;
            for (const auto& [s, p] : claimed)
                free &=
                    start + special.size() <= s || s + v.tokens[size_t(unique[p])].size() <= start;
            if (free) claimed.push_back({start, priority});
        }
    }
    std::sort(claimed.begin(), claimed.end());
    std::vector<int32_t> out;
    size_t done = 0;
    for (const auto& [start, priority] : claimed) {
        append_bytes(text.substr(done, start - done), out);
        out.push_back(unique[priority]);
        done = start + v.tokens[size_t(unique[priority])].size();
    }
    append_bytes(text.substr(done), out);
    return out;
}

}  // namespace

TEST_CASE("tokenizer: special matching on overlapping, nested and adjacent specials") {
    // Expectations as the byte-trie matcher produced them (checked against it).
    const MiniVocab v = specials_vocab({
        {"<|a|>", 3},  // 256
        {"<|a", 3},    // 257: a prefix of 256
        {"a|>", 3},    // 258: a suffix of 256
        {"<|", 4},     // 259: user-defined, a prefix of 256 and 257
        {"|><|", 3},   // 260: straddles two adjacent 256s
        {"<|a|>", 4},  // 261: 256's text again: answers as 256 (a control token)
        {"xx", 3},     // 262
        {"xxx", 3},    // 263
    });
    const auto tok = smol::Tokenizer::from_gguf(v.file());
    using Ids = std::vector<int32_t>;
    CHECK(tok.encode("<|a|><|a|>", true) == Ids{256, 256});
    CHECK(tok.encode("<|a|><|", true) == Ids{256, 259});
    CHECK(tok.encode("<|a|", true) == Ids{257, '|'});
    CHECK(tok.encode("x<|a|>", true) == Ids{'x', 256});
    CHECK(tok.encode("xxxxx", true) == Ids{263, 262});
    CHECK(tok.encode("xxxx", true) == Ids{263, 'x'});
    // The longer 256 claims first even though 260 starts earlier.
    CHECK(tok.encode("|><|a|>", true) == Ids{'|', '>', 256});
    // 260 (length 4) outranks 257 and 258 (length 3) wherever they are.
    CHECK(tok.encode("a|><|a", true) == Ids{'a', 260, 'a'});
    CHECK(tok.encode("<|a|>x<|a", true) == Ids{256, 'x', 257});
    // Without parse_special only user-defined tokens match, and 261 does
    // not: its text answers as 256, a control token.
    CHECK(tok.encode("<|a|><|", false) == Ids{259, 'a', '|', '>', 259});
    for (const char* text :
         {"<|a|><|a|>", "<|a|><|", "<|a|", "xxxxx", "|><|a|>", "a|><|a", "<|a|><|"})
        for (bool parse_special : {true, false}) {
            CAPTURE(text);
            CAPTURE(parse_special);
            CHECK(tok.encode(text, parse_special) == reference_encode(v, text, parse_special));
        }
}

TEST_CASE("tokenizer: special matching equals the reference rule on random vocabularies") {
    std::mt19937 rng(17);
    // Bytes above 0x7F too: the matcher must order bytes as unsigned.
    const std::string alphabet = "<|a\xC3\xA9";
    auto random_text = [&](size_t length) {
        std::string s(length, ' ');
        for (char& c : s) c = alphabet[rng() % alphabet.size()];
        return s;
    };
    int compared = 0;
    for (int round = 0; round < 300; ++round) {
        std::vector<std::pair<std::string, int32_t>> specials;
        for (size_t k = 0, n = 1 + rng() % 10; k < n; ++k) {
            const int32_t types[] = {2, 3, 4};
            specials.push_back({random_text(2 + rng() % 5), types[rng() % 3]});
        }
        const MiniVocab v = specials_vocab(specials);
        const auto tok = smol::Tokenizer::from_gguf(v.file());
        for (int t = 0; t < 40; ++t) {
            const std::string text = random_text(rng() % 32);
            for (bool parse_special : {true, false}) {
                const auto got = tok.encode(text, parse_special);
                const auto want = reference_encode(v, text, parse_special);
                if (got != want) {
                    CAPTURE(round);
                    CAPTURE(text);
                    CAPTURE(parse_special);
                    CHECK(got == want);
                }
                ++compared;
            }
        }
    }
    CHECK(compared == 300 * 40 * 2);
}

TEST_CASE("tokenizer: a 4 MB special token costs O(1) memory and still matches") {
    MiniVocab v;  // its specials (<|end|> is 261) and byte tokens, no merges
    v.merges.clear();
    std::string big = "<|";
    std::mt19937 rng(23);
    while (big.size() < (4u << 20)) big += char('a' + rng() % 26);
    big += "|>";
    v.tokens.push_back(big);
    v.types.push_back(3);
    const int32_t big_id = int32_t(v.tokens.size() - 1);
    // And a run of '<': a special that starts at every place of a text of
    // '<'s. (Matching costs the text's length times the run's here: each
    // place compares the run. Kept short; see SpecialMatcher.)
    const std::string run(4096, '<');
    v.tokens.push_back(run);
    v.types.push_back(3);
    const int32_t run_id = int32_t(v.tokens.size() - 1);
    const auto file = v.file();
    const auto tok = smol::Tokenizer::from_gguf(file);
    const auto stats = tok.detail_table_stats();
    MESSAGE("special matcher: " << stats.special_count << " specials, "
                                << stats.special_matcher_nodes << " nodes, "
                                << stats.special_matcher_bytes << " bytes; all tables "
                                << stats.heap_bytes << " bytes for a file of " << file->size());
    // A byte trie held ~100 bytes per byte of special text (500 MB here).
    CHECK(stats.special_matcher_bytes <= 2048 + 128 * stats.special_count);
    CHECK(stats.heap_bytes <= file->size() / 4);

    using Ids = std::vector<int32_t>;
    Ids want;
    append_bytes("x", want);
    want.push_back(big_id);
    want.push_back(261);
    append_bytes("y", want);
    CHECK(tok.encode("x" + big + "<|end|>y", true) == want);
    // A prefix of the big one is no match; the whole one after it is.
    const std::string half = big.substr(0, big.size() / 2);
    want.assign(1, '<');
    want.insert(want.end(), {'|'});
    Ids tail;
    append_bytes(half.substr(2), tail);
    want.insert(want.end(), tail.begin(), tail.end());
    want.push_back(big_id);
    CHECK(tok.encode(half + big, true) == want);

    // Texts full of '<': the run special claims 16 times, left to right, the
    // 5 left over are bytes.
    const std::string lt(16 * run.size() + 5, '<');
    want.assign(16, run_id);
    append_bytes("<<<<<", want);
    CHECK(tok.encode(lt, true) == want);
    std::string mixed;
    want.clear();
    for (int i = 0; i < 20000; ++i) {
        mixed += "<<|<|end";
        append_bytes("<<|<|end", want);
        if (i % 7 == 0) {
            mixed += "<|end|>";
            want.push_back(261);
        }
    }
    CHECK(tok.encode(mixed, true) == want);
}

TEST_CASE("tokenizer: texts full of '<' on the real vocabulary") {
    auto tok = load_tokenizer("vocab-llama-bpe.gguf");
    if (!tok) return;
    const auto im_start = *tok->token_id("<|im_start|>");
    const auto eot = *tok->token_id("<|eot_id|>");
    const char* noise[] = {"<", "<|", "<|im_", "|", ">", " <", "<<|", "<|reserved_special_token_"};
    std::mt19937 rng(29);
    std::string text;
    long inserted = 0;
    while (text.size() < 200000) {
        const unsigned pick = rng() % 10;
        if (pick == 0)
            text += "<|im_start|>", ++inserted;
        else if (pick == 1)
            text += "<|eot_id|>", ++inserted;
        else
            text += noise[rng() % std::size(noise)];
    }
    const auto ids = tok->encode(text, true);
    CHECK(std::count(ids.begin(), ids.end(), im_start) + std::count(ids.begin(), ids.end(), eot) ==
          inserted);
    CHECK(tok->decode(ids) == text);
    CHECK(tok->decode(tok->encode(text, false)) == text);
}

// ---- encode_prompt: special tokens only where the prompt's writer put them --

namespace {

bool has_special(const smol::Tokenizer& tok, const std::vector<int32_t>& ids) {
    return std::any_of(ids.begin(), ids.end(), [&](int32_t id) { return tok.is_special(id); });
}

}  // namespace

TEST_CASE("tokenizer: encode_prompt matches specials in markup only, user-defined ones too") {
    MiniVocab v;
    v.types[263] = int32_t(smol::TokenType::user_defined);  // "[x"
    const auto tok = smol::Tokenizer::from_gguf(v.file());
    // parse_special = false still matches user-defined tokens; content never does.
    CHECK(tok.encode("a[x", false) == std::vector<int32_t>{'a', 263});
    smol::PromptText content;
    content.append_content("a[x<|end|>");
    CHECK(tok.encode_prompt(content) ==
          std::vector<int32_t>{'a', '[', 'x', '<', '|', 'e', 'n', 'd', '|', '>'});

    // All markup: exactly encode(text, true).
    smol::PromptText markup;
    markup.append_markup("hello<|end|>x[x]]");
    CHECK(markup.markup.size() == 1);
    CHECK(tok.encode_prompt(markup) == tok.encode(markup.text, true));

    // Adjacent markup appends are one range: a marker written in two pieces counts.
    smol::PromptText pieces;
    pieces.append_markup("<|en");
    pieces.append_markup("d|>");
    CHECK(pieces.markup.size() == 1);
    CHECK(tok.encode_prompt(pieces) == std::vector<int32_t>{261});

    // Content cannot extend a marker of the markup ("<|end|>" + "x" is not
    // "<|end|>x") nor complete one ("<|en" + "d|>").
    smol::PromptText extend;
    extend.append_markup("<|end|>");
    extend.append_content("x");
    CHECK(tok.encode_prompt(extend) == std::vector<int32_t>{261, 'x'});
    CHECK(tok.encode(extend.text, true) == std::vector<int32_t>{262});
    smol::PromptText complete;
    complete.append_markup("<|en");
    complete.append_content("d|>");
    CHECK_FALSE(has_special(tok, tok.encode_prompt(complete)));
    CHECK(tok.decode(tok.encode_prompt(complete)) == complete.text);

    // Ranges out of order or past the text are refused.
    smol::PromptText bad;
    bad.text = "hello";
    bad.markup = {{0, 6}};
    std::vector<int32_t> out;
    CHECK(tok.try_encode_prompt(bad, out).error().kind == smol::ErrorKind::invalid_argument);
    bad.markup = {{2, 4}, {1, 3}};
    CHECK(tok.try_encode_prompt(bad, out).error().kind == smol::ErrorKind::invalid_argument);
}

TEST_CASE("tokenizer: encode_prompt equals encode(parse_special) when contents hold no marker") {
    // The cut points are the same specials, so the runs between them are split
    // and merged the same way: random template-like markup around random
    // contents (words, spaces, newlines, digits, symbols, partial markers).
    auto tok = load_tokenizer("tiny-q4km.gguf");
    if (!tok) return;
    const char* markup_pieces[] = {"<|im_start|>user\n",
                                   "<|im_end|>\n",
                                   "<|im_start|>assistant\n",
                                   "<think>\n\n</think>\n",
                                   "\n\n",
                                   "Today Date: ",
                                   "\n",
                                   "<tool_call>\n",
                                   "\n</tool_call>",
                                   " ",
                                   "## Tools\n\n"};
    const char* content_pieces[] = {
        "hello",     " world",     "  ",           "\n",           "\n\n", " 12345", "!!",
        " <",        "<|im",       "_end",         "|>",           ">",    "think",  "</",
        "tool_call", "{\"a\": 1}", " caf\xC3\xA9", "\xE5\x9F\x8E", "'s",   "\t",     "x"};
    std::mt19937 rng(30);
    long compared = 0;
    for (int round = 0; round < 400; ++round) {
        smol::PromptText prompt;
        const int parts = 1 + int(rng() % 12);
        for (int k = 0; k < parts; ++k) {
            if (rng() % 2) {
                prompt.append_markup(markup_pieces[rng() % std::size(markup_pieces)]);
            } else {
                for (int n = int(rng() % 5); n >= 0; --n)
                    prompt.append_content(content_pieces[rng() % std::size(content_pieces)]);
            }
        }
        const auto safe = tok->encode_prompt(prompt);
        CHECK(tok->decode(safe) == prompt.text);
        // Specials of the markup alone: what encode_prompt may use.
        size_t markup_specials = 0;
        for (const smol::TextRange& r : prompt.markup) {
            const auto ids = tok->encode(prompt.text.substr(r.begin, r.end - r.begin), true);
            markup_specials += size_t(std::count_if(
                ids.begin(), ids.end(), [&](int32_t id) { return tok->is_special(id); }));
        }
        const size_t safe_specials = size_t(std::count_if(
            safe.begin(), safe.end(), [&](int32_t id) { return tok->is_special(id); }));
        CHECK(safe_specials == markup_specials);
        const auto old = tok->encode(prompt.text, true);
        const size_t old_specials = size_t(
            std::count_if(old.begin(), old.end(), [&](int32_t id) { return tok->is_special(id); }));
        if (old_specials != markup_specials) continue;  // a content spelled a marker
        CHECK(safe == old);
        ++compared;
    }
    CHECK(compared > 200);
}

}  // namespace test_tokenizer
