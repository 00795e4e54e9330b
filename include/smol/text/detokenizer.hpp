// StreamDecoder: turns a stream of token ids into text that is always whole,
// valid UTF-8, for printing tokens as they are generated.
//
// One token can end in the middle of a character (byte tokens, or merges that
// split an emoji's four bytes across tokens). push() returns every character
// completed so far and holds back a trailing incomplete one until the next
// token completes it. Bytes that can no longer form a character (an ill-formed
// sequence, or one interrupted by a byte that cannot continue it) come out as
// U+FFFD, one per maximal ill-formed subpart; finish() flushes a sequence still
// pending at the end as U+FFFD. Whenever the whole decode() of the ids is
// valid UTF-8, the concatenated outputs of push() and finish() equal it.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <string>

#include "tokenizer.hpp"
#include "unicode.hpp"

SMOL_NAMESPACE_BEGIN

class StreamDecoder {
public:
    // The tokenizer must outlive the decoder.
    explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

    // Appends a token; returns the text it completes (possibly empty). Throws
    // invalid_argument for an id outside the vocabulary (the state is kept).
    std::string push(int32_t id) {
        tokenizer_->append_piece(id, pending_);
        std::string out;
        const size_t held =
            unicode::append_valid_utf8(out, pending_, /*keep_incomplete_tail=*/true);
        pending_.erase(0, pending_.size() - held);
        return out;
    }

    // Ends the stream: returns U+FFFD for a character still incomplete (or
    // nothing), and resets the decoder.
    std::string finish() {
        std::string out;
        unicode::append_valid_utf8(out, pending_, /*keep_incomplete_tail=*/false);
        pending_.clear();
        return out;
    }

    // Forgets any pending bytes (a new stream).
    void reset() noexcept { pending_.clear(); }

    // Bytes of an incomplete character held back (0..3).
    size_t pending_bytes() const noexcept { return pending_.size(); }

private:
    const Tokenizer* tokenizer_;
    std::string pending_;  // the incomplete tail of the bytes so far (at most 3 bytes)
};

SMOL_NAMESPACE_END
