// The C ABI (include/smol/smol.h) over the public C++ API: the one source file
// of the shared library (smol::shared). Every entry point catches everything
// and turns it into the thread's last error; handles own the C++ objects.
#define SMOL_BUILDING_SHARED 1
#include <smol/smol.h>
#include <smol/smol.hpp>
#include <smol/detail/json.hpp>

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

struct smol_model {
    std::shared_ptr<const smol::Model> model;
    std::string tuning;  // model->tuning().text(), made once: smol_model_tuning hands it out
};
struct smol_batcher {
    std::shared_ptr<smol::Batcher> batcher;
};
struct smol_generator {
    std::unique_ptr<smol::Generator> generator;
};
struct smol_async {
    smol::AsyncGeneration run;
    std::string polled;  // what the last smol_async_poll returned
};

namespace {

// The size rule relies on every field being 8 bytes on 64-bit targets: no
// padding, so a field is covered by a caller's size or not at all.
#if UINTPTR_MAX == UINT64_MAX
static_assert(sizeof(smol_load_options) == 18 * 8, "smol_load_options has padding");
static_assert(sizeof(smol_generator_options) == 11 * 8, "smol_generator_options has padding");
static_assert(sizeof(smol_batcher_options) == 7 * 8, "smol_batcher_options has padding");
static_assert(sizeof(smol_params) == 48 * 8, "smol_params has padding");
static_assert(sizeof(smol_result) == 21 * 8, "smol_result has padding");
#endif
static_assert(int(SMOL_STOP_CONTEXT_FULL) == int(smol::StopReason::context_full), "stop reasons");
static_assert(int(SMOL_ERR_RESOURCE) == int(smol::ErrorKind::resource) + 1, "error kinds");
static_assert(int(SMOL_DEVICE_AUTO) == int(smol::Device::automatic), "devices");
static_assert(int(SMOL_KV_F16) == int(smol::KVType::f16), "kv types");
static_assert(int(SMOL_KV_Q8_0) == int(smol::KVType::q8_0), "kv types");
static_assert(int(SMOL_CONTEXT_SHIFT) == int(smol::ContextPolicy::shift), "context policies");
static_assert(int(SMOL_TUNE_AUTO) == int(smol::TuneMode::automatic) &&
                  int(SMOL_TUNE_ON) == int(smol::TuneMode::on) &&
                  int(SMOL_TUNE_OFF) == int(smol::TuneMode::off),
              "tune modes");

struct LastError {
    smol_status code = SMOL_OK;
    std::string message;
};
LastError& last_error() noexcept {
    // Constructed on first use per thread; constructing an empty string cannot throw.
    thread_local LastError error;
    return error;
}

void set_ok() noexcept {
    LastError& e = last_error();
    e.code = SMOL_OK;
    e.message.clear();
}
void set_error(smol_status code, const char* message) noexcept {
    LastError& e = last_error();
    e.code = code;
    try {
        e.message = message;
    } catch (...) {
        e.message.clear();  // out of memory for the message: the code still tells
    }
}

[[noreturn]] void invalid(const std::string& message) {
    throw smol::Error(smol::ErrorKind::invalid_argument, message);
}

// Runs f(); on any exception records it and returns
// `failed`. Every fallible entry point goes through here. The record is
// cleared again after a success: a callback of f may have made a failing call.
template <class R, class F>
R guarded(R failed, F&& f) noexcept {
    set_ok();
    try {
        R result = f();
        set_ok();
        return result;
    } catch (const smol::Error& e) {
        set_error(smol_status(int(e.kind()) + 1), e.what());
    } catch (const std::bad_alloc&) {
        set_error(SMOL_ERR_RESOURCE, "out of memory");
    } catch (const std::exception& e) {
        set_error(SMOL_ERR_INTERNAL, e.what());
    } catch (...) {
        set_error(SMOL_ERR_INTERNAL, "unknown exception");
    }
    return failed;
}

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

int to_int(int64_t value, const char* what) {
    if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max())
        invalid(std::string(what) + " = " + std::to_string(value) + " is out of range");
    return int(value);
}

