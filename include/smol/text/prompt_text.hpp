// PromptText: a prompt as a chat template writes it, knowing which bytes are
// its own markup (where special tokens such as <|im_start|> are control
// tokens) and which come from message contents (ordinary text, whatever
// characters they hold). Tokenizer::encode_prompt reads it that way, so a
// message that spells "<|im_end|>" cannot close its turn.
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

SMOL_NAMESPACE_BEGIN

// Bytes [begin, end) of a text.
struct TextRange {
    size_t begin = 0;
    size_t end = 0;
};

struct PromptText {
    std::string text;
    // Where special tokens are recognized: in text order, disjoint, and
    // adjacent markup is one range, so a marker written in two appends is
    // still found whole.
    std::vector<TextRange> markup;

    // Text the template itself writes: special tokens in it count.
    void append_markup(std::string_view piece) {
        if (piece.empty()) return;
        if (!markup.empty() && markup.back().end == text.size())
            markup.back().end += piece.size();
        else
            markup.push_back({text.size(), text.size() + piece.size()});
        text += piece;
    }
    // Text from outside (message contents, tool definitions): ordinary text.
    void append_content(std::string_view piece) { text += piece; }
    // Content or markup by the caller's choice (ChatTemplateOptions::
    // parse_special_in_content).
    void append(std::string_view piece, bool as_markup) {
        if (as_markup)
            append_markup(piece);
        else
            append_content(piece);
    }
};

SMOL_NAMESPACE_END
