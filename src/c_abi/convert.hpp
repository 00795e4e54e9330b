// The C ABI's option structs and the C++ ones: each struct's defaults (from
// the C++ struct), the size rule (read_sized, init_sized) and the conversions
// of load options, generator and batcher options, params and messages.
// Part of the C ABI's one source file: only src/smol_c.cpp includes it, so
// its helpers stay in an unnamed namespace of that unit.
#pragma once

#include <smol/smol.h>
#include <smol/smol.hpp>
#include "errors.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// Each option struct's defaults at this library's size, taken from the C++
// structs so the two never disagree (defined below).
void default_load_options(smol_load_options* options) noexcept;
void default_batcher_options(smol_batcher_options* options) noexcept;
void default_generator_options(smol_generator_options* options) noexcept;
void default_params(smol_params* params) noexcept;

// The caller's struct read by its size field: fields past it keep the defaults.
template <class T>
T read_sized(const T* user, void (*init)(T*), const char* what) {
    T out;
    init(&out);
    if (!user) return out;
    if (user->size < sizeof(uint64_t))
        invalid(std::string(what) + ": size is " + std::to_string(user->size) +
                " (set it with its _init function)");
    // A newer caller's larger struct: the fields this library does not know are ignored.
    std::memcpy(&out, user, size_t(std::min<uint64_t>(user->size, sizeof(T))));
    out.size = sizeof(T);
    return out;
}

smol::LoadOptions to_load_options(const smol_load_options* user) {
    const smol_load_options o = read_sized(user, default_load_options, "smol_load_options");
    smol::LoadOptions out;
    out.n_threads = to_int(o.n_threads, "smol_load_options.n_threads");
    if (o.n_threads < 0) invalid("smol_load_options.n_threads is negative");
    if (o.device < SMOL_DEVICE_CPU || o.device > SMOL_DEVICE_AUTO)
        invalid("smol_load_options.device = " + std::to_string(o.device) + " is not a smol_device");
    out.device = smol::Device(uint32_t(o.device));
    out.cuda_device = to_int(o.cuda_device, "smol_load_options.cuda_device");
    out.memory_budget = o.memory_budget;
    out.interleave_weights = o.interleave_weights != 0;
    if (o.cpu) {
        const std::optional<smol::CpuLevel> level = smol::parse_cpu_level(o.cpu);
        if (!level)
            invalid(std::string("smol_load_options.cpu = \"") + o.cpu +
                    "\" is not a kernel level (" + smol::supported_cpu_levels() + ")");
        out.cpu = *level;
    }
    if (smol_progress_fn fn = o.progress) {
        void* user_data = o.progress_user_data;
        out.progress = [fn, user_data](float progress) { return fn(progress, user_data) != 0; };
    }
    if (smol_log_fn fn = o.log) {
        void* user_data = o.log_user_data;
        out.log = [fn, user_data](int level, const std::string& message) {
            fn(level, message.c_str(), user_data);
        };
    }
    if (o.tune != SMOL_TUNE_AUTO && o.tune != SMOL_TUNE_ON && o.tune != SMOL_TUNE_OFF)
        invalid("smol_load_options.tune = " + std::to_string(o.tune) + " is not a smol_tune_mode");
    out.tune = smol::TuneMode(uint8_t(o.tune));
    if (o.tune_file) out.tune_file = o.tune_file;
    if (o.pin_kernel_params) {
        // Checked against the candidates by the load itself (Error(invalid_argument)).
        smol::kernels::KernelParams k;
        k.pace_steps = to_int(o.kernel_pace_steps, "smol_load_options.kernel_pace_steps");
        k.interleaved_prefetch =
            to_int(o.kernel_interleaved_prefetch, "smol_load_options.kernel_interleaved_prefetch");
        k.stored_prefetch =
            to_int(o.kernel_stored_prefetch, "smol_load_options.kernel_stored_prefetch");
        k.decode_chunks = to_int(o.kernel_decode_chunks, "smol_load_options.kernel_decode_chunks");
        k.codebook_gathers =
            to_int(o.kernel_codebook_gathers, "smol_load_options.kernel_codebook_gathers");
        out.kernel_params = k;
    }
    return out;
}

smol::BatcherOptions to_batcher_options(const smol_batcher_options* user) {
    const smol_batcher_options o =
        read_sized(user, default_batcher_options, "smol_batcher_options");
    smol::BatcherOptions out;
    out.max_batch = to_count(o.max_batch, "smol_batcher_options.max_batch");
    out.prefill_shared = to_count(o.prefill_shared, "smol_batcher_options.prefill_shared");
    out.max_step_slowdown = o.max_step_slowdown;
    out.prefill_alone = to_count(o.prefill_alone, "smol_batcher_options.prefill_alone");
    out.gather_ms = o.gather_ms;
    out.gather_fraction = o.gather_fraction;
    return out;
}

