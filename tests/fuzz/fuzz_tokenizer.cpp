// libFuzzer target for the tokenizer and the streaming detokenizer. The
// vocabularies of two fixtures (smaug-bpe and llama-bpe pre-tokenizers) are
// loaded once; each input is
//   byte 0: bit 0 picks the vocabulary, bit 1 parses special tokens,
//           bit 2 reads the rest as token ids instead of text
//   rest:   text to encode, or little-endian u32 ids (some out of range)
// Properties checked besides "no crash": byte-level BPE is lossless, so for
// valid UTF-8 without special parsing decode(encode(text)) == text; and the
// StreamDecoder's pushes + finish() equal decode(ids) whenever that is valid
// UTF-8. Needs SMOL_FIXTURES (tools/fuzz.sh sets it).
#include <smol/detail/utf8.hpp>
#include <smol/detail/bytes.hpp>
#include <smol/text/detokenizer.hpp>
#include <smol/text/tokenizer.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

std::unique_ptr<smol::Tokenizer> g_tokenizers[2];

bool valid_utf8(std::string_view s) {
    return smol::detail::find_invalid_utf8(s) == std::string_view::npos;
}

void check_stream(const smol::Tokenizer& tok, const std::vector<int32_t>& ids) {
    smol::StreamDecoder stream(tok);
    std::string streamed;
    std::vector<int32_t> accepted;
    for (int32_t id : ids) {
        try {
            streamed += stream.push(id);
            accepted.push_back(id);
        } catch (const smol::Error& e) {
            if (e.kind() != smol::ErrorKind::invalid_argument) __builtin_trap();
            if (id >= 0 && id < tok.vocab_size()) __builtin_trap();  // a valid id was refused
        }
    }
    streamed += stream.finish();
    const std::string whole = tok.decode(accepted);
    if (valid_utf8(whole) && streamed != whole) __builtin_trap();
    if (!valid_utf8(streamed)) __builtin_trap();  // the stream promises whole characters
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* dir = std::getenv("SMOL_FIXTURES");
    const std::string base = dir ? dir : "../shared/fixtures";
    const char* files[2] = {"tiny-q4km.gguf", "vocab-llama-bpe.gguf"};
    for (int i = 0; i < 2; ++i) {
        try {
            g_tokenizers[i] =
                std::make_unique<smol::Tokenizer>(smol::gguf::File::open(base + "/" + files[i]));
        } catch (const smol::Error& e) {
            std::fprintf(stderr, "fuzz_tokenizer: cannot load %s/%s: %s\n", base.c_str(), files[i],
                         e.what());
            std::abort();
        }
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t mode = data[0];
    const smol::Tokenizer& tok = *g_tokenizers[mode & 1];
    const bool parse_special = (mode & 2) != 0;
    if (mode & 4) {
        std::vector<int32_t> ids;
        for (size_t i = 1; i + 4 <= size; i += 4) {
            const uint32_t raw = smol::detail::read_le<uint32_t>(data, i);
            // Mostly valid ids, sometimes just past the end or negative.
            int32_t id = int32_t(raw % uint32_t(tok.vocab_size() + 4));
            if ((raw >> 30) == 3) id = -int32_t(raw & 7) - 1;
            ids.push_back(id);
        }
        check_stream(tok, ids);
        return 0;
    }
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    std::vector<int32_t> ids;
    try {
        ids = tok.encode(text, parse_special);
    } catch (const smol::Error& e) {
        // Only malformed text may be refused.
        if (valid_utf8(text)) __builtin_trap();
        return 0;
    }
    for (int32_t id : ids)
        if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
    const std::string decoded = tok.decode(ids);
    if (!parse_special && valid_utf8(text) && decoded != text) __builtin_trap();
    check_stream(tok, ids);
    return 0;
}
