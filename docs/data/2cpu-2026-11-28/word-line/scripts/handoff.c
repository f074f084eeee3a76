/*
 * How long a spinner takes to see a lock's release on this machine: two
 * threads, pinned to CPUs 0 and 1, each loop over "take a one-word lock
 * (a compare-and-swap; on failure poll the word with a pause between
 * loads, as the lab's rwsem spins), hold it for HOLD iterations of an
 * empty loop, release it (an atomic and), wait GAP iterations". The
 * share of acquisitions that follow the other thread's release is the
 * chance that a spinner takes the lock in a gap of that length; where it
 * is near 0 the releaser takes its lock back every time.
 *
 * The gap in nanoseconds is the one-thread iteration time at GAP less
 * that at 0 (noisy on a shared VM: negative figures are noise).
 *
 *     gcc -O2 -pthread handoff.c -o handoff
 *     ./handoff HOLD GAP...          e.g. ./handoff 1200 8 16 32 64 128 256 512
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static _Alignas(128) atomic_uint word;
static _Alignas(128) atomic_int stop;
static _Alignas(128) atomic_uint last; /* the thread that took it last */
static long gap_iters, hold_iters;
static struct { long acquired, handed; } result[2];

static inline void wait_iters(long n)
{
	for (long i = 0; i < n; i++)
		__asm__ volatile("");
}

static void *worker(void *arg)
{
	int me = (int)(long)arg;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(me, &set);
	pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	long acquired = 0, handed = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unsigned expect = 0;
		if (!atomic_compare_exchange_strong_explicit(&word, &expect, 1,
				memory_order_acquire, memory_order_relaxed)) {
			for (;;) {
				if (atomic_load_explicit(&word, memory_order_relaxed) == 0) {
					expect = 0;
					if (atomic_compare_exchange_strong_explicit(&word,
							&expect, 1, memory_order_acquire,
							memory_order_relaxed))
						break;
				}
				_mm_pause();
				if (atomic_load_explicit(&stop, memory_order_relaxed))
					goto out;
			}
		}
		acquired++;
		if (atomic_load_explicit(&last, memory_order_relaxed) != (unsigned)me) {
			handed++;
			atomic_store_explicit(&last, me, memory_order_relaxed);
		}
		wait_iters(hold_iters);
		atomic_fetch_and_explicit(&word, 0, memory_order_release);
		wait_iters(gap_iters);
	}
out:
	result[me].acquired = acquired;
	result[me].handed = handed;
	return NULL;
}

/* Nanoseconds per acquisition of `threads` threads over `secs`. */
static double trial(int threads, double secs)
{
	pthread_t t[2];
	atomic_store(&stop, 0);
	atomic_store(&word, 0);
	atomic_store(&last, 0);
	result[0].acquired = result[1].acquired = 0;
	result[0].handed = result[1].handed = 0;
	for (long k = 0; k < threads; k++)
		pthread_create(&t[k], NULL, worker, (void *)k);
	struct timespec d = { 0, (long)(secs * 1e9) };
	nanosleep(&d, NULL);
	atomic_store(&stop, 1);
	for (int k = 0; k < threads; k++)
		pthread_join(t[k], NULL);
	return secs * 1e9 / (double)(result[0].acquired + result[1].acquired);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s HOLD GAP...\n", argv[0]);
		return 2;
	}
	hold_iters = atol(argv[1]);
	for (int i = 2; i < argc; i++) {
		long gap = atol(argv[i]);
		gap_iters = 0;
		double base = trial(1, 0.1);
		gap_iters = gap;
		double one = trial(1, 0.1);
		trial(2, 0.3);
		long acquired = result[0].acquired + result[1].acquired;
		long handed = result[0].handed + result[1].handed;
		printf("hold %ld gap %4ld iterations (%6.1f ns; one thread %.1f ns an acquisition): "
		       "taken by the spinner %.4f of acquisitions\n",
		       hold_iters, gap, one - base, one, (double)handed / (double)acquired);
	}
	return 0;
}
