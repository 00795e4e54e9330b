// smol: header-only SmolLM3 inference from GGUF files.
//
// Include this one header. Layers, bottom to top (each uses only those below):
//   gguf/ quant/ core/   file format, block layouts, weight matrix views, fp16
//   kernels/             quantized dot products and friends (scalar + SIMD)
//   model/               SmolLM3 config, weights, KV cache, forward pass
//   text/ sampling/      tokenizer, chat template, sampler
//   generator.hpp        generate / chat / stream
#pragma once

#include "version.hpp"
#include "error.hpp"
#include "core/fp16.hpp"
#include "core/mmap.hpp"
#include "quant/types.hpp"
#include "quant/blocks.hpp"
#include "quant/reference.hpp"
#include "gguf/gguf.hpp"
#include "gguf/writer.hpp"
#include "core/threadpool.hpp"
#include "kernels/kernels.hpp"
#include "kernels/bandwidth.hpp"
#include "model/model.hpp"
#include "text/unicode.hpp"
#include "text/tokenizer.hpp"
#include "text/detokenizer.hpp"
#include "text/chat_template.hpp"
#include "sampling/sampler.hpp"
#include "build_info.hpp"
#include "generator.hpp"