smol::GeneratorOptions to_generator_options(const smol_generator_options* user) {
    const smol_generator_options o =
        read_sized(user, default_generator_options, "smol_generator_options");
    smol::GeneratorOptions out;
    if (o.n_ctx < 0) invalid("smol_generator_options.n_ctx is negative");
    if (o.n_ctx > 0) out.n_ctx = size_t(o.n_ctx);
    if (o.kv_type != SMOL_KV_F32 && o.kv_type != SMOL_KV_F16 && o.kv_type != SMOL_KV_Q8_0)
        invalid("smol_generator_options.kv_type = " + std::to_string(o.kv_type) +
                " is not a smol_kv_type");
    out.kv_type = smol::KVType(uint32_t(o.kv_type));
    if (o.prefill_chunk < 0) invalid("smol_generator_options.prefill_chunk is negative");
    out.prefill_chunk = size_t(o.prefill_chunk);
    if (o.batcher) out.batcher = o.batcher->batcher;
    if (smol_log_fn fn = o.log) {
        void* user_data = o.log_user_data;
        out.log = [fn, user_data](int level, const std::string& message) {
            fn(level, message.c_str(), user_data);
        };
    }
    if (smol_worker_start_fn fn = o.on_worker_start) {
        void* user_data = o.worker_start_user_data;
        out.on_worker_start = [fn, user_data] { fn(user_data); };
    }
    if (o.context_policy != SMOL_CONTEXT_STOP && o.context_policy != SMOL_CONTEXT_SHIFT)
        invalid("smol_generator_options.context_policy = " + std::to_string(o.context_policy) +
                " is not a smol_context_policy");
    out.context_policy = smol::ContextPolicy(uint32_t(o.context_policy));
    if (o.n_keep < 0) invalid("smol_generator_options.n_keep is negative");
    out.n_keep = size_t(o.n_keep);
    return out;
}

smol::GenerateParams to_params(const smol_params* user) {
    const smol_params p = read_sized(user, default_params, "smol_params");
    smol::GenerateParams out;
    out.temperature = float(p.temperature);
    out.top_k = to_int(p.top_k, "smol_params.top_k");
    out.top_p = float(p.top_p);
    out.min_p = float(p.min_p);
    out.repeat_penalty = float(p.repeat_penalty);
    out.presence_penalty = float(p.presence_penalty);
    out.frequency_penalty = float(p.frequency_penalty);
    out.penalty_last_n = to_int(p.penalty_last_n, "smol_params.penalty_last_n");
    out.seed = p.seed;
    const size_t n_bias = array_count(p.logit_bias, p.n_logit_bias, "smol_params.logit_bias");
    for (size_t i = 0; i < n_bias; ++i)
        out.logit_bias.emplace_back(p.logit_bias[i].token, p.logit_bias[i].bias);
    if (smol_logits_fn fn = p.logits_hook) {
        void* user_data = p.logits_hook_user_data;
        out.logits_hook = [fn, user_data](float* logits, size_t n_vocab) {
            fn(logits, n_vocab, user_data);
        };
    }
    out.max_tokens = to_int(p.max_tokens, "smol_params.max_tokens");
    const size_t n_stop = array_count(p.stop, p.n_stop, "smol_params.stop");
    for (size_t i = 0; i < n_stop; ++i)
        out.stop.emplace_back(need_string(p.stop[i], "smol_params.stop[i]"));
    out.ignore_eos = p.ignore_eos != 0;
    out.prompt_as_text = p.prompt_as_text != 0;
    out.chat.add_generation_prompt = p.add_generation_prompt != 0;
    if (p.enable_thinking >= 0) out.chat.enable_thinking = p.enable_thinking != 0;
    if (p.today) out.chat.today = p.today;
    const size_t n_tools = array_count(p.tools, p.n_tools, "smol_params.tools");
    for (size_t i = 0; i < n_tools; ++i) {
        smol::ToolDefinition tool;
        tool.name = need_string(p.tools[i].name, "smol_params.tools[i].name");
        if (p.tools[i].description) tool.description = p.tools[i].description;
        if (p.tools[i].parameters) tool.parameters = p.tools[i].parameters;
        out.chat.tools.push_back(std::move(tool));
    }
    out.chat.xml_tools = to_strings(p.xml_tools, p.n_xml_tools, "smol_params.xml_tools");
    out.chat.python_tools =
        to_strings(p.python_tools, p.n_python_tools, "smol_params.python_tools");
    out.chat.parse_special_in_content = p.parse_special_in_content != 0;
    if (p.grammar) out.grammar = p.grammar;
    if (p.json_schema) out.json_schema = p.json_schema;
    out.json_schema_options.max_indent = to_int(p.json_max_indent, "smol_params.json_max_indent");
    out.json_schema_options.max_integer_digits =
        to_int(p.json_max_integer_digits, "smol_params.json_max_integer_digits");
    out.json_schema_options.max_fraction_digits =
        to_int(p.json_max_fraction_digits, "smol_params.json_max_fraction_digits");
    out.json_schema_options.max_exponent_digits =
        to_int(p.json_max_exponent_digits, "smol_params.json_max_exponent_digits");
    out.json_schema_options.max_any_depth =
        to_int(p.json_max_any_depth, "smol_params.json_max_any_depth");
    out.constrain_tool_calls = p.constrain_tool_calls != 0;
    // The sampler validates the values (Sampler::validate) as for C++ callers.
    out.dry_multiplier = float(p.dry_multiplier);
    out.dry_base = float(p.dry_base);
    out.dry_allowed_length = to_int(p.dry_allowed_length, "smol_params.dry_allowed_length");
    out.dry_penalty_last_n = to_int(p.dry_penalty_last_n, "smol_params.dry_penalty_last_n");
    out.dry_sequence_breakers = to_strings(p.dry_sequence_breakers, p.n_dry_sequence_breakers,
                                           "smol_params.dry_sequence_breakers");
    out.xtc_probability = float(p.xtc_probability);
    out.xtc_threshold = float(p.xtc_threshold);
    out.lookup.mode = p.lookup < 0    ? smol::LookupMode::automatic
                      : p.lookup == 0 ? smol::LookupMode::off
                                      : smol::LookupMode::on;
    out.lookup.k = to_count(p.lookup_k, "smol_params.lookup_k");
    out.lookup.max_ngram = to_count(p.lookup_max_ngram, "smol_params.lookup_max_ngram");
    return out;
}

