/* sign.c — see sign.h. OpenSSL's one-shot HMAC() (not deprecated in 3.0, unlike HMAC_CTX);
 * it is thread-safe and keeps no state between calls. */
#include "delivery/sign.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

int sign_hmac_sha256_hex(const void *key, size_t keylen, const void *body, size_t len, char out[SIGN_HEX_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    static const unsigned char none[1] = {0}; /* HMAC() wants non-NULL pointers, even for length 0 */
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    out[0] = '\0';
    if (keylen > (size_t)0x7fffffff)
        return -1;
    if (HMAC(EVP_sha256(), keylen ? key : none, (int)keylen, len ? body : none, len, md, &mdlen) == NULL ||
        mdlen * 2 != SIGN_HEX_LEN)
        return -1;
    for (unsigned int i = 0; i < mdlen; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[SIGN_HEX_LEN] = '\0';
    return 0;
}

int sign_header_value(const char *secret, const void *body, size_t len, char out[SIGN_HEADER_LEN + 1])
{
    memcpy(out, "sha256=", 7);
    if (sign_hmac_sha256_hex(secret, strlen(secret), body, len, out + 7) < 0) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}
