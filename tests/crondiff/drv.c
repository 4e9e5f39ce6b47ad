/* drv.c — prints the fires cron.c computes, for crondiff.py to compare with ref.py.
 *
 *   drv ZONE A B < expressions      one line per expression: its fires in (A, B] (unix s),
 *                                   or "ERR <message>" when cron_parse refuses it */
#include "base/cron.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    char err[CRON_ERR_MAX], line[256];
    if (argc != 4)
        return 2;
    struct tz *tz = tz_load(argv[1], err, sizeof err);
    if (!tz) {
        fprintf(stderr, "drv: %s\n", err);
        return 1;
    }
    long long a = atoll(argv[2]), b = atoll(argv[3]);
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        struct cron_rule s;
        if (cron_rule_init_cron(&s, line, tz, err, sizeof err) < 0) {
            printf("ERR %s\n", err);
            continue;
        }
        int64_t t = a * 1000;
        while ((t = cron_rule_next(&s, t)) != CRON_NEVER && t <= b * 1000)
            printf("%lld ", (long long)(t / 1000));
        printf("\n");
    }
    tz_free(tz);
    return 0;
}
