/* cluster.c — Redis Cluster routing without I/O (see cluster.h for the contract).
 *
 * The slot map is a 16384-entry owner table built from the reply's ranges, so a lookup is one
 * array read; the ranges and the distinct masters (with their replicas, for /health) are kept
 * as the reply gave them. Validation is strict because the reply crosses the network and a
 * wrong map would send writes to the wrong node: anything that is not CLUSTER SLOTS's shape
 * fails the whole parse with a message naming the entry, and the caller keeps its old map. */
#include "core/cluster.h"

#include "core/ids.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tag search is proven (once, by brute force) to reach every slot from every "n." with
 * n < 256 for k < 255795; the bound only stops a search that could never end. */
#define TAG_SEARCH_MAX 1000000L

_Static_assert(IDS_MAX_SHARDS <= 256, "cluster_shard_tag's search bound was checked for n < 256 only");

/* CRC16-CCITT (XMODEM): polynomial 0x1021, initial 0, no reflection — what Redis hashes with. */
static const uint16_t crc16_table[256] = {
    0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7, 0x8108, 0x9129, 0xa14a, 0xb16b, 0xc18c, 0xd1ad,
    0xe1ce, 0xf1ef, 0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6, 0x9339, 0x8318, 0xb37b, 0xa35a,
    0xd3bd, 0xc39c, 0xf3ff, 0xe3de, 0x2462, 0x3443, 0x0420, 0x1401, 0x64e6, 0x74c7, 0x44a4, 0x5485, 0xa56a, 0xb54b,
    0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d, 0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4,
    0xb75b, 0xa77a, 0x9719, 0x8738, 0xf7df, 0xe7fe, 0xd79d, 0xc7bc, 0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861,
    0x2802, 0x3823, 0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b, 0x5af5, 0x4ad4, 0x7ab7, 0x6a96,
    0x1a71, 0x0a50, 0x3a33, 0x2a12, 0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a, 0x6ca6, 0x7c87,
    0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41, 0xedae, 0xfd8f, 0xcdec, 0xddcd, 0xad2a, 0xbd0b, 0x8d68, 0x9d49,
    0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70, 0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a,
    0x9f59, 0x8f78, 0x9188, 0x81a9, 0xb1ca, 0xa1eb, 0xd10c, 0xc12d, 0xf14e, 0xe16f, 0x1080, 0x00a1, 0x30c2, 0x20e3,
    0x5004, 0x4025, 0x7046, 0x6067, 0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e, 0x02b1, 0x1290,
    0x22f3, 0x32d2, 0x4235, 0x5214, 0x6277, 0x7256, 0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
    0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405, 0xa7db, 0xb7fa, 0x8799, 0x97b8, 0xe75f, 0xf77e,
    0xc71d, 0xd73c, 0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634, 0xd94c, 0xc96d, 0xf90e, 0xe92f,
    0x99c8, 0x89e9, 0xb98a, 0xa9ab, 0x5844, 0x4865, 0x7806, 0x6827, 0x18c0, 0x08e1, 0x3882, 0x28a3, 0xcb7d, 0xdb5c,
    0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a, 0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92,
    0xfd2e, 0xed0f, 0xdd6c, 0xcd4d, 0xbdaa, 0xad8b, 0x9de8, 0x8dc9, 0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83,
    0x1ce0, 0x0cc1, 0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8, 0x6e17, 0x7e36, 0x4e55, 0x5e74,
    0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

static uint16_t crc16_update(uint16_t crc, const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8) ^ crc16_table[((crc >> 8) ^ (unsigned char)p[i]) & 0xff]);
    return crc;
}

int cluster_keyslot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t from = (size_t)(open - key) + 1;
        const char *close = memchr(key + from, '}', len - from);
        /* Redis's rule: an empty tag "{}" does not count, the whole key is hashed */
        if (close != NULL && close > key + from)
            return crc16_update(0, key + from, (size_t)(close - (key + from))) & (CLUSTER_SLOTS - 1);
    }
    return crc16_update(0, key, len) & (CLUSTER_SLOTS - 1);
}

/* ---- the slot map ---- */

static void fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* A host we can connect to and put in an address: printable, no spaces or brackets. */
static int host_ok(const char *h, size_t len)
{
    if (len == 0 || len > CLUSTER_HOST_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)h[i];
        if (c <= ' ' || c >= 0x7f || c == '[' || c == ']')
            return 0;
    }
    return 1;
}

/* "host:port", bracketing an IPv6 literal. The host is already checked by host_ok. */
static void format_addr(char out[CLUSTER_ADDR_MAX], const char *host, size_t len, int port)
{
    if (memchr(host, ':', len) != NULL)
        snprintf(out, CLUSTER_ADDR_MAX, "[%.*s]:%d", (int)len, host, port);
    else
        snprintf(out, CLUSTER_ADDR_MAX, "%.*s:%d", (int)len, host, port);
}

