// The running kernel's own figures for three of vmbench's workloads, to
// check the model's threads-mode ratios against: brk1 (grow and shrink the
// break by a page), mmap1 (map and unmap 128 MiB of anonymous memory) and
// malloc1 (the same, writing its first page, as vmbench's malloc1 does), in
// N threads of one process or N processes, one per CPU; prints ops/s over
// 2 s after 1 s of warm-up.
//
//   gcc -O2 -pthread tools/kernel-ref/wis.c -o /tmp/wis
//   /tmp/wis brk1 2 threads      # or: processes
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdatomic.h>
#define MEMSIZE (128UL << 20)
struct slot { _Atomic unsigned long n; char pad[56]; };
static struct slot *counts;
static const char *test;
static void pin(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s); }
static void loop(int id) {
    pin(id);
    long page = sysconf(_SC_PAGESIZE);
    if (!strcmp(test, "brk1")) {
        unsigned long base = syscall(SYS_brk, 0);
        for (;;) { syscall(SYS_brk, base + page); syscall(SYS_brk, base); atomic_fetch_add_explicit(&counts[id].n, 1, memory_order_relaxed); }
    } else if (!strcmp(test, "mmap1")) {
        for (;;) { void *p = mmap(0, MEMSIZE, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0); munmap(p, MEMSIZE); atomic_fetch_add_explicit(&counts[id].n, 1, memory_order_relaxed); }
    } else if (!strcmp(test, "malloc1")) {
        for (;;) { char *p = mmap(0, MEMSIZE, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0); p[0] = 1; munmap(p, MEMSIZE); atomic_fetch_add_explicit(&counts[id].n, 1, memory_order_relaxed); }
    }
}
static void *thr(void *a) { loop((int)(long)a); return 0; }
int main(int argc, char **argv) {
    if (argc < 3 || atoi(argv[2]) < 1 || atoi(argv[2]) > 64 ||
        (strcmp(argv[1], "brk1") && strcmp(argv[1], "mmap1") && strcmp(argv[1], "malloc1"))) {
        fprintf(stderr, "usage: %s brk1|mmap1|malloc1 N(1-64) [threads|processes]\n", argv[0]);
        return 2;
    }
    test = argv[1]; int n = atoi(argv[2]); int procs = argc > 3 && !strcmp(argv[3], "processes");
    counts = mmap(0, 4096, PROT_READ|PROT_WRITE, MAP_SHARED|MAP_ANONYMOUS, -1, 0);
    pid_t kids[64]; pthread_t t;
    for (int i = 0; i < n; i++) {
        if (procs) { if (!(kids[i] = fork())) { loop(i); _exit(0); } }
        else pthread_create(&t, 0, thr, (void *)(long)i);
    }
    sleep(1);
    unsigned long a = 0, b = 0; for (int i = 0; i < n; i++) a += counts[i].n;
    sleep(2);
    for (int i = 0; i < n; i++) b += counts[i].n;
    printf("%s %s x%d: %.0f ops/s\n", test, procs ? "processes" : "threads", n, (b - a) / 2.0);
    if (procs) for (int i = 0; i < n; i++) kill(kids[i], 9);
    fflush(stdout); _exit(0);
}
