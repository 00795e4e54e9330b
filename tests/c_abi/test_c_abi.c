/* The C ABI from C99: every entry point, every error path, on the tiny fixture.
 * Usage: test_c_abi FIXTURES_DIR ($SMOL_FIXTURES wins). Exit 77 (a ctest skip)
 * when the fixture is missing, unless SMOL_REQUIRE_FIXTURES=1. */
#include <smol/smol.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond)                                                                             \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "%s:%d: CHECK(%s) failed; last error %s: %s\n", __FILE__, __LINE__, \
                    #cond, smol_status_name(smol_last_error()), smol_last_error_message());     \
            ++failures;                                                                         \
        }                                                                                       \
    } while (0)
/* A call that must fail with `code` and say something. */
#define CHECK_FAILS(call, code)                                                        \
    do {                                                                               \
        CHECK((call) == 0);                                                            \
        CHECK(smol_last_error() == (code));                                            \
        CHECK(strlen(smol_last_error_message()) > 0);                                  \
        if (smol_last_error() != (code))                                               \
            fprintf(stderr, "  expected %s from %s\n", smol_status_name(code), #call); \
    } while (0)

/* Piece callback: appends to a buffer, counts the calls; stops after
 * stop_after pieces when that is positive. */
typedef struct {
    char text[65536];
    size_t length;
    int calls;
    int stop_after;
    smol_generator* reenter; /* run on this generator from inside the callback */
    int reentry_status;
} Pieces;

static int on_piece(const char* piece, size_t length, void* user_data) {
    Pieces* p = (Pieces*)user_data;
    CHECK(piece[length] == '\0');
    if (p->length + length < sizeof p->text) {
        memcpy(p->text + p->length, piece, length);
        p->length += length;
        p->text[p->length] = '\0';
    }
    ++p->calls;
    if (p->reenter) {
        smol_result* inner = smol_generate(p->reenter, "again", NULL, NULL, NULL);
        p->reentry_status = inner ? SMOL_OK : (int)smol_last_error();
        smol_result_free(inner);
        p->reenter = NULL;
    }
    return p->stop_after <= 0 || p->calls < p->stop_after;
}

static int progress_calls = 0;
static int on_progress(float progress, void* user_data) {
    int cancel_at = *(int*)user_data;
    CHECK(progress >= 0.0f && progress <= 1.0f);
    ++progress_calls;
    return !(cancel_at >= 0 && progress_calls > cancel_at);
}

static int log_lines = 0;
static void on_log(int level, const char* message, void* user_data) {
    (void)level;
    (void)user_data;
    CHECK(message != NULL);
    ++log_lines;
}

static int hook_calls = 0;
static void on_logits(float* logits, size_t n_vocab, void* user_data) {
    CHECK(n_vocab == *(size_t*)user_data);
    CHECK(logits != NULL);
    ++hook_calls;
}

static int same_tokens(const smol_result* a, const smol_result* b) {
    return a->n_tokens == b->n_tokens &&
           memcmp(a->tokens, b->tokens, sizeof(int32_t) * (size_t)a->n_tokens) == 0;
}

static unsigned char* read_all(const char* path, size_t* size) {
    FILE* f = fopen(path, "rb");
    unsigned char* data;
    long n;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    data = (unsigned char*)malloc((size_t)n);
    if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return data;
}

static smol_params greedy(int max_tokens) {
    smol_params p;
    smol_params_init(&p);
    p.temperature = 0;
    p.max_tokens = max_tokens;
    return p;
}

/* ---------------------------------------------- filling at the caller's size */

/* smol_params as a program compiled against an older smol.h declared it: a
 * prefix of today's struct, size field first. guard stands for whatever the
 * program keeps after it, which the library must not touch. */
typedef struct {
    struct {
        uint64_t size;
        double temperature;
        int64_t top_k;
    } params;
    unsigned char guard[64];
} OldCaller;

#define GUARD_BYTE 0xA5

/* Room for any of the option structs and more, aligned for them. */
typedef union {
    smol_params params;
    smol_load_options load;
    unsigned char bytes[1024];
} InitBuffer;

typedef smol_status (*InitSizedFn)(void* options, size_t size);
static smol_status init_load(void* o, size_t n) {
    return smol_load_options_init_sized((smol_load_options*)o, n);
}
static smol_status init_batcher(void* o, size_t n) {
    return smol_batcher_options_init_sized((smol_batcher_options*)o, n);
}
static smol_status init_generator(void* o, size_t n) {
    return smol_generator_options_init_sized((smol_generator_options*)o, n);
}
static smol_status init_params(void* o, size_t n) {
    return smol_params_init_sized((smol_params*)o, n);
}

static int all_bytes(const unsigned char* bytes, size_t n, unsigned char value) {
    size_t i;
    for (i = 0; i < n; ++i)
        if (bytes[i] != value) return 0;
    return 1;
}

static uint64_t size_field(const void* options) {
    uint64_t size;
    memcpy(&size, options, sizeof size);
    return size;
}

/* One smol_*_init_sized against callers built with other headers. current:
 * the struct filled by the inline smol_*_init at this header's size. */
static void check_init_sized(const char* what, InitSizedFn init, const void* current,
                             size_t current_size) {
    InitBuffer buf;
    const size_t old_size = 3 * sizeof(uint64_t);
    const size_t newer_size = current_size + 5 * sizeof(uint64_t);
    const size_t n = sizeof buf.bytes;
    int before = failures;

    CHECK(size_field(current) == current_size);

    /* An older caller: the fields it has get the defaults, and not one byte
     * past its struct is written. */
    memset(buf.bytes, GUARD_BYTE, n);
    CHECK(init(buf.bytes, old_size) == SMOL_OK);
    CHECK(smol_last_error() == SMOL_OK);
    CHECK(size_field(buf.bytes) == old_size);
    CHECK(memcmp(buf.bytes + 8, (const unsigned char*)current + 8, old_size - 8) == 0);
    CHECK(all_bytes(buf.bytes + old_size, n - old_size, GUARD_BYTE));

    /* The same caller as this header: the same bytes as smol_*_init. */
    memset(buf.bytes, GUARD_BYTE, n);
    CHECK(init(buf.bytes, current_size) == SMOL_OK);
    CHECK(memcmp(buf.bytes, current, current_size) == 0);
    CHECK(all_bytes(buf.bytes + current_size, n - current_size, GUARD_BYTE));

    /* A newer caller: its size kept, the fields this library does not know
     * zeroed, nothing written past its struct. */
    memset(buf.bytes, GUARD_BYTE, n);
    CHECK(init(buf.bytes, newer_size) == SMOL_OK);
    CHECK(size_field(buf.bytes) == newer_size);
    CHECK(memcmp(buf.bytes + 8, (const unsigned char*)current + 8, current_size - 8) == 0);
    CHECK(all_bytes(buf.bytes + current_size, newer_size - current_size, 0));
    CHECK(all_bytes(buf.bytes + newer_size, n - newer_size, GUARD_BYTE));

    /* No room for the size field, or no struct: an error, nothing written. */
    memset(buf.bytes, GUARD_BYTE, n);
    CHECK(init(buf.bytes, 7) == SMOL_ERR_INVALID_ARGUMENT);
    CHECK(smol_last_error() == SMOL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(smol_last_error_message(), "size 7") != NULL);
    CHECK(init(buf.bytes, 0) == SMOL_ERR_INVALID_ARGUMENT);
    CHECK(all_bytes(buf.bytes, n, GUARD_BYTE));
    CHECK(init(NULL, current_size) == SMOL_ERR_INVALID_ARGUMENT);
    CHECK(strlen(smol_last_error_message()) > 0);
    /* A success clears the record, as every call that can fail does. */
    CHECK(init(buf.bytes, current_size) == SMOL_OK);
    CHECK(smol_last_error() == SMOL_OK && smol_last_error_message()[0] == '\0');

    if (failures != before) fprintf(stderr, "  in check_init_sized(%s)\n", what);
}

static void test_init_sized(void) {
    smol_load_options lo;
    smol_batcher_options bo;
    smol_generator_options go;
    smol_params p;
    OldCaller old;

    smol_load_options_init(&lo);
    smol_batcher_options_init(&bo);
    smol_generator_options_init(&go);
    smol_params_init(&p);
    check_init_sized("smol_load_options", init_load, &lo, sizeof lo);
    check_init_sized("smol_batcher_options", init_batcher, &bo, sizeof bo);
    check_init_sized("smol_generator_options", init_generator, &go, sizeof go);
    check_init_sized("smol_params", init_params, &p, sizeof p);

    /* The older program's own struct, by its fields. */
    memset(&old, GUARD_BYTE, sizeof old);
    CHECK(smol_params_init_sized((smol_params*)(void*)&old.params, sizeof old.params) == SMOL_OK);
    CHECK(old.params.size == sizeof old.params);
    CHECK(old.params.temperature == p.temperature && old.params.top_k == p.top_k);
    CHECK(all_bytes(old.guard, sizeof old.guard, GUARD_BYTE));

    /* The inline spellings: NULL does nothing, not even to the last error. */
    CHECK(smol_params_init_sized(NULL, sizeof p) == SMOL_ERR_INVALID_ARGUMENT);
    smol_load_options_init(NULL);
    smol_batcher_options_init(NULL);
    smol_generator_options_init(NULL);
    smol_params_init(NULL);
    CHECK(smol_last_error() == SMOL_ERR_INVALID_ARGUMENT);
}

static void test_errors_without_model(const char* path) {
    smol_load_options o;
    int never = -1, at_once = 0;
    CHECK(strcmp(smol_version(), "0.1.0") == 0 || strlen(smol_version()) > 0);
    CHECK(strstr(smol_build_info(), smol_version()) != NULL);
    CHECK(strcmp(smol_status_name(SMOL_OK), "ok") == 0);
    CHECK(strcmp(smol_status_name(SMOL_ERR_RESOURCE), "resource") == 0);
    CHECK(strcmp(smol_status_name((smol_status)99), "unknown") == 0);

    CHECK_FAILS(smol_model_load(NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
    CHECK_FAILS(smol_model_load("/nonexistent/model.gguf", NULL), SMOL_ERR_IO);
    CHECK_FAILS(smol_model_load_memory(NULL, 10, NULL), SMOL_ERR_INVALID_ARGUMENT);
    CHECK_FAILS(smol_model_load_memory("GGUF", 4, NULL), SMOL_ERR_FORMAT);

    smol_load_options_init(&o);
    o.size = 0; /* never initialized */
    CHECK_FAILS(smol_model_load(path, &o), SMOL_ERR_INVALID_ARGUMENT);
    smol_load_options_init(&o);
    o.device = 7;
    CHECK_FAILS(smol_model_load(path, &o), SMOL_ERR_INVALID_ARGUMENT);
    smol_load_options_init(&o);
    o.device = SMOL_DEVICE_CUDA; /* the shared library is a CPU build */
    CHECK_FAILS(smol_model_load(path, &o), SMOL_ERR_UNSUPPORTED);
    smol_load_options_init(&o);
    o.cpu = "pentium";
    CHECK_FAILS(smol_model_load(path, &o), SMOL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(smol_last_error_message(), "pentium") != NULL);
    smol_load_options_init(&o);
    o.n_threads = -2;
    CHECK_FAILS(smol_model_load(path, &o), SMOL_ERR_INVALID_ARGUMENT);
    /* Out of the memory budget: a KV cache larger than it. */
    smol_load_options_init(&o);
    o.memory_budget = 1000;
    {
        smol_model* m = smol_model_load(path, &o);
        CHECK(m != NULL);
        CHECK_FAILS(smol_generator_new(m, NULL), SMOL_ERR_RESOURCE);
        smol_model_free(m);
    }
    smol_load_options_init(&o);
    o.progress = on_progress;
    o.progress_user_data = &at_once;
    CHECK_FAILS(smol_model_load(path, &o), SMOL_ERR_CANCELLED);
    /* An older caller whose struct ends before memory_budget: the default (no
     * budget) applies, whatever lies past its size, so a cache fits. */
    smol_load_options_init(&o);
    o.memory_budget = 1000;
    o.size = offsetof(smol_load_options, memory_budget);
    o.progress = on_progress;
    o.progress_user_data = &never;
    {
        smol_model* m = smol_model_load(path, &o);
        smol_generator* g;
        CHECK(m != NULL);
        CHECK(smol_last_error() == SMOL_OK && smol_last_error_message()[0] == '\0');
        g = smol_generator_new(m, NULL);
        CHECK(g != NULL);
        smol_generator_free(g);
        smol_model_free(m);
    }
    smol_model_free(NULL);
}

static void test_generate(smol_model* model) {
    smol_generator_options go;
    smol_generator* gen;
    smol_generator* other;
    smol_result* r;
    smol_result* again;
    smol_params p = greedy(16);
    Pieces* pieces = (Pieces*)calloc(1, sizeof(Pieces));
    size_t n_vocab = smol_model_n_vocab(model);

    /* Generator options and their errors. */
    CHECK_FAILS(smol_generator_new(NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
    smol_generator_options_init(&go);
    go.n_ctx = -1;
    CHECK_FAILS(smol_generator_new(model, &go), SMOL_ERR_INVALID_ARGUMENT);
    go.n_ctx = (int64_t)smol_model_n_ctx_train(model) + 1;
    CHECK_FAILS(smol_generator_new(model, &go), SMOL_ERR_INVALID_ARGUMENT);
    smol_generator_options_init(&go);
    go.kv_type = 9;
    CHECK_FAILS(smol_generator_new(model, &go), SMOL_ERR_INVALID_ARGUMENT);
    go.kv_type = SMOL_KV_Q8_0; /* a q8_0 cache: the same run, fewer bytes per position */
    {
        smol_generator* q8 = smol_generator_new(model, &go);
        smol_result* q8_result = q8 ? smol_generate(q8, "Once upon a time", NULL, NULL, NULL) : NULL;
        uint64_t owned = 0;
        CHECK(q8_result != NULL);
        CHECK(q8 && smol_generator_cache_memory(q8, &owned, NULL) == SMOL_OK && owned > 0);
        smol_result_free(q8_result);
        smol_generator_free(q8);
    }
    smol_generator_options_init(&go);
    go.size = 3;
    CHECK_FAILS(smol_generator_new(model, &go), SMOL_ERR_INVALID_ARGUMENT);
    smol_generator_options_init(&go);
    CHECK(go.context_policy == SMOL_CONTEXT_STOP && go.n_keep == 0);
    go.context_policy = 2;
    CHECK_FAILS(smol_generator_new(model, &go), SMOL_ERR_INVALID_ARGUMENT);
    smol_generator_options_init(&go);
    go.n_keep = -1;
    CHECK_FAILS(smol_generator_new(model, &go), SMOL_ERR_INVALID_ARGUMENT);

    smol_generator_options_init(&go);
    go.n_ctx = 256;
    go.log = on_log;
    gen = smol_generator_new(model, &go);
    CHECK(gen != NULL);
    if (!gen) return;
    CHECK(smol_generator_n_ctx(gen) == 256);
    CHECK(smol_generator_n_cached(gen) == 0);

    /* Greedy, streamed: the pieces are the text. */
    r = smol_generate(gen, "Once upon a time", &p, on_piece, pieces);
    CHECK(r != NULL);
    if (!r) return;
    CHECK(r->size == sizeof(smol_result));
    CHECK(r->n_tokens > 0 && r->n_tokens <= 16);
    CHECK(r->stop_reason == SMOL_STOP_MAX_TOKENS || r->stop_reason == SMOL_STOP_EOS);
    CHECK(r->text_length == pieces->length && strcmp(r->text, pieces->text) == 0);
    CHECK(r->n_prompt_tokens > 0 && r->n_reused_tokens == 0);
    CHECK(r->n_discarded_tokens == 0 && r->n_prompt_discarded_tokens == 0);
    CHECK(r->prefill_ms >= 0 && r->decode_ms >= 0);
    CHECK(strcmp(r->tool_calls_json, "[]") == 0);
    CHECK(r->matched_stop[0] == '\0');
    CHECK(smol_generator_n_cached(gen) > 0);

    /* The same run on another generator: the same tokens; with the defaults
     * (params NULL) it samples, so only check it runs. */
    other = smol_generator_new(model, NULL);
    again = smol_generate(other, "Once upon a time", &p, NULL, NULL);
    CHECK(again && same_tokens(r, again));
    smol_result_free(again);
    again = smol_generate(other, "Once upon a time", NULL, NULL, NULL);
    CHECK(again && again->n_reused_tokens > 0);
    smol_result_free(again);

    /* Fork and reset; a fork shares the parent's cache blocks until it writes them. */
    {
        uint64_t owned = 1, shared = 1, parent_owned = 0;
        CHECK(smol_generator_cache_memory(gen, &parent_owned, &shared) == SMOL_OK);
        CHECK(parent_owned > 0 && shared == 0);
        smol_generator* fork = smol_generator_fork(gen);
        CHECK(fork && smol_generator_n_cached(fork) == smol_generator_n_cached(gen));
        CHECK(smol_generator_cache_memory(fork, &owned, &shared) == SMOL_OK);
        CHECK(owned == 0 && shared == parent_owned);
        CHECK(smol_generator_cache_memory(fork, NULL, NULL) == SMOL_OK);
        CHECK(smol_generator_cache_memory(NULL, &owned, &shared) == SMOL_ERR_INVALID_ARGUMENT);
        CHECK(owned == 0 && shared == 0);
        CHECK(smol_reset(fork) == SMOL_OK);
        CHECK(smol_generator_n_cached(fork) == 0);
        again = smol_generate(fork, "Once upon a time", &p, NULL, NULL);
        CHECK(again && same_tokens(r, again));
        smol_result_free(again);
        smol_generator_free(fork);
        CHECK_FAILS(smol_generator_fork(NULL), SMOL_ERR_INVALID_ARGUMENT);
        CHECK(smol_reset(NULL) == SMOL_ERR_INVALID_ARGUMENT);
    }

    /* Sessions: restore into a fresh generator, then the next run reuses the cache. */
    {
        size_t size = 0;
        uint8_t* bytes = smol_session_save(gen, &size);
        smol_generator* restored = smol_generator_new(model, &go);
        CHECK(bytes && size > 0);
        CHECK(smol_session_restore(restored, bytes, size) == SMOL_OK);
        CHECK(smol_generator_n_cached(restored) == smol_generator_n_cached(gen));
        again = smol_generate(restored, "Once upon a time", &p, NULL, NULL);
        CHECK(again && again->n_reused_tokens == again->n_prompt_tokens - 1 &&
              same_tokens(r, again));
        smol_result_free(again);
        CHECK(smol_session_restore(restored, bytes, size / 2) == SMOL_ERR_FORMAT);
        bytes[size - 1] ^= 0x55;
        CHECK(smol_session_restore(restored, bytes, size) == SMOL_ERR_FORMAT);
        CHECK(smol_session_restore(restored, NULL, 0) == SMOL_ERR_FORMAT);
        CHECK(smol_session_restore(restored, NULL, 5) == SMOL_ERR_INVALID_ARGUMENT);
        CHECK(smol_session_restore(NULL, bytes, size) == SMOL_ERR_INVALID_ARGUMENT);
        CHECK_FAILS(smol_session_save(NULL, &size), SMOL_ERR_INVALID_ARGUMENT);
        CHECK_FAILS(smol_session_save(gen, NULL), SMOL_ERR_INVALID_ARGUMENT);
        smol_bytes_free(bytes);
        smol_bytes_free(NULL);
        smol_generator_free(restored);
    }

    /* Input errors: each a code and a message, the generator still usable. */
    CHECK_FAILS(smol_generate(NULL, "x", &p, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
    CHECK_FAILS(smol_generate(gen, NULL, &p, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
    CHECK_FAILS(smol_generate(gen, "bad \xff utf-8", &p, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(smol_last_error_message(), "UTF-8") != NULL);
    CHECK_FAILS(smol_generate(gen, "", &p, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
    {
        char long_prompt[4000];
        memset(long_prompt, 'a', sizeof long_prompt - 1);
        long_prompt[sizeof long_prompt - 1] = '\0';
        CHECK_FAILS(smol_generate(gen, long_prompt, &p, NULL, NULL), SMOL_ERR_OUT_OF_RANGE);
    }
    {
        smol_params bad = greedy(4);
        bad.size = 0;
        CHECK_FAILS(smol_generate(gen, "x", &bad, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
        bad = greedy(4);
        bad.n_stop = -1;
        CHECK_FAILS(smol_generate(gen, "x", &bad, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
        bad = greedy(4);
        bad.n_stop = 2;
        CHECK_FAILS(smol_generate(gen, "x", &bad, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
        bad = greedy(4);
        bad.top_k = (int64_t)1 << 40;
        CHECK_FAILS(smol_generate(gen, "x", &bad, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
        bad = greedy(4);
        bad.repeat_penalty = 0;
        CHECK_FAILS(smol_generate(gen, "x", &bad, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
        bad = greedy(4);
        bad.grammar = "root ::= \"a\"";
        bad.json_schema = "{\"type\": \"string\"}";
        CHECK_FAILS(smol_generate(gen, "x", &bad, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
        bad = greedy(4);
        bad.grammar = "root ::= (";
        CHECK_FAILS(smol_generate(gen, "x", &bad, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
        /* An older caller's struct that ends before grammar: the bad grammar
         * past its size is never read. */
        bad.size = offsetof(smol_params, grammar);
        again = smol_generate(gen, "x", &bad, NULL, NULL);
        CHECK(again != NULL && smol_last_error() == SMOL_OK);
        smol_result_free(again);
    }

    /* The callback stops the run; a run started inside it is refused. */
    memset(pieces, 0, sizeof *pieces);
    pieces->stop_after = 2;
    pieces->reenter = gen;
    again = smol_generate(gen, "Once upon a time", &p, on_piece, pieces);
    CHECK(again && again->stop_reason == SMOL_STOP_CANCELLED && pieces->calls == 2);
    CHECK(pieces->reentry_status == SMOL_ERR_INVALID_ARGUMENT);
    /* The refused inner call's error does not outlive the outer success. */
    CHECK(smol_last_error() == SMOL_OK && smol_last_error_message()[0] == '\0');
    smol_result_free(again);
    smol_cancel(gen); /* nothing runs: no effect */
    smol_cancel(NULL);

    /* Stop strings: the first piece of the greedy text stops the next run. */
    {
        smol_params s = greedy(16);
        const char* stops[1];
        char stop[2] = {0, 0};
        size_t i;
        for (i = 0; i < r->text_length && !stop[0]; ++i)
            if ((unsigned char)r->text[i] < 0x80 && r->text[i] > ' ') stop[0] = r->text[i];
        if (!stop[0]) stop[0] = 'e'; /* no ASCII letter: the run then ends otherwise */
        stops[0] = stop;
        s.stop = stops;
        s.n_stop = 1;
        again = smol_generate(gen, "Once upon a time", &s, NULL, NULL);
        CHECK(again &&
              (again->stop_reason == SMOL_STOP_STRING) == (strchr(r->text, stop[0]) != NULL));
        CHECK(again &&
              (again->stop_reason != SMOL_STOP_STRING || strcmp(again->matched_stop, stop) == 0));
        smol_result_free(again);
    }

    /* Logit bias and the logits hook: +100 on one token makes greedy pick it. */
    {
        smol_params b = greedy(3);
        smol_logit_bias bias = {42, 100.0f};
        b.logit_bias = &bias;
        b.n_logit_bias = 1;
        b.logits_hook = on_logits;
        b.logits_hook_user_data = &n_vocab;
        b.ignore_eos = 1;
        hook_calls = 0;
        again = smol_generate(gen, "Once upon a time", &b, NULL, NULL);
        CHECK(again && again->n_tokens == 3);
        CHECK(again && again->tokens[0] == 42 && again->tokens[1] == 42 && again->tokens[2] == 42);
        CHECK(hook_calls == 3);
        smol_result_free(again);
    }

    /* A grammar: the whole text follows it, and eos ends it. */
    {
        smol_params g = greedy(8);
        g.grammar = "root ::= \"yes\" | \"no\"";
        again = smol_generate(gen, "Answer:", &g, NULL, NULL);
        CHECK(again && (strcmp(again->text, "yes") == 0 || strcmp(again->text, "no") == 0));
        CHECK(again && again->stop_reason == SMOL_STOP_EOS);
        smol_result_free(again);
    }

    /* Tokenize. */
    {
        size_t n = 0;
        int32_t* ids = smol_tokenize(gen, "<|im_start|>user", 0, &n);
        size_t n_text = 0;
        int32_t* text_ids = smol_tokenize(gen, "<|im_start|>user", 1, &n_text);
        CHECK(ids && n >= 2 && ids[0] == 128011);
        CHECK(text_ids && n_text > n);
        smol_tokens_free(ids);
        smol_tokens_free(text_ids);
        CHECK_FAILS(smol_tokenize(gen, "x", 0, NULL), SMOL_ERR_INVALID_ARGUMENT);
        CHECK_FAILS(smol_tokenize(NULL, "x", 0, &n), SMOL_ERR_INVALID_ARGUMENT);
        CHECK_FAILS(smol_tokenize(gen, NULL, 0, &n), SMOL_ERR_INVALID_ARGUMENT);
        /* Tokenize gives the ids generate would run, so it rejects what
         * generate rejects: bad UTF-8 (\377: the byte 0xff), with the same
         * code and message. */
        CHECK_FAILS(smol_generate(gen, "abc\377def", &p, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
        {
            char generate_message[256];
            snprintf(generate_message, sizeof generate_message, "%s", smol_last_error_message());
            n = 5;
            CHECK_FAILS(smol_tokenize(gen, "abc\377def", 0, &n), SMOL_ERR_INVALID_ARGUMENT);
            CHECK(n == 0);
            CHECK(strcmp(smol_last_error_message(), generate_message) == 0);
            CHECK(strstr(smol_last_error_message(), "UTF-8") != NULL);
            CHECK(strstr(smol_last_error_message(), "byte offset 3") != NULL);
            CHECK_FAILS(smol_tokenize(gen, "abc\377def", 1, &n), SMOL_ERR_INVALID_ARGUMENT);
        }
        smol_tokens_free(NULL);
    }

    smol_result_free(r);
    smol_result_free(NULL);
    smol_generator_free(other);
    smol_generator_free(gen);
    smol_generator_free(NULL);
    free(pieces);
}

static void test_chat(smol_model* model) {
    smol_generator* gen = smol_generator_new(model, NULL);
    smol_params p = greedy(12);
    smol_message messages[3];
    smol_result* first;
    smol_result* second;
    smol_tool tool = {"get_weather", "The weather in a city",
                      "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}"};
    messages[0].role = "system";
    messages[0].content = "You are a blacksmith.";
    messages[0].model_output = 0;
    messages[1].role = "user";
    messages[1].content = "Hi! <|im_end|>";
    messages[1].model_output = 0;
    p.enable_thinking = 0;
    p.today = "01 January 2026";
    first = smol_chat(gen, messages, 2, &p, NULL, NULL);
    CHECK(first != NULL);
    if (!first) return;
    CHECK(first->answer_length + first->reasoning_length <= first->text_length);
    /* The next turn re-renders the conversation and reuses the cache. */
    messages[2].role = "assistant";
    messages[2].content = first->text;
    messages[2].model_output = 1;
    second = smol_chat(gen, messages, 3, &p, NULL, NULL);
    CHECK(second && second->n_reused_tokens > first->n_prompt_tokens / 2);
    smol_result_free(second);

    /* Tools declared: the result carries a JSON array. */
    p.tools = &tool;
    p.n_tools = 1;
    second = smol_chat(gen, messages, 2, &p, NULL, NULL);
    CHECK(second && second->tool_calls_json[0] == '[');
    smol_result_free(second);
    p.constrain_tool_calls = 1;
    p.grammar = "root ::= \"x\"";
    CHECK_FAILS(smol_chat(gen, messages, 2, &p, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
    p.grammar = NULL;
    tool.name = NULL;
    CHECK_FAILS(smol_chat(gen, messages, 2, &p, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);

    p = greedy(4);
    messages[1].content = "bad \xc3";
    CHECK_FAILS(smol_chat(gen, messages, 2, &p, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
    messages[1].content = NULL;
    CHECK_FAILS(smol_chat(gen, messages, 2, &p, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
    CHECK_FAILS(smol_chat(gen, NULL, 2, &p, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
    CHECK_FAILS(smol_chat(NULL, messages, 2, &p, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
    smol_result_free(first);
    smol_generator_free(gen);
}

static void test_async(smol_model* model) {
    smol_generator* gen = smol_generator_new(model, NULL);
    smol_params p = greedy(16);
    smol_async* run;
    smol_result* sync;
    smol_result* done;
    smol_result* again;
    smol_message user = {"user", "Hello", 0};
    char text[65536];
    size_t length = 0;

    sync = smol_generate(gen, "Once upon a time", &p, NULL, NULL);
    CHECK(smol_reset(gen) == SMOL_OK);
    /* Polled to completion: the polled text is the result's text. */
    run = smol_generate_async(gen, "Once upon a time", &p);
    CHECK(run != NULL);
    for (;;) {
        size_t n = 0;
        const int finished = smol_async_done(run);
        const char* piece = smol_async_poll(run, &n);
        CHECK(piece != NULL && piece[n] == '\0');
        if (length + n < sizeof text) {
            memcpy(text + length, piece, n);
            length += n;
        }
        if (finished) break;
    }
    text[length] = '\0';
    done = smol_async_wait(run);
    CHECK(done && sync && same_tokens(done, sync) && strcmp(done->text, text) == 0);
    smol_result_free(done);
    smol_async_free(run);

    /* Cancelled at once: a run that would fill the context stops early. */
    p.max_tokens = -1;
    p.ignore_eos = 1;
    run = smol_generate_async(gen, "Once upon a time", &p);
    smol_async_cancel(run);
    done = smol_async_wait(run);
    CHECK(done && done->stop_reason == SMOL_STOP_CANCELLED);
    smol_result_free(done);
    smol_async_free(run);

    /* smol_cancel on the generator stops its async run too. */
    run = smol_chat_async(gen, &user, 1, &p);
    smol_cancel(gen);
    done = smol_async_wait(run);
    CHECK(done && done->stop_reason == SMOL_STOP_CANCELLED);
    smol_result_free(done);
    smol_async_free(run);

    /* An error on the worker comes back from wait. */
    run = smol_generate_async(gen, "bad \xff", &p);
    CHECK(run != NULL);
    CHECK_FAILS(smol_async_wait(run), SMOL_ERR_INVALID_ARGUMENT);
    smol_async_free(run);
    /* Freed while running: cancels it; the generator's next run waits for it. */
    run = smol_generate_async(gen, "Once upon a time", &p);
    smol_async_free(run);

    /* A smol_generate during a live async run is not refused: it waits for
     * the run to end, then runs. The async run ends whole (not cancelled) and
     * the sync run gives the tokens it gives on a fresh generator. */
    CHECK(smol_reset(gen) == SMOL_OK);
    p = greedy(200);
    p.ignore_eos = 1;
    run = smol_generate_async(gen, "Once upon a time", &p);
    CHECK(run != NULL);
    if (run && smol_async_done(run))
        printf("note: the async run ended before smol_generate was called\n");
    p = greedy(16);
    again = smol_generate(gen, "Once upon a time", &p, NULL, NULL);
    CHECK(again && sync && same_tokens(again, sync));
    CHECK(smol_async_done(run));
    done = smol_async_wait(run);
    CHECK(done && done->stop_reason == SMOL_STOP_MAX_TOKENS && done->n_tokens == 200);
    smol_result_free(done);
    smol_result_free(again);
    smol_async_free(run);

    /* Freeing the generator during its async run cancels the run (and waits
     * for it to stop); the handle stays valid: done, its result, the rest of
     * its text. */
    {
        smol_generator* doomed = smol_generator_new(model, NULL);
        size_t n = 0;
        const char* rest;
        p = greedy(-1);
        p.ignore_eos = 1;
        run = doomed ? smol_generate_async(doomed, "Once upon a time", &p) : NULL;
        CHECK(run != NULL);
        smol_generator_free(doomed);
        CHECK(smol_async_done(run));
        rest = smol_async_poll(run, &n);
        CHECK(rest != NULL && rest[n] == '\0');
        done = smol_async_wait(run);
        CHECK(done && done->stop_reason == SMOL_STOP_CANCELLED);
        CHECK(done && n == done->text_length);
        smol_result_free(done);
        smol_async_free(run);
    }

    CHECK_FAILS(smol_generate_async(NULL, "x", &p), SMOL_ERR_INVALID_ARGUMENT);
    CHECK_FAILS(smol_chat_async(gen, NULL, 1, &p), SMOL_ERR_INVALID_ARGUMENT);
    CHECK_FAILS(smol_async_wait(NULL), SMOL_ERR_INVALID_ARGUMENT);
    CHECK(smol_async_done(NULL) == 1);
    smol_async_cancel(NULL);
    smol_async_free(NULL);
    smol_result_free(sync);
    smol_generator_free(gen);
}

/* Piece callback that erases from its own generator (refused: a run is going). */
typedef struct {
    smol_generator* gen;
    smol_status status;
} EraseInside;

static int on_piece_erase(const char* piece, size_t length, void* user_data) {
    EraseInside* e = (EraseInside*)user_data;
    (void)piece;
    (void)length;
    e->status = smol_erase(e->gen, 0, 1);
    return 1;
}

static int history_is(smol_generator* gen, const int32_t* want, size_t n) {
    size_t n_history = 0;
    int32_t* history = smol_generator_history(gen, &n_history);
    const int same = history && n_history == n && n_history == smol_generator_n_history(gen) &&
                     memcmp(history, want, n * sizeof(int32_t)) == 0;
    smol_tokens_free(history);
    return same;
}

static int history_is_prefix(smol_generator* gen, const int32_t* want, size_t n) {
    size_t n_history = 0;
    int32_t* history = smol_generator_history(gen, &n_history);
    const int same = history && n_history >= n && memcmp(history, want, n * sizeof(int32_t)) == 0;
    smol_tokens_free(history);
    return same;
}

static void test_erase(smol_model* model) {
    const char* prompt = "The blacksmith said hello to the traveller.";
    smol_generator_options go;
    smol_generator* gen;
    smol_params p = greedy(8);
    smol_result* r;
    smol_result* again;
    int32_t* before;
    int32_t* expected;
    size_t n = 0, cached, i;
    EraseInside inside;

    smol_generator_options_init(&go);
    go.n_ctx = 256;
    gen = smol_generator_new(model, &go);
    CHECK(gen != NULL);
    if (!gen) return;
    CHECK(smol_generator_n_history(gen) == 0);
    r = smol_generate(gen, prompt, &p, NULL, NULL);
    CHECK(r != NULL);
    if (!r) return;
    /* The history is the prompt and the generated ids; the cache all but
     * possibly the last. */
    before = smol_generator_history(gen, &n);
    CHECK(before && n == r->n_prompt_tokens + r->n_tokens && n == smol_generator_n_history(gen));
    if (!before) return;
    CHECK(memcmp(before + r->n_prompt_tokens, r->tokens, r->n_tokens * sizeof(int32_t)) == 0);
    cached = smol_generator_n_cached(gen);
    CHECK(cached + 1 >= n && cached <= n);

    /* Erasing the generated tail rewinds: the same prompt then reuses all but
     * its last token and generates the same ids again. */
    CHECK(smol_erase(gen, (size_t)r->n_prompt_tokens, (size_t)r->n_tokens) == SMOL_OK);
    CHECK(smol_last_error() == SMOL_OK);
    CHECK(history_is(gen, before, (size_t)r->n_prompt_tokens));
    CHECK(smol_generator_n_cached(gen) == r->n_prompt_tokens);
    again = smol_generate(gen, prompt, &p, NULL, NULL);
    CHECK(again && again->n_reused_tokens == again->n_prompt_tokens - 1 && same_tokens(r, again));
    smol_result_free(again);

    /* A middle range: history and cache shrink together. */
    CHECK(history_is(gen, before, n));
    cached = smol_generator_n_cached(gen);
    CHECK(smol_erase(gen, 3, 5) == SMOL_OK);
    expected = (int32_t*)malloc(n * sizeof(int32_t));
    memcpy(expected, before, 3 * sizeof(int32_t));
    memcpy(expected + 3, before + 8, (n - 8) * sizeof(int32_t));
    CHECK(history_is(gen, expected, n - 5));
    CHECK(smol_generator_n_cached(gen) == cached - 5);
    /* The last token, which the cache may not hold: only the history shrinks. */
    CHECK(smol_erase(gen, n - 6, 1) == SMOL_OK);
    CHECK(smol_generator_n_history(gen) == n - 6);
    CHECK(smol_generator_n_cached(gen) == n - 6);
    CHECK(smol_erase(gen, 2, 0) == SMOL_OK);
    CHECK(smol_generator_n_history(gen) == n - 6);

    /* Errors: past the history, no generator, inside a run; nothing changes. */
    CHECK(smol_erase(gen, 2, n) == SMOL_ERR_OUT_OF_RANGE);
    CHECK(strlen(smol_last_error_message()) > 0);
    CHECK(smol_erase(gen, n - 5, 0) == SMOL_ERR_OUT_OF_RANGE);
    CHECK(smol_erase(gen, (size_t)-1, 2) == SMOL_ERR_OUT_OF_RANGE);
    CHECK(history_is(gen, expected, n - 6));
    CHECK(smol_erase(NULL, 0, 0) == SMOL_ERR_INVALID_ARGUMENT);
    inside.gen = gen;
    inside.status = SMOL_OK;
    again = smol_generate(gen, prompt, &p, on_piece_erase, &inside);
    CHECK(again != NULL && inside.status == SMOL_ERR_INVALID_ARGUMENT);
    CHECK(smol_last_error() == SMOL_OK);
    smol_result_free(again);
    CHECK(smol_erase(gen, 0, smol_generator_n_history(gen)) == SMOL_OK);
    CHECK(smol_generator_n_history(gen) == 0 && smol_generator_n_cached(gen) == 0);
    CHECK_FAILS(smol_generator_history(gen, NULL), SMOL_ERR_INVALID_ARGUMENT);
    CHECK_FAILS(smol_generator_history(NULL, &n), SMOL_ERR_INVALID_ARGUMENT);
    CHECK(n == 0 && smol_generator_n_history(NULL) == 0);
    for (i = 0; i < 2; ++i) { /* an empty history is still a pointer to free */
        int32_t* empty = smol_generator_history(gen, &n);
        CHECK(empty != NULL && n == 0);
        smol_tokens_free(empty);
    }

    free(expected);
    smol_tokens_free(before);
    smol_result_free(r);
    smol_generator_free(gen);
}

/* A generator of n_ctx 64 with the given policy; size: the caller's struct
 * size (0: the whole struct). */
static smol_generator* small_generator(smol_model* model, int64_t policy, uint64_t size) {
    smol_generator_options go;
    smol_generator_options_init(&go);
    go.n_ctx = 64;
    go.context_policy = policy;
    go.n_keep = 4;
    if (size) go.size = size;
    return smol_generator_new(model, &go);
}

static void test_shift(smol_model* model) {
    const char* prompt = "Once upon a time, in a village by the sea, there lived";
    const char* sentence = "The smith hammered the red iron until it rang. ";
    char long_prompt[2048];
    smol_generator* gen = small_generator(model, SMOL_CONTEXT_SHIFT, 0);
    smol_generator* stop = small_generator(model, SMOL_CONTEXT_STOP, 0);
    smol_generator* older;
    smol_params p = greedy(150);
    smol_result* r;
    int32_t* head;
    size_t n_head = 0, i;
    CHECK(gen && stop);
    if (!gen || !stop) return;
    p.ignore_eos = 1;

    /* Generating past n_ctx: the oldest tokens after n_keep go, the run goes on. */
    r = smol_generate(gen, prompt, &p, NULL, NULL);
    CHECK(r && r->stop_reason == SMOL_STOP_MAX_TOKENS && r->n_tokens == 150);
    CHECK(r && r->n_discarded_tokens > 0 && r->n_prompt_discarded_tokens == 0);
    CHECK(r && r->n_prompt_tokens + r->n_tokens - r->n_discarded_tokens ==
                   smol_generator_n_history(gen));
    CHECK(smol_generator_n_history(gen) <= 64 && smol_generator_n_cached(gen) <= 64);
    head = smol_tokenize(gen, prompt, 0, &n_head);
    CHECK(head && n_head > 4 && history_is_prefix(gen, head, 4));
    smol_tokens_free(head);
    smol_result_free(r);

    /* With SMOL_CONTEXT_STOP the same run ends at the context. */
    r = smol_generate(stop, prompt, &p, NULL, NULL);
    CHECK(r && r->stop_reason == SMOL_STOP_CONTEXT_FULL && r->n_discarded_tokens == 0);
    smol_result_free(r);

    /* A prompt longer than the context: shown without its oldest part. */
    long_prompt[0] = '\0';
    for (i = 0; i < 12; ++i) strcat(long_prompt, sentence);
    p = greedy(4);
    CHECK_FAILS(smol_generate(stop, long_prompt, &p, NULL, NULL), SMOL_ERR_OUT_OF_RANGE);
    CHECK(smol_reset(gen) == SMOL_OK);
    r = smol_generate(gen, long_prompt, &p, NULL, NULL);
    CHECK(r && r->n_prompt_tokens > 64 && r->n_prompt_discarded_tokens > 0);
    CHECK(r && r->n_discarded_tokens >= r->n_prompt_discarded_tokens);
    CHECK(r && r->n_prompt_tokens - r->n_reused_tokens - r->n_prompt_discarded_tokens <= 64);
    smol_result_free(r);

    /* An older caller's struct, which ends before context_policy: the default
     * (stop) applies, whatever lies past its size. */
    older = small_generator(model, SMOL_CONTEXT_SHIFT,
                            offsetof(smol_generator_options, context_policy));
    CHECK(older != NULL && smol_last_error() == SMOL_OK);
    p = greedy(150);
    p.ignore_eos = 1;
    r = older ? smol_generate(older, prompt, &p, NULL, NULL) : NULL;
    CHECK(r && r->stop_reason == SMOL_STOP_CONTEXT_FULL && r->n_discarded_tokens == 0);
    smol_result_free(r);
    smol_generator_free(older);
    /* ... and one whose struct ends before n_keep gets n_keep 0: shift works. */
    older = small_generator(model, SMOL_CONTEXT_SHIFT, offsetof(smol_generator_options, n_keep));
    r = older ? smol_generate(older, prompt, &p, NULL, NULL) : NULL;
    CHECK(r && r->stop_reason == SMOL_STOP_MAX_TOKENS && r->n_discarded_tokens > 0);
    smol_result_free(r);
    smol_generator_free(older);

    smol_generator_free(gen);
    smol_generator_free(stop);
}

static void test_batcher(smol_model* model) {
    smol_batcher* batcher = smol_batcher_new(model);
    smol_generator_options go;
    smol_generator* a;
    smol_generator* b;
    smol_params p = greedy(8);
    smol_result* ra;
    smol_result* rb;
    CHECK(batcher != NULL);
    smol_generator_options_init(&go);
    go.batcher = batcher;
    a = smol_generator_new(model, &go);
    b = smol_generator_new(model, &go);
    smol_batcher_free(batcher); /* the generators keep it */
    ra = smol_generate(a, "Once upon a time", &p, NULL, NULL);
    rb = smol_generate(b, "Once upon a time", &p, NULL, NULL);
    CHECK(ra && rb && same_tokens(ra, rb));
    smol_result_free(ra);
    smol_result_free(rb);
    smol_generator_free(a);
    smol_generator_free(b);
    CHECK_FAILS(smol_batcher_new(NULL), SMOL_ERR_INVALID_ARGUMENT);
    smol_batcher_free(NULL);
}

/* Two runs' token ids differ. */
static int tokens_differ(const smol_result* a, const smol_result* b) {
    return a->n_tokens != b->n_tokens ||
           memcmp(a->tokens, b->tokens, a->n_tokens * sizeof(int32_t)) != 0;
}

/* A run on a fresh cache: one knob against its default on the same prompt. */
static smol_result* fresh_run(smol_generator* gen, const char* prompt, const smol_params* p) {
    CHECK(smol_reset(gen) == SMOL_OK);
    return smol_generate(gen, prompt, p, NULL, NULL);
}

/* The knobs appended to smol_params after constrain_tool_calls (DRY, XTC,
 * lookup decoding, xml_tools / python_tools), smol_generate_tokens,
 * smol_detokenize, smol_tokenize_chat and smol_render_chat. */
static void test_knobs(smol_model* model) {
    /* A prompt whose greedy continuation repeats itself: what DRY penalizes
     * and what lookup decoding drafts from. */
    const char* prompt = "one two three four, one two three four, one two three four, one two";
    smol_generator* gen = smol_generator_new(model, NULL);
    smol_params p = greedy(48);
    smol_params q;
    smol_result* plain;
    smol_result* r;
    p.ignore_eos = 1;
    p.lookup = 0; /* plain decoding, the baseline (the default, -1, would run lookup) */
    CHECK(gen != NULL);
    if (!gen) return;
    plain = fresh_run(gen, prompt, &p);
    CHECK(plain != NULL && plain->n_tokens == 48);
    if (!plain) return;
    /* Plain decoding: one step per token after the first, nothing drafted. */
    CHECK(plain->n_decode_steps + 1 >= plain->n_tokens && plain->n_drafted_tokens == 0);

    /* The defaults are the C++ ones, the breakers included. */
    smol_params_init(&q);
    CHECK(q.dry_multiplier == 0 && q.dry_base == 1.75 && q.dry_allowed_length == 2);
    CHECK(q.dry_penalty_last_n == -1 && q.n_dry_sequence_breakers == 4);
    CHECK(q.dry_sequence_breakers && strcmp(q.dry_sequence_breakers[0], "\n") == 0 &&
          strcmp(q.dry_sequence_breakers[3], "*") == 0);
    CHECK(q.xtc_probability == 0 && q.xtc_threshold > 0.09 && q.xtc_threshold < 0.11);
    CHECK(q.lookup == -1 && q.lookup_k == 4 && q.lookup_max_ngram == 3); /* -1: automatic */
    CHECK(q.n_xml_tools == 0 && q.n_python_tools == 0);

    /* DRY on: the repeats are penalized, so the greedy tokens change. */
    q = p;
    q.dry_multiplier = 4;
    r = fresh_run(gen, prompt, &q);
    CHECK(r && tokens_differ(r, plain));
    smol_result_free(r);
    /* DRY with its window off (dry_penalty_last_n 0) is plain decoding. */
    q.dry_penalty_last_n = 0;
    r = fresh_run(gen, prompt, &q);
    CHECK(r && same_tokens(r, plain));
    smol_result_free(r);
    q = p;
    q.dry_allowed_length = 0;
    CHECK_FAILS(fresh_run(gen, prompt, &q), SMOL_ERR_INVALID_ARGUMENT);
    q = p;
    q.n_dry_sequence_breakers = -1;
    CHECK_FAILS(fresh_run(gen, prompt, &q), SMOL_ERR_INVALID_ARGUMENT);
    {
        const char* breakers[2] = {"\n", NULL};
        q = p;
        q.dry_multiplier = 4;
        q.dry_sequence_breakers = breakers;
        q.n_dry_sequence_breakers = 2;
        CHECK_FAILS(fresh_run(gen, prompt, &q), SMOL_ERR_INVALID_ARGUMENT);
        CHECK(strstr(smol_last_error_message(), "dry_sequence_breakers[1]") != NULL);
        /* No breakers at all (a count of 0) is allowed. */
        q.n_dry_sequence_breakers = 0;
        r = fresh_run(gen, prompt, &q);
        CHECK(r && tokens_differ(r, plain));
        smol_result_free(r);
    }

    /* XTC on a seeded sampled run: removing the likeliest tokens changes them. */
    {
        smol_params sampled = p;
        smol_result* base;
        sampled.temperature = 1.0;
        sampled.top_k = 0;
        sampled.top_p = 1.0;
        sampled.min_p = 0;
        sampled.seed = 7;
        base = fresh_run(gen, prompt, &sampled);
        q = sampled;
        q.xtc_probability = 1.0;
        q.xtc_threshold = 0.01;
        r = fresh_run(gen, prompt, &q);
        CHECK(base && r && tokens_differ(r, base));
        smol_result_free(r);
        /* A threshold above 0.5 turns it off: the same tokens as without. */
        q.xtc_threshold = 0.6;
        r = fresh_run(gen, prompt, &q);
        CHECK(base && r && same_tokens(r, base));
        smol_result_free(r);
        smol_result_free(base);
        q.xtc_probability = 1.5;
        CHECK_FAILS(fresh_run(gen, prompt, &q), SMOL_ERR_INVALID_ARGUMENT);
    }

    /* Lookup decoding: greedy output is plain decoding's, in fewer steps. */
    q = p;
    q.lookup = 1;
    q.lookup_k = 4;
    r = fresh_run(gen, prompt, &q);
    CHECK(r && same_tokens(r, plain));
    CHECK(r && r->n_drafted_tokens > 0 && r->n_accepted_drafts > 0);
    CHECK(r && r->n_accepted_drafts <= r->n_drafted_tokens);
    CHECK(r && r->n_decode_steps < plain->n_decode_steps);
    smol_result_free(r);
    q.lookup_k = -1;
    CHECK_FAILS(fresh_run(gen, prompt, &q), SMOL_ERR_INVALID_ARGUMENT);
    q.lookup_k = 4;
    q.lookup_max_ngram = 0;
    CHECK_FAILS(fresh_run(gen, prompt, &q), SMOL_ERR_INVALID_ARGUMENT);

    /* An older caller's smol_params that ends before the new fields: they
     * keep their defaults, whatever lies past its size. */
    {
        smol_result* automatic;
        q = p;
        q.lookup = -1;
        automatic = fresh_run(gen, prompt, &q); /* the default lookup mode */
        q.size = offsetof(smol_params, dry_multiplier);
        q.dry_multiplier = 4;
        q.lookup = 0;
        q.lookup_k = -5;
        r = fresh_run(gen, prompt, &q);
        CHECK(r && automatic && same_tokens(r, plain) &&
              r->n_drafted_tokens == automatic->n_drafted_tokens && r->n_drafted_tokens > 0);
        smol_result_free(r);
        smol_result_free(automatic);
    }

    /* The token ids of the prompt generate what the text generates. */
    {
        size_t n = 0;
        int32_t* ids = smol_tokenize(gen, prompt, 0, &n);
        char* text;
        size_t length = 0;
        CHECK(ids && n > 0);
        CHECK(smol_reset(gen) == SMOL_OK);
        r = smol_generate_tokens(gen, ids, n, &p, NULL, NULL);
        CHECK(r && same_tokens(r, plain) && r->n_prompt_tokens == n);
        CHECK(r && r->text_length == plain->text_length && strcmp(r->text, plain->text) == 0);
        smol_result_free(r);
        /* ... and back to the text: ids -> text -> ids is the identity here. */
        text = smol_detokenize(model, ids, n, 1, &length);
        CHECK(text && length == strlen(text) && strcmp(text, prompt) == 0);
        smol_string_free(text);
        /* The generated ids are the generated text (no end token: max_tokens). */
        text = smol_detokenize(model, plain->tokens, plain->n_tokens, 1, &length);
        CHECK(text && length == plain->text_length && strcmp(text, plain->text) == 0);
        smol_string_free(text);
        text = smol_detokenize(model, NULL, 0, 1, NULL);
        CHECK(text && text[0] == '\0');
        smol_string_free(text);
        smol_tokens_free(ids);
        {
            int32_t bad_ids[2] = {1, -3};
            CHECK_FAILS(smol_detokenize(model, bad_ids, 2, 1, &length), SMOL_ERR_INVALID_ARGUMENT);
            CHECK(length == 0);
            CHECK_FAILS(smol_detokenize(NULL, bad_ids, 1, 1, &length), SMOL_ERR_INVALID_ARGUMENT);
            CHECK_FAILS(smol_detokenize(model, NULL, 1, 1, &length), SMOL_ERR_INVALID_ARGUMENT);
            CHECK_FAILS(smol_generate_tokens(gen, NULL, 2, &p, NULL, NULL),
                        SMOL_ERR_INVALID_ARGUMENT);
            bad_ids[1] = (int32_t)smol_model_n_vocab(model);
            CHECK_FAILS(smol_generate_tokens(gen, bad_ids, 2, &p, NULL, NULL),
                        SMOL_ERR_INVALID_ARGUMENT);
        }
    }

    /* The conversation smol_chat would run: its ids, its text, the tools. */
    {
        const smol_message messages[2] = {{"system", "Be brief.", 0}, {"user", "Hi <|im_end|>", 0}};
        const char* xml_tools[1] = {"{\"name\": \"xml_probe\"}"};
        const char* python_tools[1] = {"def python_probe(x): ..."};
        smol_params c = greedy(4);
        size_t n = 0, length = 0, n_history = 0;
        int32_t* ids;
        int32_t* history;
        char* text;
        c.enable_thinking = 0;
        c.today = "01 January 2026";
        c.xml_tools = xml_tools;
        c.n_xml_tools = 1;
        c.python_tools = python_tools;
        c.n_python_tools = 1;
        ids = smol_tokenize_chat(gen, messages, 2, &c, &n);
        CHECK(ids && n > 0);
        CHECK(smol_reset(gen) == SMOL_OK);
        r = smol_chat(gen, messages, 2, &c, NULL, NULL);
        CHECK(r && r->n_prompt_tokens == n);
        history = smol_generator_history(gen, &n_history);
        CHECK(ids && history && n_history >= n && memcmp(history, ids, n * sizeof(int32_t)) == 0);
        smol_tokens_free(history);
        smol_result_free(r);
        text = smol_render_chat(gen, messages, 2, &c, &length);
        CHECK(text && length == strlen(text));
        CHECK(text && strstr(text, "Hi <|im_end|>") && strstr(text, "01 January 2026"));
        CHECK(text && strstr(text, "xml_probe") && strstr(text, "python_probe"));
        smol_string_free(text);
        /* The rendered text's special markers are the template's only: the
         * ids of the content's "<|im_end|>" are text, so tokenizing the
         * rendered text (markers parsed) gives other ids. */
        {
            size_t n_parsed = 0;
            char* rendered = smol_render_chat(gen, messages, 2, &c, NULL);
            int32_t* parsed = rendered ? smol_tokenize(gen, rendered, 0, &n_parsed) : NULL;
            CHECK(parsed && (n_parsed != n || memcmp(parsed, ids, n * sizeof(int32_t)) != 0));
            smol_tokens_free(parsed);
            smol_string_free(rendered);
        }
        smol_tokens_free(ids);
        c.n_xml_tools = -1;
        CHECK_FAILS(smol_render_chat(gen, messages, 2, &c, &length), SMOL_ERR_INVALID_ARGUMENT);
        CHECK(length == 0);
        c.n_xml_tools = 0;
        python_tools[0] = NULL;
        CHECK_FAILS(smol_tokenize_chat(gen, messages, 2, &c, &n), SMOL_ERR_INVALID_ARGUMENT);
        CHECK(n == 0);
        CHECK_FAILS(smol_tokenize_chat(gen, messages, 2, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
        CHECK_FAILS(smol_tokenize_chat(NULL, messages, 2, NULL, &n), SMOL_ERR_INVALID_ARGUMENT);
        CHECK_FAILS(smol_render_chat(gen, NULL, 2, NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
        /* NULL params: the defaults. */
        text = smol_render_chat(gen, messages, 1, NULL, NULL);
        CHECK(text && strstr(text, "Be brief."));
        smol_string_free(text);
    }
    smol_result_free(plain);
    smol_generator_free(gen);
}

/* The load's tuning knobs: pinned kernel settings, the modes, a tune file. */
static void test_tuning(const char* path) {
    smol_load_options o;
    smol_model* m;
    char file[4200];
    FILE* f;
    smol_load_options_init(&o);
    CHECK(o.tune == SMOL_TUNE_AUTO && o.tune_file == NULL && o.pin_kernel_params == 0);
    CHECK(o.kernel_pace_steps == 60 && o.kernel_interleaved_prefetch == 8192);
    CHECK(o.kernel_stored_prefetch == 4096 && o.kernel_decode_chunks == 8);
    CHECK(o.kernel_codebook_gathers == 0);
    o.n_threads = 2;
    o.pin_kernel_params = 1;
    o.kernel_decode_chunks = 16;
    m = smol_model_load(path, &o);
    CHECK(m && strstr(smol_model_tuning(m), "decode chunks 16") != NULL);
    smol_model_free(m);
    CHECK(smol_model_tuning(NULL)[0] == '\0');
    o.kernel_decode_chunks = 5; /* not a candidate */
    CHECK_FAILS(smol_model_load(path, &o), SMOL_ERR_INVALID_ARGUMENT);
    o.kernel_decode_chunks = 8;
    o.kernel_codebook_gathers = 2; /* not a candidate */
    CHECK_FAILS(smol_model_load(path, &o), SMOL_ERR_INVALID_ARGUMENT);
    smol_load_options_init(&o);
    o.tune = 3;
    CHECK_FAILS(smol_model_load(path, &o), SMOL_ERR_INVALID_ARGUMENT);
    /* tune off: the defaults, "not tuned". */
    o.tune = SMOL_TUNE_OFF;
    o.n_threads = 2;
    m = smol_model_load(path, &o);
    CHECK(m && strstr(smol_model_tuning(m), "not tuned") != NULL);
    smol_model_free(m);
    /* tune on with a file: measured (unless SMOL_TUNE=off), then remembered. */
    snprintf(file, sizeof file, "%s", "smol_c_abi_tune.txt");
    remove(file);
    o.tune = SMOL_TUNE_ON;
    o.tune_file = file;
    m = smol_model_load(path, &o);
    CHECK(m != NULL);
    {
        const char* env = getenv("SMOL_TUNE");
        const int off = env && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0);
        if (m && !off) {
            CHECK(strstr(smol_model_tuning(m), "tuned in") != NULL);
            f = fopen(file, "rb");
            CHECK(f != NULL);
            if (f) fclose(f);
        }
    }
    smol_model_free(m);
    remove(file);
}

/* smol_batcher_options: the defaults are C++'s, bad values are refused, and
 * generators on a batcher made with options run as without one. */
static void test_batcher_options(smol_model* model) {
    smol_batcher_options bo;
    smol_batcher* batcher;
    smol_generator_options go;
    smol_generator* a;
    smol_generator* alone;
    smol_params p = greedy(8);
    smol_result* ra;
    smol_result* rb;
    smol_batcher_options_init(&bo);
    CHECK(bo.size == sizeof bo && bo.max_batch == 8 && bo.prefill_shared == 64);
    CHECK(bo.max_step_slowdown == 1.8 && bo.prefill_alone > 0);
    CHECK(bo.gather_ms == 5.0 && bo.gather_fraction == 0.25);
    bo.max_batch = 0;
    CHECK_FAILS(smol_batcher_new_with_options(model, &bo), SMOL_ERR_INVALID_ARGUMENT);
    bo.max_batch = -2;
    CHECK_FAILS(smol_batcher_new_with_options(model, &bo), SMOL_ERR_INVALID_ARGUMENT);
    CHECK_FAILS(smol_batcher_new_with_options(NULL, NULL), SMOL_ERR_INVALID_ARGUMENT);
    bo.size = 0;
    CHECK_FAILS(smol_batcher_new_with_options(model, &bo), SMOL_ERR_INVALID_ARGUMENT);
    smol_batcher_options_init(&bo);
    bo.max_batch = 2;
    bo.prefill_alone = 3; /* a prompt in steps of 3 tokens: the same result */
    bo.gather_ms = 1;
    batcher = smol_batcher_new_with_options(model, &bo);
    CHECK(batcher != NULL);
    smol_generator_options_init(&go);
    go.batcher = batcher;
    a = smol_generator_new(model, &go);
    alone = smol_generator_new(model, NULL);
    smol_batcher_free(batcher);
    ra = smol_generate(a, "Once upon a time", &p, NULL, NULL);
    rb = smol_generate(alone, "Once upon a time", &p, NULL, NULL);
    CHECK(ra && rb && same_tokens(ra, rb));
    smol_result_free(ra);
    smol_result_free(rb);
    smol_generator_free(a);
    smol_generator_free(alone);
}

int main(int argc, char** argv) {
    const char* dir = getenv("SMOL_FIXTURES");
    const char* required = getenv("SMOL_REQUIRE_FIXTURES");
    char path[4096];
    smol_load_options o;
    smol_model* model;
    smol_model* from_memory;
    unsigned char* bytes;
    size_t size = 0;
    int never = -1;
    FILE* probe;

    /* Needs no model: runs even when the fixture is missing. */
    test_init_sized();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }

    if (!dir || !*dir) dir = argc > 1 ? argv[1] : "../shared/fixtures";
    snprintf(path, sizeof path, "%s/tiny-q4km.gguf", dir);
    probe = fopen(path, "rb");
    if (!probe) {
        if (required && strcmp(required, "1") == 0) {
            fprintf(stderr, "fixture '%s' is missing and SMOL_REQUIRE_FIXTURES=1\n", path);
            return 1;
        }
        printf("skipping: fixture '%s' not found (set SMOL_FIXTURES)\n", path);
        return 77;
    }
    fclose(probe);
    printf("%s\n", smol_build_info());

    test_errors_without_model(path);

    smol_load_options_init(&o);
    o.n_threads = 2;
    o.progress = on_progress;
    o.progress_user_data = &never;
    o.log = on_log;
    progress_calls = 0;
    model = smol_model_load(path, &o);
    CHECK(model != NULL);
    if (!model) return 1;
    CHECK(progress_calls > 1);
    CHECK(smol_model_n_vocab(model) == 128256);
    CHECK(smol_model_n_ctx_train(model) == 4096);
    CHECK(smol_model_device(model) == SMOL_DEVICE_CPU);
    CHECK(strncmp(smol_model_identity(model), "smollm3-", 8) == 0);
    CHECK(strlen(smol_model_cpu_level(model)) > 0);
    CHECK(smol_model_n_vocab(NULL) == 0 && smol_model_identity(NULL)[0] == '\0');

    bytes = read_all(path, &size);
    CHECK(bytes != NULL);
    from_memory = smol_model_load_memory(bytes, size, NULL);
    CHECK(from_memory && strcmp(smol_model_identity(from_memory), smol_model_identity(model)) == 0);

    test_generate(model);
    test_chat(model);
    test_async(model);
    test_batcher(model);
    test_erase(model);
    test_shift(model);
    test_knobs(model);
    test_batcher_options(model);
    test_tuning(path);

    /* A generator outlives the handle of its model. */
    {
        smol_generator* gen = smol_generator_new(from_memory, NULL);
        smol_params p = greedy(4);
        smol_result* r;
        smol_model_free(from_memory);
        r = smol_generate(gen, "Once upon a time", &p, NULL, NULL);
        CHECK(r && r->n_tokens > 0);
        smol_result_free(r);
        smol_generator_free(gen);
    }
    free(bytes);
    smol_model_free(model);

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all C ABI checks passed\n");
    return 0;
}
