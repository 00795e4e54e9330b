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
 * or a named reason not to: the parity table at the end of this header,
 * which tests/test_surface.cpp checks both ways against the C++ headers.
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
    int64_t n_keep; /* with SMOL_CONTEXT_SHIFT: leading tokens never dropped (a text's fixed
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
    int64_t lookup;           /* nonzero: on; default 0 */
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
                                           smol_piece_fn on_piece,
                                           void* user_data) SMOL_NOEXCEPT;
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
SMOL_API int32_t* smol_tokenize_chat(const smol_generator* generator,
                                     const smol_message* messages, size_t n_messages,
                                     const smol_params* params, size_t* n_tokens) SMOL_NOEXCEPT;
/* The exact text smol_chat would run, for showing or logging (its ids are
 * smol_tokenize_chat's; tokenizing this text would parse marker text in
 * contents as control tokens). UTF-8, NUL-terminated, *length bytes (length
 * may be NULL); release with smol_string_free. NULL on failure. */
SMOL_API char* smol_render_chat(const smol_generator* generator, const smol_message* messages,
                                size_t n_messages, const smol_params* params,
                                size_t* length) SMOL_NOEXCEPT;

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
 *   LookupParams::enabled                   smol_params.lookup
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
 *      handling, ownership, errors, threading); a field is appended to its
 *      struct, 64 bits wide, never inserted or reordered (the size rule at the
 *      top); a C++ field's row in the parity table above
 *   2. src/smol_c.cpp             the definition: noexcept, through guarded();
 *      a struct read with read_sized(); its default in the struct's
 *      default_*() filler taken from the C++ struct's own; the size
 *      static_assert updated. A new option struct: its exported
 *      smol_*_init_sized (through init_sized(), writing at the caller's size)
 *      and the inline smol_*_init here that passes sizeof *options; the
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

#ifdef __cplusplus
}
#endif

#endif /* SMOL_H */
