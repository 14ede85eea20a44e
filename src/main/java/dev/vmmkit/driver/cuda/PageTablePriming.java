package dev.vmmkit.driver.cuda;

import java.lang.foreign.MemorySegment;

import dev.vmmkit.driver.CudaResult;

/**
 * Readies the GPU's page tables at the start of a new large reservation: one page is created,
 * mapped there, granted access, unmapped and released. The driver builds the page tables of a range
 * on its first mapping and keeps them after the unmap while the range stays reserved, so the first
 * large block placed there (a model's first weights, at the start of vmmkit's large region) finds
 * them made. Measured from C on an H100 ({@code first_vmm vmm-pt-warm}, median of 5): a first
 * 1 GiB create + map + setAccess took 98 us so primed against 166 us in a fresh reservation,
 * where the first {@code cuMemAlloc} of 1 GiB took 118 us.
 *
 * <p>Only reservations of at least {@link #MIN_RANGE} are primed (regions, not imports). The calls
 * go straight to the driver, past the counting and timing adaptors, and any failure (no memory for
 * the page, say) leaves the range as it was: priming is an optimisation, never a reason to fail.
 * The system property {@code vmmkit.cuda.primePageTables=false} turns it off, for
 * {@code scripts/gpu/cold-path.sh} to measure what it saves.
 */
final class PageTablePriming {
    /** Smaller reservations (an imported allocation's) are mapped whole at once anyway. */
    static final long MIN_RANGE = 1L << 30;
    private static final boolean ENABLED = !"false".equals(System.getProperty("vmmkit.cuda.primePageTables"));

    private PageTablePriming() {
    }

    /** Primes {@code [va, va + page)} of a range of {@code rangeBytes} just reserved; never throws a driver failure. */
    static void prime(long va, long rangeBytes, long page, MemorySegment prop, MemorySegment access) {
        if (!ENABLED || rangeBytes < MIN_RANGE || page > rangeBytes) return;
        CudaScratch scratch = CudaScratch.get();
        if (CudaApi.cuMemCreate(scratch.second, page, prop, 0L) != CudaResult.SUCCESS) return;
        long handle = scratch.secondLong();
        if (CudaApi.cuMemMap(va, page, 0L, handle, 0L) == CudaResult.SUCCESS) {
            CudaApi.cuMemSetAccess(va, page, access, 1L);
            CudaApi.cuMemUnmap(va, page);
        }
        CudaApi.cuMemRelease(handle);
    }
}
