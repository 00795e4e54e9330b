/* smol_params.h: the C ABI's per-call structs (smol_params, smol_tool,
 * smol_logit_bias, smol_message, smol_result) and the parity table that maps
 * every field of the C++ option and result structs to its C counterpart,
 * with the checklist for adding a C ABI call. Part of smol.h, which includes
 * it where these structs belong (after the handles and callbacks they use);
 * including this file alone includes smol.h. The rules at the top of smol.h
 * (errors, NULL, ownership, threading, the size field) hold here. */

#ifndef SMOL_H
#include "smol.h" /* which includes this file where the structs belong */
#endif

#ifndef SMOL_PARAMS_H
#define SMOL_PARAMS_H

/* ------------------------------------------------------------ parameters */

/* A (token id, added to its logit) pair. */
typedef struct smol_logit_bias {
    int32_t token;
    float bias;
} smol_logit_bias;

/* A tool the model may call: parameters is a JSON Schema object as text
 * (NULL: {"type": "object", "properties": {}}); description may be NULL (none);
 * name may not. */
typedef struct smol_tool {
    const char* name;
    const char* description; /* may be NULL */
    const char* parameters;
} smol_tool;

/* The arrays (logit_bias, stop, tools, ...) come with their counts: a negative
 * count, or a NULL array with a positive count, is SMOL_ERR_INVALID_ARGUMENT
 * (a NULL array with count 0 is none), as is a NULL stop string. */
typedef struct smol_params {
    uint64_t size; /* sizeof(smol_params) */
    /* Sampling (C++ SamplingParams, same defaults). */
    double temperature; /* 0.8; <= 0: greedy */
    int64_t top_k;      /* 40; <= 0: off */
    double top_p;       /* 0.95; >= 1: off */
    double min_p;       /* 0.05; <= 0: off */
    double repeat_penalty;
    double presence_penalty;
    double frequency_penalty;
    int64_t penalty_last_n; /* 64 */
    uint64_t seed;
    const smol_logit_bias* logit_bias;
    int64_t n_logit_bias;
    smol_logits_fn logits_hook; /* may be NULL */
    void* logits_hook_user_data;
    /* Stopping. */
    int64_t max_tokens;      /* 256; < 0: until end or full context; 0: prefill only */
    const char* const* stop; /* n_stop stop strings (UTF-8) */
    int64_t n_stop;
    int64_t ignore_eos;     /* 0 */
    int64_t prompt_as_text; /* 0: smol_generate parses control tokens written in the prompt */
    /* How smol_chat renders the conversation (C++ ChatOptions). */
    int64_t add_generation_prompt; /* 1 */
    int64_t enable_thinking;       /* -1 (default): the template's own default (think) */
    const char* today;             /* NULL: today's date */
    const smol_tool* tools;
    int64_t n_tools;
    int64_t parse_special_in_content; /* 0: message contents are always text */
    /* Structured output: at most one of grammar, json_schema, constrain_tool_calls. */
    const char* grammar;     /* GBNF text, or NULL */
    const char* json_schema; /* JSON Schema text, or NULL */
    int64_t json_max_indent; /* the C++ JsonSchemaOptions, same defaults */
    int64_t json_max_integer_digits;
    int64_t json_max_fraction_digits;
    int64_t json_max_exponent_digits;
    int64_t json_max_any_depth;
    int64_t constrain_tool_calls; /* 0 */
    /* DRY, the repetition penalty on extended repeats (C++ SamplingParams). */
    double dry_multiplier;      /* 0: off; must be >= 0 */
    double dry_base;            /* 1.75; < 1: off */
    int64_t dry_allowed_length; /* 2: repeats this long go unpenalized; >= 1 */
    int64_t dry_penalty_last_n; /* -1: the whole history; 0: off */
    /* Strings that end a repeat: smol_params_init points this at the C++
     * defaults ("\n", ":", "\"", "*"; a static array, never freed); a count of
     * 0 is none. A NULL string is SMOL_ERR_INVALID_ARGUMENT. */
    const char* const* dry_sequence_breakers;
    int64_t n_dry_sequence_breakers;
    /* XTC: with this probability, drop the likeliest tokens above threshold. */
    double xtc_probability; /* 0: off; in [0, 1] */
    double xtc_threshold;   /* 0.1; > 0.5: off */
    /* Lookup decoding (C++ LookupParams, generation/lookup.hpp): drafts from
     * the context, checked k at a time; the same tokens as plain decoding. */
    int64_t lookup;           /* -1: automatic (the default: on where it never
                                 loses), 0: off, 1: on */
    int64_t lookup_k;         /* drafted tokens per step, 1..16; 4 */
    int64_t lookup_max_ngram; /* longest suffix looked up, 1..16; 3 */
    /* The chat template's raw xml_tools (each inserted verbatim inside
     * <tools></tools>; ignored when tools are given) and python_tools (the
     * "<code>" section's descriptions). */
    const char* const* xml_tools;
    int64_t n_xml_tools;
    const char* const* python_tools;
    int64_t n_python_tools;
} smol_params;

