/* test_config.c — src/core/config.h: defaults, the strict INI reader, validation and printing. */
#include "core/config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME "test.conf"

static struct config cfg;
static char err[512];

static int load(const char *text)
{
    config_defaults(&cfg);
    err[0] = '\0';
    return config_load_string(&cfg, NAME, text, err, sizeof err);
}

/* `text` must fail at `line`, with a message naming the file, the line and `word` (the key). */
static void load_fails(const char *text, int line, const char *word)
{
    ck_assert_msg(load(text) == -1, "accepted:\n%s", text);
    char where[64];
    snprintf(where, sizeof where, NAME ":%d:", line);
    ck_assert_msg(strstr(err, where) != NULL, "\"%s\" does not start with %s (text: %s)", err, where, text);
    if (word)
        ck_assert_msg(strstr(err, word) != NULL, "\"%s\" does not name %s", err, word);
}

/* ---- defaults and the contract's keys ---- */

START_TEST(test_defaults)
{
    config_defaults(&cfg);
    /* the contract's "Config keys" list */
    ck_assert_str_eq(cfg.listen, "127.0.0.1:8080");
    ck_assert_int_eq(cfg.http_threads, 0);
    ck_assert_int_eq(cfg.max_body, 65536);
    ck_assert_int_eq(cfg.longpoll_max, 60);
    ck_assert_str_eq(cfg.token, "");
    ck_assert_str_eq(cfg.admin_token, "");
    ck_assert_str_eq(cfg.redis_address, "127.0.0.1:6379");
    ck_assert_str_eq(cfg.redis_password, "");
    ck_assert_int_eq(cfg.redis_db, 0);
    ck_assert_str_eq(cfg.redis_prefix, "hg");
    ck_assert_int_eq(cfg.redis_shards, 8);
    ck_assert_str_eq(cfg.mysql_host, "127.0.0.1");
    ck_assert_int_eq(cfg.mysql_port, 3306);
    ck_assert_str_eq(cfg.mysql_socket, "");
    ck_assert_str_eq(cfg.mysql_user, "hourglass");
    ck_assert_str_eq(cfg.mysql_password, "");
    ck_assert_str_eq(cfg.mysql_database, "hourglass");
    ck_assert_int_eq(cfg.retention_days, 7);
    ck_assert_int_eq(cfg.default_ttr, 30000);
    ck_assert_int_eq(cfg.default_tries, 3);
    ck_assert_int_eq(cfg.max_delay, INT64_C(31536000000)); /* 365 days */
    ck_assert_int_eq(cfg.log_level, 2);                    /* info */
    ck_assert_str_eq(cfg.log_file, "");
    /* the contract's limits */
    ck_assert_int_eq(cfg.max_batch, 1000);
    /* an empty file changes nothing */
    struct config before = cfg;
    ck_assert_int_eq(config_load_string(&cfg, NAME, "", err, sizeof err), 0);
    ck_assert_int_eq(memcmp(&before, &cfg, sizeof cfg), 0);
    /* and the defaults are valid */
    ck_assert_msg(config_validate(&cfg, err, sizeof err) == 0, "%s", err);
}
END_TEST

static const char *const contract_ini = "[http]\n"
                                        "listen = 0.0.0.0:9090\n"
                                        "threads = 3\n"
                                        "max_body = 100000\n"
                                        "longpoll_max = 20\n"
                                        "token = tok-1\n"
                                        "admin_token = adm-2\n"
                                        "\n"
                                        "[redis]\n"
                                        "address = unix:/run/redis/redis.sock\n"
                                        "password = rpw\n"
                                        "db = 5\n"
                                        "prefix = hgtest\n"
                                        "shards = 16\n"
                                        "\n"
                                        "[mysql]\n"
                                        "host = db.example.com\n"
                                        "port = 3307\n"
                                        "socket = /run/mysqld/mysqld.sock\n"
                                        "user = hg_user\n"
                                        "password = mpw\n"
                                        "database = hg_db\n"
                                        "retention_days = 30\n"
                                        "\n"
                                        "[queue]\n"
                                        "default_ttr = 60000\n"
                                        "default_tries = 5\n"
                                        "max_delay = 86400000\n"
                                        "\n"
                                        "[log]\n"
                                        "level = debug\n"
                                        "file = /var/log/hourglass.log\n";