std::vector<smol::ChatMessage> to_messages(const smol_message* messages, size_t n) {
    if (n > 0 && !messages) invalid("messages is NULL with a count of " + std::to_string(n));
    std::vector<smol::ChatMessage> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        const std::string at = "messages[" + std::to_string(i) + "]";
        out.push_back({need_string(messages[i].role, (at + ".role").c_str()),
                       need_string(messages[i].content, (at + ".content").c_str()),
                       messages[i].model_output != 0});
    }
    return out;
}

// SamplingParams' default DRY breakers as a C array, for default_params:
// built once (thread-safe), never freed, so the pointers it hands out stay
// valid for the process. NULL if that first allocation failed (init cannot
// fail: the caller then gets no breakers, and can set them itself).
struct DefaultBreakers {
    std::vector<std::string> strings = smol::SamplingParams{}.dry_sequence_breakers;
    std::vector<const char*> pointers;
    DefaultBreakers() {
        for (const std::string& b : strings) pointers.push_back(b.c_str());
    }
};
const DefaultBreakers* default_breakers() noexcept {
    static const DefaultBreakers* const breakers = []() noexcept -> const DefaultBreakers* {
        try {
            return new DefaultBreakers();
        } catch (...) {
            return nullptr;
        }
    }();
    return breakers;
}

void default_load_options(smol_load_options* options) noexcept {
    *options = smol_load_options{};
    options->size = sizeof(smol_load_options);
    // The defaults from the C++ struct, so the two never disagree.
    const smol::LoadOptions d;
    options->device = int64_t(d.device);
    options->interleave_weights = d.interleave_weights;
    options->tune = int64_t(d.tune);
    const smol::kernels::KernelParams k;
    options->kernel_pace_steps = k.pace_steps;
    options->kernel_interleaved_prefetch = k.interleaved_prefetch;
    options->kernel_stored_prefetch = k.stored_prefetch;
    options->kernel_decode_chunks = k.decode_chunks;
    options->kernel_codebook_gathers = k.codebook_gathers;
}