enum node_verdict { NODE_OK, NODE_UNKNOWN, NODE_BAD };

/* One node entry of a range: [host, port, id?, metadata...]. NODE_UNKNOWN is the "?" a node
 * without a known hostname gets under cluster-preferred-endpoint-type hostname. */
static enum node_verdict parse_node(const redisReply *r, const char *asked_host, struct cluster_node *out, char *why,
                                    size_t whylen)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
        fail(why, whylen, "a node is not an array of host, port[, id]");
        return NODE_BAD;
    }
    const redisReply *h = r->element[0], *p = r->element[1];
    const char *host;
    size_t hlen;
    if (h == NULL || h->type == REDIS_REPLY_NIL || (h->type == REDIS_REPLY_STRING && h->len == 0)) {
        if (asked_host == NULL) {
            fail(why, whylen, "a node has no endpoint and the asked host is not known");
            return NODE_BAD;
        }
        host = asked_host;
        hlen = strlen(asked_host);
    } else if (h->type == REDIS_REPLY_STRING) {
        host = h->str;
        hlen = h->len;
    } else {
        fail(why, whylen, "a node's host is not a string");
        return NODE_BAD;
    }
    if (hlen == 1 && host[0] == '?')
        return NODE_UNKNOWN;
    if (!host_ok(host, hlen)) {
        fail(why, whylen, "a node's host is empty, too long or has bad characters");
        return NODE_BAD;
    }
    if (p == NULL || p->type != REDIS_REPLY_INTEGER) {
        fail(why, whylen, "a node's port is not an integer");
        return NODE_BAD;
    }
    if (p->integer < 1 || p->integer > 65535) {
        fail(why, whylen, "port %lld out of range", p->integer);
        return NODE_BAD;
    }
    format_addr(out->addr, host, hlen, (int)p->integer);
    out->id[0] = '\0';
    if (r->elements >= 3) {
        const redisReply *id = r->element[2];
        if (id == NULL || id->type != REDIS_REPLY_STRING || id->len != CLUSTER_ID_LEN) {
            fail(why, whylen, "a node id is not a string of %d characters", CLUSTER_ID_LEN);
            return NODE_BAD;
        }
        for (size_t i = 0; i < id->len; i++) {
            if (!isxdigit((unsigned char)id->str[i])) {
                fail(why, whylen, "a node id is not hexadecimal");
                return NODE_BAD;
            }
        }
        memcpy(out->id, id->str, CLUSTER_ID_LEN + 1);
    }
    /* elements past the id (Redis 7's networking metadata) carry nothing we route by */
    return NODE_OK;
}

static int find_master(const struct cluster_map *m, const char *addr)
{
    for (int i = 0; i < m->nmasters; i++)
        if (strcmp(m->masters[i].node.addr, addr) == 0)
            return i;
    return -1;
}

/* Add a replica to a master unless it is listed already (a master with several ranges repeats
 * its replicas with each). */
static int add_replica(struct cluster_master *ms, const struct cluster_node *n)
{
    for (int i = 0; i < ms->nreplicas; i++)
        if (strcmp(ms->replicas[i].addr, n->addr) == 0)
            return 0;
    /* grown one at a time: a master has a replica or two, and the map is read rarely */
    struct cluster_node *r = realloc(ms->replicas, (size_t)(ms->nreplicas + 1) * sizeof *r);
    if (r == NULL)
        return -1;
    ms->replicas = r;
    ms->replicas[ms->nreplicas++] = *n;
    return 0;
}

void cluster_map_free(struct cluster_map *m)
{
    if (m == NULL)
        return;
    for (int i = 0; i < m->nmasters; i++)
        free(m->masters[i].replicas);
    free(m->masters);
    free(m->ranges);
    free(m);
}

