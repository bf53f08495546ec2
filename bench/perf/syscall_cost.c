/* What one warm system call costs on this machine (issue 25, eighteenth round): the
 * mean of a million getppid(2) calls, the cheapest entry and exit the kernel has. A
 * leader at rest makes three calls a heartbeat (epoll_wait, recvmmsg, sendto); folding
 * them into one io_uring_enter(2) would save two entries and exits, not their work.
 *   cc -O2 -o /tmp/syscall_cost bench/perf/syscall_cost.c && /tmp/syscall_cost */
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(void) {
  enum { N = 1000000 };
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < N; i++)
    syscall(SYS_getppid);
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.1f ns a system call\n",
         ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / N);
  return 0;
}
