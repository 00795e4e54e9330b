// smol: header-only SmolLM3 inference from GGUF files. Include this one header.
//
// The public API on one screen: what a program calls, and the header that says more.
//
//   Errors                                                                  error.hpp
//     smol::Error           the one exception type: kind() + what() naming the file, key, tensor
//     ErrorKind, ErrorInfo  the kinds; an error as a value
//     Status, Expected<T>   errors as values (how the try_* calls report, with or without
//     exceptions)
//   Loading a model                                                         model/model.hpp
//     Model::load(path, LoadOptions) -> std::shared_ptr<const Model>     immutable, share it freely
//     Model::try_load(path, LoadOptions) -> Expected<...>                the non-throwing form
//     LoadOptions           n_threads, device (cpu|cuda|automatic), device_backend (the GPU
//                           backend's factory: smol::cuda_backend() from <smol/cuda/backend.hpp>
//                           when the program links smol::cuda), cuda_device, cpu (force a
//                           kernel level), memory_budget, interleave_weights, tune (the
//                           kernels' self-tuning: automatic|on|off), kernel_params,
//                           tune_file, progress, log
//     model->tokenizer(), config(), identity(), cpu_level(), device(), tuning()
//   Generating text                                                  generation/generator.hpp
//     Generator(model, GeneratorOptions)     one per conversation: a KV cache + its history
//     generate(prompt, params, on_text) / chat(messages, params, on_text) -> GenerateResult
//       (a prompt's markers are control tokens; chat contents are always text)
//     generate_tokens(ids, params, on_text)  the same from token ids
//     prefill(prompt) / prefill_chat(messages)  fill the KV cache only (a shared prefix)
//     tokenize(prompt, params), tokenize_chat(messages, options), render_chat -> the ids / text
//     logits(), history(), n_cached(), n_ctx()  the state after the last step
//     generate_async / chat_async -> AsyncGeneration: poll(), done(), wait(), cancel()
//                                                                        generation/async.hpp
//     cancel(), reset(), fork(), save_session(), restore_session(), try_create()
//     erase(first, count)   drop history tokens and their cache entries (keys re-rotated)
//     GeneratorOptions      n_ctx, kv_type, context_policy (ContextPolicy::stop | shift: long
//                           conversations drop their oldest turns), n_keep, batcher, log
//     GenerateParams        SamplingParams (temperature, top_k, top_p, min_p, penalties, DRY,
//                           XTC, seed, logit_bias, logits_hook) + max_tokens, stop,
//                           ignore_eos, chat, prompt_as_text
//       structured output   grammar (GBNF, constrain/grammar.hpp), json_schema (JSON Schema,
//                           constrain/json_schema.hpp) + json_schema_options, or
//                           constrain_tool_calls (the declared tools' call shapes);
//                           tokens a constraint forces run as one chunk
//                           (jump-forward: the same output)      generation/jump_forward.hpp
//       lookup decoding     lookup (LookupParams: mode automatic|on|off, k, max_ngram,
//                           draft_hook): drafts from the context, verified k per
//                           step; by default on where it never loses
//                                                                       generation/lookup.hpp
//     GenerateResult        text, reasoning, answer, tokens, stop_reason, tool_calls (parsed
//                           <tool_call> blocks, text/tool_calls.hpp), token counts
//                           (n_reused_tokens, n_discarded_tokens, ...), timings
//                                                                       generation/params.hpp
//     ChatMessage{role, content}, ChatOptions (thinking, date, tools,  text/chat_template.hpp
//                           parse_special_in_content: trusted contents only)
//   Serving several conversations                                    generation/batcher.hpp
//     std::make_shared<Batcher>(model, BatcherOptions) in GeneratorOptions::batcher: the
//                           generators sharing it decode in one forward pass; stats()
//   What runs where                                                         build_info.hpp
//     build_info(), build_info_string(), CpuLevel (kernels/cpu.hpp), Device (model/backend.hpp)
//
// Below the API, for tools and tests, each layer using only those under it (include by path):
//   gguf/ quant/ core/   the file format (reader, writer), block layouts, (de)quantization, mmap
//   kernels/             quantized dot products per ISA, chosen at run time
//   model/               config, weights, KV cache, the SmolLM3 forward pass, the backend seam
//   text/ sampling/      tokenizer, detokenizer, chat template, sampler
//   constrain/           grammars, JSON Schema, token masks for structured output
//   generation/          the Generator and what it is made of
// Internals a program never names live in `detail` namespaces (and detail/ folders).
//
// Everything this header makes reachable outside `detail`: the namespace-scope
// types and functions of each header, then each public class with its public
// member functions and types (tests/test_surface.cpp fails when a header
// declares one this index does not name, or the index names one that is gone;
// SMOL_SURFACE_PRINT=1 ./build/tests/test_surface prints it afresh), by header:
//   error.hpp
//     ErrorKind, to_string, ErrorInfo, set_fatal_error_handler, try_call
//     Error: kind
//     Status: ok error take_error
//     Expected: ok value error take_error
//   build_info.hpp
//     BuildInfo, build_info, compiled_isas, build_info_string
//   model/model.hpp
//     LoadOptions, try_load_model
//     Model: try_load load try_load_from_memory load_from_memory config tokenizer file weights
//       network cpu_level kernels tuning identity thread_pool backend cpu_backend device
//       try_make_cache make_cache memory_budget try_forward forward
//   kernels/cpu.hpp
//     CpuLevel, cpu_level_name, parse_cpu_level, compiled_cpu_levels, cpu_supports, best_cpu_level,
//       supported_cpu_levels, try_resolve_cpu_level, resolve_cpu_level, try_requested_cpu_level,
//       requested_cpu_level
//   core/threadpool.hpp
//     ThreadPool: check_size size run run_dynamic parallel_for
//   gguf/gguf.hpp
//     File: try_open open try_from_buffer from_buffer try_from_bytes from_bytes source version
//       alignment bytes size data_offset mapping metadata tensors find_value has try_get get
//       try_find find find_tensor tensor
//   kernels/tune.hpp
//     TuneMode, tune_off_by_environment, requested_tune_mode, TuneTiming, TuneOptions,
//       tunes_stored_prefetch, tune_kernels, tune_key, TuneFileRead, read_tune_file,
//       write_tune_file
//     TuneReport: text
//   log.hpp
//     LogLevel, LogCallback
//   text/tokenizer.hpp
//     TokenType
//     Tokenizer: try_from_gguf from_gguf try_encode encode try_encode_prompt encode_prompt decode
//       token_to_piece append_piece vocab_size bos_id eos_id eot_id pad_id add_bos pre_type
//       end_of_generation_ids is_end_of_generation token_id token_text token_type is_control
//       is_special file detail_table_stats
//   model/backend.hpp
//     ForwardOptions, Segment, DeviceBackendFactory
//     Backend: device name vocab_size context_length max_chunk default_chunk batch_rows
//       try_make_cache make_cache try_erase erase try_forward forward
//   model/config.hpp
//     Config: q_dim kv_dim heads_per_kv layer_uses_rope try_from_gguf try_validate
//   model/kv_cache.hpp
//     KVCache: try_create fork clone memory type row_bytes bytes compatible set_size prepare_write
//       block_table block_shift stream_offset row store erase_positions load_row serialize
//       deserialize try_deserialize restore try_restore
//   model/smollm3.hpp
//     SmolLM3: try_create config weights file kernels use_kernels rope file_ptr interleave_weights
//       forward
//   model/weights.hpp
//     LayerWeights
//     Weights: try_bind embed
//   generation/async.hpp
//     AsyncGeneration: valid poll done wait cancel
//   generation/generator.hpp
//     Generator: try_create generate generate_tokens chat generate_async chat_async prefill
//       prefill_chat cancel reset fork erase try_erase save_session restore_session
//       try_restore_session model model_ptr n_ctx n_cached cache_memory history chat_format logits
//       tokenize tokenize_chat render_chat
//   generation/params.hpp
//     StopReason, to_string, ContextPolicy, GeneratorOptions, ChatOptions, GenerateParams,
//       TokenCallback
//     GenerateResult: n_prefilled_tokens prefill_tokens_per_s decode_tokens_per_s
//   core/mmap.hpp
//     MappedFile: try_open data size swap release_pages
//   quant/types.hpp
//     GGMLType, TypeTraits, type_traits, is_known_type, type_name, row_bytes, TypeList,
//       WeightTypes, visit_weight_type, for_each_weight_type, weight_type_index,
//       is_supported_weight_type, TypeTag, weight_type_names
//   gguf/value.hpp
//     ValueType, value_type_name, scalar_size, is_integer, KeyValue
//     ArrayView: element_type size data bytes try_strings strings try_to_vector to_vector try_at at
//     Value: type is_integer is_float as_i64 as_u64 negative as_f64 as_bool as_string as_array
//       make_unsigned make_signed make_float make_string make_array
//     TensorInfo: dim rows
//   quant/weight_matrix.hpp
//     interleaved_word_offset, can_interleave, interleave_rows, deinterleave_rows
//     WeightMatrix: row copy_row copy_stored interleaved_copy
//   kernels/dispatch.hpp
//     build_level_set, build_kernel_set, kernel_set, default_kernels
//   kernels/kernel_set.hpp
//     TileKernel, TileRow, tile_row_of, tile_row, WideTileRow, wide_tile_row_of, wide_tile_row,
//       TileSource, TypeKernels, KernelParams, candidate_index, valid_kernel_params,
//       kernel_params_text, decode_chunks_only, converted_tiles, tile, stored_row_bytes, copy_rows,
//       spec_tiles, spec_converted, make_kernel_set, complete_with_spec, kernel_table_text
//     PackedTiles: max_cols tile
//     KernelSet: of packing converts interleaves name
//   kernels/kernels.hpp
//     activation_type_for, make_weight_matrix, MatmulJob, dot_f32, rmsnorm, swiglu, softmax,
//       check_matmul_args, token_ranges, ChunkBuffers, multiply_rows, BatchPlan, plan_batch,
//       ChunkRows, chunk_rows, prefetch_chunk, run_batch, matmul_batch, matmul, matmul_reference
//     MatmulScratch: reserve_bytes
//     QuantizedInput: kernels quantize set_sequences sequences in_format_for type n_tokens cols
//       row_bytes row data kernel_row
//   text/prompt_text.hpp
//     TextRange
//     PromptText: append_markup append_content append
//   text/unicode.hpp
//     codepoint_flags, is_letter, is_number, is_whitespace, Utf8Char, decode_utf8, is_valid_utf8,
//       append_valid_utf8, split_llama3
//     SplitScratch: Char
//   model/backend_cache.hpp
//     KVType, kv_type_name, parse_kv_type, kv_row_bytes, KVPart, CacheMemory
//     BackendCache: size n_ctx n_layers n_kv_heads head_dim device truncate clear memory serialize
//       restore try_restore clone
//   model/device.hpp
//     Device, device_name, parse_device
//   core/fp16.hpp
//     fp16_to_fp32, fp32_to_fp16, bf16_to_fp32, fp32_to_bf16
//   quant/blocks.hpp
//     BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K, BlockQ8_0, BlockQ4_0, BlockQ4_1, BlockQ5_0,
//       BlockQ5_1, BlockIQ4NL, BlockQ2K, BlockQ3K, BlockIQ4XS, BlockIQ2XXS, BlockIQ2XS, BlockIQ2S,
//       BlockIQ3XXS, BlockIQ3S, BlockIQ1S, BlockIQ1M, load_u16, load_u32
//   quant/dequantize.hpp
//     dequantize_row_f32, dequantize_row_f16, dequantize_row_bf16, dequantize_row_q8_0,
//       dequantize_row_q8_k, dequantize_row_q4_k, dequantize_row_q5_k, dequantize_row_q6_k,
//       dequantize_row_q4_0, dequantize_row_q4_1, dequantize_row_q5_0, dequantize_row_q5_1,
//       dequantize_row_iq4_nl, dequantize_row_q2_k, dequantize_row_q3_k, dequantize_row_iq4_xs,
//       dequantize_row_codebook, RowCodec
//   quant/quantize.hpp
//     QuantizeEffort, quantize_row_f32, quantize_row_f16, quantize_row_bf16, quantize_row_q8_0,
//       quantize_row_q8_k, quantize_row_q4_k, quantize_row_q5_k, quantize_row_q6_k
//   model/rope.hpp
//     RopeRule: pairs frequency mscale encode shift
//   model/forward_zones.hpp
//     ForwardZone, forward_zone_name, ForwardZoneTimes, ForwardZoneRecorder
//   model/cpu_backend.hpp
//     CpuBackend: name network thread_pool
//   quant/reference.hpp
//     ReferenceTypes, can_quantize, can_dequantize, quantize_row, dequantize_row
//   constrain/constraint.hpp
//     try_tool_call_grammar
//     TokenConstraint: reset whole_text active finished apply forced_tokens accept overflow_error
//   sampling/sampler.hpp
//     SamplingParams, TokenProbability, apply_penalties, check_logit_bias, apply_dry,
//       apply_logit_bias, try_greedy_token, greedy_token
//     Sampler: create validate params set_params reseed dry_active set_dry_breakers set_constraint
//       try_sample sample distribution
//   text/chat_template.hpp
//     ChatMessage, ChatTemplateOptions, ChatFormat, ReasoningSplit, date_string, today_string,
//       try_render_smollm3_prompt, try_render_smollm3_chat, render_smollm3_chat,
//       render_chatml_prompt, render_chatml, detect_chat_format, try_render_chat_prompt,
//       try_render_chat, render_chat, split_reasoning
//   generation/batcher.hpp
//     BatcherOptions
//     Batcher: model options run join leave Membership Stats stats
//   generation/lookup.hpp
//     LookupMode, lookup_mode_name, parse_lookup_mode, LookupParams, find_lookup_drafts,
//       DraftVerdict, verify_draft
//   constrain/json_schema_options.hpp
//     JsonSchemaOptions
//   text/tool_calls.hpp
//     ToolDefinition, ToolCall, try_render_tool, parse_tool_calls
//   kernels/level_sets.hpp
//     build_level_set
//   kernels/activations.hpp
//     ActivationType, BlockQ8K32, activation_type_name, activation_block_size,
//       activation_row_bytes, q8k32_scale, dequantize_activation_row
//   kernels/scalar.hpp
//     quantize_row_q8_k32, quantize_row_q8_k_activations, quantize_row_q8_0, dot_k4_q8k32,
//       dot_q4k_q8k32, dot_q5k_q8k32, q6k_value, dot_q6k_q8k32, ConvertedBlock, fp16_round,
//       convert_k4_block, convert_q6k_block, converted_block_dot, dot_converted_q8k32,
//       dot_q8_0_q8_0, convert_legacy32_blocks, dot_legacy32_q8k32, legacy32_activation_sum
//     Legacy32: value
//   kernels/weight_types.hpp
//     ReferenceDot, WeightTraits, WeightTypeInfo, weight_type_info
//   kernels/matmul_plan.hpp
//     TokenRange, RowLayout, MatmulRun, MatrixShape, MatmulPlan, packing_of, plan_runs, chunk_rows,
//       plan_matmul, token_groups, token_group_size
//   quant/codebook.hpp
//     CodebookForm, decode_codebook, is_codebook_type
//   constrain/json_schema.hpp
//     try_json_schema_to_grammar, json_schema_to_grammar
//   constrain/token_mask.hpp
//     TokenVocabulary: TrieNode Trie n_vocab piece is_text end_of_generation short_tokens
//       long_tokens same_bytes_next
//     TokenMask: allows
//     TokenMasker: matcher vocabulary start advance mask recover maybe_compact n_cached_masks
//       n_short_masks
//   sampling/dry.hpp
//     DryBreakers: build size is_single_token tails longest_match_at
//   sampling/rng.hpp
//     Rng: reseed next_u64 next_unit
//   text/detokenizer.hpp
//     StreamDecoder: push finish reset pending_bytes
//   kernels/arm.hpp
//     block_row, narrow_16, quantize_4, quantize_row_q8_k32, quantize_row_q8_0, rope, load_cache4,
//       attend, sum_bytes, make_kernel_set
//   kernels/x86.hpp
//     horizontal_sum, horizontal_sum_i32, half_to_float, load256, pack_32, quantize_row_q8_k32,
//       quantize_row_q8_k_activations, quantize_row_q8_0, unpack_k4_scales, block_row,
//       transpose_4x8, interleave_q8k32, combine_halves, sum_bytes, make_kernel_set,
//       interleaved_candidate, q6k_candidate
//   kernels/scalar_float.hpp
//     CacheFormat, sum_lanes, widen_one, dot_in_lanes, dot_f32, dot_f16_f32, dot_bf16_f32,
//       dot_f32_unaligned, rmsnorm, swiglu, softmax, rope, cache_value, attend, sum_bytes
//     AttentionHead: key value
//   kernels/scalar_k32.hpp
//     activation_scale, dot_q2k_q8k, dot_q3k_q8k, dot_iq4xs_q8k, dot_codebook_q8k,
//       codebook_convert_step, convert_q8k_block, converted_q8k_block_dot, dot_converted_q8k,
//       dot_converted_q8k_stored, converted_q8k_row_bytes, pack_converted_q8k
//   constrain/compiled_grammar.hpp
//     GrammarLimits
//     ByteSet: test set set_range empty
//     Grammar: Kind Position try_parse parse root n_rules alternatives position n_positions
//       byte_set n_byte_sets rule_name saturated_position position_rule has_repetition_families
//   constrain/grammar_compiler.hpp
//     GrammarCompiler: run
//   constrain/matcher.hpp
//     MatcherLimits
//     GrammarMatcher: grammar start begin_step step class_of step_class can_end can_continue
//       overflowed overflow_message n_states n_nodes n_byte_classes work_done needs_compaction
//       saturated compact
#pragma once

#include "version.hpp"
#include "error.hpp"
#include "build_info.hpp"
#include "model/model.hpp"
#include "generator.hpp"
