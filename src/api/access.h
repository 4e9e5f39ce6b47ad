/* access.h — who may call what: the tokens of [http] token / admin_token, the loopback rule
 * for admin endpoints without an admin token, and [http] rate_limit per client. */
#ifndef HG_ACCESS_H
#define HG_ACCESS_H

struct request;

/* Rate limit first (so failed authentication attempts count too), then authentication.
 * 0 when the request may go on; otherwise it has been answered (429, 401 or 403). */
int access_check(struct request *r) __attribute__((warn_unused_result));

#endif
