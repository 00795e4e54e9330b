/* smol.h: the C ABI of smol, for C and for every language that calls C
 * (Python ctypes, C# P/Invoke, Unity, Godot, Lua, ...). C99, no C++ types.
 * The functions live in the shared library (CMake target smol::shared:
 * libsmol.so, smol.dll, libsmol.dylib); the header-only C++ API
 * (<smol/smol.hpp>) is what it wraps, and its documentation holds for the
 * meaning of every option (generation/params.hpp, model/model.hpp).
 *
 *   smol_model* model = smol_model_load("model.gguf", NULL);
 *   smol_generator* gen = smol_generator_new(model, NULL);
 *   smol_params p;  smol_params_init(&p);  p.max_tokens = 64;  p.temperature = 0;
 *   smol_result* r = smol_generate(gen, "Once upon a time", &p, on_piece, user_data);
 *   if (!r) fprintf(stderr, "%s\n", smol_last_error_message());
 *   else puts(r->text);
 *   smol_result_free(r);  smol_generator_free(gen);  smol_model_free(model);
 *
 * Errors: every function that can fail returns a smol_status (SMOL_OK = 0) or
 * a pointer (NULL on failure), and records the error for the calling thread:
 * smol_last_error() gives its code and smol_last_error_message() its message
 * (naming the file, key, tensor or byte offset at fault). The record is
 * thread-local, so threads never see each other's errors; every call that can
 * fail overwrites it (with SMOL_OK and "" on success). No exception and no C++
 * object crosses the boundary: each entry point catches everything (an
 * allocation that fails is SMOL_ERR_RESOURCE).
 *
 * NULL: a function that can fail fails with SMOL_ERR_INVALID_ARGUMENT (NULL
 * or its status) when given a NULL handle, a NULL string it needs (a path, a
 * prompt, a message's role or content, a stop string, a tool's name) or a NULL
 * pointer it must write through (n_tokens, size, an options struct to fill).
 * Where a NULL is allowed, its declaration says so. The functions that cannot
 * fail treat NULL as nothing and leave the last error alone: the *_free
 * functions, the smol_*_init functions (not their _sized forms, which can
 * fail) and smol_cancel / smol_async_cancel do nothing, the facts about a
 * model or a generator are 0 or "", smol_async_done is 1.
 *
 * Ownership: handles (smol_model, smol_generator, smol_batcher, smol_async),
 * results and byte buffers are allocated by the library and released by their
 * *_free function (each accepts NULL). Strings passed in are copied or used
 * only during the call, except the buffer of smol_model_load_memory, which
 * must outlive the model. Strings handed out are UTF-8, NUL-terminated, with
 * their byte length alongside.
 *
 * Threading (the C++ contract, generation/generator.hpp):
 *   - a smol_model is immutable: share it between any number of generators on
 *     any threads. smol_model_free may be called while generators still use
 *     it (they keep the weights alive).
 *   - a smol_generator is used by one thread at a time; the exceptions:
 *     smol_cancel may be called from any thread at any moment, and a
 *     smol_async's functions from any one thread while its run goes on.
 *   - while an async run of a generator goes on, a call that uses the
 *     generator (smol_generate, smol_chat, a new async run, smol_reset,
 *     smol_generator_fork, smol_erase, smol_session_save / _restore) first
 *     waits for the run to end, then proceeds: it is not rejected. Made from
 *     inside a run instead (one of its callbacks: a piece callback, a logits
 *     hook, a log line), or, against the rule above, from a second thread
 *     during a smol_generate / smol_chat, such a call is rejected with
 *     SMOL_ERR_INVALID_ARGUMENT. The readers (smol_generator_n_cached,
 *     _n_history, _history, _cache_memory) do not wait: call them when no
 *     run is going on (for an async run: once smol_async_done is nonzero).
 *   - a smol_batcher may be shared by generators on different threads.
 *   - callbacks run on the thread that does the work: the caller's for
 *     smol_model_load and for smol_generate / smol_chat (pieces, logits hook,
 *     log), the generator's worker thread for async runs (logits hook, log,
 *     worker start). A callback must not free the handle it was called for.
 *   - smol_version, smol_build_info, smol_last_error*, smol_*_init and
 *     smol_*_init_sized: any thread.
 *
 * Option structs begin with their own size. Fill them with smol_*_init (which
 * sets the size and the defaults; NULL: no effect), then change fields. The
 * library reads only the fields that the given size covers and uses the
 * defaults for the rest, so a program compiled against an older, smaller
 * struct keeps working when fields are appended. Filling works the same way
 * round: smol_*_init is inline in this header and hands the library the
 * struct's size as compiled into the caller (smol_*_init_sized), so a newer
 * library writes an older caller's smaller struct only up to its end, never
 * at the library's own, larger size. Bindings that declare the structs
 * themselves (Python, C#) call smol_*_init_sized with their own size. Fields
 * are only ever appended, never reordered or removed; every field is 64 bits
 * wide on 64-bit targets (integers are int64_t, reals double), so no struct
 * has padding a later field could fall into. Planned next: more KV cache
 * types (smol_kv_type gains values).
 *
 * Every field of the C++ option and result structs has its C counterpart,
 * or a named reason not to: the parity table in smol_params.h (included
 * below), which tests/test_surface.cpp checks both ways against the C++
 * headers.
 *
 * Long conversations (C++: "Long conversations" in generation/generator.hpp).
 * With SMOL_CONTEXT_SHIFT in smol_generator_options.context_policy, a prompt
 * longer than the context, or a run that fills it, drops the oldest tokens
 * after the first n_keep (smol_chat: the oldest whole turns after the system
 * message) instead of failing or stopping; the caller keeps passing the whole
 * prompt or conversation, and the cache follows without a new prefill.
 * smol_result.n_discarded_tokens says how many tokens a call dropped.
 * smol_erase removes a range of the history by hand, the same way.
 */