struct cluster_map *cluster_map_parse(const redisReply *reply, const char *asked_host, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (reply == NULL) {
        fail(err, errlen, "CLUSTER SLOTS: no reply");
        return NULL;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        fail(err, errlen, "CLUSTER SLOTS: %.*s", (int)(reply->len < 120 ? reply->len : 120), reply->str);
        return NULL;
    }
    if (reply->type != REDIS_REPLY_ARRAY) {
        fail(err, errlen, "CLUSTER SLOTS: reply of type %d, not an array", reply->type);
        return NULL;
    }
    if (reply->elements == 0) {
        fail(err, errlen, "CLUSTER SLOTS: no slot is assigned (is the cluster created?)");
        return NULL;
    }
    if (reply->elements > CLUSTER_SLOTS) { /* ranges cannot overlap, so there are at most 16384 */
        fail(err, errlen, "CLUSTER SLOTS: %zu ranges, more than there are slots", (size_t)reply->elements);
        return NULL;
    }
    struct cluster_map *m = malloc(sizeof *m);
    if (m == NULL) {
        fail(err, errlen, "CLUSTER SLOTS: out of memory");
        return NULL;
    }
    m->nmasters = m->nranges = m->covered = 0;
    m->masters = calloc(reply->elements, sizeof *m->masters);
    m->ranges = calloc(reply->elements, sizeof *m->ranges);
    if (m->masters == NULL || m->ranges == NULL) {
        fail(err, errlen, "CLUSTER SLOTS: out of memory");
        goto bad;
    }
    for (int s = 0; s < CLUSTER_SLOTS; s++)
        m->owner[s] = -1;

    char why[CLUSTER_ERR_MAX];
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *e = reply->element[i];
        if (e == NULL || e->type != REDIS_REPLY_ARRAY || e->elements < 3) {
            fail(err, errlen, "CLUSTER SLOTS: entry %zu is not an array of first, last, master...", i);
            goto bad;
        }
        const redisReply *a = e->element[0], *b = e->element[1];
        if (a == NULL || b == NULL || a->type != REDIS_REPLY_INTEGER || b->type != REDIS_REPLY_INTEGER) {
            fail(err, errlen, "CLUSTER SLOTS: entry %zu: slots are not integers", i);
            goto bad;
        }
        if (a->integer < 0 || b->integer >= CLUSTER_SLOTS || a->integer > b->integer) {
            fail(err, errlen, "CLUSTER SLOTS: entry %zu: bad slot range %lld-%lld", i, a->integer, b->integer);
            goto bad;
        }
        int first = (int)a->integer, last = (int)b->integer;

        struct cluster_node master;
        switch (parse_node(e->element[2], asked_host, &master, why, sizeof why)) {
        case NODE_OK:
            break;
        case NODE_UNKNOWN:
            fail(err, errlen, "CLUSTER SLOTS: entry %zu: the master of slots %d-%d has no known endpoint", i, first,
                 last);
            goto bad;
        case NODE_BAD:
            fail(err, errlen, "CLUSTER SLOTS: entry %zu: master: %s", i, why);
            goto bad;
        }
        int mi = find_master(m, master.addr);
        if (mi < 0) {
            mi = m->nmasters++;
            m->masters[mi].node = master;
        }
        struct cluster_master *ms = &m->masters[mi];
        for (size_t j = 3; j < e->elements; j++) {
            struct cluster_node rep;
            enum node_verdict v = parse_node(e->element[j], asked_host, &rep, why, sizeof why);
            if (v == NODE_BAD) {
                fail(err, errlen, "CLUSTER SLOTS: entry %zu: replica %zu: %s", i, j - 3, why);
                goto bad;
            }
            if (v == NODE_OK && add_replica(ms, &rep) < 0) {
                fail(err, errlen, "CLUSTER SLOTS: out of memory");
                goto bad;
            }
            /* a replica without a known endpoint is only left out: we never route to replicas */
        }
        for (int s = first; s <= last; s++) {
            if (m->owner[s] >= 0) {
                fail(err, errlen, "CLUSTER SLOTS: entry %zu: slot %d is claimed twice", i, s);
                goto bad;
            }
            m->owner[s] = (int16_t)mi;
        }
        ms->nslots += last - first + 1;
        m->covered += last - first + 1;
        m->ranges[m->nranges++] = (struct cluster_range){first, last, mi};
    }
    return m;
bad:
    cluster_map_free(m);
    return NULL;
}

int cluster_map_lookup(const struct cluster_map *m, int slot)
{
    if (m == NULL || slot < 0 || slot >= CLUSTER_SLOTS)
        return -1;
    return m->owner[slot];
}

int cluster_map_key_master(const struct cluster_map *m, const char *key, size_t len)
{
    return cluster_map_lookup(m, cluster_keyslot(key, len));
}

int cluster_map_shard_master(const struct cluster_map *m, int n, int shards)
{
    return cluster_map_lookup(m, cluster_shard_slot(n, shards));
}

int cluster_map_shard_counts(const struct cluster_map *m, int shards, int *counts)
{
    if (m == NULL || counts == NULL || shards < 1 || shards > CLUSTER_SLOTS)
        return -1;
    memset(counts, 0, (size_t)m->nmasters * sizeof *counts);
    int unserved = 0;
    for (int n = 0; n < shards; n++) {
        int mi = cluster_map_shard_master(m, n, shards);
        if (mi < 0)
            unserved++;
        else
            counts[mi]++;
    }
    return unserved;
}

/* ---- redirections ---- */

/* Decimal digits only, value <= max; -1 otherwise. */
static long parse_uint(const char *s, size_t len, long max)
{
    if (len == 0 || len > 6)
        return -1;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v <= max ? v : -1;
}

