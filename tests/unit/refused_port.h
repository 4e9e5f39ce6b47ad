/* refused_port.h — for unit tests (Check) that need a TCP port where connects are refused. */
#ifndef HG_TEST_REFUSED_PORT_H
#define HG_TEST_REFUSED_PORT_H

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* A loopback port with nothing listening: bound (so no one else takes it) but never listened
 * on, so a connect is refused at once. Close *fd when done. */
static int refused_port(int *fd)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(*fd, 0);
    ck_assert_int_eq(bind(*fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(*fd, (struct sockaddr *)&a, &len), 0);
    return ntohs(a.sin_port);
}

#endif
