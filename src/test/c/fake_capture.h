/*
 * fake_capture.h: stream-capture bookkeeping for the stand-in runtime (fake_cudart.c) and driver
 * (fake_cuda.c): one capturing stream at a time, enough for the shim's. Each stand-in turns the
 * answers into its own API's codes.
 */
#ifndef FAKE_CAPTURE_H
#define FAKE_CAPTURE_H

#include <pthread.h>

static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;
static void *capturing_stream;
static int capturing;

/* Begins a capture on stream; 0, or 1 (refused) when one is under way already. */
static int capture_begin(void *stream) {
    pthread_mutex_lock(&capture_lock);
    int busy = capturing;
    if (!busy) { capturing = 1; capturing_stream = stream; }
    pthread_mutex_unlock(&capture_lock);
    return busy;
}

/* 1 while stream captures, else 0. */
static int capture_status(void *stream) {
    pthread_mutex_lock(&capture_lock);
    int status = capturing && capturing_stream == stream;
    pthread_mutex_unlock(&capture_lock);
    return status;
}

/* Ends stream's capture; 0, or 1 (refused) when stream does not capture. */
static int capture_end(void *stream) {
    pthread_mutex_lock(&capture_lock);
    int ours = capturing && capturing_stream == stream;
    if (ours) capturing = 0;
    pthread_mutex_unlock(&capture_lock);
    return !ours;
}

#endif
