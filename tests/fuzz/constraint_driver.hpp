// Shared by fuzz_grammar and fuzz_json_schema: drives a compiled grammar the
// way the decode step (generation/decode_step.hpp) does (TokenConstraint::
// apply over the real 128k vocabulary of tiny-q4km.gguf, then accept of an
// allowed token), with the tokens picked by the input's choice bytes.
// Must hold: every error is typed (resource naming a MatcherLimits bound, or
// invalid_argument "no token can continue"), an allowed token is always
// accepted, a live state can end or continue, and after an error a reset
// constraint works again. Needs SMOL_FIXTURES (tools/fuzz.sh sets it).
#pragma once

#include <smol/constrain/constraint.hpp>
#include <smol/text/tokenizer.hpp>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fuzz_constraint {

inline std::shared_ptr<const smol::TokenVocabulary> vocabulary() {
    static std::shared_ptr<const smol::TokenVocabulary> vocab = [] {
        const char* dir = std::getenv("SMOL_FIXTURES");
        const std::string path = std::string(dir ? dir : "../shared/fixtures") + "/tiny-q4km.gguf";
        smol::Tokenizer tokenizer(smol::gguf::File::open(path));
        return std::make_shared<const smol::TokenVocabulary>(tokenizer);
    }();
    return vocab;
}

// Limits small enough for a fuzzer's time and memory budget (ASan included).
inline smol::MatcherLimits limits() {
    smol::MatcherLimits l;
    l.soft_states = 256;
    l.hard_states = 8192;
    l.max_tops = 256;
    l.max_nodes = size_t(1) << 16;
    l.max_top_entries = size_t(1) << 17;
    l.max_transitions = size_t(1) << 20;
    l.max_step_work = size_t(1) << 16;
    return l;
}

inline bool typed_limit(const smol::ErrorInfo& e) {
    return e.kind == smol::ErrorKind::resource &&
           e.message.find("MatcherLimits::") != std::string::npos;
}

// Up to `max_steps` tokens; choice bytes pick among the allowed tokens.
inline void drive(const smol::Grammar& grammar, std::string_view choices, size_t max_steps) {
    auto masker = std::make_shared<smol::TokenMasker>(
        std::make_shared<const smol::Grammar>(grammar), vocabulary(), limits());
    const smol::GrammarMatcher& m = masker->matcher();
    if (masker->start() < 0) {
        if (masker->start() != smol::GrammarMatcher::kOverflow || !m.overflowed()) __builtin_trap();
        return;
    }
    smol::TokenConstraint constraint(masker);
    const size_t n_vocab = vocabulary()->n_vocab();
    std::vector<float> logits(n_vocab);
    std::vector<int32_t> allowed;
    bool recovered = false;
    for (size_t step = 0, c = 0; step < max_steps; ++step) {
        std::fill(logits.begin(), logits.end(), 0.0f);
        const smol::Status applied = constraint.apply(logits.data(), n_vocab);
        if (m.work_done() > limits().max_step_work) __builtin_trap();
        if (!applied) {
            const smol::ErrorInfo& e = applied.error();
            const bool stuck = e.kind == smol::ErrorKind::invalid_argument &&
                               e.message.find("no token") != std::string::npos;
            if (!typed_limit(e) && !stuck) __builtin_trap();
            if (recovered || stuck) return;
            // As the generator's next run would: reset, and go on from the start.
            constraint.reset();
            if (m.overflowed()) __builtin_trap();
            recovered = true;
            continue;
        }
        allowed.clear();
        for (size_t id = 0; id < n_vocab; ++id)
            if (!std::isinf(logits[id])) allowed.push_back(int32_t(id));
        if (allowed.empty()) __builtin_trap();  // apply() reports that case itself
        size_t pick = 0;
        for (int k = 0; k < 3; ++k)
            pick = pick * 256 + (c < choices.size() ? uint8_t(choices[c++]) : 0);
        const int32_t token = allowed[pick % allowed.size()];
        const smol::Status accepted = constraint.accept(token);
        if (!accepted) {
            if (!typed_limit(accepted.error())) __builtin_trap();  // an allowed token
            return;
        }
        bool eog = false;
        for (int32_t id : vocabulary()->end_of_generation()) eog = eog || id == token;
        if (eog || constraint.finished()) return;
    }
}

}  // namespace fuzz_constraint