/* As smol_load_options_init_sized, for smol_params. */
SMOL_API smol_status smol_params_init_sized(smol_params* params, size_t size) SMOL_NOEXCEPT;
SMOL_INLINE void smol_params_init(smol_params* params) SMOL_NOEXCEPT {
    if (params) (void)smol_params_init_sized(params, sizeof *params);
}

/* One chat message. An array element, so no size field: this layout is fixed. */
typedef struct smol_message {
    const char* role;     /* "system", "user", "assistant" or "tool"; not NULL */
    const char* content;  /* UTF-8; not NULL */
    int64_t model_output; /* nonzero: an assistant reply verbatim (see C++ ChatMessage) */
} smol_message;

/* ------------------------------------------------------------ results */

/* Owned by the library; release with smol_result_free. Its size field tells
 * a caller compiled against a newer header which fields exist. */
typedef struct smol_result {
    uint64_t size;
    const char* text; /* everything emitted (never a matched stop string) */
    uint64_t text_length;
    const char* reasoning; /* the <think> part, without the tags */
    uint64_t reasoning_length;
    const char* answer; /* text without the reasoning */
    uint64_t answer_length;
    /* Each <tool_call> in text, when tools were declared, as a JSON array:
     * [{"name": ..., "arguments": {...} or null, "text": ..., "error": ...}] */
    const char* tool_calls_json;
    const char* matched_stop; /* "" unless stop_reason is SMOL_STOP_STRING */
    const int32_t* tokens;    /* generated ids, a final end-of-generation id included */
    uint64_t n_tokens;
    int64_t stop_reason;      /* smol_stop_reason */
    uint64_t n_prompt_tokens; /* tokens of the prompt or rendered conversation */
    uint64_t n_reused_tokens; /* of those, already in the KV cache */
    double prefill_ms;        /* prefilled: n_prompt - n_reused - n_prompt_discarded tokens */
    double decode_ms;
    /* SMOL_CONTEXT_SHIFT: tokens this call left out of the context or erased
     * from it, from the prompt or mid-run; and the prompt's share of them
     * (prompt tokens the model never saw in this call). 0 otherwise. */
    uint64_t n_discarded_tokens;
    uint64_t n_prompt_discarded_tokens;
    /* Forward passes after the prefill, and the tokens they ran beyond each
     * step's first (lookup decoding's drafts, or the tokens a grammar or
     * schema forces) and how many were accepted. */
    uint64_t n_decode_steps;
    uint64_t n_drafted_tokens;
    uint64_t n_accepted_drafts;
} smol_result;

SMOL_API void smol_result_free(smol_result* result) SMOL_NOEXCEPT;

