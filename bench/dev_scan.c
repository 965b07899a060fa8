// bench/dev_scan.c: what PlanIsolation's listing of /dev costs before (fstatat of every entry) and
// after (only the nvidia* names). gcc -O2 -o /tmp/dev_scan bench/dev_scan.c && /tmp/dev_scan [/dev]
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static int scan(const char* dir, const char* prefix) {
  DIR* d = opendir(dir); int n = 0; struct dirent* e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || strncmp(e->d_name, prefix, strlen(prefix))) continue;
    struct stat st; if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) ++n;
  }
  closedir(d); return n;
}
int cmp(const void* a, const void* b) { double x = *(double*)a, y = *(double*)b; return (x > y) - (x < y); }
int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : "/dev"; enum { R = 400 };
  double all[R], some[R]; int na = 0, ns = 0;
  for (int i = 0; i < R; ++i) {  // interleaved
    double t = now_ms(); na = scan(dir, ""); all[i] = now_ms() - t;
    t = now_ms(); ns = scan(dir, "nvidia"); some[i] = now_ms() - t;
  }
  qsort(all, R, sizeof(double), cmp); qsort(some, R, sizeof(double), cmp);
  printf("%s: every entry stat'ed (%d): median %.3f ms, p90 %.3f | only nvidia* (%d): median %.3f ms, p90 %.3f (%d rounds)\n",
         dir, na, all[R / 2], all[R * 9 / 10], ns, some[R / 2], some[R * 9 / 10], R);
}
