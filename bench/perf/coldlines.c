/* What a cold code line costs a daemon at rest (issue 25, seventeenth round): an
 * LD_PRELOAD library that wraps sendto(2) and, before each call, runs a chain of
 * CHAIN jumps, each over 250 bytes of padding, so every call fetches CHAIN code lines
 * spread over about CHAIN/16 pages that nothing else touches. Built without CHAIN the
 * wrapper adds nothing but itself (the A side of the A/B). The electd binary is the
 * same on both sides: no profile or layout of the daemon moves. coldlines.sh builds
 * both and runs bench/perf/lab.py's A/B. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/socket.h>

static ssize_t (*real_sendto)(int, const void *, size_t, int, const struct sockaddr *,
                              socklen_t);

#ifdef CHAIN
__attribute__((noinline)) static void chain(void) {
  __asm__ volatile(".rept " CHAIN "\n"
                   "jmp 1f\n"
                   ".skip 250, 0x90\n"
                   "1:\n"
                   ".endr\n" ::: "memory");
}
#else
static void chain(void) {}
#endif

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
               socklen_t tolen) {
  if (!real_sendto)
    real_sendto = dlsym(RTLD_NEXT, "sendto");
  chain();
  return real_sendto(fd, buf, len, flags, to, tolen);
}
