/* A small native program with the control flow the PT emulation must encode: conditional
 * branches, jump tables, indirect calls, returns, recursion, rep string instructions,
 * system calls, faults whose handler redirects (siglongjmp) or resumes after the faulting
 * instruction, division by zero, asynchronous timer signals, and short-lived threads. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

static volatile uint64_t sink;
static sigjmp_buf jb;
static volatile int faults, skips, alarms;

static __attribute__((noinline)) uint64_t collatz(uint64_t n)
{
    uint64_t s = 0;
    while (n != 1) {
        n = (n & 1) ? 3 * n + 1 : n / 2;
        s++;
    }
    return s;
}

static __attribute__((noinline)) int sw(int v)
{
    switch (v % 9) {
    case 0: return v * 3;
    case 1: return v ^ 0x55;
    case 2: return v - 7;
    case 3: return v << 2;
    case 4: return v >> 1;
    case 5: return ~v;
    case 6: return v + 100;
    case 7: return v * v;
    default: return 1;
    }
}

static int f_add(int a) { return a + 1; }
static int f_mul(int a) { return a * 3; }
static int f_neg(int a) { return -a; }
static int (*const fns[])(int) = {f_add, f_mul, f_neg};

static __attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

/* Signal handlers live in a section of their own, placed after .text by the linker, so a
 * filter covering .text leaves them outside the range. */
#define HANDLER __attribute__((section("emu_handlers"), noinline))

HANDLER static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    (void)sig, (void)si;
    ucontext_t *uc = ctx;
    if (uc->uc_mcontext.gregs[REG_RBX] == 0x5151) {
        /* Resume after the faulting 3-byte load (see skip_load). */
        uc->uc_mcontext.gregs[REG_RIP] += 3;
        skips++;
        return;
    }
    faults++;
    siglongjmp(jb, 1);
}

HANDLER static void on_fpe(int sig)
{
    (void)sig;
    faults++;
    siglongjmp(jb, 2);
}

/* Where each timer signal interrupted the program, for the harness to compare with the
 * FUP addresses in the trace. */
static uint64_t alarm_rip[64];

HANDLER static void on_alarm(int sig, siginfo_t *si, void *ctx)
{
    (void)sig, (void)si;
    ucontext_t *uc = ctx;
    if (alarms < 64)
        alarm_rip[alarms] = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    alarms++;
}

static __attribute__((noinline)) uint64_t skip_load(uint64_t *p)
{
    uint64_t v = 7;
    /* mov (%rdi),%rax is 3 bytes (48 8b 07); the handler skips it when rbx is 0x5151. */
    __asm__ volatile("push %%rbx\n\tmov $0x5151, %%rbx\n\tmov (%1), %0\n\tpop %%rbx"
                     : "+a"(v)
                     : "D"(p)
                     : "memory");
    return v;
}

static __attribute__((noinline)) int divide(int a, int b) { return a / b; }

static void *worker(void *arg)
{
    uintptr_t k = (uintptr_t)arg;
    uint64_t acc = 0;
    for (uint64_t i = 1; i < 300 + k * 50; i++)
        acc += collatz(i) + (uint64_t)sw((int)i);
    sink += acc;
    return NULL;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    signal(SIGFPE, on_fpe);
    struct sigaction sal;
    memset(&sal, 0, sizeof sal);
    sal.sa_sigaction = on_alarm;
    sal.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGALRM, &sal, NULL);

    uint64_t acc = 0;
    char src[4096], dst[4096];
    memset(src, 'x', sizeof src);
    /* volatile: the loop survives the siglongjmp out of the fault handlers. */
    for (volatile int r = 0; r < rounds; r++) {
        acc += collatz((uint64_t)r + 1);
        acc += (uint64_t)sw(r);
        acc += (uint64_t)fns[r % 3](r);
        /* rep movsb / rep stosb */
        __asm__ volatile("rep movsb" : : "D"(dst), "S"(src), "c"((size_t)(r % 200) + 1) : "memory");
        __asm__ volatile("rep stosb" : : "D"(dst), "a"(r), "c"((size_t)(r % 100) + 1) : "memory");
        acc += (uint8_t)dst[0];
        if (r % 10 == 0) {
            if (sigsetjmp(jb, 1) == 0)
                acc += *(volatile uint64_t *)(uintptr_t)(r % 7 == 8); /* NULL load */
        }
        if (r % 10 == 3) {
            if (sigsetjmp(jb, 1) == 0)
                acc += (uint64_t)divide(r, r % 10 - 3);
        }
        if (r % 10 == 5)
            acc += skip_load(NULL);
        if (r % 25 == 0) {
            char buf[32];
            int n = snprintf(buf, sizeof buf, "round %d\n", r);
            if (write(STDOUT_FILENO, buf, (size_t)n) < 0)
                acc++;
        }
    }
    acc += (uint64_t)fib(16);

    /* Asynchronous signals: a fast interval timer while computing. */
    struct itimerval it = {{0, 2000}, {0, 2000}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (int r = 0; alarms < 20; r++)
        acc += collatz((uint64_t)(r % 1000) + 27) + (uint64_t)sw(r);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);

    pthread_t th[6];
    for (int w = 0; w < 2; w++) {
        for (uintptr_t i = 0; i < 3; i++)
            pthread_create(&th[w * 3 + i], NULL, worker, (void *)(i + (uintptr_t)w));
        for (int i = 0; i < 3; i++)
            pthread_join(th[w * 3 + i], NULL);
    }
    printf("alarm-rips:");
    for (int i = 0; i < alarms && i < 64; i++)
        printf(" 0x%llx", (unsigned long long)alarm_rip[i]);
    printf("\n");
    printf("ctest %" "llu" " faults %d skips %d alarms %d\n",
           (unsigned long long)(acc + sink), faults, skips, alarms);
    return 0;
}
