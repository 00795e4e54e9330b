// What a generation takes and gives back: GeneratorOptions (per generator),
// GenerateParams (per call: the sampler's parameters, stopping, the chat
// template's options), GenerateResult and StopReason.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../log.hpp"
#include "../constrain/json_schema_options.hpp"
#include "../model/kv_cache.hpp"
#include "../sampling/sampler.hpp"
#include "../text/chat_template.hpp"
#include "../text/tool_calls.hpp"
#include "lookup.hpp"

SMOL_NAMESPACE_BEGIN

class Batcher;  // generation/batcher.hpp

// Why generation ended.
//
// Stopping: an end-of-generation token of the file (never emitted as text), a stop string (matched
// across token boundaries; text that might begin one is held back from the callback until it
// cannot; the stop string and anything after it never reach the callback or GenerateResult::text),
// max_tokens, the callback returning false or cancel() (StopReason::cancelled), or a full context
// (StopReason::context_full: reported, not thrown). A prompt longer than the context is
// smol::Error(out_of_range); a prompt, message or stop string that is not valid UTF-8 is
// smol::Error(invalid_argument) naming the byte offset. Streamed pieces are always whole UTF-8.
enum class StopReason {
    eos,           // the model produced an end-of-generation token
    max_tokens,    // GenerateParams::max_tokens tokens were generated
    stop_string,   // a GenerateParams::stop string appeared in the text
    cancelled,     // cancel(), AsyncGeneration::cancel(), or the callback returned false
    context_full,  // the KV cache is full (n_ctx positions)
    error,         // only without exceptions: see GenerateResult::error
};

inline const char* to_string(StopReason reason) noexcept {
    switch (reason) {
        case StopReason::eos:
            return "eos";
        case StopReason::max_tokens:
            return "max_tokens";
        case StopReason::stop_string:
            return "stop_string";
        case StopReason::cancelled:
            return "cancelled";
        case StopReason::context_full:
            return "context_full";
        case StopReason::error:
            return "error";
    }
    return "unknown";
}

// What a generator does when a conversation outgrows its context
// (GeneratorOptions::context_policy; the rule in detail: generation/generator.hpp,
// "Long conversations").
enum class ContextPolicy : uint32_t {
    stop = 0,   // a prompt longer than n_ctx is Error(out_of_range); a full
                // context ends the run with StopReason::context_full
    shift = 1,  // the oldest tokens after n_keep (chat(): the oldest whole turns
                // after the system message) leave the context, so it goes on
};

struct GeneratorOptions {
    // KV cache positions. Default (KVCache::kDefaultSize): min(4096, the model's
    // context length); 0 or more than the context length: Error(invalid_argument).
    size_t n_ctx = KVCache::kDefaultSize;
    // f16 (the goldens' own), f32, or q8_0 (53 % of F16's bytes, CPU only; the
    // model's head_dim a multiple of 32). A restored session brings its own type.
    KVType kv_type = KVType::f16;
    size_t prefill_chunk = 0;  // tokens per prefill forward call; 0 = the model's default
    // Silent by default. Called on the generating thread.
    LogCallback log;  // levels: LogLevel (log.hpp)
    // Called first thing on each async worker thread (generate_async /
    // chat_async), e.g. to lower its priority or pin it so that a game's
    // main thread keeps its core.
    std::function<void()> on_worker_start;
    // Share forward passes with the other generators of this batcher (one per
    // model; generation/batcher.hpp): their decode steps then read the weights
    // once for all. Null: this generator runs its own passes.
    std::shared_ptr<Batcher> batcher;
    // stop (default) or shift: see ContextPolicy and generation/generator.hpp.
    ContextPolicy context_policy = ContextPolicy::stop;
    // With shift: tokens at the start a shift never drops (a text's fixed
    // preamble). chat() always keeps the system message, whatever this says.
    size_t n_keep = 0;
};

// How chat() renders a conversation: the template's own options
// (text/chat_template.hpp: generation prompt, thinking, date, tools).
using ChatOptions = ChatTemplateOptions;

// One call's parameters. The sampling fields are SamplingParams' own
// (sampling/sampler.hpp has the exact order: penalties over the last
// penalty_last_n tokens (prompt included), DRY, logit bias, logits hook,
// top-k, top-p, min-p, XTC, temperature (<= 0: greedy), a draw from a PRNG
// seeded with `seed` at the start of every call); the rest says when to stop
// and how chat() renders.
struct GenerateParams : SamplingParams {
    int max_tokens = 256;  // < 0: until end-of-generation or a full context; 0: prefill only
    std::vector<std::string> stop;  // stop strings (valid UTF-8; empty ones ignored)
    bool ignore_eos = false;        // keep going past end-of-generation tokens
    ChatOptions chat;               // used by chat() / chat_async(); chat.tools declares tools
    // generate(prompt) parses special tokens written in the prompt (the
    // program's own text may write turns by hand). True: the prompt is plain
    // text, no byte of it a control token: for text the program did not write.
    bool prompt_as_text = false;

