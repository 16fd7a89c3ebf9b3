/* LD_PRELOAD for a job we did not write that binds every interface (TensorFlow's gRPC servers bind
 * [::]): a bind() to the any-address binds loopback instead, so all its traffic stays on 127.0.0.1.
 * Built on first use by loopback.py; nothing else is changed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real;
    if (!real) real = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        memcpy(&a, addr, sizeof a);
        if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real(fd, (const struct sockaddr *)&a, sizeof a);
        }
    } else if (addr && addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 a;
        memcpy(&a, addr, sizeof a);
        if (!memcmp(&a.sin6_addr, &in6addr_any, sizeof a.sin6_addr)) {
            /* a dual-stack any-address: IPv4's loopback as a mapped address, so 127.0.0.1 reaches it */
            memset(&a.sin6_addr, 0, sizeof a.sin6_addr);
            a.sin6_addr.s6_addr[10] = 0xff; a.sin6_addr.s6_addr[11] = 0xff;
            a.sin6_addr.s6_addr[12] = 127; a.sin6_addr.s6_addr[15] = 1;
            return real(fd, (const struct sockaddr *)&a, sizeof a);
        }
    }
    return real(fd, addr, len);
}