#ifndef SMOL_H
#define SMOL_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(SMOL_BUILDING_SHARED)
#define SMOL_API __declspec(dllexport)
#else
#define SMOL_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define SMOL_API __attribute__((visibility("default")))
#else
#define SMOL_API
#endif

#ifdef __cplusplus
#define SMOL_NOEXCEPT noexcept
extern "C" {
#else
#define SMOL_NOEXCEPT
#endif

/* The header's own small functions (smol_*_init): compiled into the caller,
 * so what they pass the library (a struct's size) is the caller's. MSVC's C
 * compiler before C11 knows only __inline. */
#if defined(_MSC_VER) && !defined(__cplusplus)
#define SMOL_INLINE static __inline
#else
#define SMOL_INLINE static inline
#endif

/* The version of this C ABI: bumped when an existing function or field
 * changes meaning (appending fields or functions does not). */
#define SMOL_C_ABI_VERSION 1

/* ------------------------------------------------------------------ errors */

/* The C++ API's ErrorKind, plus SMOL_OK. */
typedef enum smol_status {
    SMOL_OK = 0,
    SMOL_ERR_IO = 1,               /* file missing, unreadable, not mappable */
    SMOL_ERR_FORMAT = 2,           /* malformed or truncated GGUF or session bytes */
    SMOL_ERR_UNSUPPORTED = 3,      /* valid, but not implemented (e.g. cuda in a CPU build) */
    SMOL_ERR_SHAPE = 4,            /* a tensor whose shape disagrees with the config */
    SMOL_ERR_MISSING = 5,          /* a required key or tensor is absent */
    SMOL_ERR_TYPE = 6,             /* a metadata value of the wrong type */
    SMOL_ERR_INVALID_ARGUMENT = 7, /* NULL handle, bad option, bad UTF-8, ... */
    SMOL_ERR_OUT_OF_RANGE = 8,     /* a prompt or session longer than the context */
    SMOL_ERR_CANCELLED = 9,        /* a load cancelled by its progress callback */
    SMOL_ERR_INTERNAL = 10,        /* a bug in smol: please report it */
    SMOL_ERR_RESOURCE = 11         /* past the memory budget, or out of memory */
} smol_status;

/* The calling thread's last error: its code (SMOL_OK after a success) and
 * message ("" after a success). The message stays valid until the thread's
 * next smol call. */
SMOL_API smol_status smol_last_error(void) SMOL_NOEXCEPT;
SMOL_API const char* smol_last_error_message(void) SMOL_NOEXCEPT;
/* "ok", "io", "format", ... (static strings; "unknown" for other values). */
SMOL_API const char* smol_status_name(smol_status status) SMOL_NOEXCEPT;

/* ------------------------------------------------------------ build facts */

/* "0.1.0" (static). */
SMOL_API const char* smol_version(void) SMOL_NOEXCEPT;
/* One line: version, kernel level chosen at run time, best level, levels
 * compiled in, hardware threads (static once computed). */
SMOL_API const char* smol_build_info(void) SMOL_NOEXCEPT;

/* ------------------------------------------------------------ enums */

typedef enum smol_device {
    SMOL_DEVICE_CPU = 0,
    SMOL_DEVICE_CUDA = 1, /* SMOL_ERR_UNSUPPORTED from a library built without CUDA */
    SMOL_DEVICE_AUTO = 2  /* cuda when possible, else cpu */
} smol_device;

/* KV cache element type. SMOL_KV_Q8_0: 53 % of F16's bytes, CPU only (the
 * model's head_dim a multiple of 32). */
typedef enum smol_kv_type { SMOL_KV_F32 = 0, SMOL_KV_F16 = 1, SMOL_KV_Q8_0 = 2 } smol_kv_type;

/* What a generator does when a conversation outgrows its context (C++
 * ContextPolicy). */
typedef enum smol_context_policy {
    SMOL_CONTEXT_STOP = 0, /* a prompt longer than n_ctx is SMOL_ERR_OUT_OF_RANGE;
                            * a full context ends the run (SMOL_STOP_CONTEXT_FULL) */
    SMOL_CONTEXT_SHIFT = 1 /* the oldest tokens after n_keep leave the context */
} smol_context_policy;

/* The kernels' tuning at load (C++ TuneMode, kernels/tune.hpp). */
typedef enum smol_tune_mode {
    SMOL_TUNE_AUTO = 0, /* measure for models of at least 256 MiB of weights */
    SMOL_TUNE_ON = 1,   /* measure whatever the size */
    SMOL_TUNE_OFF = 2   /* the defaults */
} smol_tune_mode;

typedef enum smol_stop_reason {
    SMOL_STOP_EOS = 0,
    SMOL_STOP_MAX_TOKENS = 1,
    SMOL_STOP_STRING = 2,
    SMOL_STOP_CANCELLED = 3,
    SMOL_STOP_CONTEXT_FULL = 4
} smol_stop_reason;

/* ------------------------------------------------------------ callbacks */

/* Load progress in [0, 1]; return 0 to cancel the load (SMOL_ERR_CANCELLED). */
typedef int (*smol_progress_fn)(float progress, void* user_data);
/* A log line; level: -1 debug, 0 info, 1 warning, 2 error. */
typedef void (*smol_log_fn)(int level, const char* message, void* user_data);
/* A new piece of generated text (whole UTF-8, NUL-terminated, valid during the
 * call only); return nonzero to go on, 0 to stop (SMOL_STOP_CANCELLED). */
typedef int (*smol_piece_fn)(const char* piece, size_t length, void* user_data);
/* Called with the logits [n_vocab] before sampling; may change them. */
typedef void (*smol_logits_fn)(float* logits, size_t n_vocab, void* user_data);
/* Called first thing on a generator's async worker thread. */
typedef void (*smol_worker_start_fn)(void* user_data);

/* ------------------------------------------------------------ model */

typedef struct smol_model smol_model;

typedef struct smol_load_options {
    uint64_t size;              /* sizeof(smol_load_options) */
    int64_t n_threads;          /* 0: hardware threads, capped at physical cores */
    int64_t device;             /* smol_device; default SMOL_DEVICE_CPU */
    int64_t cuda_device;        /* which GPU; default 0 */
    uint64_t memory_budget;     /* bytes one allocation may take; 0: physical memory */
    int64_t interleave_weights; /* nonzero (default): the faster CPU weight layout */
    const char* cpu;            /* kernel level: NULL (default, automatic), "scalar", "avx2", ... */
    smol_progress_fn progress;  /* may be NULL */
    void* progress_user_data;
    smol_log_fn log; /* may be NULL (silent) */
    void* log_user_data;
    /* The kernels' speed-only settings (same bits whatever they are; C++
     * LoadOptions::tune, tune_file, kernel_params). */
    int64_t tune;          /* smol_tune_mode; default SMOL_TUNE_AUTO (SMOL_TUNE=off wins) */
    const char* tune_file; /* where tuned settings are remembered; NULL or "": none */
    /* Nonzero: pin the five settings below instead of tuning (each one of its
     * candidates in kernels/kernel_set.hpp, else SMOL_ERR_INVALID_ARGUMENT);
     * default 0. Their defaults are the C++ KernelParams' own. */
    int64_t pin_kernel_params;
    int64_t kernel_pace_steps;
    int64_t kernel_interleaved_prefetch;
    int64_t kernel_stored_prefetch;
    int64_t kernel_decode_chunks;
    int64_t kernel_codebook_gathers;
} smol_load_options;

/* Fills an options struct of `size` bytes (the caller's sizeof) with the
 * defaults: this library's defaults for the fields the size covers, nothing
 * written past size bytes (an older caller's smaller struct), zeros past this
 * library's struct (a newer caller's larger one: fields this library does not
 * know, and ignores), and size in its size field. SMOL_OK; options NULL, or a
 * size smaller than the size field (8 bytes): SMOL_ERR_INVALID_ARGUMENT,
 * nothing written. Every smol_*_init_sized below is the same for its struct.
 * From C and C++, call smol_load_options_init instead. */
SMOL_API smol_status smol_load_options_init_sized(smol_load_options* options,
                                                  size_t size) SMOL_NOEXCEPT;
/* The defaults at the size this header declares (NULL: no effect). Inline, so
 * a program keeps passing its own struct's size to a newer library. */
SMOL_INLINE void smol_load_options_init(smol_load_options* options) SMOL_NOEXCEPT {
    if (options) (void)smol_load_options_init_sized(options, sizeof *options);
}

/* options may be NULL (the defaults); path may not. NULL on failure. */
SMOL_API smol_model* smol_model_load(const char* path,
                                     const smol_load_options* options) SMOL_NOEXCEPT;
/* The caller keeps data alive and unchanged as long as the model lives (its
 * generators and batchers keep it alive past smol_model_free). data NULL,
 * whatever the size: SMOL_ERR_INVALID_ARGUMENT; options may be NULL. */
SMOL_API smol_model* smol_model_load_memory(const void* data, size_t size,
                                            const smol_load_options* options) SMOL_NOEXCEPT;
SMOL_API void smol_model_free(smol_model* model) SMOL_NOEXCEPT;

/* Facts about a loaded model (static strings / numbers; 0 or "" for NULL:
 * smol_model_device gives SMOL_DEVICE_CPU). */
SMOL_API const char* smol_model_identity(const smol_model* model) SMOL_NOEXCEPT;
SMOL_API const char* smol_model_cpu_level(const smol_model* model) SMOL_NOEXCEPT;
SMOL_API smol_device smol_model_device(const smol_model* model) SMOL_NOEXCEPT;
SMOL_API size_t smol_model_n_vocab(const smol_model* model) SMOL_NOEXCEPT;
SMOL_API size_t smol_model_n_ctx_train(const smol_model* model) SMOL_NOEXCEPT;
/* The kernel settings the load chose and why ("pace 60, ... (tuned in 180
 * ms)" or "... (not tuned: <reason>)"; C++ Model::tuning().text()). Valid as
 * long as the model handle; "" for NULL. */
SMOL_API const char* smol_model_tuning(const smol_model* model) SMOL_NOEXCEPT;

/* The text of token ids, as bytes (C++ Tokenizer::decode: a sequence may end
 * inside a UTF-8 character, so the bytes need not be valid UTF-8); special
 * tokens as their text, or left out when render_special is 0. NUL-terminated,
 * *length bytes (length may be NULL); release with smol_string_free. NULL on
 * failure: model NULL, ids NULL with n_ids > 0, an id outside the vocabulary
 * (SMOL_ERR_INVALID_ARGUMENT). */
SMOL_API char* smol_detokenize(const smol_model* model, const int32_t* ids, size_t n_ids,
                               int render_special, size_t* length) SMOL_NOEXCEPT;
SMOL_API void smol_string_free(char* text) SMOL_NOEXCEPT;

/* ------------------------------------------------------------ batcher */

/* Generators given one batcher decode in shared forward passes (many NPCs at
 * the speed of one); C++: generation/batcher.hpp, with its default options. */
typedef struct smol_batcher smol_batcher;
/* How a batcher schedules (C++ BatcherOptions, same defaults and meaning). */
typedef struct smol_batcher_options {
    uint64_t size;     /* sizeof(smol_batcher_options) */
    int64_t max_batch; /* requests (sequences) per step; 8 */
    /* Prompt tokens per step of one request while others wait: at most this
     * many, fewer when more would make a step slower than max_step_slowdown x
     * a step without prompt tokens. 64 and 1.8. */
    int64_t prefill_shared;
    double max_step_slowdown;
    int64_t prefill_alone; /* prompt tokens per step when alone */
    /* How long a step waits for members between two steps: gather_ms, or
     * gather_fraction of a step's measured time if longer. 5 ms and 0.25. */
    double gather_ms;
    double gather_fraction;
} smol_batcher_options;

/* As smol_load_options_init_sized, for smol_batcher_options. */
SMOL_API smol_status smol_batcher_options_init_sized(smol_batcher_options* options,
                                                     size_t size) SMOL_NOEXCEPT;
SMOL_INLINE void smol_batcher_options_init(smol_batcher_options* options) SMOL_NOEXCEPT {
    if (options) (void)smol_batcher_options_init_sized(options, sizeof *options);
}
/* NULL on failure (model NULL: SMOL_ERR_INVALID_ARGUMENT). The default options. */
SMOL_API smol_batcher* smol_batcher_new(const smol_model* model) SMOL_NOEXCEPT;
/* As smol_batcher_new, with options (NULL: the defaults; a negative or zero
 * count where one is needed: SMOL_ERR_INVALID_ARGUMENT). */
SMOL_API smol_batcher* smol_batcher_new_with_options(
    const smol_model* model, const smol_batcher_options* options) SMOL_NOEXCEPT;
/* Generators that use it keep it alive. */
SMOL_API void smol_batcher_free(smol_batcher* batcher) SMOL_NOEXCEPT;

/* ------------------------------------------------------------ generator */

typedef struct smol_generator smol_generator;

typedef struct smol_generator_options {
    uint64_t size;         /* sizeof(smol_generator_options) */
    int64_t n_ctx;         /* KV cache positions; 0 (default): min(4096, the model's) */
    int64_t kv_type;       /* smol_kv_type; default SMOL_KV_F16 */
    int64_t prefill_chunk; /* tokens per prefill pass; 0 (default): the model's */
    smol_batcher* batcher; /* share forward passes; NULL (default): none */
    smol_log_fn log;       /* may be NULL */
    void* log_user_data;
    smol_worker_start_fn on_worker_start; /* may be NULL */
    void* worker_start_user_data;
    int64_t context_policy; /* smol_context_policy; default SMOL_CONTEXT_STOP */
    int64_t n_keep;         /* with SMOL_CONTEXT_SHIFT: leading tokens never dropped (a text's fixed
                             * preamble; smol_chat keeps the system message anyway); default 0 */
} smol_generator_options;

/* As smol_load_options_init_sized, for smol_generator_options. */
SMOL_API smol_status smol_generator_options_init_sized(smol_generator_options* options,
                                                       size_t size) SMOL_NOEXCEPT;
SMOL_INLINE void smol_generator_options_init(smol_generator_options* options) SMOL_NOEXCEPT {
    if (options) (void)smol_generator_options_init_sized(options, sizeof *options);
}
/* options may be NULL, model may not. NULL on failure (bad n_ctx or kv_type,
 * a cache past the memory budget, ...). The generator keeps the model alive. */
SMOL_API smol_generator* smol_generator_new(const smol_model* model,
                                            const smol_generator_options* options) SMOL_NOEXCEPT;
/* During an async run of the generator: cancels the run and waits for it to
 * stop (at the next layer or token), then frees the generator. The run's
 * smol_async stays valid: it is done, its last poll gives the rest of the
 * text, and smol_async_wait its result or error (a result stopped with
 * SMOL_STOP_CANCELLED unless the run had ended already); free it as usual.
 * Not from the generator's own callbacks. */
SMOL_API void smol_generator_free(smol_generator* generator) SMOL_NOEXCEPT;
/* An independent copy (KV cache and history): e.g. many NPCs from one
 * prefilled system prompt. On the CPU the copy shares the cache's blocks of
 * positions until either writes one (copy on write), so many forks of one long
 * prompt hold it once: smol_generator_cache_memory shows the split. An
 * async run still going is waited for first (see Threading). NULL on failure
 * (e.g. generator NULL, or a call from inside one of its runs). */
SMOL_API smol_generator* smol_generator_fork(smol_generator* generator) SMOL_NOEXCEPT;
/* Forgets the history and empties the KV cache (an async run still going is
 * waited for first). generator NULL: SMOL_ERR_INVALID_ARGUMENT. */
SMOL_API smol_status smol_reset(smol_generator* generator) SMOL_NOEXCEPT;
/* Stops the run in progress (also during a prefill), from any thread; no
 * effect when nothing runs, or for NULL. */
SMOL_API void smol_cancel(smol_generator* generator) SMOL_NOEXCEPT;
/* The context's positions (0 for NULL). */
SMOL_API size_t smol_generator_n_ctx(const smol_generator* generator) SMOL_NOEXCEPT;
/* Tokens whose keys and values the cache holds (a prefix of the history; 0
 * for NULL). */
SMOL_API size_t smol_generator_n_cached(const smol_generator* generator) SMOL_NOEXCEPT;
/* The KV cache's bytes held by this generator alone (*owned) and shared with
 * its forks (*shared: counted in each of them, held once); either pointer may
 * be NULL. SMOL_ERR_INVALID_ARGUMENT for a NULL generator. */
SMOL_API smol_status smol_generator_cache_memory(const smol_generator* generator, uint64_t* owned,
                                                 uint64_t* shared) SMOL_NOEXCEPT;
/* The history: the ids of the last run's prompt and generated tokens, as the
 * cache holds them (after any shift or erase). Its length (0 for NULL): */
SMOL_API size_t smol_generator_n_history(const smol_generator* generator) SMOL_NOEXCEPT;
/* A copy of the history (*n_tokens ids); release with smol_tokens_free. NULL
 * on failure (generator or n_tokens NULL; *n_tokens is 0 then). */
SMOL_API int32_t* smol_generator_history(const smol_generator* generator,
                                         size_t* n_tokens) SMOL_NOEXCEPT;
/* Removes history tokens [first, first + count) and their cache entries; the
 * later tokens move down (their keys re-rotated), so nothing is prefilled
 * again and the next run reuses what is left. first + count past the history:
 * SMOL_ERR_OUT_OF_RANGE; while a run is going on (from inside one of its
 * callbacks): SMOL_ERR_INVALID_ARGUMENT; an async run still going is waited
 * for first; count 0: no effect; generator NULL: SMOL_ERR_INVALID_ARGUMENT.
 * From the generator's one thread, like every generator call but
 * smol_cancel; on failure the generator keeps its state.
 * The next call reuses the cache as far as its prompt matches what is left. */
SMOL_API smol_status smol_erase(smol_generator* generator, size_t first,
                                size_t count) SMOL_NOEXCEPT;

/* The per-call structs (smol_params, smol_message, smol_result, ...) and the
 * parity table of every option and result struct: smol_params.h. */
#include "smol_params.h"

/* ------------------------------------------------------------ generation */

/* Completes prompt (the program's own text: control tokens written in it are
 * parsed, unless params->prompt_as_text). params may be NULL (the defaults),
 * on_piece too; generator and prompt may not. NULL on failure (bad UTF-8
 * naming the byte offset, a prompt longer than the context, bad parameters,
 * a call from inside a run of this generator, ...). During an async run of
 * the generator it waits for that run to end, then runs (see Threading). */
SMOL_API smol_result* smol_generate(smol_generator* generator, const char* prompt,
                                    const smol_params* params, smol_piece_fn on_piece,
                                    void* user_data) SMOL_NOEXCEPT;
/* Completes a prompt given as token ids (C++ Generator::generate_tokens; no
 * BOS added): e.g. smol_tokenize's or smol_tokenize_chat's ids, edited. ids
 * may be NULL only with n_ids 0. Otherwise as smol_generate. */
SMOL_API smol_result* smol_generate_tokens(smol_generator* generator, const int32_t* ids,
                                           size_t n_ids, const smol_params* params,
                                           smol_piece_fn on_piece, void* user_data) SMOL_NOEXCEPT;
/* Renders the whole conversation with the model's chat template and generates
 * the assistant's reply; contents are always text. Reuses the cached prefix.
 * params and on_piece may be NULL; generator may not, nor messages unless
 * n_messages is 0. Failures and waiting as smol_generate. */
SMOL_API smol_result* smol_chat(smol_generator* generator, const smol_message* messages,
                                size_t n_messages, const smol_params* params,
                                smol_piece_fn on_piece, void* user_data) SMOL_NOEXCEPT;

/* ------------------------------------------------------------ async */

/* A run on the generator's worker thread, for loops that must not block (a
 * game's frame loop): start it, poll its text each frame, cancel it, wait for
 * its result. Freeing the handle cancels the run (the generator's next call
 * waits for it to stop); freeing the generator cancels it too, and the handle
 * stays valid (smol_generator_free). */
typedef struct smol_async smol_async;

/* The arguments as smol_generate's / smol_chat's (copied: nothing needs to
 * outlive the call). NULL when the run cannot start: a NULL generator, prompt
 * or messages, bad smol_params fields or counts, a call from inside a run of
 * this generator. An async run already going on is waited for first. The
 * run's own errors (bad UTF-8, a prompt longer than the context, a bad
 * grammar, ...) come from smol_async_wait. */
SMOL_API smol_async* smol_generate_async(smol_generator* generator, const char* prompt,
                                         const smol_params* params) SMOL_NOEXCEPT;
SMOL_API smol_async* smol_chat_async(smol_generator* generator, const smol_message* messages,
                                     size_t n_messages, const smol_params* params) SMOL_NOEXCEPT;
/* The text produced since the last poll ("" if none; whole UTF-8); never waits
 * for the worker. Valid until the next smol_async_poll or smol_async_free of
 * this handle. length may be NULL. Once smol_async_done is nonzero, one more
 * poll returns the rest. run NULL: "" (length 0), with SMOL_ERR_INVALID_ARGUMENT
 * as the last error. */
SMOL_API const char* smol_async_poll(smol_async* run, size_t* length) SMOL_NOEXCEPT;
/* Nonzero once the run has finished (1 for NULL). */
SMOL_API int smol_async_done(const smol_async* run) SMOL_NOEXCEPT;
/* Asks the run to stop; returns at once. Any thread. NULL: no effect. */
SMOL_API void smol_async_cancel(smol_async* run) SMOL_NOEXCEPT;
/* Blocks until the run finishes; its result, or NULL with the run's error
 * (run NULL: SMOL_ERR_INVALID_ARGUMENT). */
SMOL_API smol_result* smol_async_wait(smol_async* run) SMOL_NOEXCEPT;
SMOL_API void smol_async_free(smol_async* run) SMOL_NOEXCEPT;

/* ------------------------------------------------------------ sessions */

/* The session (history and KV cache) as bytes, tagged with the model's
 * identity; release with smol_bytes_free. NULL on failure (generator or size
 * NULL; *size is 0 then). An async run still going is waited for first. */
SMOL_API uint8_t* smol_session_save(smol_generator* generator, size_t* size) SMOL_NOEXCEPT;
/* Another model's session: SMOL_ERR_INVALID_ARGUMENT; damaged bytes:
 * SMOL_ERR_FORMAT; longer than n_ctx: SMOL_ERR_OUT_OF_RANGE. On failure the
 * generator keeps its state. generator NULL: SMOL_ERR_INVALID_ARGUMENT; data
 * NULL: SMOL_ERR_INVALID_ARGUMENT with a size, SMOL_ERR_FORMAT (no session)
 * with size 0. An async run still going is waited for first. */
SMOL_API smol_status smol_session_restore(smol_generator* generator, const uint8_t* data,
                                          size_t size) SMOL_NOEXCEPT;
SMOL_API void smol_bytes_free(uint8_t* bytes) SMOL_NOEXCEPT;

/* ------------------------------------------------------------ tokens */

/* The ids smol_generate would run for prompt (control tokens parsed unless
 * as_text), so it refuses what smol_generate refuses in a prompt: bad UTF-8 is
 * SMOL_ERR_INVALID_ARGUMENT, naming the byte offset. Release with
 * smol_tokens_free. NULL on failure (generator, prompt or n_tokens NULL;
 * *n_tokens is 0 then). */
SMOL_API int32_t* smol_tokenize(const smol_generator* generator, const char* prompt, int as_text,
                                size_t* n_tokens) SMOL_NOEXCEPT;
SMOL_API void smol_tokens_free(int32_t* tokens) SMOL_NOEXCEPT;
/* The exact ids smol_chat would run for the conversation with params' chat
 * options (add_generation_prompt, enable_thinking, today, tools, xml_tools,
 * python_tools, parse_special_in_content; params may be NULL): control tokens
 * only where the template wrote them. Release with smol_tokens_free. NULL on
 * failure (as smol_tokenize; messages as smol_chat's). */
SMOL_API int32_t* smol_tokenize_chat(const smol_generator* generator, const smol_message* messages,
                                     size_t n_messages, const smol_params* params,
                                     size_t* n_tokens) SMOL_NOEXCEPT;
/* The exact text smol_chat would run, for showing or logging (its ids are
 * smol_tokenize_chat's; tokenizing this text would parse marker text in
 * contents as control tokens). UTF-8, NUL-terminated, *length bytes (length
 * may be NULL); release with smol_string_free. NULL on failure. */
SMOL_API char* smol_render_chat(const smol_generator* generator, const smol_message* messages,
                                size_t n_messages, const smol_params* params,
                                size_t* length) SMOL_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* SMOL_H */
