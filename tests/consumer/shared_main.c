/* A C consumer of an installed libsmol (find_package(smol COMPONENTS shared),
 * smol::shared): it compiles against the installed smol.h, links the installed
 * library and calls into it, so a missing header, export or library file, or a
 * library that is not the one built from this tree, fails. */
#include <smol/smol.h>

#include <stdio.h>
#include <string.h>

int main(void) {
    smol_model* model;
    if (strcmp(smol_version(), SMOL_EXPECTED_VERSION) != 0) {
        fprintf(stderr, "shared consumer: version '%s', expected '%s'\n", smol_version(),
                SMOL_EXPECTED_VERSION);
        return 1;
    }
    /* An error path runs real code in the library (the loader) and the
     * thread-local error message. */
    model = smol_model_load("/nonexistent/model.gguf", NULL);
    if (model != NULL || smol_last_error() != SMOL_ERR_IO ||
        strstr(smol_last_error_message(), "/nonexistent/model.gguf") == NULL) {
        fprintf(stderr, "shared consumer: loading a missing file did not fail with io\n");
        smol_model_free(model);
        return 1;
    }
    printf("shared consumer ok: %s\n", smol_build_info());
    return 0;
}
