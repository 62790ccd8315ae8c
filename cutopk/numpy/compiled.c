/* Exact top-K of the rows of a strided 2-D array: the NumPy backend's compiled route
 * (cutopk/numpy/compiled.py builds this file with the machine's C compiler and calls it through
 * ctypes, the GIL released). A call's rows are shared between the calling thread and a pool of
 * worker threads kept between calls (see "Threads" at the end); each row runs on one thread.
 *
 * Algorithm, per row: each element's preference key (the twin of cutopk/_request/keys.py and
 * kernels/key_traits.cuh: an unsigned integer of the element's width whose order is the
 * preference order, -0.0 tied with +0.0, NaN at one end by the NaN rule) is compared with a
 * running threshold `t`, the key of the K-th best element kept so far. Only keys strictly above
 * `t` can still win: an element whose key equals `t` comes after every kept element of key `t`
 * (the row is read in index order), and the lower index wins a tie. The few that pass go into a
 * buffer of composites (key in the high half, the inverted column in the low half: composites
 * are distinct, and a larger one is the preferred element, ties to the lower index included).
 * When the buffer fills, a quickselect keeps its K best and raises `t`. At the end the K best
 * composites are sorted for the order asked for.
 *
 * The first `t`: on rows of at least SAMPLE_MIN_N with K at most a SAMPLE_MIN_SHARE-th of them,
 * the key that about 2K + 32 elements of the row reach, read from a sample of SAMPLE evenly
 * spaced keys, and the scan keeps keys at or above it; should fewer than K reach it, the row is
 * read again the plain way, so the answer never depends on the sample. Other rows of at least
 * 2K: the least of the K maxima down the row's slices of K (column j of every slice), a key that
 * K distinct elements reach, so the scan keeps the keys at or above it (1024x4096 k=64: 20-40%
 * less time than the plain way, on AVX2). Otherwise (the plain way) the first K elements enter
 * unconditionally and the least of them is the first `t`.
 *
 * The keys of a chunk of CHUNK elements are made and compared with `t` in plain loops that the
 * compiler vectorises; a chunk holding keys above `t` gives them as a bit mask where the
 * machine compares vectors into masks (AVX-512BW), else its 16-key parts are stepped through.
 *
 * Work: O(N) per row whatever the data (a rising row refills the buffer every `capacity - K`
 * elements, each refill O(capacity)), plus O(K log K) for the order. Memory: two buffers of
 * `capacity` composites per call (the second for the partitions), freed before return. Elements
 * of 1, 2, 4 or 8 bytes, unsigned, signed or IEEE binary floating point (float16, bfloat16,
 * float32, float64), read with any strides (negative and zero too) and any alignment, in
 * native byte order. Rows of fewer than 2**32 elements use 64-bit composites (32-bit halves), longer
 * ones and 64-bit keys 128-bit composites.
 *
 * Other methods (the request's `method`), each exact on every input it takes, chosen
 * by the caller for speed (cutopk/numpy/compiled.py's choose_method):
 * - METHOD_INSERT (short rows, small K): the K best so far kept sorted, an element entering
 *   only above the K-th; rows of at most CHUNK have the keys of several rows made at once.
 * - METHOD_COUNT (8- and 16-bit elements): a 256-bin count per row gives the K-th key (16 bits:
 *   the high byte's, then the low byte's in the K-th key's bin), a last pass writes the winners,
 *   in value order by a counting sort (16 bits, K above 16: two stable byte passes).
 * - METHOD_COLUMNS (rows side by side: an outer axis, or short rows): CHUNK rows at once, each
 *   step reading the next element of every one of them where it lies into sorted lists kept in
 *   vector lanes, one lane a row, without branches.
 * Every method can also copy its winners' values (the request's `values`), bit for bit.
 *
 * This file is the build's one entry (a unity build: one compiler call, one object). The parts
 * are in compiled/, one per method, included in the order below; request.h (struct cutopk_rows,
 * the ABI, the call of a row function in the copy for a width) and keys.h and lanes.h (the keys
 * and the lanes) are the headers they share. compiled.py's run-time build passes the folder of
 * this file with -I and hashes every part into its cache key (compiled.py's SOURCES).
 */
#define _GNU_SOURCE /* sched_getcpu, pthread_setaffinity_np: the workers' placement (Linux) */
#include "compiled/request.h"
#include "compiled/keys.h"
#include "compiled/composites.c"
#include "compiled/threshold.c"
#include "compiled/insert.c"
#include "compiled/lanes.h"
#include "compiled/lanes.c"
#include "compiled/rank.c"
#include "compiled/count.c"
#include "compiled/request.c"
#include "compiled/widths.c"
#include "compiled/threads.c"
