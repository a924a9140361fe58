// What the runtime test programs check with: each call's answer against NVIDIA's runtime's
// (and a few helpers they share: an iota check, a counting host function and stream callback).
// A wrong error code is counted and the program goes on, so one run on NVIDIA's runtime shows
// every difference (with its line); a call expected to succeed that fails stops the function
// (what follows needs it), as does a false CHECK. Each program ends with `report`.
// stdout is line-buffered and a crash prints the line of the last EXPECT or CHECK begun, so a
// program that dies (a runtime that does not survive a call) still says how far it got.
#pragma once
#include <csignal>
#include <cstdio>
#include <unistd.h>

static int mismatches = 0;

// The line of the EXPECT or CHECK being evaluated, for the crash report.
static volatile sig_atomic_t expect_line = 0;

// On a crash: "line N: crashed (signal S)" on stdout, then the signal's default action (so the
// exit status still says which signal). Only async-signal-safe calls.
static void expect_crashed(int sig) {
    char msg[64] = "line ";
    int at = 5;
    char digits[12];
    int nd = 0;
    for (unsigned v = unsigned(expect_line); nd == 0 || v != 0; v /= 10) digits[nd++] = char('0' + v % 10);
    while (nd > 0) msg[at++] = digits[--nd];
    const char mid[] = ": crashed (signal ";
    for (const char *c = mid; *c; c++) msg[at++] = *c;
    for (unsigned v = unsigned(sig); nd == 0 || v != 0; v /= 10) digits[nd++] = char('0' + v % 10);
    while (nd > 0) msg[at++] = digits[--nd];
    msg[at++] = ')';
    msg[at++] = '\n';
    ssize_t written = write(STDOUT_FILENO, msg, size_t(at));
    (void)written;
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

// Runs before main: line-buffered stdout, and the crash report for the signals a bad pointer or
// an abort raises.
static const int expect_setup = [] {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(sig, expect_crashed);
    return 0;
}();

#define EXPECT(call, want)                                                                 \
    do {                                                                                   \
        expect_line = __LINE__;                                                            \
        cudaError_t e_ = (call);                                                           \
        if (e_ != (want)) {                                                                \
            std::printf("line %d: %s: got %s (%d), want %s\n", __LINE__, #call,             \
                        cudaGetErrorName(e_), int(e_), cudaGetErrorName(want));            \
            mismatches++;                                                                  \
            if ((want) == cudaSuccess) return 1;                                           \
        }                                                                                  \
    } while (0)
// A call that fails: its error is also the thread's last error (and is reset by reading it).
#define FAILS(call, want)                                                                  \
    do {                                                                                   \
        EXPECT(call, want);                                                                \
        EXPECT(cudaGetLastError(), want);                                                  \
    } while (0)
#define CHECK(cond)                                                                        \
    do {                                                                                   \
        expect_line = __LINE__;                                                            \
        if (!(cond)) {                                                                     \
            std::printf("line %d: %s is false\n", __LINE__, #cond);                        \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

// A program's last words: "<program> ok" and 0, or how many answers differed and 1.
static int report(const char *program) {
    if (mismatches) {
        std::printf("%s: %d mismatch(es)\n", program, mismatches);
        return 1;
    }
    std::printf("%s ok\n", program);
    return 0;
}

// Whether host[0..n) holds first, first + 1, ...; prints the first element that does not.
static bool holds_iota(const int *host, int first, int n) {
    for (int i = 0; i < n; i++) {
        if (host[i] != first + i) {
            std::printf("element %d is %d, want %d\n", i, host[i], first + i);
            return false;
        }
    }
    return true;
}

// A host function: counts its calls.
static void CUDART_CB count_call(void *counter) { ++*static_cast<int *>(counter); }

// A stream callback: counts its calls, and the ones told of an error.
static void CUDART_CB count_callback(cudaStream_t, cudaError_t status, void *counter) {
    *static_cast<int *>(counter) += status == cudaSuccess ? 1 : 1000;
}