const char* need_string(const char* text, const char* what) {
    if (!text) invalid(std::string(what) + " is NULL");
    return text;
}

template <class T>
T& need(T* handle, const char* what) {
    if (!handle) invalid(std::string(what) + " is NULL");
    return *handle;
}

// The count of an array argument, checked against its pointer.
size_t array_count(const void* data, int64_t n, const char* what) {
    if (n < 0) invalid(std::string(what) + ": count " + std::to_string(n) + " is negative");
    if (n > 0 && !data)
        invalid(std::string(what) + " is NULL with a count of " + std::to_string(n));
    return size_t(n);
}

// A (strings, count) pair of smol_params as the C++ vector; a NULL string is
// an error naming the array and the index.
std::vector<std::string> to_strings(const char* const* strings, int64_t n, const char* what) {
    const size_t count = array_count(strings, n, what);
    std::vector<std::string> out;
    out.reserve(count);
    for (size_t i = 0; i < count; ++i)
        out.emplace_back(
            need_string(strings[i], (std::string(what) + "[" + std::to_string(i) + "]").c_str()));
    return out;
}

size_t to_count(int64_t value, const char* what) {
    if (value < 0) invalid(std::string(what) + " = " + std::to_string(value) + " is negative");
    return size_t(value);
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
    out.lookup.enabled = p.lookup != 0;
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

// A JSON string literal (the library's own quoting: detail/json.hpp).
void append_json_string(std::string& out, const std::string& text) {
    out += smol::detail::json::quote(text);
}

std::string tool_calls_json(const std::vector<smol::ToolCall>& calls) {
    std::string out = "[";
    for (size_t i = 0; i < calls.size(); ++i) {
        const smol::ToolCall& call = calls[i];
        out += i ? ",{\"name\":" : "{\"name\":";
        append_json_string(out, call.name);
        // ToolCall::arguments is compact JSON text when the call parsed.
        out += ",\"arguments\":";
        out += call.arguments.empty() ? "null" : call.arguments;
        out += ",\"text\":";
        append_json_string(out, call.text);
        out += ",\"error\":";
        append_json_string(out, call.error);
        out += '}';
    }
    return out + "]";
}

// A smol_result and the storage its pointers point into. The C struct comes
// first, so the pointer handed out is also the box's.
struct ResultData {
    smol::GenerateResult result;
    std::string tool_calls;
};
struct ResultBox {
    smol_result c;
    ResultData* data;
};
static_assert(std::is_standard_layout<ResultBox>::value, "ResultBox is cast from its first member");

smol_result* to_result(smol::GenerateResult result) {
    auto data = std::make_unique<ResultData>();
    data->result = std::move(result);
    data->tool_calls = tool_calls_json(data->result.tool_calls);
    const smol::GenerateResult& r = data->result;
    auto box = std::make_unique<ResultBox>();
    smol_result& c = box->c;
    c.size = sizeof(smol_result);
    c.text = r.text.c_str();
    c.text_length = r.text.size();
    c.reasoning = r.reasoning.c_str();
    c.reasoning_length = r.reasoning.size();
    c.answer = r.answer.c_str();
    c.answer_length = r.answer.size();
    c.tool_calls_json = data->tool_calls.c_str();
    c.matched_stop = r.matched_stop.c_str();
    c.tokens = r.tokens.data();
    c.n_tokens = r.tokens.size();
    c.stop_reason = int64_t(r.stop_reason);
    c.n_prompt_tokens = r.n_prompt_tokens;
    c.n_reused_tokens = r.n_reused_tokens;
    c.prefill_ms = r.prefill_ms;
    c.decode_ms = r.decode_ms;
    c.n_discarded_tokens = r.n_discarded_tokens;
    c.n_prompt_discarded_tokens = r.n_prompt_discarded_tokens;
    c.n_decode_steps = r.n_decode_steps;
    c.n_drafted_tokens = r.n_drafted_tokens;
    c.n_accepted_drafts = r.n_accepted_drafts;
    box->data = data.release();
    return &box.release()->c;
}

// A TokenCallback over a C piece callback: each piece NUL-terminated in a
// buffer reused across the run.
struct PieceForwarder {
    smol_piece_fn fn;
    void* user_data;
    std::string buffer;
    bool operator()(std::string_view piece) {
        buffer.assign(piece.data(), piece.size());
        return fn(buffer.c_str(), buffer.size(), user_data) != 0;
    }
};

template <class Run>
smol_result* run_with_callback(smol_piece_fn on_piece, void* user_data, Run&& run) {
    smol::TokenCallback callback;
    PieceForwarder forwarder{on_piece, user_data, {}};
    if (on_piece) callback = std::ref(forwarder);
    return to_result(run(callback));
}

// A NUL-terminated malloc'd copy of text (freed by smol_string_free).
char* copy_string(const std::string& text, size_t* length) {
    char* out = static_cast<char*>(std::malloc(text.size() + 1));
    if (!out) throw std::bad_alloc();
    std::memcpy(out, text.data(), text.size());
    out[text.size()] = '\0';
    if (length) *length = text.size();
    return out;
}

template <class T>
T* copy_out(const std::vector<T>& values) {
    // malloc, so that an empty result is still a pointer the caller frees.
    T* out = static_cast<T*>(std::malloc(std::max<size_t>(1, values.size() * sizeof(T))));
    if (!out) throw std::bad_alloc();
    if (!values.empty()) std::memcpy(out, values.data(), values.size() * sizeof(T));
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

smol_model* new_model(std::shared_ptr<const smol::Model> model) {
    std::string tuning = model->tuning().text();
    return new smol_model{std::move(model), std::move(tuning)};
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
    params->lookup = d.lookup.enabled;
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

extern "C" {

smol_status smol_last_error(void) noexcept {
    return last_error().code;
}

const char* smol_last_error_message(void) noexcept {
    return last_error().message.c_str();
}

const char* smol_status_name(smol_status status) noexcept {
    if (status == SMOL_OK) return "ok";
    if (status < SMOL_ERR_IO || status > SMOL_ERR_RESOURCE) return "unknown";
    return smol::to_string(smol::ErrorKind(int(status) - 1));
}

const char* smol_version(void) noexcept {
    return SMOL_VERSION_STRING;
}

const char* smol_build_info(void) noexcept {
    try {
        static const std::string info = smol::build_info_string();
        return info.c_str();
    } catch (...) {
        return SMOL_VERSION_STRING;
    }
}

smol_status smol_load_options_init_sized(smol_load_options* options, size_t size) noexcept {
    return init_sized(options, size, default_load_options, "smol_load_options_init_sized");
}

smol_status smol_batcher_options_init_sized(smol_batcher_options* options, size_t size) noexcept {
    return init_sized(options, size, default_batcher_options, "smol_batcher_options_init_sized");
}

smol_status smol_generator_options_init_sized(smol_generator_options* options,
                                              size_t size) noexcept {
    return init_sized(options, size, default_generator_options,
                      "smol_generator_options_init_sized");
}

smol_status smol_params_init_sized(smol_params* params, size_t size) noexcept {
    return init_sized(params, size, default_params, "smol_params_init_sized");
}

smol_model* smol_model_load(const char* path, const smol_load_options* options) noexcept {
    return guarded<smol_model*>(nullptr, [&] {
        need_string(path, "smol_model_load: path");
        smol::Expected<std::shared_ptr<const smol::Model>> model =
            smol::Model::try_load(path, to_load_options(options));
        if (!model) smol::detail::fail(model.take_error());
        return new_model(std::move(model).value());
    });
}

smol_model* smol_model_load_memory(const void* data, size_t size,
                                   const smol_load_options* options) noexcept {
    return guarded<smol_model*>(nullptr, [&] {
        if (!data) invalid("smol_model_load_memory: data is NULL");
        smol::Expected<std::shared_ptr<const smol::Model>> model =
            smol::Model::try_load_from_memory(data, size, to_load_options(options));
        if (!model) smol::detail::fail(model.take_error());
        return new_model(std::move(model).value());
    });
}

void smol_model_free(smol_model* model) noexcept {
    delete model;
}

const char* smol_model_identity(const smol_model* model) noexcept {
    return model ? model->model->identity().c_str() : "";
}

const char* smol_model_cpu_level(const smol_model* model) noexcept {
    return model ? smol::cpu_level_name(model->model->cpu_level()) : "";
}

smol_device smol_model_device(const smol_model* model) noexcept {
    return model ? smol_device(int(model->model->device())) : SMOL_DEVICE_CPU;
}

size_t smol_model_n_vocab(const smol_model* model) noexcept {
    return model ? model->model->config().vocab_size : 0;
}

size_t smol_model_n_ctx_train(const smol_model* model) noexcept {
    return model ? model->model->config().context_length : 0;
}

const char* smol_model_tuning(const smol_model* model) noexcept {
    return model ? model->tuning.c_str() : "";
}

char* smol_detokenize(const smol_model* model, const int32_t* ids, size_t n_ids, int render_special,
                      size_t* length) noexcept {
    if (length) *length = 0;
    return guarded<char*>(nullptr, [&] {
        const smol_model& m = need(model, "smol_detokenize: model");
        if (n_ids > 0 && !ids)
            invalid("smol_detokenize: ids is NULL with a count of " + std::to_string(n_ids));
        const std::vector<int32_t> v(ids, ids + n_ids);
        return copy_string(m.model->tokenizer().decode(v, render_special != 0), length);
    });
}

void smol_string_free(char* text) noexcept {
    std::free(text);
}

smol_batcher* smol_batcher_new(const smol_model* model) noexcept {
    return smol_batcher_new_with_options(model, nullptr);
}

smol_batcher* smol_batcher_new_with_options(const smol_model* model,
                                            const smol_batcher_options* options) noexcept {
    return guarded<smol_batcher*>(nullptr, [&] {
        const smol_model& m = need(model, "smol_batcher_new: model");
        return new smol_batcher{
            std::make_shared<smol::Batcher>(m.model, to_batcher_options(options))};
    });
}

void smol_batcher_free(smol_batcher* batcher) noexcept {
    delete batcher;
}

smol_generator* smol_generator_new(const smol_model* model,
                                   const smol_generator_options* options) noexcept {
    return guarded<smol_generator*>(nullptr, [&] {
        const smol_model& m = need(model, "smol_generator_new: model");
        smol::ErrorInfo error;
        std::unique_ptr<smol::Generator> generator =
            smol::Generator::try_create(m.model, to_generator_options(options), &error);
        if (!generator) smol::detail::fail(error);
        return new smol_generator{std::move(generator)};
    });
}

void smol_generator_free(smol_generator* generator) noexcept {
    delete generator;
}

smol_generator* smol_generator_fork(smol_generator* generator) noexcept {
    return guarded<smol_generator*>(nullptr, [&] {
        smol::Generator& g = *need(generator, "smol_generator_fork: generator").generator;
        return new smol_generator{std::make_unique<smol::Generator>(g.fork())};
    });
}

smol_status smol_reset(smol_generator* generator) noexcept {
    const bool ok = guarded<bool>(false, [&] {
        need(generator, "smol_reset: generator").generator->reset();
        return true;
    });
    return ok ? SMOL_OK : smol_last_error();
}

void smol_cancel(smol_generator* generator) noexcept {
    if (generator) generator->generator->cancel();
}

size_t smol_generator_n_ctx(const smol_generator* generator) noexcept {
    return generator ? generator->generator->n_ctx() : 0;
}

size_t smol_generator_n_cached(const smol_generator* generator) noexcept {
    return generator ? generator->generator->n_cached() : 0;
}

smol_status smol_generator_cache_memory(const smol_generator* generator, uint64_t* owned,
                                        uint64_t* shared) noexcept {
    if (owned) *owned = 0;
    if (shared) *shared = 0;
    const bool ok = guarded<bool>(false, [&] {
        const smol::CacheMemory memory =
            need(generator, "smol_generator_cache_memory: generator").generator->cache_memory();
        if (owned) *owned = memory.owned;
        if (shared) *shared = memory.shared;
        return true;
    });
    return ok ? SMOL_OK : smol_last_error();
}

size_t smol_generator_n_history(const smol_generator* generator) noexcept {
    return generator ? generator->generator->history().size() : 0;
}

int32_t* smol_generator_history(const smol_generator* generator, size_t* n_tokens) noexcept {
    if (n_tokens) *n_tokens = 0;
    return guarded<int32_t*>(nullptr, [&] {
        const smol::Generator& g = *need(generator, "smol_generator_history: generator").generator;
        if (!n_tokens) invalid("smol_generator_history: n_tokens is NULL");
        const std::vector<int32_t>& ids = g.history();
        int32_t* out = copy_out(ids);
        *n_tokens = ids.size();
        return out;
    });
}

smol_status smol_erase(smol_generator* generator, size_t first, size_t count) noexcept {
    const bool ok = guarded<bool>(false, [&] {
        smol::Generator& g = *need(generator, "smol_erase: generator").generator;
        smol::detail::ok_or_fail(g.try_erase(first, count));
        return true;
    });
    return ok ? SMOL_OK : smol_last_error();
}

void smol_result_free(smol_result* result) noexcept {
    if (!result) return;
    ResultBox* box = reinterpret_cast<ResultBox*>(result);
    delete box->data;
    delete box;
}

smol_result* smol_generate(smol_generator* generator, const char* prompt, const smol_params* params,
                           smol_piece_fn on_piece, void* user_data) noexcept {
    return guarded<smol_result*>(nullptr, [&] {
        smol::Generator& g = *need(generator, "smol_generate: generator").generator;
        need_string(prompt, "smol_generate: prompt");
        const smol::GenerateParams p = to_params(params);
        return run_with_callback(on_piece, user_data, [&](const smol::TokenCallback& callback) {
            return g.generate(prompt, p, callback);
        });
    });
}

smol_result* smol_generate_tokens(smol_generator* generator, const int32_t* ids, size_t n_ids,
                                  const smol_params* params, smol_piece_fn on_piece,
                                  void* user_data) noexcept {
    return guarded<smol_result*>(nullptr, [&] {
        smol::Generator& g = *need(generator, "smol_generate_tokens: generator").generator;
        if (n_ids > 0 && !ids)
            invalid("smol_generate_tokens: ids is NULL with a count of " + std::to_string(n_ids));
        const std::vector<int32_t> prompt(ids, ids + n_ids);
        const smol::GenerateParams p = to_params(params);
        return run_with_callback(on_piece, user_data, [&](const smol::TokenCallback& callback) {
            return g.generate_tokens(prompt, p, callback);
        });
    });
}

smol_result* smol_chat(smol_generator* generator, const smol_message* messages, size_t n_messages,
                       const smol_params* params, smol_piece_fn on_piece,
                       void* user_data) noexcept {
    return guarded<smol_result*>(nullptr, [&] {
        smol::Generator& g = *need(generator, "smol_chat: generator").generator;
        const std::vector<smol::ChatMessage> m = to_messages(messages, n_messages);
        const smol::GenerateParams p = to_params(params);
        return run_with_callback(on_piece, user_data, [&](const smol::TokenCallback& callback) {
            return g.chat(m, p, callback);
        });
    });
}

smol_async* smol_generate_async(smol_generator* generator, const char* prompt,
                                const smol_params* params) noexcept {
    return guarded<smol_async*>(nullptr, [&] {
        smol::Generator& g = *need(generator, "smol_generate_async: generator").generator;
        need_string(prompt, "smol_generate_async: prompt");
        auto run = std::make_unique<smol_async>();
        run->run = g.generate_async(prompt, to_params(params));
        return run.release();
    });
}

smol_async* smol_chat_async(smol_generator* generator, const smol_message* messages,
                            size_t n_messages, const smol_params* params) noexcept {
    return guarded<smol_async*>(nullptr, [&] {
        smol::Generator& g = *need(generator, "smol_chat_async: generator").generator;
        auto run = std::make_unique<smol_async>();
        run->run = g.chat_async(to_messages(messages, n_messages), to_params(params));
        return run.release();
    });
}

const char* smol_async_poll(smol_async* run, size_t* length) noexcept {
    const char* text = guarded<const char*>(nullptr, [&] {
        smol_async& a = need(run, "smol_async_poll: run");
        a.polled = a.run.poll();
        return a.polled.c_str();
    });
    if (length) *length = text ? run->polled.size() : 0;
    return text ? text : "";
}

int smol_async_done(const smol_async* run) noexcept {
    return run ? int(run->run.done()) : 1;
}

void smol_async_cancel(smol_async* run) noexcept {
    if (run) run->run.cancel();
}

smol_result* smol_async_wait(smol_async* run) noexcept {
    return guarded<smol_result*>(
        nullptr, [&] { return to_result(need(run, "smol_async_wait: run").run.wait()); });
}

void smol_async_free(smol_async* run) noexcept {
    delete run;
}

uint8_t* smol_session_save(smol_generator* generator, size_t* size) noexcept {
    if (size) *size = 0;
    return guarded<uint8_t*>(nullptr, [&] {
        smol::Generator& g = *need(generator, "smol_session_save: generator").generator;
        if (!size) invalid("smol_session_save: size is NULL");
        const std::vector<uint8_t> bytes = g.save_session();
        uint8_t* out = copy_out(bytes);
        *size = bytes.size();
        return out;
    });
}

smol_status smol_session_restore(smol_generator* generator, const uint8_t* data,
                                 size_t size) noexcept {
    const bool ok = guarded<bool>(false, [&] {
        smol::Generator& g = *need(generator, "smol_session_restore: generator").generator;
        if (!data && size) invalid("smol_session_restore: data is NULL");
        static const uint8_t empty = 0;
        smol::ErrorInfo error;
        if (!g.try_restore_session(data ? data : &empty, size, &error)) smol::detail::fail(error);
        return true;
    });
    return ok ? SMOL_OK : smol_last_error();
}

void smol_bytes_free(uint8_t* bytes) noexcept {
    std::free(bytes);
}

int32_t* smol_tokenize(const smol_generator* generator, const char* prompt, int as_text,
                       size_t* n_tokens) noexcept {
    if (n_tokens) *n_tokens = 0;
    return guarded<int32_t*>(nullptr, [&] {
        const smol::Generator& g = *need(generator, "smol_tokenize: generator").generator;
        need_string(prompt, "smol_tokenize: prompt");
        if (!n_tokens) invalid("smol_tokenize: n_tokens is NULL");
        smol::GenerateParams params;
        params.prompt_as_text = as_text != 0;
        const std::vector<int32_t> ids = g.tokenize(prompt, params);
        int32_t* out = copy_out(ids);
        *n_tokens = ids.size();
        return out;
    });
}

void smol_tokens_free(int32_t* tokens) noexcept {
    std::free(tokens);
}

int32_t* smol_tokenize_chat(const smol_generator* generator, const smol_message* messages,
                            size_t n_messages, const smol_params* params,
                            size_t* n_tokens) noexcept {
    if (n_tokens) *n_tokens = 0;
    return guarded<int32_t*>(nullptr, [&] {
        const smol::Generator& g = *need(generator, "smol_tokenize_chat: generator").generator;
        if (!n_tokens) invalid("smol_tokenize_chat: n_tokens is NULL");
        const std::vector<int32_t> ids =
            g.tokenize_chat(to_messages(messages, n_messages), to_params(params).chat);
        int32_t* out = copy_out(ids);
        *n_tokens = ids.size();
        return out;
    });
}

char* smol_render_chat(const smol_generator* generator, const smol_message* messages,
                       size_t n_messages, const smol_params* params, size_t* length) noexcept {
    if (length) *length = 0;
    return guarded<char*>(nullptr, [&] {
        const smol::Generator& g = *need(generator, "smol_render_chat: generator").generator;
        return copy_string(g.render_chat(to_messages(messages, n_messages), to_params(params).chat),
                           length);
    });
}

}  // extern "C"