START_TEST(test_contract_keys_accepted)
{
    ck_assert_msg(load(contract_ini) == 0, "%s", err);
    ck_assert_str_eq(cfg.listen, "0.0.0.0:9090");
    ck_assert_int_eq(cfg.http_threads, 3);
    ck_assert_int_eq(cfg.max_body, 100000);
    ck_assert_int_eq(cfg.longpoll_max, 20);
    ck_assert_str_eq(cfg.token, "tok-1");
    ck_assert_str_eq(cfg.admin_token, "adm-2");
    ck_assert_str_eq(cfg.redis_address, "unix:/run/redis/redis.sock");
    ck_assert_str_eq(cfg.redis_password, "rpw");
    ck_assert_int_eq(cfg.redis_db, 5);
    ck_assert_str_eq(cfg.redis_prefix, "hgtest");
    ck_assert_int_eq(cfg.redis_shards, 16);
    ck_assert_str_eq(cfg.mysql_host, "db.example.com");
    ck_assert_int_eq(cfg.mysql_port, 3307);
    ck_assert_str_eq(cfg.mysql_socket, "/run/mysqld/mysqld.sock");
    ck_assert_str_eq(cfg.mysql_user, "hg_user");
    ck_assert_str_eq(cfg.mysql_password, "mpw");
    ck_assert_str_eq(cfg.mysql_database, "hg_db");
    ck_assert_int_eq(cfg.retention_days, 30);
    ck_assert_int_eq(cfg.default_ttr, 60000);
    ck_assert_int_eq(cfg.default_tries, 5);
    ck_assert_int_eq(cfg.max_delay, 86400000);
    ck_assert_int_eq(cfg.log_level, 3); /* debug */
    ck_assert_str_eq(cfg.log_file, "/var/log/hourglass.log");
    ck_assert_msg(config_validate(&cfg, err, sizeof err) == 0, "%s", err);
}
END_TEST

START_TEST(test_contract_keys_with_empty_values)
{
    /* the contract shows these keys with nothing after '=' */
    ck_assert_msg(load("[http]\ntoken =\nadmin_token =\n[redis]\npassword =\n[mysql]\nsocket =\npassword =\n"
                       "[log]\nfile =\n") == 0,
                  "%s", err);
    ck_assert_str_eq(cfg.token, "");
    ck_assert_str_eq(cfg.log_file, "");
}
END_TEST

START_TEST(test_value_types)
{
    ck_assert_int_eq(load("[mysql]\nper_row_commit = true\n"), 0);
    ck_assert_int_eq(cfg.journal_per_row, 1);
    ck_assert_int_eq(load("[mysql]\nper_row_commit = false\n"), 0);
    ck_assert_int_eq(cfg.journal_per_row, 0);
    load_fails("[mysql]\nper_row_commit = maybe\n", 2, "per_row_commit");

    static const char *const levels[] = {"error", "warn", "info", "debug"};
    char text[128];
    for (int i = 0; i < 4; i++) {
        snprintf(text, sizeof text, "[log]\nlevel = %s\n", levels[i]);
        ck_assert_int_eq(load(text), 0);
        ck_assert_int_eq(cfg.log_level, i);
    }
    load_fails("[log]\nlevel = verbose\n", 2, "level");
    load_fails("[log]\nlevel =\n", 2, "level");

    ck_assert_int_eq(load("[instance]\nworker_id = auto\n"), 0);
    ck_assert_int_eq(cfg.worker_id, -1);
    ck_assert_int_eq(load("[instance]\nworker_id = 0\n"), 0);
    ck_assert_int_eq(cfg.worker_id, 0);
    ck_assert_int_eq(load("[instance]\nworker_id = 1023\n"), 0);
    ck_assert_int_eq(cfg.worker_id, 1023);
    load_fails("[instance]\nworker_id = 1024\n", 2, "worker_id");
    load_fails("[instance]\nworker_id = -1\n", 2, "worker_id");
    load_fails("[instance]\nworker_id = x\n", 2, "worker_id");

    /* strings have a length limit */
    char *long_value = malloc(CONFIG_STR_MAX + 64);
    ck_assert_ptr_nonnull(long_value);
    int n = snprintf(long_value, CONFIG_STR_MAX + 64, "[http]\nlisten = ");
    memset(long_value + n, 'h', CONFIG_STR_MAX - 1);
    long_value[n + CONFIG_STR_MAX - 1] = '\0';
    ck_assert_int_eq(load(long_value), 0);
    ck_assert_uint_eq(strlen(cfg.listen), CONFIG_STR_MAX - 1);
    strcat(long_value, "h");
    load_fails(long_value, 2, "listen");
    free(long_value);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_unknown_section)
{
    load_fails("[http]\nthreads = 1\n[nosuch]\n", 3, "nosuch");
    load_fails("[HTTP]\n", 1, "HTTP");
    load_fails("# leading comment\n[queues]\ndefault_ttr = 1\n", 2, "queues");
}
END_TEST

