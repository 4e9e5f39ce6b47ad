/* sdnotify.h — tell systemd (Type=notify) about start-up and shutdown, without libsystemd:
 * one datagram to $NOTIFY_SOCKET. A no-op when not run by systemd. */
#ifndef HG_SDNOTIFY_H
#define HG_SDNOTIFY_H

/* Send e.g. "READY=1" or "STOPPING=1". */
void sdnotify_send(const char *msg);

#endif
