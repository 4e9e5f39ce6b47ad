/* fuzz_job.c — libFuzzer entry point: a POST /push body, topic list or bizKey (src/core/job.h).
 * The target body is fuzz_job() in targets.h, shared with tests/unit/test_fuzz_corpus.c. */
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
    return fuzz_job(data, size);
}