START_TEST(test_unknown_key)
{
    load_fails("[redis]\n\nshard = 4\n", 3, "shard");
    load_fails("[http]\nport = 3306\n", 2, "port"); /* a key of another section */
    load_fails("[queue]\ndefault_ttr = 1\nDefault_Tries = 2\n", 3, "Default_Tries");
    load_fails("[log]\nlevel = info\nfile = x\ncolour = yes\n", 4, "colour");
}
END_TEST

START_TEST(test_bad_integer)
{
    static const char *const bad[] = {"two", "1.5", "12abc", "0x10", "1 2",
                                      "1e3", "--1", "+-1",   "3,5",  "99999999999999999999"};
    char text[128];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "[http]\nthreads = %s\n", bad[i]);
        load_fails(text, 2, "threads");
        snprintf(text, sizeof text, "[log]\nlevel = info\n[queue]\nmax_delay = %s\n", bad[i]);
        load_fails(text, 4, "max_delay");
    }
    load_fails("[http]\nthreads =\n", 2, "threads");
    load_fails("[mysql]\nport = \"\"\n", 2, "port");
}
END_TEST

START_TEST(test_out_of_range)
{
    static const struct {
        const char *text;
        int line;
        const char *key;
    } cases[] = {
        {"[mysql]\nport = 0\n", 2, "port"},
        {"[mysql]\nport = 65536\n", 2, "port"},
        {"[mysql]\nport = -1\n", 2, "port"},
        {"[mysql]\nretention_days = -1\n", 2, "retention_days"},
        {"[redis]\nshards = 0\n", 2, "shards"},
        {"[redis]\nshards = 257\n", 2, "shards"}, /* ids.h: 1..256 shards */
        {"[redis]\ndb = -1\n", 2, "db"},
        {"[http]\nthreads = -1\n", 2, "threads"},
        {"[http]\nlongpoll_max = -1\n", 2, "longpoll_max"},
        {"[http]\nmax_body = -1\n", 2, "max_body"},
        {"[http]\nmax_body = 0\n", 2, "max_body"},
        {"[queue]\ndefault_tries = 0\n", 2, "default_tries"}, /* contract: tries >= 1 */
        {"[queue]\ndefault_ttr = -1\n", 2, "default_ttr"},
        {"[queue]\nmax_delay = -1\n", 2, "max_delay"},
        /* values beyond an int must not wrap into range */
        {"[http]\nthreads = 4294967297\n", 2, "threads"},
        {"[mysql]\nport = 4294970592\n", 2, "port"},     /* 2^32 + 3296 */
        {"[redis]\nshards = 4294967304\n", 2, "shards"}, /* 2^32 + 8 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        load_fails(cases[i].text, cases[i].line, cases[i].key);
    /* the edges themselves are fine */
    ck_assert_int_eq(load("[mysql]\nport = 1\n"), 0);
    ck_assert_int_eq(load("[mysql]\nport = 65535\n"), 0);
    ck_assert_int_eq(cfg.mysql_port, 65535);
    ck_assert_int_eq(load("[redis]\nshards = 1\n"), 0);
    ck_assert_int_eq(load("[redis]\nshards = 256\n"), 0);
    ck_assert_int_eq(cfg.redis_shards, 256);
    ck_assert_int_eq(load("[queue]\ndefault_tries = 1\ndefault_ttr = 0\nmax_delay = 0\n"), 0);
}
END_TEST

START_TEST(test_key_outside_section)
{
    load_fails("threads = 4\n[http]\n", 1, "threads");
    load_fails("# comment\n\nlisten = 1.2.3.4:5\n", 3, "listen");
}
END_TEST

START_TEST(test_malformed_lines)
{
    load_fails("[http\nthreads = 1\n", 1, NULL);
    load_fails("[http]\nthreads = 1\n[redis] extra\n", 3, NULL);
    load_fails("[http] # a comment is not allowed here\n", 1, NULL);
    load_fails("[http]]\n", 1, NULL);
    load_fails("[]\n", 1, NULL);
    load_fails("[http]\nthreads\n", 2, NULL); /* no '=' */
    load_fails("[http]\n= 4\n", 2, NULL);     /* no key */
}
END_TEST

START_TEST(test_first_error_reported)
{
    ck_assert_int_eq(load("[http]\nthreads = 7\nbogus = 1\nthreads = x\n"), -1);
    ck_assert_ptr_nonnull(strstr(err, NAME ":3:")); /* the first problem, not a later one */
    ck_assert_ptr_nonnull(strstr(err, "bogus"));
}
END_TEST

/* ---- syntax ---- */

START_TEST(test_comments_and_blank_lines)
{
    ck_assert_msg(load("# a comment\n"
                       "; another\n"
                       "   # indented\n"
                       "\t; tab-indented\n"
                       "\n"
                       "   \n"
                       "[http]\n"
                       "# threads = 9\n"
                       "threads = 2\n") == 0,
                  "%s", err);
    ck_assert_int_eq(cfg.http_threads, 2);
    /* no inline comments: '#' and ';' are part of a value (tokens may contain them) */
    ck_assert_int_eq(load("[http]\ntoken = abc # def\nadmin_token = x;y\n"), 0);
    ck_assert_str_eq(cfg.token, "abc # def");
    ck_assert_str_eq(cfg.admin_token, "x;y");
    /* ...which makes a commented number a bad number */
    load_fails("[http]\nthreads = 4 # four\n", 2, "threads");
}
END_TEST

START_TEST(test_whitespace_and_quotes)
{
    ck_assert_int_eq(load("  [http]  \n   threads   =   5   \n\ttoken\t=\tab cd\t\n"), 0);
    ck_assert_int_eq(cfg.http_threads, 5);
    ck_assert_str_eq(cfg.token, "ab cd"); /* inner spaces kept, outer trimmed */

    ck_assert_int_eq(load("[http]\ntoken = \"  padded  \"\n"), 0);
    ck_assert_str_eq(cfg.token, "  padded  ");
    ck_assert_int_eq(load("[http]\ntoken = \"\"\n"), 0);
    ck_assert_str_eq(cfg.token, "");
    ck_assert_int_eq(load("[http]\ntoken = \"a=b#c;d\"\n"), 0);
    ck_assert_str_eq(cfg.token, "a=b#c;d");
    ck_assert_int_eq(load("[http]\nthreads = \"6\"\n"), 0);
    ck_assert_int_eq(cfg.http_threads, 6);
    /* a value may contain '=' */
    ck_assert_int_eq(load("[mysql]\npassword = a=b=c\n"), 0);
    ck_assert_str_eq(cfg.mysql_password, "a=b=c");
}
END_TEST

START_TEST(test_crlf)
{
    ck_assert_msg(load("# windows\r\n[http]\r\nlisten = 0.0.0.0:9000\r\ntoken = abc\r\n\r\nthreads = 2\r\n"
                       "[log]\r\nlevel = warn\r\nfile = \"x.log\"\r\n") == 0,
                  "%s", err);
    ck_assert_str_eq(cfg.listen, "0.0.0.0:9000");
    ck_assert_str_eq(cfg.token, "abc");
    ck_assert_int_eq(cfg.http_threads, 2);
    ck_assert_int_eq(cfg.log_level, 1);
    ck_assert_str_eq(cfg.log_file, "x.log");
    /* line numbers still count CRLF lines */
    load_fails("[http]\r\n\r\nthreads = 1\r\nnope = 2\r\n", 4, "nope");
    /* no final newline */
    ck_assert_int_eq(load("[http]\r\nthreads = 3"), 0);
    ck_assert_int_eq(cfg.http_threads, 3);
}
END_TEST

START_TEST(test_bom)
{
    ck_assert_msg(load("\xEF\xBB\xBF[http]\nthreads = 3\n") == 0, "%s", err);
    ck_assert_int_eq(cfg.http_threads, 3);
    ck_assert_msg(load("\xEF\xBB\xBF# comment\r\n[http]\r\nthreads = 4\r\n") == 0, "%s", err);
    ck_assert_int_eq(cfg.http_threads, 4);
    /* the BOM does not hide an error on line 1 */
    load_fails("\xEF\xBB\xBFthreads = 3\n", 1, "threads");
}
END_TEST

/* ---- files ---- */

static char *write_temp(const char *content, size_t len)
{
    char *path = strdup("/tmp/hg-test-config-XXXXXX");
    ck_assert_ptr_nonnull(path);
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, content, len), (ssize_t)len);
    close(fd);
    return path;
}

