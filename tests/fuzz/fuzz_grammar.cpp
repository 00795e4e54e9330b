// libFuzzer target for the constraint engine's text inputs: the GBNF parser
// (constrain/grammar.hpp), the JSON Schema converter (constrain/json_schema.hpp)
// and the matcher (constrain/matcher.hpp) they feed, up to decoding.
//   byte 0: bit 0 picks the input kind (0 grammar text, 1 JSON Schema text)
//   rest:   the text, then optionally a 0x00 byte and probe bytes that are fed
//           to a matcher of the compiled grammar one by one, and that then
//           pick the tokens of up to 12 decoding steps (constraint_driver.hpp:
//           masks over the real vocabulary, accept, recovery after a limit)
// Must hold: no crash, hang or unbounded memory; a schema the converter
// accepts gives grammar text with no syntax error (the grammar checks may
// still reject it: a $ref cycle can be left recursive or have no finite
// document); a matcher state is live exactly when it can end or continue, and
// its saturated form (GrammarMatcher::saturated) takes the same next byte.
#include <smol/constrain/json_schema.hpp>
#include <smol/constrain/matcher.hpp>

#include "constraint_driver.hpp"

#include <memory>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const bool schema = data[0] & 1;
    const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    const size_t split = body.find('\0');
    const std::string_view text = body.substr(0, split);
    const std::string_view probe =
        split == std::string_view::npos ? std::string_view() : body.substr(split + 1);

    // Bounds small enough for a fuzzer's time and memory limits.
    smol::GrammarLimits limits;
    limits.max_positions = size_t(1) << 16;
    limits.max_repeat = 10000;  // the converter's own cap on counts
    std::string grammar_text(text);
    if (schema) {
        smol::JsonSchemaOptions options;
        options.max_indent = 2;
        auto converted = smol::try_json_schema_to_grammar(text, options);
        if (!converted) return 0;
        grammar_text = std::move(converted).value();
    }
    auto grammar = smol::Grammar::try_parse(grammar_text, limits);
    if (!grammar) {
        const std::string& message = grammar.error().message;
        // The converter must never write a grammar with a syntax error.
        if (schema && message.find(" at line ") != std::string::npos) __builtin_trap();
        return 0;
    }
    smol::MatcherLimits matcher_limits;
    matcher_limits.soft_states = 64;
    matcher_limits.hard_states = 4096;
    matcher_limits.max_tops = 256;
    matcher_limits.max_nodes = size_t(1) << 16;
    matcher_limits.max_step_work = size_t(1) << 16;
    fuzz_constraint::drive(grammar.value(), probe, 12);
    smol::GrammarMatcher matcher(std::make_shared<const smol::Grammar>(std::move(grammar).value()),
                                 matcher_limits);
    int32_t state = matcher.start();
    if (state < 0) return 0;  // overflowed at the start: drive() checked it
    for (char c : probe) {
        const int32_t next = matcher.step(state, static_cast<uint8_t>(c));
        if (next == smol::GrammarMatcher::kOverflow) break;
        if (next < 0) continue;  // rejected: try the next byte from the same state
        state = next;
        if (!matcher.can_end(state) && !matcher.can_continue(state)) __builtin_trap();
        // The saturated state (masks share it) accepts the same short strings:
        // here, the next probe byte at least.
        const int32_t shared = matcher.saturated(state, 4);
        if (shared == smol::GrammarMatcher::kOverflow) break;
        if (shared < 0) __builtin_trap();
        const size_t at = size_t(&c - probe.data()) + 1;
        if (at < probe.size()) {
            const uint8_t b = static_cast<uint8_t>(probe[at]);
            const int32_t a1 = matcher.step(state, b), a2 = matcher.step(shared, b);
            if (a1 == smol::GrammarMatcher::kOverflow || a2 == smol::GrammarMatcher::kOverflow)
                break;
            if ((a1 >= 0) != (a2 >= 0)) __builtin_trap();
        }
        if (matcher.needs_compaction()) matcher.compact({&state});
    }
    return 0;
}