void default_batcher_options(smol_batcher_options* options) noexcept {
    *options = smol_batcher_options{};
    options->size = sizeof(smol_batcher_options);
    const smol::BatcherOptions d;
    options->max_batch = int64_t(d.max_batch);
    options->prefill_shared = int64_t(d.prefill_shared);
    options->max_step_slowdown = d.max_step_slowdown;
    options->prefill_alone = int64_t(d.prefill_alone);
    options->gather_ms = d.gather_ms;
    options->gather_fraction = d.gather_fraction;
}

void default_generator_options(smol_generator_options* options) noexcept {
    *options = smol_generator_options{};
    options->size = sizeof(smol_generator_options);
    // The defaults from the C++ struct, so the two never disagree.
    const smol::GeneratorOptions d;
    options->kv_type = int64_t(d.kv_type);
    options->context_policy = int64_t(d.context_policy);
    options->n_keep = int64_t(d.n_keep);
}

void default_params(smol_params* params) noexcept {
    *params = smol_params{};
    params->size = sizeof(smol_params);
    // Each default from the C++ structs, so the two never disagree.
    const smol::GenerateParams d;
    params->temperature = d.temperature;
    params->top_k = d.top_k;
    params->top_p = d.top_p;
    params->min_p = d.min_p;
    params->repeat_penalty = d.repeat_penalty;
    params->presence_penalty = d.presence_penalty;
    params->frequency_penalty = d.frequency_penalty;
    params->penalty_last_n = d.penalty_last_n;
    params->seed = d.seed;
    params->max_tokens = d.max_tokens;
    params->ignore_eos = d.ignore_eos;
    params->prompt_as_text = d.prompt_as_text;
    params->add_generation_prompt = d.chat.add_generation_prompt;
    params->enable_thinking = d.chat.enable_thinking ? (*d.chat.enable_thinking ? 1 : 0) : -1;
    params->parse_special_in_content = d.chat.parse_special_in_content;
    params->json_max_indent = d.json_schema_options.max_indent;
    params->json_max_integer_digits = d.json_schema_options.max_integer_digits;
    params->json_max_fraction_digits = d.json_schema_options.max_fraction_digits;
    params->json_max_exponent_digits = d.json_schema_options.max_exponent_digits;
    params->json_max_any_depth = d.json_schema_options.max_any_depth;
    params->constrain_tool_calls = d.constrain_tool_calls;
    params->dry_multiplier = d.dry_multiplier;
    params->dry_base = d.dry_base;
    params->dry_allowed_length = d.dry_allowed_length;
    params->dry_penalty_last_n = d.dry_penalty_last_n;
    // The default breakers, so a caller sees what C++ would use (0: none).
    if (const DefaultBreakers* breakers = default_breakers()) {
        params->dry_sequence_breakers = breakers->pointers.data();
        params->n_dry_sequence_breakers = int64_t(breakers->pointers.size());
    }
    params->xtc_probability = d.xtc_probability;
    params->xtc_threshold = d.xtc_threshold;
    params->lookup = d.lookup.mode == smol::LookupMode::automatic ? -1
                     : d.lookup.mode == smol::LookupMode::off     ? 0
                                                                  : 1;
    params->lookup_k = int64_t(d.lookup.k);
    params->lookup_max_ngram = int64_t(d.lookup.max_ngram);
}

// The size rule for the _init_sized functions: a caller's struct of `size`
// bytes (its own sizeof, which smol.h's inline smol_*_init compiles into the
// caller) is written at that size, never at this library's. An older caller's
// smaller struct gets the defaults of the fields it has and nothing past its
// end (writing at our size would overwrite the caller's next variable); a
// newer caller's larger struct gets the fields this library does not know
// zeroed (read_sized ignores them anyway). The size field records the caller's
// size, which read_sized then honours.
template <class T>
smol_status init_sized(T* user, size_t size, void (*defaults)(T*), const char* what) noexcept {
    const bool ok = guarded<bool>(false, [&] {
        if (!user) invalid(std::string(what) + ": the struct is NULL");
        if (size < sizeof(uint64_t))
            invalid(std::string(what) + ": size " + std::to_string(size) +
                    " does not hold the size field (8 bytes)");
        T d;
        defaults(&d);
        // Bytes, not T: the caller's object may be smaller than a T.
        unsigned char* out = reinterpret_cast<unsigned char*>(user);
        std::memcpy(out, &d, std::min(size, sizeof(T)));
        if (size > sizeof(T)) std::memset(out + sizeof(T), 0, size - sizeof(T));
        const uint64_t caller_size = size;
        std::memcpy(out, &caller_size, sizeof caller_size);
        return true;
    });
    return ok ? SMOL_OK : smol_last_error();
}

}  // namespace
