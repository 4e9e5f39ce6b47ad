/* fuzz_ids.c — libFuzzer entry point: decimal ids, compact keys, raw values and an id-generator program
 * (src/core/ids.h). The target body is fuzz_ids() in targets.h, shared with tests/unit/test_fuzz_corpus.c. */
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
    return fuzz_ids(data, size);
}
