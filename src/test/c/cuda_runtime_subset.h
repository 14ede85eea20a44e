/*
 * cuda_runtime_subset.h: the few CUDA runtime declarations the test programs use, so they build
 * against the stand-in runtime (fake_cudart.c) and the real libcudart without CUDA's headers.
 */
#ifndef VMMKIT_CUDA_RUNTIME_SUBSET_H
#define VMMKIT_CUDA_RUNTIME_SUBSET_H
#include <stddef.h>

typedef int cudaError_t;
typedef void *cudaStream_t;
enum { H2D = 1, D2H = 2, D2D = 3, DEFAULT_KIND = 4 }; /* cudaMemcpyKind */
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);
cudaError_t cudaMallocAsync(void **, size_t, cudaStream_t);
cudaError_t cudaFreeAsync(void *, cudaStream_t);
cudaError_t cudaMemcpy(void *, const void *, size_t, int);
cudaError_t cudaMemcpyAsync(void *, const void *, size_t, int, cudaStream_t);
cudaError_t cudaSetDevice(int);
cudaError_t cudaDeviceSynchronize(void);
#endif
