/* Chunks of a kernel's parallel loop, claimed as its threads get to them
 * (autoplace/deploy/dynamic_chunks.py). Linked into every kernel library built for a
 * target of several cores.
 *
 * The loop's chunks are split into one contiguous range per thread. A thread takes chunks
 * from the front of its own range; when that is empty it takes from the back of the range
 * with the most left. Each range is one 64-bit word (next chunk in the low half, end in the
 * high half) changed by compare-and-swap, on a cache line of its own. The ranges live in
 * the launching thread's storage: a kernel call returns only when its loop is done, and two
 * units' threads launching kernels at once use two sets of ranges. */
#include <stdint.h>

#define AUTOPLACE_MOST_THREADS 64
#define AUTOPLACE_LINE 8 /* uint64 words per cache line */

static __thread uint64_t autoplace_ranges[AUTOPLACE_MOST_THREADS * AUTOPLACE_LINE];

static uint64_t autoplace_pack(uint64_t next, uint64_t end) { return next | (end << 32); }

static int64_t autoplace_take(uint64_t* range, int from_back) {
  uint64_t old = __atomic_load_n(range, __ATOMIC_ACQUIRE);
  for (;;) {
    uint64_t next = old & 0xffffffffu, end = old >> 32;
    if (next >= end) return -1;
    uint64_t left = from_back ? autoplace_pack(next, end - 1) : autoplace_pack(next + 1, end);
    if (__atomic_compare_exchange_n(range, &old, left, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      return from_back ? (int64_t)(end - 1) : (int64_t)next;
  }
}

#ifdef __cplusplus
extern "C" {
#endif

/* Split chunks 0 .. chunks-1 into `threads` ranges; the ranges' handle. */
void* autoplace_split_chunks(int64_t threads, int64_t chunks) {
  if (threads > AUTOPLACE_MOST_THREADS) threads = AUTOPLACE_MOST_THREADS;
  for (int64_t t = 0; t < threads; ++t)
    __atomic_store_n(&autoplace_ranges[t * AUTOPLACE_LINE],
                     autoplace_pack(chunks * t / threads, chunks * (t + 1) / threads),
                     __ATOMIC_RELEASE);
  return autoplace_ranges;
}

/* The next chunk for thread `self`, or -1 when none is left. */
int64_t autoplace_claim_chunk(void* handle, int64_t self, int64_t threads) {
  uint64_t* ranges = (uint64_t*)handle;
  if (threads > AUTOPLACE_MOST_THREADS) threads = AUTOPLACE_MOST_THREADS;
  int64_t chunk = autoplace_take(&ranges[(self % threads) * AUTOPLACE_LINE], 0);
  while (chunk < 0) {
    int64_t fullest = -1;
    uint64_t most = 0;
    for (int64_t t = 0; t < threads; ++t) {
      uint64_t word = __atomic_load_n(&ranges[t * AUTOPLACE_LINE], __ATOMIC_ACQUIRE);
      uint64_t next = word & 0xffffffffu, end = word >> 32;
      if (end > next && end - next > most) {
        most = end - next;
        fullest = t;
      }
    }
    if (fullest < 0) return -1;
    chunk = autoplace_take(&ranges[fullest * AUTOPLACE_LINE], 1);
  }
  return chunk;
}

#ifdef __cplusplus
}
#endif
