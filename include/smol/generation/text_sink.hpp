// detail::TextSink: generated tokens to streamed text. Detokenizes (whole
// UTF-8 only), holds back text that might begin a stop string, and appends
// what is certain to the result and the caller's callback.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "../detail/stop_strings.hpp"
#include "../text/detokenizer.hpp"
#include "../text/tokenizer.hpp"
#include "params.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

class TextSink {
public:
    TextSink(const Tokenizer& tokenizer, const std::vector<std::string>& stop,
             const TokenCallback& on_text, std::string& text)
        : decoder_(tokenizer), matcher_(stop), on_text_(on_text), text_(text) {}

    void push(int32_t token) { emit(decoder_.push(token)); }
    // At a natural end (not after a stop string): what the decoder and the
    // matcher still hold.
    void flush() {
        emit(decoder_.finish());
        if (matcher_.matched()) return;
        const std::string rest = matcher_.finish();
        if (rest.empty()) return;
        text_ += rest;
        if (on_text_) on_text_(rest);
    }
    bool matched() const { return matcher_.matched(); }
    std::string matched_string() const { return matcher_.matched_string(); }
    // The callback returned false.
    bool callback_stopped() const noexcept { return callback_stopped_; }

private:
    void emit(const std::string& piece) {
        const std::string out = matcher_.push(piece);
        if (out.empty()) return;
        text_ += out;
        if (on_text_ && !on_text_(out)) callback_stopped_ = true;
    }
    StreamDecoder decoder_;
    StopStringMatcher matcher_;
    const TokenCallback& on_text_;
    std::string& text_;
    bool callback_stopped_ = false;
};

}  // namespace detail

SMOL_NAMESPACE_END
