// The C ABI (include/smol/smol.h) over the public C++ API: the one source file
// of the shared library (smol::shared), its helpers in src/c_abi/ by concept. Every entry point
// catches everything and turns it into the thread's last error; handles own the C++ objects.
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

// The unit's helpers, by concept (each an unnamed namespace of this unit alone).
#include "c_abi/errors.hpp"   // the last error, the guard, argument checks
#include "c_abi/convert.hpp"  // option structs: defaults, sizes, C <-> C++
#include "c_abi/results.hpp"  // results, callbacks, copies handed out

namespace {

// The size rule relies on every field being 8 bytes on 64-bit targets: no
// padding, so a field is covered by a caller's size or not at all.
#if UINTPTR_MAX == UINT64_MAX
static_assert(sizeof(smol_load_options) == 19 * 8, "smol_load_options has padding");
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

smol_model* new_model(std::shared_ptr<const smol::Model> model) {
    std::string tuning = model->tuning().text();
    return new smol_model{std::move(model), std::move(tuning)};
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
