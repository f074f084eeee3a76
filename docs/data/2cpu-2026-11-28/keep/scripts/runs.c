/*
 * Two threads, pinned to CPUs 0 and 1, add to one word back to back, with
 * GAP iterations of an empty loop after each add. A run is a thread's
 * adds with none of the other's between them (the value an add returns is
 * one past its own previous one). Prints the time per add with one thread
 * and with two (all adds of both over the wall time), the adds per run,
 * the wall time per run (the line changes hands once per run), and the
 * adds per run times one add alone.
 *
 * At GAP 0 the adds a CPU makes in a row, times one add alone, is how
 * long it kept the line while the other CPU waited for it; `vmbench
 * topology --measure` takes that figure, over one transfer, as `keep`.
 *
 *     gcc -O2 -pthread runs.c -o runs && ./runs 0 5 10 20 40 80 160
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static _Alignas(128) atomic_long word;
static _Alignas(128) atomic_int stop;
static long gap_iters;
static _Alignas(128) long res[2][2][8];
static inline void wait_iters(long n){ for (long i=0;i<n;i++) __asm__ volatile(""); }
static void *worker(void *arg){
  int me=(int)(long)arg; cpu_set_t s; CPU_ZERO(&s); CPU_SET(me,&s);
  pthread_setaffinity_np(pthread_self(),sizeof s,&s);
  long n=0, runs=0, last=-2;
  while(!atomic_load_explicit(&stop,memory_order_relaxed)){
    for(int k=0;k<64;k++){
      long v=atomic_fetch_add_explicit(&word,1,memory_order_acq_rel);
      if(v!=last+1) runs++;
      last=v;
      wait_iters(gap_iters);
    }
    n+=64;
  }
  res[me][0][0]=n; res[me][1][0]=runs; return NULL;
}
static double trial(int threads,double secs){
  pthread_t t[2]; atomic_store(&stop,0); for(int i=0;i<2;i++){res[i][0][0]=res[i][1][0]=0;}
  for(long k=0;k<threads;k++) pthread_create(&t[k],NULL,worker,(void*)k);
  struct timespec d={0,(long)(secs*1e9)}; nanosleep(&d,NULL); atomic_store(&stop,1);
  for(int k=0;k<threads;k++) pthread_join(t[k],NULL);
  return secs*1e9/(double)(res[0][0][0]+res[1][0][0]);
}
int main(int argc,char**argv){
  for(int i=1;i<argc;i++){
    gap_iters=atol(argv[i]);
    double one=trial(1,0.2);
    double two=trial(2,0.4);
    double n=res[0][0][0]+res[1][0][0], runs=res[0][1][0]+res[1][1][0];
    double L=n/runs, per_run=two*n/runs; /* wall ns per run, system-wide */
    printf("gap %4ld: one thread %5.1f ns per add; two: %5.1f ns per add system-wide; %.2f adds per run; %.1f ns wall per run; adds in a row x one add alone %.1f ns\n",
      gap_iters, one, two, L, per_run, L*one);
  }
}
