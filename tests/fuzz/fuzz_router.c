/* fuzz_router.c — libFuzzer entry point: a raw request path (src/core/router.h: router_match, router_method_allowed,
 * router_percent_decode). The target body is fuzz_router() in targets.h, shared with tests/unit/test_fuzz_corpus.c. */
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
    return fuzz_router(data, size);
}