    // Structured output (constrain/): at most one of grammar and json_schema.
    // The generated text follows it from the first token; end-of-generation is
    // allowed exactly when the text is complete, so a run that stops with
    // StopReason::eos produced a full match (also with ignore_eos, which a
    // complete match overrides), and any other stop leaves a valid prefix.
    // Masks are applied after logits_hook, before top-k. With chat() and
    // thinking enabled the model would start with <think>: set
    // chat.enable_thinking = false, or write the think block into the grammar.
    std::string grammar;      // GBNF text (constrain/grammar.hpp documents the syntax)
    std::string json_schema;  // JSON Schema text (constrain/json_schema.hpp: what is supported)
    JsonSchemaOptions json_schema_options;  // whitespace and number bounds for json_schema
    // With chat.tools: the JSON after each <tool_call> token follows one of the
    // declared tools' {"name", "arguments"} shapes, then </tool_call> closes it.
    // The text outside calls stays free.
    bool constrain_tool_calls = false;

    // Lookup decoding (generation/lookup.hpp): drafts from the context,
    // verified k at a time in one step. By default (LookupMode::automatic) on
    // where it never loses: unconstrained generation on the CPU backend
    // without a Batcher. Greedy output is
    // plain decoding's, token for token; sampled output is exact in
    // distribution (and, seeded, plain decoding's tokens).
    LookupParams lookup;
};

struct GenerateResult {
    std::string text;             // everything emitted (never a matched stop string)
    std::string reasoning;        // the <think>...</think> part of text, without the tags
    std::string answer;           // text without the reasoning
    std::vector<int32_t> tokens;  // generated ids, including a final end-of-generation id
    StopReason stop_reason = StopReason::max_tokens;
    std::string matched_stop;  // the stop string that ended generation, if any
    // Each <tool_call>...</tool_call> in text, parsed (text/tool_calls.hpp),
    // when tools were declared (chat.tools or chat.xml_tools).
    std::vector<ToolCall> tool_calls;
    size_t n_prompt_tokens = 0;  // tokens of the prompt / rendered conversation
    size_t n_reused_tokens = 0;  // of those, already in the KV cache (not prefilled)
    // ContextPolicy::shift: tokens this call left out of the context or erased
    // from it, from the prompt or mid-run; the prompt's share of them (tokens
    // of the prompt the model never saw in this call) separately.
    size_t n_discarded_tokens = 0;
    size_t n_prompt_discarded_tokens = 0;
    double prefill_ms = 0;  // prefill of n_prefilled_tokens() tokens
    double decode_ms = 0;   // sampling + decoding of the generated tokens
    // Decode steps (forward passes after the prefill) and the tokens they ran
    // beyond the step's first, proposed by lookup decoding's drafts or, under a
    // constraint, forced by it (generation/jump_forward.hpp), with how many of
    // them were accepted: the tokens per step are tokens.size() / n_decode_steps,
    // about.
    size_t n_decode_steps = 0;
    size_t n_drafted_tokens = 0;
    size_t n_accepted_drafts = 0;
    std::string error;  // StopReason::error only (no-exceptions builds)
    ErrorKind error_kind = ErrorKind::internal;

    // The prompt tokens actually run through the model: the prompt, less what
    // the cache held, less what a shift left out.
    size_t n_prefilled_tokens() const noexcept {
        return n_prompt_tokens - n_reused_tokens - n_prompt_discarded_tokens;
    }
    double prefill_tokens_per_s() const noexcept {
        return prefill_ms > 0 ? 1000.0 * double(n_prefilled_tokens()) / prefill_ms : 0.0;
    }
    double decode_tokens_per_s() const noexcept {
        return decode_ms > 0 ? 1000.0 * double(tokens.size()) / decode_ms : 0.0;
    }
};

namespace detail {
// A failed run as its caller sees it: thrown with exceptions, a result with
// StopReason::error without.
inline GenerateResult error_result(ErrorInfo error) {
#if SMOL_HAS_EXCEPTIONS
    fail(error);
#else
    GenerateResult result;
    result.stop_reason = StopReason::error;
    result.error = std::move(error.message);
    result.error_kind = error.kind;
    return result;
#endif
}
}  // namespace detail

// Receives each new piece of text (whole UTF-8); return false to stop.
using TokenCallback = std::function<bool(std::string_view piece)>;

SMOL_NAMESPACE_END
