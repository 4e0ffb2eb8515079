/* One resource's share of a run, executed without Python (autoplace.runtime.native).
 *
 * A worker thread enters autoplace_serve once, with Python's GIL released (a ctypes call),
 * and stays there between runs, asleep on its station's futex. autoplace_launch hands each
 * station its job and wakes it; autoplace_wait_run sleeps until the last worker of the run
 * is done. A job is one resource's share of the run: run_items runs its items in order,
 * each a list of TVM FFI calls (a kernel, or the copies of a copy hop), after waiting for
 * the items of other resources it reads or follows. Each item's state (done[i]) is 0
 * (pending), 2 (pending, a worker sleeps on it) or 1 (done); a waiter spins briefly, then
 * sleeps on a futex; the worker that finishes the item wakes sleepers. The first failure is
 * recorded (its item, its message) and ends every worker's run: all items are marked done so
 * that no one sleeps on work that will not come, and each worker stops at its next item.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <tvm/ffi/c_api.h>

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void await_done(_Atomic int32_t* state, int32_t spins) {
  for (int32_t spin = 0; spin < spins; ++spin) {
    if (atomic_load_explicit(state, memory_order_acquire) == 1) return;
    cpu_relax();
  }
  for (;;) {
    int32_t v = atomic_load_explicit(state, memory_order_acquire);
    if (v == 1) return;
    if (v == 0 && !atomic_compare_exchange_strong(state, &v, 2)) continue;
    syscall(SYS_futex, (int32_t*)state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
  }
}

static void mark_done(_Atomic int32_t* state) {
  if (atomic_exchange_explicit(state, 1, memory_order_release) == 2) {
    syscall(SYS_futex, (int32_t*)state, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
  }
}

static void wake_all(_Atomic int32_t* word) {
  syscall(SYS_futex, (int32_t*)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Record the first failure: the item and the raised error's kind and message. */
static void fail(int32_t item, _Atomic int32_t* failed, char* message, int32_t capacity,
                 _Atomic int32_t* done, int32_t n_total) {
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  int32_t none = -1;
  if (atomic_compare_exchange_strong(failed, &none, item) && capacity > 0) {
    message[0] = '\0';
    if (err != NULL) {
      TVMFFIErrorCell* cell = (TVMFFIErrorCell*)((char*)err + sizeof(TVMFFIObject));
      size_t k = cell->kind.size < (size_t)capacity / 4 ? cell->kind.size : 0;
      size_t room = (size_t)capacity - 1 - k - (k ? 2 : 0);
      size_t m = cell->message.size < room ? cell->message.size : room;
      char* out = message;
      if (k) {
        memcpy(out, cell->kind.data, k);
        out += k;
        memcpy(out, ": ", 2);
        out += 2;
      }
      memcpy(out, cell->message.data, m);
      out[m] = '\0';
    }
  }
  if (err != NULL) TVMFFIObjectDecRef(err);
  for (int32_t i = 0; i < n_total; ++i) mark_done(&done[i]);
}

/* Run `n_items` items (indices into the run's items, in this worker's order).
 * Item i makes the calls [call_ptr[i], call_ptr[i+1]); call c calls funcs[c] with the
 * tensors args[arg_ptr[c] .. arg_ptr[c+1]); it first waits for the items
 * waits[wait_ptr[i] .. wait_ptr[i+1]). Returns 0, or -1 when the run failed (here or on
 * another worker: `failed` holds the item) or was stopped (`failed` is -2). */
static int run_items(int32_t n_items, const int32_t* items, const int32_t* call_ptr,
                     void* const* funcs, const int32_t* arg_ptr, void* const* args,
                     const int32_t* wait_ptr, const int32_t* waits, int32_t n_total,
                     _Atomic int32_t* done, _Atomic int32_t* failed, int64_t* start,
                     int64_t* end, char* message, int32_t capacity, int32_t spins) {
  TVMFFIAny packed[64];
  for (int32_t x = 0; x < n_items; ++x) {
    int32_t i = items[x];
    for (int32_t w = wait_ptr[i]; w < wait_ptr[i + 1]; ++w) await_done(&done[waits[w]], spins);
    if (atomic_load_explicit(failed, memory_order_acquire) != -1) return -1;
    start[i] = now_ns();
    for (int32_t c = call_ptr[i]; c < call_ptr[i + 1]; ++c) {
      int32_t n = arg_ptr[c + 1] - arg_ptr[c];
      if (n > 64) n = 64; /* the Python side refuses more */
      for (int32_t a = 0; a < n; ++a) {
        packed[a].type_index = kTVMFFITensor;
        packed[a].zero_padding = 0;
        packed[a].v_obj = (TVMFFIObject*)args[arg_ptr[c] + a];
      }
      TVMFFIAny result;
      result.type_index = kTVMFFINone;
      result.zero_padding = 0;
      result.v_int64 = 0;
      if (TVMFFIFunctionCall(funcs[c], packed, n, &result) != 0) {
        fail(i, failed, message, capacity, done, n_total);
        return -1;
      }
      if (result.type_index >= kTVMFFIStaticObjectBegin && result.v_obj != NULL) {
        TVMFFIObjectDecRef(result.v_obj);
      }
    }
    end[i] = now_ns();
    mark_done(&done[i]);
  }
  return 0;
}

