// How many line transfers a CPU overlaps when it reads lines another CPU
// just wrote, by access pattern: independent loads (the bulk read that
// `vmbench topology --measure` times), a walk through 4-line nodes found
// by pointer (a maple node is 256 bytes), and a walk through 1-line nodes
// (pure pointer chasing). CPU 0 writes, CPU 1 reads and times itself.
// Build: gcc -O2 -pthread walk.c -o walk; run: ./walk [rounds]
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LINES 128
typedef struct { _Alignas(64) volatile uint64_t w[8]; } line_t;
static line_t data[LINES];
static _Alignas(64) atomic_ulong turn;
static int order[LINES];
static int mode, node_lines, rounds = 2000;
static double *times;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
// Node k occupies lines [k*n, k*n+n); its first word holds the next node.
static void *writer(void *arg) {
    (void)arg;
    pin(0);
    int n = node_lines, nodes = LINES / n;
    for (unsigned long r = 0; r < (unsigned long)rounds; r++) {
        while (atomic_load(&turn) != 2 * r) ;
        for (int k = 0; k < nodes; k++)
            for (int j = 0; j < n; j++) {
                data[order[k] * n + j].w[1] = r;
                if (j == 0) data[order[k] * n].w[0] = (k + 1 < nodes) ? (uint64_t)order[k + 1] : 0;
            }
        atomic_store(&turn, 2 * r + 1);
    }
    return NULL;
}
static void *reader(void *arg) {
    (void)arg;
    pin(1);
    int n = node_lines, nodes = LINES / n;
    uint64_t sum = 0;
    for (unsigned long r = 0; r < (unsigned long)rounds; r++) {
        while (atomic_load(&turn) != 2 * r + 1) ;
        double t0 = now();
        if (mode == 0) {                       // independent loads
            for (int i = 0; i < LINES; i++) sum += data[i].w[1];
        } else {                               // walk by pointer
            uint64_t k = (uint64_t)order[0];
            for (int s = 0; s < nodes; s++) {
                for (int j = 1; j < n; j++) sum += data[k * n + j].w[1];
                uint64_t next = data[k * n].w[0];
                sum += data[k * n].w[1];
                k = next;
            }
        }
        times[r] = (now() - t0) / LINES;
        atomic_store(&turn, 2 * r + 2);
    }
    if (sum == 42) puts("");
    return NULL;
}
static double run(int m, int n) {
    mode = m; node_lines = n;
    int nodes = LINES / n;
    for (int i = 0; i < nodes; i++) order[i] = i;
    for (int i = nodes - 1; i > 0; i--) { int j = rand() % (i + 1), t = order[i]; order[i] = order[j]; order[j] = t; }
    atomic_store(&turn, 0);
    pthread_t a, b;
    pthread_create(&a, NULL, writer, NULL);
    pthread_create(&b, NULL, reader, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    qsort(times + rounds / 4, rounds - rounds / 4, sizeof *times, cmp);
    return times[rounds / 4 + (rounds - rounds / 4) / 2];
}
// One-way latency of one line: half a ping-pong round trip.
static _Alignas(64) atomic_ulong ping;
static void *pong(void *arg) {
    (void)arg;
    pin(0);
    for (unsigned long r = 0; r < (unsigned long)rounds; r++) {
        while (atomic_load(&ping) != 2 * r + 1) ;
        atomic_store(&ping, 2 * r + 2);
    }
    return NULL;
}
static double single(void) {
    pthread_t a;
    atomic_store(&ping, 0);
    pthread_create(&a, NULL, pong, NULL);
    pin(1);
    for (unsigned long r = 0; r < (unsigned long)rounds; r++) {
        double t0 = now();
        atomic_store(&ping, 2 * r + 1);
        while (atomic_load(&ping) != 2 * r + 2) ;
        times[r] = (now() - t0) / 2;
    }
    pthread_join(a, NULL);
    qsort(times + rounds / 4, rounds - rounds / 4, sizeof *times, cmp);
    return times[rounds / 4 + (rounds - rounds / 4) / 2];
}
int main(int argc, char **argv) {
    if (argc > 1) rounds = atoi(argv[1]);
    times = calloc(rounds, sizeof *times);
    srand(1);
    double one = single();
    double bulk = run(0, 1), walk4 = run(1, 4), walk1 = run(1, 1);
    printf("one line %.1f ns; per line: bulk %.1f ns (overlap %.1f), 4-line nodes by pointer %.1f ns (overlap %.1f), 1-line nodes by pointer %.1f ns (overlap %.1f)\n",
           one, bulk, one / bulk, walk4, one / walk4, walk1, one / walk1);
    return 0;
}
