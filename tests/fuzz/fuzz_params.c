/* fuzz_params.c — libFuzzer entry point: a query string and/or body (src/http/params.h: form and JSON parameters, typed
 * getters). The target body is fuzz_params() in targets.h, shared with tests/unit/test_fuzz_corpus.c. */
#include "targets.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_params(data, size);
}
