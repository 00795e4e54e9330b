// The sampling state a session keeps between runs: the structured-output
// constraint compiled for the last run (GenerateParams::grammar, json_schema,
// constrain_tool_calls: its grammar, matcher and warm mask caches) and DRY's
// sequence breakers mapped to token sequences (GenerateParams::
// dry_sequence_breakers).
//
// Why a session keeps them: both cost far more than a decode step to build (a
// grammar compile, then masks over the vocabulary's token trie; a pass over
// every token's text for the breakers), and a program tends to ask for the
// same schema or the same breakers run after run. So the session keeps the
// last one of each, keyed by what built it, and a run that asks for the same
// reuses it warm; a different one replaces it. prepare() attaches both to a
// run's Sampler: the sampler masks with the constraint inside its chain
// (after the logits hook, before top-k: sampling/sampler.hpp), and the
// decode step (generation/decode_step.hpp) feeds the constraint each token.
//
// A fork shares the vocabulary's trie (read only) and nothing else: a
// masker's caches are written by the runs that use it.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../constrain/constraint.hpp"
#include "../error.hpp"
#include "../sampling/sampler.hpp"
#include "../text/tokenizer.hpp"
#include "params.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

// The last compiled constraint, with the vocabulary's token trie it masks over.
class ConstraintCache {
public:
    // The run's constraint, or null when params ask for none. The compiled
    // grammar and its masks are kept for the next run with the same text and
    // options (the key below names both).
    Expected<std::unique_ptr<TokenConstraint>> make(const GenerateParams& params,
                                                    const Tokenizer& tokenizer) {
        const JsonSchemaOptions& o = params.json_schema_options;
        const std::string options =
            std::to_string(o.max_indent) + "," + std::to_string(o.max_integer_digits) + "," +
            std::to_string(o.max_fraction_digits) + "," + std::to_string(o.max_exponent_digits) +
            "," + std::to_string(o.max_any_depth) + ":";
        std::string key;
        if (!params.grammar.empty()) {
            key = "grammar:" + params.grammar;
        } else if (!params.json_schema.empty()) {
            key = "schema:" + options + params.json_schema;
        } else if (params.constrain_tool_calls) {
            key = "tools:" + options;
            for (const ToolDefinition& tool : params.chat.tools)
                key += std::to_string(tool.name.size()) + ":" + tool.name +
                       std::to_string(tool.parameters.size()) + ":" + tool.parameters;
        } else {
            return std::unique_ptr<TokenConstraint>();
        }
        if (!masker_ || key_ != key) {
            masker_.reset();
            std::string text;
            int32_t trigger = -1, end = -1;
            if (!params.grammar.empty()) {
                text = params.grammar;
            } else if (!params.json_schema.empty()) {
                SMOL_TRY_ASSIGN(text, try_json_schema_to_grammar(params.json_schema, o));
            } else {
                SMOL_TRY_ASSIGN(text, try_tool_call_grammar(params.chat.tools, o));
                const std::optional<int32_t> open = tokenizer.token_id("<tool_call>");
                const std::optional<int32_t> close = tokenizer.token_id("</tool_call>");
                if (!open || !close)
                    return ErrorInfo{ErrorKind::invalid_argument,
                                     "constrain_tool_calls: the vocabulary has no <tool_call> and "
                                     "</tool_call> tokens"};
                trigger = *open;
                end = *close;
            }
            SMOL_TRY_ASSIGN(Grammar grammar, Grammar::try_parse(text));
            if (!vocabulary_) vocabulary_ = std::make_shared<const TokenVocabulary>(tokenizer);
            auto masker = std::make_shared<TokenMasker>(
                std::make_shared<const Grammar>(std::move(grammar)), vocabulary_);
            // A start state past a MatcherLimits bound (e.g. 10,000 parses at
            // once) is refused before any token, and not kept.
            if (masker->start() < 0)
                return ErrorInfo{ErrorKind::resource,
                                 "constraint: the grammar needs too much to follow: " +
                                     masker->matcher().overflow_message()};
            masker_ = std::move(masker);
            key_ = std::move(key);
            trigger_ = trigger;
            end_ = end;
        }
        return std::make_unique<TokenConstraint>(masker_, trigger_, end_);
    }

    // A fork's cache: the trie (built on the first constrained run) is shared.
    ConstraintCache fork() const {
        ConstraintCache out;
        out.vocabulary_ = vocabulary_;
        return out;
    }

private:
    std::shared_ptr<const TokenVocabulary> vocabulary_;  // built once per session
    std::string key_;                                    // what masker_ was compiled from
    std::shared_ptr<TokenMasker> masker_;                // null until a constrained run
    int32_t trigger_ = -1, end_ = -1;                    // tool calls' shape; -1: whole text
};

// DRY's breaker strings as a token table, kept for the next run with the same strings.
class DryBreakerCache {
public:
    // Built on the vocabulary once per distinct list (a pass over every token's text).
    Expected<std::shared_ptr<const DryBreakers>> get(const std::vector<std::string>& strings,
                                                     const Tokenizer& tokenizer) {
        if (!table_ || strings_ != strings) {
            SMOL_TRY_ASSIGN(DryBreakers table,
                            DryBreakers::build(
                                tokenizer.vocab_size(),
                                [&](int32_t id, std::string& out) {
                                    out.clear();
                                    tokenizer.append_piece(id, out);
                                },
                                [&](std::string_view text, std::vector<int32_t>& out) {
                                    return tokenizer.try_encode(text, /*parse_special=*/false, out);
                                },
                                strings));
            table_ = std::make_shared<const DryBreakers>(std::move(table));
            strings_ = strings;
        }
        return table_;
    }

private:
    std::vector<std::string> strings_;
    std::shared_ptr<const DryBreakers> table_;
};

// Both, as a session holds them.
struct SamplingState {
    ConstraintCache constraint;
    DryBreakerCache dry;

    // Readies a run's sampler (made from params, which run_inputs_status
    // checked): DRY's breakers when DRY is on, and the constraint's mask.
    // Returns the constraint (null: none), which the run owns and the decode
    // step feeds each emitted token; the sampler refers to it, so it must
    // outlive the sampler's use.
    Expected<std::unique_ptr<TokenConstraint>> prepare(Sampler& sampler,
                                                       const GenerateParams& params,
                                                       const Tokenizer& tokenizer) {
        if (Sampler::dry_active(params) && !params.dry_sequence_breakers.empty()) {
            SMOL_TRY_ASSIGN(std::shared_ptr<const DryBreakers> breakers,
                            dry.get(params.dry_sequence_breakers, tokenizer));
            sampler.set_dry_breakers(std::move(breakers));
        }
        SMOL_TRY_ASSIGN(std::unique_ptr<TokenConstraint> made, constraint.make(params, tokenizer));
        if (made) {
            sampler.set_constraint([c = made.get()](float* logits, size_t n_vocab) {
                return c->apply(logits, n_vocab);
            });
        }
        return Expected<std::unique_ptr<TokenConstraint>>(std::move(made));
    }

    // A fork's state (see the top of this file).
    SamplingState fork() const {
        SamplingState out;
        out.constraint = constraint.fork();
        return out;
    }
};

}  // namespace detail

SMOL_NAMESPACE_END
