/* c-chat: a terminal chat in C99 over the C ABI (include/smol/smol.h, the
 * smol::shared library). Streams each reply, keeps the conversation (the
 * cache is reused turn after turn), and shows the error codes and messages.
 *
 *   c-chat [-m model.gguf] [-n max_tokens] [-p "one message, then exit"]
 * Without -m it runs the demo model the build makes (random weights: gibberish). */
#include <smol/smol.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SMOL_DEMO_MODEL_PATH
#define SMOL_DEMO_MODEL_PATH "smol-demo.gguf"
#endif

enum { kMaxTurns = 64, kLine = 4096 };

static int print_piece(const char* piece, size_t length, void* user_data) {
    (void)user_data;
    fwrite(piece, 1, length, stdout);
    fflush(stdout);
    return 1;
}

static char* copy_string(const char* text, size_t length) {
    char* out = (char*)malloc(length + 1);
    if (out) {
        memcpy(out, text, length);
        out[length] = '\0';
    }
    return out;
}

int main(int argc, char** argv) {
    const char* path = SMOL_DEMO_MODEL_PATH;
    const char* once = NULL;
    int max_tokens = 128, i, n = 0, status = 0;
    smol_message messages[2 * kMaxTurns + 1];
    char* owned[2 * kMaxTurns + 1];
    smol_model* model;
    smol_generator* gen;
    smol_params params;

    for (i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "-m") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            max_tokens = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) {
            once = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [-m model.gguf] [-n max_tokens] [-p message]\n", argv[0]);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }

    fprintf(stderr, "%s\n", smol_build_info());
    model = smol_model_load(path, NULL);
    if (!model) {
        fprintf(stderr, "error (%s): %s\n", smol_status_name(smol_last_error()),
                smol_last_error_message());
        return 1;
    }
    gen = smol_generator_new(model, NULL);
    if (!gen) {
        fprintf(stderr, "error (%s): %s\n", smol_status_name(smol_last_error()),
                smol_last_error_message());
        smol_model_free(model);
        return 1;
    }
    smol_params_init(&params);
    params.max_tokens = max_tokens;
    params.enable_thinking = 0;

    messages[n].role = "system";
    messages[n].content = "You are a helpful assistant.";
    messages[n].model_output = 0;
    owned[n++] = NULL;
    while (n + 2 <= 2 * kMaxTurns + 1) {
        char line[kLine];
        smol_result* reply;
        size_t length;
        if (once) {
            snprintf(line, sizeof line, "%s", once);
        } else {
            printf("> ");
            fflush(stdout);
            if (!fgets(line, sizeof line, stdin)) break;
        }
        length = strcspn(line, "\n");
        line[length] = '\0';
        if (length == 0) continue;
        messages[n].role = "user";
        messages[n].content = owned[n] = copy_string(line, length);
        messages[n].model_output = 0;
        ++n;
        reply = smol_chat(gen, messages, (size_t)n, &params, print_piece, NULL);
        printf("\n");
        if (!reply) {
            /* e.g. bad UTF-8 typed in: the turn is dropped, the chat goes on */
            fprintf(stderr, "error (%s): %s\n", smol_status_name(smol_last_error()),
                    smol_last_error_message());
            free(owned[--n]);
            status = 1;
            if (once) break;
            continue;
        }
        fprintf(stderr, "[%llu tokens, %llu of %llu prompt tokens reused, %.1f ms]\n",
                (unsigned long long)reply->n_tokens, (unsigned long long)reply->n_reused_tokens,
                (unsigned long long)reply->n_prompt_tokens, reply->prefill_ms + reply->decode_ms);
        /* The reply, verbatim, as the model's own output: its control tokens stay
         * tokens next turn, so the cache is reused. */
        messages[n].role = "assistant";
        messages[n].content = owned[n] = copy_string(reply->text, (size_t)reply->text_length);
        messages[n].model_output = 1;
        ++n;
        smol_result_free(reply);
        status = 0;
        if (once) break;
    }
    for (i = 0; i < n; ++i) free(owned[i]);
    smol_generator_free(gen);
    smol_model_free(model);
    return status;
}