START_TEST(test_load_file)
{
    const char *text = "[http]\nthreads = 9\n";
    char *path = write_temp(text, strlen(text));
    config_defaults(&cfg);
    ck_assert_msg(config_load(&cfg, path, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cfg.http_threads, 9);
    unlink(path);
    free(path);

    /* errors name the path given */
    text = "[http]\nthreads = 9\nwat = 1\n";
    path = write_temp(text, strlen(text));
    config_defaults(&cfg);
    ck_assert_int_eq(config_load(&cfg, path, err, sizeof err), -1);
    char where[128];
    snprintf(where, sizeof where, "%s:3:", path);
    ck_assert_msg(strstr(err, where) != NULL, "%s", err);
    ck_assert_ptr_nonnull(strstr(err, "wat"));
    unlink(path);
    free(path);

    /* a file bigger than any read chunk */
    size_t big = 100000;
    char *content = malloc(big + 64);
    ck_assert_ptr_nonnull(content);
    memset(content, '\n', big);
    strcpy(content + big, "[http]\nthreads = 11\n");
    path = write_temp(content, strlen(content));
    config_defaults(&cfg);
    ck_assert_msg(config_load(&cfg, path, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cfg.http_threads, 11);
    unlink(path);
    free(path);
    free(content);

    /* empty file: defaults */
    path = write_temp("", 0);
    config_defaults(&cfg);
    ck_assert_int_eq(config_load(&cfg, path, err, sizeof err), 0);
    ck_assert_int_eq(cfg.mysql_port, 3306);
    unlink(path);
    free(path);

    /* a NUL byte is not silently cut off */
    path = write_temp("[http]\nthreads = 9\n\0[bogus]\n", 28);
    config_defaults(&cfg);
    ck_assert_int_eq(config_load(&cfg, path, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, path));
    unlink(path);
    free(path);

    /* missing file */
    config_defaults(&cfg);
    ck_assert_int_eq(config_load(&cfg, "/nonexistent/dir/hourglass.conf", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/dir/hourglass.conf"));
}
END_TEST

/* ---- validation ---- */

static int validate(void)
{
    err[0] = '\0';
    return config_validate(&cfg, err, sizeof err);
}

START_TEST(test_validate_threads)
{
    config_defaults(&cfg);
    ck_assert_int_eq(validate(), 0);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores >= 1 && cores <= 64)
        ck_assert_int_eq(cfg.http_threads, (int)cores); /* 0 = one per core */
    else
        ck_assert_int_ge(cfg.http_threads, 1);
    ck_assert_int_eq(load("[http]\nthreads = 5\n"), 0);
    ck_assert_int_eq(validate(), 0);
    ck_assert_int_eq(cfg.http_threads, 5);
}
END_TEST

START_TEST(test_validate_tokens)
{
    ck_assert_int_eq(load("[http]\ntoken = same\nadmin_token = same\n"), 0);
    ck_assert_int_eq(validate(), -1);
    ck_assert_ptr_nonnull(strstr(err, "admin_token"));
    ck_assert_ptr_null(strstr(err, "same")); /* the secret itself is not echoed */

    ck_assert_int_eq(load("[http]\ntoken = one\nadmin_token = two\n"), 0);
    ck_assert_int_eq(validate(), 0);
    ck_assert_int_eq(load("[http]\ntoken = one\n"), 0);
    ck_assert_int_eq(validate(), 0);
    ck_assert_int_eq(load("[http]\nadmin_token = two\n"), 0);
    ck_assert_int_eq(validate(), 0);
}
END_TEST

START_TEST(test_validate_listen)
{
    static const char *const good[] = {"127.0.0.1:8080", "0.0.0.0:1", "localhost:65535",
                                       "[::1]:8080",     "[::]:80",   "host.example.com:443"};
    static const char *const bad[] = {
        "localhost",       "8080",         "127.0.0.1:",    "127.0.0.1:abc", "127.0.0.1:http", "127.0.0.1:65536",
        "127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:80x", "127.0.0.1: 80", "[::1]",          ":"};
    char text[300];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        snprintf(text, sizeof text, "[http]\nlisten = %s\n", good[i]);
        ck_assert_int_eq(load(text), 0);
        ck_assert_msg(validate() == 0, "listen %s refused: %s", good[i], err);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "[http]\nlisten = \"%s\"\n", bad[i]);
        ck_assert_int_eq(load(text), 0);
        ck_assert_msg(validate() == -1, "listen \"%s\" accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "listen"));
    }
}
END_TEST

START_TEST(test_validate_cross_keys)
{
    ck_assert_int_eq(load("[queue]\ndefault_ttr = 5000\nmax_ttr = 4000\n"), 0);
    ck_assert_int_eq(validate(), -1);
    ck_assert_ptr_nonnull(strstr(err, "default_ttr"));
    ck_assert_int_eq(load("[queue]\ndefault_tries = 10\nmax_tries = 9\n"), 0);
    ck_assert_int_eq(validate(), -1);
    ck_assert_ptr_nonnull(strstr(err, "default_tries"));
    ck_assert_int_eq(load("[redis]\nprefix = a b\n"), 0);
    ck_assert_int_eq(validate(), -1);
    ck_assert_ptr_nonnull(strstr(err, "prefix"));
    ck_assert_int_eq(load("[redis]\nprefix = {hg}\n"), 0); /* braces would change the hash tag */
    ck_assert_int_eq(validate(), -1);
}
END_TEST

/* [redis] address is read by the parser the connections use (raddr.h); with cluster = true it
 * is a list of seed nodes, and a list without it is named as such. */
START_TEST(test_validate_redis_address)
{
    config_defaults(&cfg);
    ck_assert_int_eq(cfg.redis_cluster, 0);
    static const char *const single[] = {"127.0.0.1:6379", "[::1]:6379", "unix:/run/redis.sock", "redis.internal:1"};
    char text[400];
    for (size_t i = 0; i < sizeof single / sizeof single[0]; i++) {
        snprintf(text, sizeof text, "[redis]\naddress = %s\n", single[i]);
        ck_assert_int_eq(load(text), 0);
        ck_assert_msg(validate() == 0, "address %s refused: %s", single[i], err);
    }
    ck_assert_int_eq(load("[redis]\naddress = 10.0.0.1:7000,10.0.0.2:7000\n"), 0);
    ck_assert_int_eq(validate(), -1);
    ck_assert_msg(strstr(err, "[redis] address") && strstr(err, "seed nodes needs cluster = true"), "%s", err);
    static const char *const bad_single[] = {"redis", "127.0.0.1:0", "::1:6379", "unix:", ""};
    for (size_t i = 0; i < sizeof bad_single / sizeof bad_single[0]; i++) {
        snprintf(text, sizeof text, "[redis]\naddress = \"%s\"\n", bad_single[i]);
        ck_assert_int_eq(load(text), 0);
        ck_assert_msg(validate() == -1, "address \"%s\" accepted", bad_single[i]);
        ck_assert_msg(strstr(err, "[redis] address") != NULL, "%s", err);
    }
    ck_assert_int_eq(load("[redis]\naddress = 127.0.0.1:0\n"), 0);
    ck_assert_int_eq(validate(), -1);
    ck_assert_str_eq(err, "[redis] address: \"127.0.0.1:0\" is not host:port, [IPv6]:port or unix:/path: port must be "
                          "a number 1..65535, not \"0\"");

    static const char *const seeds[] = {"10.0.0.1:7000", "10.0.0.1:7000, 10.0.0.2:7000 ,[fd00::3]:7000"};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        snprintf(text, sizeof text, "[redis]\ncluster = true\naddress = %s\n", seeds[i]);
        ck_assert_int_eq(load(text), 0);
        ck_assert_int_eq(cfg.redis_cluster, 1);
        ck_assert_msg(validate() == 0, "seeds %s refused: %s", seeds[i], err);
    }
    static const struct {
        const char *address, *says;
    } bad_seeds[] = {
        {"unix:/run/redis.sock", "seed \"unix:/run/redis.sock\""},
        {"10.0.0.1:7000,redis", "seed \"redis\" is not host:port or [IPv6]:port: no port"},
        {"10.0.0.1:7000;10.0.0.2:7000", "seed \"10.0.0.1:7000;10.0.0.2:7000\""},
        {" , ", "no seed node"},
    };
    for (size_t i = 0; i < sizeof bad_seeds / sizeof bad_seeds[0]; i++) {
        snprintf(text, sizeof text, "[redis]\ncluster = yes\naddress = \"%s\"\n", bad_seeds[i].address);
        ck_assert_int_eq(load(text), 0);
        ck_assert_msg(validate() == -1, "seeds \"%s\" accepted", bad_seeds[i].address);
        ck_assert_msg(strstr(err, "[redis] address") && strstr(err, bad_seeds[i].says), "%s", err);
    }
    load_fails("[redis]\ncluster = maybe\n", 2, "cluster");
}
END_TEST

/* [amqp] url is read by amqpurl.h; its host and port by the same rules and words as [redis]
 * address (base/netaddr.h). */
START_TEST(test_validate_mysql_hosts)
{
    /* unset: host and port name the one server, as always; no list */
    ck_assert_int_eq(load("[mysql]\nhost = ::1\n"), 0);
    ck_assert_int_eq(validate(), 0);
    struct netaddr nodes[CONFIG_MYSQL_NODES_MAX];
    ck_assert_int_eq(config_mysql_nodes(&cfg, nodes, CONFIG_MYSQL_NODES_MAX, err, sizeof err), 0);

    /* a list, in order, blanks and empty elements ignored, a missing port is [mysql] port */
    ck_assert_int_eq(load("[mysql]\nport = 3307\nhosts = db1:3306, 10.0.0.2 ,,[::1]:4406\n"), 0);
    ck_assert_int_eq(validate(), 0);
    ck_assert_int_eq(config_mysql_nodes(&cfg, nodes, CONFIG_MYSQL_NODES_MAX, err, sizeof err), 3);
    ck_assert_str_eq(nodes[0].host, "db1");
    ck_assert_int_eq(nodes[0].port, 3306);
    ck_assert_str_eq(nodes[1].host, "10.0.0.2");
    ck_assert_int_eq(nodes[1].port, 3307);
    ck_assert_str_eq(nodes[2].host, "::1");
    ck_assert_int_eq(nodes[2].port, 4406);
    ck_assert_int_eq(config_mysql_nodes(&cfg, nodes, 2, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "more than 2"));

    /* refused with the element and netaddr's reason */
    const char *bad[][2] = {{"db1:3306,db2:0", "\"db2:0\""},
                            {"::1:3306", "\"::1:3306\""},
                            {"db1:3306,db_2:99999", "1..65535"},
                            {" , ", "no node"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "[mysql]\nhosts = %s\n", bad[i][0]);
        ck_assert_int_eq(load(text), 0);
        ck_assert_msg(validate() == -1, "accepted hosts = %s", bad[i][0]);
        ck_assert_msg(strstr(err, "[mysql] hosts") && strstr(err, bad[i][1]), "%s: \"%s\" does not name %s", bad[i][0],
                      err, bad[i][1]);
    }
    /* a socket is one local server: not with a list */
    ck_assert_int_eq(load("[mysql]\nsocket = /run/mysqld/mysqld.sock\nhosts = a:1,b:2\n"), 0);
    ck_assert_int_eq(validate(), -1);
    ck_assert_ptr_nonnull(strstr(err, "exclude each other"));
}
END_TEST

START_TEST(test_validate_amqp_url)
{
    ck_assert_int_eq(load("[amqp]\nurl = amqp://u:p@[::1]:5673/v\n"), 0);
    ck_assert_msg(validate() == 0, "%s", err);
    ck_assert_int_eq(load("[amqp]\nurl = amqp://u:p@mq:0/v\n"), 0);
    ck_assert_int_eq(validate(), -1);
    ck_assert_str_eq(err, "[amqp] url: port must be a number 1..65535, not \"0\"");
    ck_assert_int_eq(load("[amqp]\nurl = amqp://u:p@::1/v\n"), 0);
    ck_assert_int_eq(validate(), -1);
    ck_assert_msg(strstr(err, "[amqp] url: an IPv6 address must be in brackets"), "%s", err);
}
END_TEST

/* ---- printing ---- */

static char *print_config(const struct config *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    config_print(c, f);
    fclose(f);
    ck_assert_ptr_nonnull(text);
    return text;
}

START_TEST(test_print_masks_secrets)
{
    ck_assert_int_eq(load("[http]\ntoken = tok-SECRET-1\nadmin_token = adm-SECRET-2\n[redis]\n"
                          "password = rpw-SECRET-3\n[mysql]\npassword = mpw-SECRET-4\nuser = visible-user\n"),
                     0);
    char *text = print_config(&cfg);
    ck_assert_msg(strstr(text, "SECRET") == NULL, "a secret was printed:\n%s", text);
    ck_assert_ptr_null(strstr(text, "tok-"));
    ck_assert_ptr_null(strstr(text, "adm-"));
    ck_assert_ptr_null(strstr(text, "rpw-"));
    ck_assert_ptr_null(strstr(text, "mpw-"));
    ck_assert_ptr_nonnull(strstr(text, "visible-user")); /* ordinary values are printed */
    /* a set secret is shown as set: its line is there, with something in place of the value */
    const char *line = strstr(text, "\ntoken = ");
    ck_assert_ptr_nonnull(line);
    ck_assert_int_ne(line[strlen("\ntoken = ")], '\n');
    free(text);
}
END_TEST

START_TEST(test_print_names_every_contract_key)
{
    config_defaults(&cfg);
    char *text = print_config(&cfg);
    static const char *const sections[][8] = {
        {"[http]", "listen", "threads", "max_body", "longpoll_max", "token", "admin_token", NULL},
        {"[redis]", "address", "password", "db", "prefix", "shards", NULL},
        {"[mysql]", "host", "port", "socket", "user", "password", "database", "retention_days"},
        {"[queue]", "default_ttr", "default_tries", "max_delay", NULL},
        {"[log]", "level", "file", NULL},
    };
    for (size_t s = 0; s < sizeof sections / sizeof sections[0]; s++) {
        const char *sec = strstr(text, sections[s][0]);
        ck_assert_msg(sec != NULL, "%s missing", sections[s][0]);
        const char *next = strstr(sec + 1, "\n[");
        for (int k = 1; k < 8 && sections[s][k]; k++) {
            char want[64];
            snprintf(want, sizeof want, "\n%s = ", sections[s][k]);
            const char *at = strstr(sec, want);
            ck_assert_msg(at != NULL && (next == NULL || at < next), "%s %s missing", sections[s][0], sections[s][k]);
        }
    }
    free(text);
}
END_TEST

START_TEST(test_print_reloads_to_the_same_config)
{
    ck_assert_int_eq(load(contract_ini), 0);
    ck_assert_int_eq(config_load_string(&cfg, NAME,
                                        "[instance]\nworker_id = 12\nid = node-a\n[mysql]\n"
                                        "per_row_commit = yes\n",
                                        err, sizeof err),
                     0);
    struct config original = cfg;
    char *text = print_config(&original);
    ck_assert_msg(load(text) == 0, "printed config does not load: %s\n%s", err, text);
    free(text);
    /* secrets are masked, so they cannot come back; everything else must */
    memset(original.token, 0, sizeof original.token);
    memset(cfg.token, 0, sizeof cfg.token);
    memset(original.admin_token, 0, sizeof original.admin_token);
    memset(cfg.admin_token, 0, sizeof cfg.admin_token);
    memset(original.redis_password, 0, sizeof original.redis_password);
    memset(cfg.redis_password, 0, sizeof cfg.redis_password);
    memset(original.mysql_password, 0, sizeof original.mysql_password);
    memset(cfg.mysql_password, 0, sizeof cfg.mysql_password);
    ck_assert_str_eq(cfg.listen, original.listen);
    ck_assert_int_eq(cfg.worker_id, 12);
    ck_assert_str_eq(cfg.instance_id, "node-a");
    ck_assert_int_eq(cfg.journal_per_row, 1);
    ck_assert_int_eq(cfg.log_level, original.log_level);
    ck_assert_int_eq(memcmp(&cfg, &original, sizeof cfg), 0);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("keys");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_contract_keys_accepted);
    tcase_add_test(tc, test_contract_keys_with_empty_values);
    tcase_add_test(tc, test_value_types);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_unknown_section);
    tcase_add_test(tc, test_unknown_key);
    tcase_add_test(tc, test_bad_integer);
    tcase_add_test(tc, test_out_of_range);
    tcase_add_test(tc, test_key_outside_section);
    tcase_add_test(tc, test_malformed_lines);
    tcase_add_test(tc, test_first_error_reported);
    suite_add_tcase(s, tc);

    tc = tcase_create("syntax");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_comments_and_blank_lines);
    tcase_add_test(tc, test_whitespace_and_quotes);
    tcase_add_test(tc, test_crlf);
    tcase_add_test(tc, test_bom);
    tcase_add_test(tc, test_load_file);
    suite_add_tcase(s, tc);

    tc = tcase_create("validate");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_validate_threads);
    tcase_add_test(tc, test_validate_tokens);
    tcase_add_test(tc, test_validate_listen);
    tcase_add_test(tc, test_validate_cross_keys);
    tcase_add_test(tc, test_validate_redis_address);
    tcase_add_test(tc, test_validate_mysql_hosts);
    tcase_add_test(tc, test_validate_amqp_url);
    suite_add_tcase(s, tc);

    tc = tcase_create("print");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_print_masks_secrets);
    tcase_add_test(tc, test_print_names_every_contract_key);
    tcase_add_test(tc, test_print_reloads_to_the_same_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