/* Stop a run (a timeout): mark it stopped, unless it failed already, and every item done,
 * so that each worker ends at its next item. */
void autoplace_stop_run(int32_t n_total, _Atomic int32_t* done, _Atomic int32_t* failed) {
  int32_t none = -1;
  atomic_compare_exchange_strong(failed, &none, -2);
  for (int32_t i = 0; i < n_total; ++i) mark_done(&done[i]);
}

/* One resource's share of one run: run_items' arguments, and the run's count of workers
 * still at work (the launcher's futex). */
typedef struct {
  int32_t n_items;
  const int32_t* items;
  const int32_t* call_ptr;
  void* const* funcs;
  const int32_t* arg_ptr;
  void* const* args;
  const int32_t* wait_ptr;
  const int32_t* waits;
  int32_t n_total;
  _Atomic int32_t* done;
  _Atomic int32_t* failed;
  int64_t* start;
  int64_t* end;
  char* message;
  int32_t capacity;
  int32_t spins;
  _Atomic int32_t* remaining;
} autoplace_job;

/* Where a worker waits for its next job: `generation` counts the jobs handed to it (the
 * futex word), `closing` ends autoplace_serve. */
typedef struct {
  _Atomic int32_t generation;
  _Atomic int32_t closing;
  const autoplace_job* job;
} autoplace_station;

/* A worker's loop, until its station closes: wait for the next job, run it, and wake the
 * launcher when it was the run's last. */
void autoplace_serve(autoplace_station* station) {
  int32_t seen = 0;
  for (;;) {
    int32_t now = atomic_load_explicit(&station->generation, memory_order_acquire);
    if (now == seen) {
      syscall(SYS_futex, (int32_t*)&station->generation, FUTEX_WAIT_PRIVATE, seen, NULL, NULL,
              0);
      continue;
    }
    seen = now;
    if (atomic_load_explicit(&station->closing, memory_order_acquire)) return;
    const autoplace_job* j = station->job;
    run_items(j->n_items, j->items, j->call_ptr, j->funcs, j->arg_ptr, j->args, j->wait_ptr,
              j->waits, j->n_total, j->done, j->failed, j->start, j->end, j->message,
              j->capacity, j->spins);
    if (atomic_fetch_sub_explicit(j->remaining, 1, memory_order_acq_rel) == 1) {
      wake_all(j->remaining);
    }
  }
}

/* Hand job k to station k, for k < n, and wake them; `*remaining` must be n already. */
void autoplace_launch(int32_t n, autoplace_station* const* stations,
                      const autoplace_job* jobs) {
  for (int32_t k = 0; k < n; ++k) {
    stations[k]->job = &jobs[k];
    atomic_fetch_add_explicit(&stations[k]->generation, 1, memory_order_release);
    wake_all(&stations[k]->generation);
  }
}

/* Sleep until no worker of the run is at work (returns 0), or for at most `timeout_ns`
 * (returns 1: the caller checks for a signal or its deadline, then waits again). */
int autoplace_wait_run(_Atomic int32_t* remaining, int64_t timeout_ns) {
  int64_t deadline = now_ns() + timeout_ns;
  for (;;) {
    int32_t r = atomic_load_explicit(remaining, memory_order_acquire);
    if (r == 0) return 0;
    int64_t left = deadline - now_ns();
    if (left <= 0) return 1;
    struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
    syscall(SYS_futex, (int32_t*)remaining, FUTEX_WAIT_PRIVATE, r, &ts, NULL, 0);
  }
}

/* End a station's autoplace_serve (after the job it runs, if any). */
void autoplace_close_station(autoplace_station* station) {
  atomic_store_explicit(&station->closing, 1, memory_order_release);
  atomic_fetch_add_explicit(&station->generation, 1, memory_order_release);
  wake_all(&station->generation);
}
