/* fuzz_config.c — libFuzzer entry point: INI text (src/core/config.h: config_load_string, config_print,
 * config_validate). The target body is fuzz_config() in targets.h, shared with tests/unit/test_fuzz_corpus.c. */
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
    return fuzz_config(data, size);
}