enum cluster_redirect_kind cluster_redirect_parse(const char *s, size_t len, const char *asked_host,
                                                  struct cluster_redirect *out)
{
    enum cluster_redirect_kind kind;
    size_t skip;
    if (s == NULL || out == NULL)
        return CLUSTER_NOT_REDIRECT;
    if (len > 6 && memcmp(s, "MOVED ", 6) == 0) {
        kind = CLUSTER_MOVED;
        skip = 6;
    } else if (len > 4 && memcmp(s, "ASK ", 4) == 0) {
        kind = CLUSTER_ASK;
        skip = 4;
    } else {
        return CLUSTER_NOT_REDIRECT;
    }
    const char *slot = s + skip, *end = s + len;
    const char *sp = memchr(slot, ' ', (size_t)(end - slot));
    if (sp == NULL)
        return CLUSTER_NOT_REDIRECT;
    long sl = parse_uint(slot, (size_t)(sp - slot), CLUSTER_SLOTS - 1);
    /* the endpoint is host:port with the port after the last ':' (an IPv6 host has colons) */
    const char *host = sp + 1;
    const char *colon = NULL;
    for (const char *p = host; p < end; p++)
        if (*p == ':')
            colon = p;
    if (sl < 0 || colon == NULL)
        return CLUSTER_NOT_REDIRECT;
    long port = parse_uint(colon + 1, (size_t)(end - colon - 1), 65535);
    if (port < 1)
        return CLUSTER_NOT_REDIRECT;
    size_t hlen = (size_t)(colon - host);
    if (hlen == 0 && asked_host != NULL) {
        host = asked_host;
        hlen = strlen(asked_host);
    }
    out->kind = kind;
    out->slot = (int)sl;
    out->addr[0] = '\0';
    if (hlen == 0 || (hlen == 1 && host[0] == '?'))
        return kind; /* a redirect all the same, to a node we cannot name */
    if (!host_ok(host, hlen))
        return CLUSTER_NOT_REDIRECT;
    format_addr(out->addr, host, hlen, (int)port);
    return kind;
}

enum cluster_error_kind cluster_error_kind(const char *s, size_t len)
{
    static const struct {
        const char *word; /* the first word, and the separator after it */
        enum cluster_error_kind kind;
    } words[] = {
        {"MOVED ", CLUSTER_ERR_MOVED},
        {"ASK ", CLUSTER_ERR_ASK},
        {"TRYAGAIN ", CLUSTER_ERR_TRYAGAIN},
        {"CLUSTERDOWN ", CLUSTER_ERR_DOWN},
    };
    if (s == NULL)
        return CLUSTER_ERR_OTHER;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i].word);
        if (len >= n && memcmp(s, words[i].word, n) == 0)
            return words[i].kind;
    }
    static const char nonlocal[] = "Script attempted to access a non local key";
    if (memmem(s, len, nonlocal, sizeof nonlocal - 1) != NULL)
        return CLUSTER_ERR_NONLOCAL;
    return CLUSTER_ERR_OTHER;
}

/* ---- shard tags ---- */

int cluster_shard_slot(int n, int shards)
{
    if (shards < 1 || shards > CLUSTER_SLOTS || n < 0 || n >= shards)
        return -1;
    /* the middle of [n*16384/S, (n+1)*16384/S): floor((n + 1/2) * 16384 / S) */
    return (int)(((2L * n + 1) * CLUSTER_SLOTS) / (2L * shards));
}

int cluster_shard_tag(int n, int shards, char *out, size_t cap)
{
    if (shards > IDS_MAX_SHARDS || out == NULL || cap < CLUSTER_TAG_MAX)
        return -1;
    int want = cluster_shard_slot(n, shards);
    if (want < 0)
        return -1;
    int len = snprintf(out, cap, "%d", n);
    if (cluster_keyslot(out, (size_t)len) == want)
        return len;
    out[len++] = '.';
    uint16_t prefix = crc16_update(0, out, (size_t)len);
    /* k counts up in decimal in place (digits[0..dl)), cheaper than formatting each one */
    char digits[12] = "0";
    int dl = 1;
    for (long k = 0; k < TAG_SEARCH_MAX; k++) {
        if ((crc16_update(prefix, digits, (size_t)dl) & (CLUSTER_SLOTS - 1)) == want) {
            memcpy(out + len, digits, (size_t)dl);
            out[len + dl] = '\0';
            return len + dl;
        }
        int i = dl - 1;
        while (i >= 0 && digits[i] == '9')
            digits[i--] = '0';
        if (i >= 0) {
            digits[i]++;
        } else {
            memmove(digits + 1, digits, (size_t)dl++);
            digits[0] = '1';
        }
    }
    out[0] = '\0';
    return -1;
}
