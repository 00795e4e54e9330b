// Grammar: a context-free grammar in a GBNF-like text syntax, compiled to a
// byte-level form that the matcher (constrain/matcher.hpp) runs.
//
// Syntax (llama.cpp's GBNF, with rules free to span lines):
//   root   ::= "{" ws pair ("," ws pair)* "}"     # the start rule is `root`
//   pair   ::= key ws ":" ws [0-9]{1,3}
//   key    ::= "\"" [a-z_]+ "\""
//   ws     ::= [ \t\n]{0,4}
//   - a rule is `name ::= alternatives`; names are [a-zA-Z0-9_-]+; a rule ends
//     where the next `name ::=` starts; `#` starts a comment to the end of line;
//   - "literal" and [class] / [^negated class] (ranges a-z) in code points, with
//     escapes \n \r \t \\ \" \' \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH; `.` is any
//     code point; ( grouping ), alternatives |, postfix * + ? {n} {n,} {n,m}
//     {,m}; a rule may refer to any rule, itself included, except on the left:
//     a rule that can reach itself before consuming a byte (left recursion) is
//     an error, so matching always terminates.
//
// Why bytes: tokens are byte strings that may end inside a UTF-8 character.
// Compiling every literal and class to UTF-8 byte sequences makes a token that
// splits a character an ordinary prefix, and masks need no UTF-8 special case.
// Repetition becomes right recursion (x* is r ::= x r | empty), which the
// matcher runs as a tail call, so a long repetition never deepens its stack.
//
// Checks at compile time (smol::Error(invalid_argument) naming the line and
// column, or the rule): syntax, undefined rules, a missing root, left
// recursion, and a grammar that can match no complete text. Alternatives that
// can never complete are removed, so a matcher never walks into a dead end
// that only max_tokens could end.
//
// Alternatives that start alike are left-factored into a trie (a | ab | ac
// becomes a (empty | b | c)), so an alternation of many literals (a 50,000
// value enum) keeps one parse per shared prefix instead of one per literal:
// the matcher's ambiguity bound (MatcherLimits::max_tops) counts parses.
//
// Bounds (GrammarLimits, each error naming its limit): the grammar as
// written has at most max_positions elements (ErrorKind::resource past it:
// literal bytes, rule references, one end per alternative and 4 per optional
// repetition count, so x{0,m} costs 4m plus x once: counts nested inside
// counts add, they never multiply), and the compiled one at most twice that
// (the factoring below copies at most as many again); groups nest at most max_nesting deep and
// every count is at most max_repeat (invalid_argument at the line and column). Compiling takes time
// O(text + positions * log(positions)) and memory O(text + positions) whatever the nesting, width
// or counts: every pass (factoring, pruning, the nullable and left-recursion checks) is a worklist
// or a sort, never a fixpoint iterated per rule.
// The parts: constrain/compiled_grammar.hpp (Grammar, ByteSet, GrammarLimits:
// the data model), constrain/grammar_compiler.hpp (GrammarCompiler, text ->
// Grammar), whose two halves are constrain/detail/gbnf_parser.hpp (the GBNF
// parser) and constrain/detail/grammar_passes.hpp (pruning, factoring, checks,
// flattening). Include this header.
#pragma once

#include "../detail/abi.hpp"

#include <string_view>

#include "../error.hpp"
#include "compiled_grammar.hpp"
#include "detail/gbnf_parser.hpp"
#include "detail/grammar_passes.hpp"
#include "grammar_compiler.hpp"

SMOL_NAMESPACE_BEGIN

inline Expected<Grammar> Grammar::try_parse(std::string_view text, const GrammarLimits& limits) {
    return GrammarCompiler(text, limits).run();
}

SMOL_NAMESPACE_END