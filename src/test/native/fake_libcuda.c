/*
 * A stand-in libcuda.so.1 for checking vmmkit's FFM bindings on a machine without a GPU: each
 * function has the exact CUDA 13 signature (compiled against the real cuda.h), logs its arguments
 * to stderr, checks the struct fields vmmkit fills, and backs "device" memory with host memory so
 * copies round-trip. It does not emulate mapping (one handle at two VAs does not alias).
 *
 *   gcc -shared -fPIC -I/usr/local/cuda-13.0/include src/test/native/fake_libcuda.c -o /tmp/fakecuda/libcuda.so.1
 *   LD_LIBRARY_PATH=/tmp/fakecuda ./vmmkit driver-bench --iterations 20
 *   FAKE_NOT_READY=1 makes cuEventQuery answer CUDA_ERROR_NOT_READY.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define LOG(...) fprintf(stderr, "[fake] " __VA_ARGS__)
static __thread CUcontext current = 0; static int primary_refs = 0; static struct CUctx_st *PRIMARY = (struct CUctx_st*)0xC0FFEE00;
CUresult cuInit(unsigned int f){ LOG("cuInit(%u)\n", f); return 0; }
CUresult cuDeviceGetCount(int *c){ *c = 1; return 0; }
CUresult cuDeviceGet(CUdevice *d, int o){ if (o!=0) return 101; *d = 0; return 0; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d){ primary_refs++; *c = PRIMARY; LOG("retain dev=%d refs=%d\n", d, primary_refs); return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d){ primary_refs--; LOG("release dev=%d refs=%d\n", d, primary_refs); return 0; }
CUresult cuCtxGetCurrent(CUcontext *c){ *c = current; return 0; }
CUresult cuCtxSetCurrent(CUcontext c){ LOG("setCurrent %p\n", (void*)c); current = c; return 0; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t){ if(!current) return 201; *f = 100; *t = 200; return 0; }
CUresult cuMemAddressReserve(CUdeviceptr *p, size_t s, size_t a, CUdeviceptr addr, unsigned long long fl){
  if(!current) return 201; void *m = aligned_alloc(a, s); LOG("reserve size=%zx align=%zx addr=%llx flags=%llx -> %p\n", s, a, addr, fl, m); *p = (CUdeviceptr)m; return 0; }
CUresult cuMemAddressFree(CUdeviceptr p, size_t s){ LOG("free %llx %zx\n", p, s); free((void*)p); return 0; }
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t s, const CUmemAllocationProp *prop, unsigned long long fl){
  LOG("create size=%zx type=%d rht=%d loc=%d/%d win=%p flags=%llx\n", s, prop->type, prop->requestedHandleTypes, prop->location.type, prop->location.id, prop->win32HandleMetaData, fl);
  if (s % (2<<20)) return 1; if (prop->type!=1 || prop->location.type!=1) return 1; *h = 0xABC000 + s; return 0; }
CUresult cuMemRelease(CUmemGenericAllocationHandle h){ LOG("release %llx\n", h); return 0; }
CUresult cuMemMap(CUdeviceptr p, size_t s, size_t o, CUmemGenericAllocationHandle h, unsigned long long fl){ LOG("map %llx %zx off=%zx h=%llx fl=%llx\n", p, s, o, h, fl); return 0; }
CUresult cuMemUnmap(CUdeviceptr p, size_t s){ LOG("unmap %llx %zx\n", p, s); return 0; }
CUresult cuMemSetAccess(CUdeviceptr p, size_t s, const CUmemAccessDesc *d, size_t n){ LOG("setAccess %llx %zx loc=%d/%d flags=%d n=%zu\n", p, s, d->location.type, d->location.id, d->flags, n); return (n==1 && d->flags==3 && d->location.type==1) ? 0 : 1; }
CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags o){ LOG("granularity opt=%d loc=%d\n", o, prop->location.type); *g = 2<<20; return 0; }
CUresult cuEventCreate(CUevent *e, unsigned int f){ LOG("eventCreate flags=%u\n", f); *e = (CUevent)0xE0E0; return 0; }
static int queries = 0;
CUresult cuEventRecord(CUevent e, CUstream s){ LOG("record %p %p\n", (void*)e, (void*)s); return 0; }
CUresult cuEventQuery(CUevent e){ return getenv("FAKE_NOT_READY") ? 600 : 0; }
CUresult cuEventSynchronize(CUevent e){ return 0; }
CUresult cuEventDestroy_v2(CUevent e){ LOG("destroy %p\n", (void*)e); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n){ memcpy((void*)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n){ memcpy(d, (void*)s, n); return 0; }
CUresult cuGetErrorName(CUresult r, const char **s){ *s = "CUDA_ERROR_FAKE"; return 0; }
CUresult cuGetErrorString(CUresult r, const char **s){ *s = r==1 ? "invalid argument (fake driver)" : "fake error"; return 0; }
