/* sign.h — webhook signatures: HMAC-SHA256 of a body under a topic's secret, as lowercase hex.
 *
 * A receiver recomputes the HMAC of the raw body it got with the secret it shares and compares
 * it with the `Hourglass-Signature: sha256=<hex>` header (in constant time, on its side). */
#ifndef HG_SIGN_H
#define HG_SIGN_H

#include <stddef.h>

#define SIGN_HEX_LEN    64                 /* 32 bytes of HMAC-SHA256 as hex */
#define SIGN_HEADER_LEN (7 + SIGN_HEX_LEN) /* "sha256=" and the hex */

/* HMAC-SHA256 of body[0..len) with key[0..keylen) into out as 64 lowercase hex digits and a NUL.
 * Either length may be 0. 0, or -1 when libcrypto fails (out is then the empty string). */
int sign_hmac_sha256_hex(const void *key, size_t keylen, const void *body, size_t len, char out[SIGN_HEX_LEN + 1])
    __attribute__((warn_unused_result));

/* The value of the Hourglass-Signature header, "sha256=<hex>", for a NUL-terminated secret.
 * 0 / -1 as above. */
int sign_header_value(const char *secret, const void *body, size_t len, char out[SIGN_HEADER_LEN + 1])
    __attribute__((warn_unused_result));

#endif
