/* A process's wall clock moved on by WINPOOL_CLOCK_SKEW_SECONDS, by
 * LD_PRELOAD: what a host whose NTP broke looks like to the program on it.
 * Only the realtime clocks move; the monotonic ones (timers, the lease's
 * renew deadline) run true, as they do on a drifting host. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

/* WINPOOL_CLOCK_SKEW_FILE, when set, is read at every call: a test writes
 * another number of seconds there to step the clock mid-run (an NTP step,
 * a VM resumed). */
static long skew(void) {
    const char *f = getenv("WINPOOL_CLOCK_SKEW_FILE");
    if (f) {
        long v = 0;
        FILE *in = fopen(f, "r");
        if (in) {
            if (fscanf(in, "%ld", &v) != 1) v = 0;
            fclose(in);
        }
        return v;
    }
    const char *s = getenv("WINPOOL_CLOCK_SKEW_SECONDS");
    return s ? atol(s) : 0;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    if (rc == 0 && ts && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += skew();
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    static int (*real)(struct timeval *restrict, void *restrict);
    if (!real) real = (int (*)(struct timeval *restrict, void *restrict))dlsym(RTLD_NEXT, "gettimeofday");
    int rc = real(tv, tz);
    if (rc == 0 && tv) tv->tv_sec += skew();
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
