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
//     LoadOptions           n_threads, device (cpu|cuda|automatic), cpu (force a kernel level),
//                           memory_budget, progress, log
//     model->tokenizer(), config(), identity(), cpu_level(), device()
//   Generating text                                                  generation/generator.hpp
//     Generator(model, GeneratorOptions)     one per conversation: a KV cache + its history
//     generate(prompt, params, on_text) / chat(messages, params, on_text) -> GenerateResult
//       (a prompt's markers are control tokens; chat contents are always text)
//     tokenize(prompt, params), tokenize_chat(messages, options), render_chat -> the ids / text
//     generate_async / chat_async -> AsyncGeneration: poll(), done(), wait(), cancel()
//                                                                        generation/async.hpp
//     cancel(), reset(), fork(), save_session(), restore_session(), try_create()
//     GenerateParams        SamplingParams (temperature, top_k, top_p, min_p, penalties, seed,
//                           logit_bias, logits_hook) + max_tokens, stop, ignore_eos, chat
//     GenerateResult        text, reasoning, answer, tokens, stop_reason, timings
//                                                                       generation/params.hpp
//     ChatMessage{role, content}, ChatOptions (thinking, date, tools,  text/chat_template.hpp
//                           parse_special_in_content: trusted contents only)
//   What runs where                                                         build_info.hpp
//     build_info(), build_info_string(), CpuLevel (kernels/cpu.hpp), Device (model/backend.hpp)
//
// Below the API, for tools and tests, each layer using only those under it (include by path):
//   gguf/ quant/ core/   the file format (reader, writer), block layouts, (de)quantization, mmap
//   kernels/             quantized dot products per ISA, chosen at run time
//   model/               config, weights, KV cache, the SmolLM3 forward pass, the backend seam
//   text/ sampling/      tokenizer, detokenizer, chat template, sampler
//   generation/          the Generator and what it is made of
// Internals a program never names live in `detail` namespaces (and detail/ folders).
#pragma once

#include "version.hpp"
#include "error.hpp"
#include "build_info.hpp"
#include "model/model.hpp"
#include "generator.hpp"