/* ------------------------------------------------------------ parity table
 *
 * Where C has each field of the C++ API's option and result structs (the
 * C++ documentation of a field holds for its C counterpart). C++17 cannot
 * list a struct's fields, so tests/test_surface.cpp reads them from the C++
 * headers' text and checks this table both ways: a C++ field that is in no
 * row, a row naming a C++ field, C field or C function that does not exist,
 * and a field of a C struct below that no row names (its size aside) each
 * fail the test. A new C++ field thus needs its C counterpart (the checklist
 * "Adding a C ABI call" at the end of this header), or a row saying why not.
 *
 * A row: "Struct::field", then one of
 *   smol_struct.field or smol_function()   the C counterparts (one or more);
 *   nested Struct                           the field is a struct whose own
 *                                           rows follow (Struct's);
 *   exempt: why                             deliberately not in the C ABI;
 *   not yet: why                            a known gap, reported by the test
 *                                           (not a failure) until it is closed.
 * Lines indented past a row continue it.
 *
 * parity-table-begin
 *   LoadOptions::n_threads                  smol_load_options.n_threads
 *   LoadOptions::cpu                        smol_load_options.cpu
 *   LoadOptions::memory_budget              smol_load_options.memory_budget
 *   LoadOptions::device                     smol_load_options.device
 *   LoadOptions::cuda_device                smol_load_options.cuda_device
 *   LoadOptions::device_backend             exempt: a C++ factory object
 *       (smol::cuda_backend() of the static library smol::cuda); a C caller
 *       picks the backend with device, and the shared library brings the
 *       backends it was built with.
 *   LoadOptions::interleave_weights         smol_load_options.interleave_weights
 *   LoadOptions::tune                       smol_load_options.tune
 *   LoadOptions::kernel_params              smol_load_options.pin_kernel_params
 *   LoadOptions::tune_file                  smol_load_options.tune_file
 *   LoadOptions::progress                   smol_load_options.progress
 *                                           smol_load_options.progress_user_data
 *   LoadOptions::log                        smol_load_options.log smol_load_options.log_user_data
 *   KernelParams::pace_steps                smol_load_options.kernel_pace_steps
 *   KernelParams::interleaved_prefetch      smol_load_options.kernel_interleaved_prefetch
 *   KernelParams::stored_prefetch           smol_load_options.kernel_stored_prefetch
 *   KernelParams::decode_chunks             smol_load_options.kernel_decode_chunks
 *   KernelParams::codebook_gathers          smol_load_options.kernel_codebook_gathers
 *
 *   GeneratorOptions::n_ctx                 smol_generator_options.n_ctx
 *   GeneratorOptions::kv_type               smol_generator_options.kv_type
 *   GeneratorOptions::prefill_chunk         smol_generator_options.prefill_chunk
 *   GeneratorOptions::log                   smol_generator_options.log
 *                                           smol_generator_options.log_user_data
 *   GeneratorOptions::on_worker_start       smol_generator_options.on_worker_start
 *                                           smol_generator_options.worker_start_user_data
 *   GeneratorOptions::batcher               smol_generator_options.batcher
 *   GeneratorOptions::context_policy        smol_generator_options.context_policy
 *   GeneratorOptions::n_keep                smol_generator_options.n_keep
 *
 *   BatcherOptions::max_batch               smol_batcher_options.max_batch
 *   BatcherOptions::prefill_shared          smol_batcher_options.prefill_shared
 *   BatcherOptions::max_step_slowdown       smol_batcher_options.max_step_slowdown
 *   BatcherOptions::prefill_alone           smol_batcher_options.prefill_alone
 *   BatcherOptions::gather_ms               smol_batcher_options.gather_ms
 *   BatcherOptions::gather_fraction         smol_batcher_options.gather_fraction
 *
 *   SamplingParams::temperature             smol_params.temperature
 *   SamplingParams::top_k                   smol_params.top_k
 *   SamplingParams::top_p                   smol_params.top_p
 *   SamplingParams::min_p                   smol_params.min_p
 *   SamplingParams::repeat_penalty          smol_params.repeat_penalty
 *   SamplingParams::presence_penalty        smol_params.presence_penalty
 *   SamplingParams::frequency_penalty       smol_params.frequency_penalty
 *   SamplingParams::penalty_last_n          smol_params.penalty_last_n
 *   SamplingParams::dry_multiplier          smol_params.dry_multiplier
 *   SamplingParams::dry_base                smol_params.dry_base
 *   SamplingParams::dry_allowed_length      smol_params.dry_allowed_length
 *   SamplingParams::dry_penalty_last_n      smol_params.dry_penalty_last_n
 *   SamplingParams::dry_sequence_breakers   smol_params.dry_sequence_breakers
 *                                           smol_params.n_dry_sequence_breakers
 *   SamplingParams::xtc_probability         smol_params.xtc_probability
 *   SamplingParams::xtc_threshold           smol_params.xtc_threshold
 *   SamplingParams::seed                    smol_params.seed
 *   SamplingParams::logit_bias              smol_params.logit_bias smol_params.n_logit_bias
 *                                           smol_logit_bias.token smol_logit_bias.bias
 *   SamplingParams::logits_hook             smol_params.logits_hook
 *                                           smol_params.logits_hook_user_data
 *
 *   GenerateParams::max_tokens              smol_params.max_tokens
 *   GenerateParams::stop                    smol_params.stop smol_params.n_stop
 *   GenerateParams::ignore_eos              smol_params.ignore_eos
 *   GenerateParams::chat                    nested ChatTemplateOptions
 *   GenerateParams::prompt_as_text          smol_params.prompt_as_text
 *   GenerateParams::grammar                 smol_params.grammar
 *   GenerateParams::json_schema             smol_params.json_schema
 *   GenerateParams::json_schema_options     nested JsonSchemaOptions
 *   GenerateParams::constrain_tool_calls    smol_params.constrain_tool_calls
 *   GenerateParams::lookup                  nested LookupParams
 *   LookupParams::mode                      smol_params.lookup
 *   LookupParams::k                         smol_params.lookup_k
 *   LookupParams::max_ngram                 smol_params.lookup_max_ngram
 *   LookupParams::draft_hook                exempt: a test and benchmark hook
 *       that replaces the n-gram lookup (to force drafts accepted or
 *       rejected); nothing a program needs, and the C++ tests cover it.
 *   JsonSchemaOptions::max_indent           smol_params.json_max_indent
 *   JsonSchemaOptions::max_integer_digits   smol_params.json_max_integer_digits
 *   JsonSchemaOptions::max_fraction_digits  smol_params.json_max_fraction_digits
 *   JsonSchemaOptions::max_exponent_digits  smol_params.json_max_exponent_digits
 *   JsonSchemaOptions::max_any_depth        smol_params.json_max_any_depth
 *   ChatTemplateOptions::add_generation_prompt smol_params.add_generation_prompt
 *   ChatTemplateOptions::enable_thinking    smol_params.enable_thinking
 *   ChatTemplateOptions::today              smol_params.today
 *   ChatTemplateOptions::tools              smol_params.tools smol_params.n_tools
 *   ChatTemplateOptions::xml_tools          smol_params.xml_tools smol_params.n_xml_tools
 *   ChatTemplateOptions::python_tools       smol_params.python_tools smol_params.n_python_tools
 *   ChatTemplateOptions::parse_special_in_content smol_params.parse_special_in_content
 *   ToolDefinition::name                    smol_tool.name
 *   ToolDefinition::description             smol_tool.description
 *   ToolDefinition::parameters              smol_tool.parameters
 *   ChatMessage::role                       smol_message.role
 *   ChatMessage::content                    smol_message.content
 *   ChatMessage::model_output               smol_message.model_output
 *
 *   GenerateResult::text                    smol_result.text smol_result.text_length
 *   GenerateResult::reasoning               smol_result.reasoning smol_result.reasoning_length
 *   GenerateResult::answer                  smol_result.answer smol_result.answer_length
 *   GenerateResult::tokens                  smol_result.tokens smol_result.n_tokens
 *   GenerateResult::stop_reason             smol_result.stop_reason
 *   GenerateResult::matched_stop            smol_result.matched_stop
 *   GenerateResult::tool_calls              smol_result.tool_calls_json
 *   GenerateResult::n_prompt_tokens         smol_result.n_prompt_tokens
 *   GenerateResult::n_reused_tokens         smol_result.n_reused_tokens
 *   GenerateResult::n_discarded_tokens      smol_result.n_discarded_tokens
 *   GenerateResult::n_prompt_discarded_tokens smol_result.n_prompt_discarded_tokens
 *   GenerateResult::prefill_ms              smol_result.prefill_ms
 *   GenerateResult::decode_ms               smol_result.decode_ms
 *   GenerateResult::n_decode_steps          smol_result.n_decode_steps
 *   GenerateResult::n_drafted_tokens        smol_result.n_drafted_tokens
 *   GenerateResult::n_accepted_drafts       smol_result.n_accepted_drafts
 *   GenerateResult::error                   exempt: only in builds without
 *       exceptions; the C ABI reports a failed run as NULL with
 *       smol_last_error_message().
 *   GenerateResult::error_kind              exempt: as error; smol_last_error().
 * parity-table-end
 *
 * Adding a C ABI call (or a field; the whole checklist):
 *   1. include/smol/smol.h        the declaration with its contract (NULL
 *      handling, ownership, errors, threading; the per-call structs in this
 *      file); a field is appended to its struct, 64 bits wide, never inserted
 *      or reordered (the size rule at the top of smol.h); a C++ field's row
 *      in the parity table above
 *   2. src/smol_c.cpp             the definition: noexcept, through guarded();
 *      a struct read with read_sized(); its default in the struct's
 *      default_*() filler taken from the C++ struct's own; the size
 *      static_assert updated. A new option struct: its exported
 *      smol_*_init_sized (through init_sized(), writing at the caller's size)
 *      and the inline smol_*_init in the header that passes sizeof *options; the
 *      _sized name in tests/c_abi/check_symbols.cmake
 *   3. bindings/python/smol/_native.py   the ctypes field or the entry in
 *      declare(); bindings/python/smol/__init__.py   the keyword argument,
 *      method or property, with type hints and a docstring (structs filled
 *      by _init_struct, which passes ctypes.sizeof)
 *   4. bindings/csharp/Smol.cs    the Native struct field or [DllImport], and
 *      the public option, property or method (structs filled by the
 *      smol_*_init_sized calls with Marshal.SizeOf)
 *   5. tests: tests/c_abi/test_c_abi.c (the call, its errors, and an older
 *      caller's smaller struct; a new option struct's _sized init in
 *      test_init_sized), tests/c_abi/test_c_abi_parity.cpp (the same
 *      result as the C++ API), bindings/python/tests/test_smol.py, and
 *      bindings/csharp/Sample.cs; each a behaviour check that fails when the
 *      value does not arrive (tokens that change, a count, a text)
 *   6. CHANGELOG.md               the Unreleased section
 * test_surface (the parity table), test_c_abi, test_c_abi_parity,
 * c_abi_symbols, python_bindings and csharp_bindings must pass.
 */

#endif /* SMOL_PARAMS_H */
