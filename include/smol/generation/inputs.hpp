// A run's inputs, checked as values before anything runs (text must be valid
// UTF-8, the error naming the byte offset; prompt ids must be in the
// vocabulary and fit the context; the sampling parameters must be usable), and
// turned into prompt ids.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "../detail/utf8.hpp"
#include "../error.hpp"
#include "../sampling/sampler.hpp"
#include "../text/chat_template.hpp"
#include "../text/tokenizer.hpp"
#include "params.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

inline Status utf8_status(std::string_view text, const std::string& what) {
    if (auto error = utf8_error(text, what)) return *error;
    return {};
}

inline Status messages_status(const std::vector<ChatMessage>& messages) {
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string what = "chat message " + std::to_string(i);
        SMOL_TRY(utf8_status(messages[i].role, what + " role"));
        SMOL_TRY(utf8_status(messages[i].content, what + " (" + messages[i].role + ")"));
    }
    return {};
}

// A run of `prompt` with `params` on a generator of n_ctx positions (with
// ContextPolicy::shift a longer prompt is the generator's to fit).
inline Status run_inputs_status(const std::vector<int32_t>& prompt, const GenerateParams& params,
                                size_t n_vocab, size_t n_ctx, ContextPolicy policy) {
    for (size_t i = 0; i < params.stop.size(); ++i)
        SMOL_TRY(utf8_status(params.stop[i], "stop string " + std::to_string(i)));
    if (prompt.empty())
        return Status(ErrorKind::invalid_argument,
                      "prompt is empty (it has no tokens, and this model adds no BOS)");
    for (size_t i = 0; i < prompt.size(); ++i)
        if (prompt[i] < 0 || size_t(prompt[i]) >= n_vocab)
            return Status(ErrorKind::invalid_argument, "prompt token " + std::to_string(i) +
                                                           " has id " + std::to_string(prompt[i]) +
                                                           ", outside the vocabulary of " +
                                                           std::to_string(n_vocab));
    if (prompt.size() > n_ctx && policy != ContextPolicy::shift)
        return Status(ErrorKind::out_of_range, "prompt has " + std::to_string(prompt.size()) +
                                                   " tokens, more than the context of " +
                                                   std::to_string(n_ctx) +
                                                   " (GeneratorOptions::n_ctx)");
    if (!params.grammar.empty() && !params.json_schema.empty())
        return Status(ErrorKind::invalid_argument,
                      "GenerateParams: grammar and json_schema are both set (use one)");
    if (params.constrain_tool_calls) {
        if (params.chat.tools.empty())
            return Status(ErrorKind::invalid_argument,
                          "GenerateParams: constrain_tool_calls needs chat.tools");
        if (!params.grammar.empty() || !params.json_schema.empty())
            return Status(ErrorKind::invalid_argument,
                          "GenerateParams: constrain_tool_calls and a grammar or json_schema "
                          "constrain the same text (use one)");
    }
    if (params.lookup.mode != LookupMode::off &&
        (params.lookup.k == 0 || params.lookup.k > LookupParams::kMaxDrafts ||
         params.lookup.max_ngram == 0 || params.lookup.max_ngram > LookupParams::kMaxNgram))
        return Status(
            ErrorKind::invalid_argument,
            "GenerateParams: lookup.k must be in [1, " + std::to_string(LookupParams::kMaxDrafts) +
                "] and lookup.max_ngram in [1, " + std::to_string(LookupParams::kMaxNgram) +
                "], got " + std::to_string(params.lookup.k) + " and " +
                std::to_string(params.lookup.max_ngram));
    return Sampler::validate(params);
}

// BOS first when the file asks for it.
inline void bos_ids(const Tokenizer& tokenizer, std::vector<int32_t>& ids) {
    ids.clear();
    if (tokenizer.add_bos() && tokenizer.bos_id()) ids.push_back(*tokenizer.bos_id());
}
// The ids of a program's prompt: special tokens parsed, unless as_text, where
// every byte is ordinary text (no special or user-defined token at all). It
// does not check the text's UTF-8: take text through text_prompt_ids, which
// does, so that no path gives ids for text a run would refuse.
inline Status prompt_ids(const Tokenizer& tokenizer, std::string_view text, bool as_text,
                         std::vector<int32_t>& ids) {
    bos_ids(tokenizer, ids);
    if (!as_text) return tokenizer.try_encode(text, /*parse_special=*/true, ids);
    PromptText plain;
    plain.append_content(text);
    return tokenizer.try_encode_prompt(plain, ids);
}
inline Status text_prompt_ids(const Tokenizer& tokenizer, std::string_view prompt, bool as_text,
                              std::vector<int32_t>& ids) {
    SMOL_TRY(utf8_status(prompt, "prompt"));
    return prompt_ids(tokenizer, prompt, as_text, ids);
}
// A conversation rendered with `format` (text/chat_template.hpp), then
// tokenized with control tokens only where the template wrote them (contents
// are text unless options.parse_special_in_content).
inline Status chat_prompt_ids(const Tokenizer& tokenizer, ChatFormat format,
                              const std::vector<ChatMessage>& messages,
                              const ChatTemplateOptions& options, std::vector<int32_t>& ids) {
    SMOL_TRY(messages_status(messages));
    SMOL_TRY_ASSIGN(const PromptText prompt, try_render_chat_prompt(format, messages, options));
    bos_ids(tokenizer, ids);
    return tokenizer.try_encode_prompt(prompt, ids);
}

}  // namespace detail

SMOL_NAMESPACE_END
