/* sha1.h — SHA-1 digest, used only to name Lua scripts for EVALSHA (not for security). */
#ifndef HG_SHA1_H
#define HG_SHA1_H

#include <stddef.h>

/* Write the lowercase hex SHA-1 of data[0..len) into hex (40 chars + NUL). */
void sha1_hex(const void *data, size_t len, char hex[41]);

#endif
