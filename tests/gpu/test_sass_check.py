"""The SASS check (tools/check_sass.py) can fail: it is run on planted kernels, one per rule,
compiled here with nvcc, next to a kernel that keeps the rules. Skipped with a reason where nvcc,
cuobjdump or nvdisasm is missing (CI installs them: nvcc from the toolkit, the other two from
the ``lint`` extra's wheels)."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))

import check_sass

SNIPPET = r"""
struct __align__(16) Vec { unsigned w[4]; };

// One load, then its use, per iteration: one load in flight, and no 128-bit load.
extern "C" __global__ void stream_one_at_a_time(const float* __restrict__ in, long long n, unsigned* hist) {
  __shared__ unsigned h[256];
  for (int d = threadIdx.x; d < 256; d += blockDim.x) h[d] = 0;
  __syncthreads();
#pragma unroll 1
  for (long long i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(&h[__float_as_uint(in[i]) >> 24], 1u);
  __syncthreads();
  for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[d] = h[d];
}

// A 64-bit shared histogram updated with a compare-and-swap loop.
extern "C" __global__ void stream_cas_histogram(const Vec* __restrict__ in, long long nv, unsigned long long* hist) {
  __shared__ unsigned long long h[256];
  for (int d = threadIdx.x; d < 256; d += blockDim.x) h[d] = 0;
  __syncthreads();
  for (long long t = 0; t < nv; t += 4LL * blockDim.x) {
    Vec v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const long long at = t + j * (long long)blockDim.x + threadIdx.x;
      v[j] = at < nv ? in[at] : Vec{};
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      unsigned long long* bin = &h[v[j].w[0] >> 24];
      unsigned long long old = *bin, seen;
      do {
        seen = old;
        old = atomicCAS(bin, seen, seen + 1);
      } while (old != seen);
    }
  }
  __syncthreads();
  for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[d] = h[d];
}

// Four 16-byte loads in flight, 32-bit shared counters: passes.
extern "C" __global__ void stream_good(const Vec* __restrict__ in, long long nv, unsigned* hist) {
  __shared__ unsigned h[256];
  for (int d = threadIdx.x; d < 256; d += blockDim.x) h[d] = 0;
  __syncthreads();
  for (long long t = 0; t < nv; t += 4LL * blockDim.x) {
    Vec v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const long long at = t + j * (long long)blockDim.x + threadIdx.x;
      v[j] = at < nv ? in[at] : Vec{};
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) atomicAdd(&h[v[j].w[e] >> 24], 1u);
  }
  __syncthreads();
  for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[d] = h[d];
}

// Streaming filters kept out of line (__noinline__), as kernels/multiblock.cu's filter_slice: four
// 16-byte loads in flight, the keys above a threshold counted; `Histogram` also counts every
// element's top byte in shared memory (what the rule keeps out of the loop).
template <bool Histogram>
__device__ __noinline__ unsigned filter(const Vec* __restrict__ in, long long nv, unsigned threshold, unsigned* h) {
  unsigned above = 0;
  for (long long t = 0; t < nv; t += 4LL * blockDim.x) {
    Vec v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const long long at = t + j * (long long)blockDim.x + threadIdx.x;
      v[j] = at < nv ? in[at] : Vec{};
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        above += v[j].w[e] > threshold;
        if (Histogram) atomicAdd(&h[v[j].w[e] >> 24], 1u);
      }
  }
  return above;
}

template <bool Histogram>
__device__ void filter_kernel(const Vec* __restrict__ in, long long nv, unsigned threshold, unsigned* out) {
  __shared__ unsigned h[256];
  for (int d = threadIdx.x; d < 256; d += blockDim.x) h[d] = 0;
  __syncthreads();
  const unsigned above = filter<Histogram>(in, nv, threshold, h);
  atomicAdd(&h[0], above);  // after the loop, in the kernel's own code: allowed
  __syncthreads();
  for (int d = threadIdx.x; d < 256; d += blockDim.x) out[d] = h[d];
}

extern "C" __global__ void filter_good(const Vec* in, long long nv, unsigned threshold, unsigned* out) {
  filter_kernel<false>(in, nv, threshold, out);
}
extern "C" __global__ void filter_histogram(const Vec* in, long long nv, unsigned threshold, unsigned* out) {
  filter_kernel<true>(in, nv, threshold, out);
}

// Refine passes over keys held in shared memory (onchip_select.cuh): the next digit of the keys
// with a given prefix counted, warp-aggregated. One key per thread and step: the rule's target.
__device__ void count_held(const unsigned* keys, int i, int len, unsigned prefix, unsigned* h) {
  const unsigned key = i < len ? keys[i] : 0u;
  const bool counted = i < len && (key >> 24) == prefix;
  if (!__any_sync(0xffffffffu, counted)) return;
  const unsigned peers = __match_any_sync(0xffffffffu, counted ? (key >> 12) & 4095u : 4096u + threadIdx.x % 32);
  if (counted && threadIdx.x % 32 == __ffs(peers) - 1) atomicAdd(&h[(key >> 12) & 4095u], __popc(peers));
}
extern "C" __global__ void held_key_at_a_time(int len, unsigned prefix, unsigned* out) {
  extern __shared__ unsigned held[];  // 4096 counters, then the keys
  for (int i0 = 0; i0 < len; i0 += blockDim.x) count_held(held + 4096, i0 + threadIdx.x, len, prefix, held);
  __syncthreads();
  out[threadIdx.x] = held[threadIdx.x];
}
// The same with a 16-byte vector of keys per thread and step: passes.
extern "C" __global__ void held_vectors(int len, unsigned prefix, unsigned* out) {
  extern __shared__ unsigned held[];
  for (int v0 = 0; v0 < len; v0 += 4 * blockDim.x) {
    const int i = v0 + 4 * threadIdx.x;
    const Vec v = i + 4 <= len ? *reinterpret_cast<const Vec*>(held + 4096 + i) : Vec{};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const bool counted = i + 4 <= len && (v.w[e] >> 24) == prefix;
      if (__popc(__ballot_sync(0xffffffffu, counted)) && counted) atomicAdd(&held[(v.w[e] >> 12) & 4095u], 1u);
    }
  }
  __syncthreads();
  out[threadIdx.x] = held[threadIdx.x];
}

// A histogram of 12-bit digits of keys in shared memory, 16-byte vectors: each key's digit counted
// after a warp match of the equal digits (kernels/radix_digit.cuh under CUTOPK_COUNT_WITH_MATCH),
// or with a plain shared atomic each (as every kernel counts).
template <bool Match>
__device__ void count_vectors(const unsigned* keys, int len, unsigned* h) {
  for (int v0 = 0; v0 < len; v0 += 4 * blockDim.x) {
    const int i = v0 + 4 * threadIdx.x;
    const Vec v = i + 4 <= len ? *reinterpret_cast<const Vec*>(keys + i) : Vec{};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const bool counted = i + 4 <= len;
      const unsigned digit = v.w[e] >> 20;
      if (Match) {
        const unsigned peers = __match_any_sync(0xffffffffu, counted ? digit : 4096u + threadIdx.x % 32);
        if (counted && threadIdx.x % 32 == __ffs(peers) - 1) atomicAdd(&h[digit], __popc(peers));
      } else if (counted) {
        atomicAdd(&h[digit], 1u);
      }
    }
  }
}
extern "C" __global__ void count_with_match(int len, unsigned* out) {
  extern __shared__ unsigned held[];  // 4096 counters, then the keys
  count_vectors<true>(held + 4096, len, held);
  __syncthreads();
  out[threadIdx.x] = held[threadIdx.x];
}
extern "C" __global__ void count_with_atomics(int len, unsigned* out) {
  extern __shared__ unsigned held[];
  count_vectors<false>(held + 4096, len, held);
  __syncthreads();
  out[threadIdx.x] = held[threadIdx.x];
}

// A row into shared memory by cp.async (LDGSTS), and the same by loads and stores.
extern "C" __global__ void copy_async(const Vec* __restrict__ in, int nv, unsigned* out) {
  extern __shared__ Vec row[];
  for (int v = threadIdx.x; v < nv; v += blockDim.x) {
    const unsigned at = (unsigned)__cvta_generic_to_shared(row + v);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(at), "l"(in + v) : "memory");
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  out[threadIdx.x] = row[threadIdx.x].w[0];
}
extern "C" __global__ void copy_plain(const Vec* __restrict__ in, int nv, unsigned* out) {
  extern __shared__ Vec row[];
  for (int v = threadIdx.x; v < nv; v += blockDim.x) row[v] = in[v];
  __syncthreads();
  out[threadIdx.x] = row[threadIdx.x].w[0];
}
// A ring of asynchronous 16-byte copies (kernels/streaming.cu's filter): each landed tile's keys
// compared with a threshold and counted; with an atomic per key, or a per-thread count only.
template <bool Atomic>
__device__ void ring(const Vec* __restrict__ in, int tiles, unsigned t, unsigned* out) {
  __shared__ Vec stage[2][256];
  __shared__ unsigned hits;
  unsigned mine = 0;
  if (threadIdx.x == 0) hits = 0;
  for (int tile = 0; tile < tiles; ++tile) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(&stage[tile & 1][threadIdx.x]);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(in + tile * 256 + threadIdx.x));
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();
    const Vec v = stage[tile & 1][threadIdx.x];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (Atomic && v.w[e] >= t) atomicAdd(&hits, 1u);
      mine += v.w[e] >= t;
    }
    __syncthreads();
  }
  out[threadIdx.x] = mine + (Atomic ? hits : 0u);
}
extern "C" __global__ void ring_counted(const Vec* in, int tiles, unsigned t, unsigned* out) {
  ring<false>(in, tiles, t, out);
}
extern "C" __global__ void ring_atomic(const Vec* in, int tiles, unsigned t, unsigned* out) {
  ring<true>(in, tiles, t, out);
}
"""


def _cubin(tmp_path_factory, source: str, name: str) -> pathlib.Path:
    nvcc = shutil.which("nvcc")
    if not nvcc:
        pytest.skip("nvcc not found: the planted kernels cannot be compiled")
    if check_sass.find_cuobjdump()[0] is None:
        pytest.skip("cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    tmp = tmp_path_factory.mktemp("sass")
    src, out = tmp / f"{name}.cu", tmp / f"{name}.cubin"
    src.write_text(source)
    subprocess.run([nvcc, "-cubin", "-arch=sm_80", str(src), "-o", str(out)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def planted_cubin(tmp_path_factory):
    return _cubin(tmp_path_factory, SNIPPET, "planted")


@pytest.fixture(scope="module")
def planted(planted_cubin):
    return check_sass.disassemble(str(planted_cubin))


def findings(functions, name):
    mine = {key: code for key, code in functions.items() if key[1] == name}
    assert mine, f"{name} is not in the disassembly"
    return [f.problem for f in check_sass.check(mine, streaming=re.compile(r"^stream_"))]


def test_one_load_at_a_time_and_no_vector_load_fail(planted):
    problems = findings(planted, "stream_one_at_a_time")
    assert any("no 128-bit global load" in p for p in problems), problems
    assert any("global loads in flight" in p for p in problems), problems


def test_a_compare_and_swap_histogram_fails(planted):
    problems = findings(planted, "stream_cas_histogram")
    assert any("compare-and-swap" in p for p in problems), problems


def test_four_vector_loads_in_flight_pass(planted):
    assert findings(planted, "stream_good") == []
    code = next(c for (_, n), c in planted.items() if n == "stream_good")
    assert check_sass.loads_in_flight(code) >= 4


def filter_findings(functions, name):
    mine = {key: code for key, code in functions.items() if key[1] == name}
    assert mine, f"{name} is not in the disassembly"
    return [f.problem for f in check_sass.check(mine, streaming=re.compile("^$"), filtered=re.compile(r"^"))]


def test_an_out_of_line_filter_without_shared_atomics_passes(planted):
    assert filter_findings(planted, "filter_good") == []
    code = next(c for (_, n), c in planted.items() if n == "filter_good")
    loop = check_sass.streaming_loop(code)
    assert loop is not None and any("LDG.E.128" in t for _, _, t in loop)
    assert loop[0][0] > code[0][0]  # a callee's code, after the kernel's own


def test_a_shared_histogram_in_the_filter_fails(planted):
    problems = filter_findings(planted, "filter_histogram")
    assert any("shared-memory atomic or warp match in the streaming filter" in p for p in problems), problems


def test_a_kernel_without_an_out_of_line_filter_fails(planted):
    # stream_good streams in its own code: no callee to check, which the rule reports.
    problems = filter_findings(planted, "stream_good")
    assert any("no out-of-line streaming filter" in p for p in problems), problems


def on_chip_findings(functions, name):
    mine = {key: code for key, code in functions.items() if key[1] == name}
    assert mine, f"{name} is not in the disassembly"
    none = re.compile("^$")
    return [
        f.problem
        for f in check_sass.check(mine, streaming=none, sampled=none, filtered=none, on_chip=re.compile(r"^"))
    ]


def test_a_held_key_scan_one_key_at_a_time_fails(planted):
    problems = on_chip_findings(planted, "held_key_at_a_time")
    assert any("reads one key per thread and step" in p for p in problems), problems


def test_a_held_key_scan_of_16_byte_vectors_passes(planted):
    assert on_chip_findings(planted, "held_vectors") == []
    code = next(c for (_, n), c in planted.items() if n == "held_vectors")
    assert any(any("LDS.128" in t for _, _, t in loop) for loop in check_sass.innermost_loops(code))


def match_findings(functions, name):
    mine = {key: code for key, code in functions.items() if key[1] == name}
    assert mine, f"{name} is not in the disassembly"
    none = re.compile("^$")
    return [
        f.problem for f in check_sass.check(mine, streaming=none, sampled=none, filtered=none, on_chip=none)
    ]


def test_a_histogram_counted_after_a_warp_match_fails(planted):
    problems = match_findings(planted, "count_with_match")
    assert any("warp match" in p and "MATCH" in p for p in problems), problems


def test_a_histogram_counted_with_plain_atomics_passes(planted):
    assert match_findings(planted, "count_with_atomics") == []


def ring_findings(functions, name):
    mine = {key: code for key, code in functions.items() if key[1] == name}
    assert mine, f"{name} is not in the disassembly"
    none = re.compile("^$")
    every = re.compile(r"^")
    return [
        f.problem
        for f in check_sass.check(
            mine, streaming=none, sampled=none, filtered=none, on_chip=none, selection=none, ringed=every
        )
    ]


def test_a_ring_filter_with_an_atomic_per_key_fails(planted):
    problems = ring_findings(planted, "ring_atomic")
    assert any("an atomic or warp match in the ring's loop" in p for p in problems), problems


def test_a_ring_filter_without_atomics_passes_and_a_kernel_without_a_ring_fails(planted):
    assert ring_findings(planted, "ring_counted") == []
    problems = ring_findings(planted, "stream_good")  # 16-byte loads, no asynchronous copy
    assert any("the ring is gone" in p for p in problems), problems


def test_the_counting_loops_count_instructions_per_key(planted):
    # One loop each, 4 keys (one 16-byte vector) per trip, one shared atomic per key; the matched
    # one issues a MATCH per key on top, so more instructions per key than the plain one.
    code = {n: c for (_, n), c in planted.items()}
    (plain,) = check_sass.counting_loops(code["count_with_atomics"])
    (matched,) = check_sass.counting_loops(code["count_with_match"])
    assert plain.atomics == matched.atomics == 4
    assert (plain.matches, matched.matches) == (0, 4)
    assert plain.per_key == plain.instructions / 4 < matched.per_key
    assert check_sass.counting_loops(code["filter_good"]) == []  # no shared atomic in any loop


def test_the_held_counting_loop_is_the_first_that_counts_16_byte_shared_vectors(planted):
    # block_row's count of its held row (tests/gpu/test_counting_cost.py compares its cost with
    # FlashInfer's): a loop of LDS.128 and shared atomics, no global load.
    code = {n: c for (_, n), c in planted.items()}
    (plain,) = check_sass.counting_loops(code["count_with_atomics"])
    assert check_sass.held_counting_loop(code["count_with_atomics"]) == plain
    assert check_sass.held_counting_loop(code["stream_good"]) is None  # global loads: a streaming count
    assert check_sass.held_counting_loop(code["filter_good"]) is None  # no shared atomic


def test_a_held_count_dearer_than_flashinfers_fails(planted):
    # The rule on sm_90's block_row and cluster kernels (one count step), with the planted count
    # under their names.
    (code,) = [c for (_, n), c in planted.items() if n == "count_with_atomics"]
    per_key = round(check_sass.held_counting_loop(code).per_key, 1)
    functions = {
        ("sm_90", "block_row_topk_float32"): code,
        ("sm_90", "cluster_topk_float16_blocks4"): code,
        ("sm_90", "cluster_topk_float32_blocks4"): code,  # not held to it (check_sass.HELD_COUNT)
        ("sm_80", "block_row_topk_float16"): code,
    }
    none = re.compile("^$")
    rules = dict(
        streaming=none, sampled=none, filtered=none, on_chip=none, async_copy=none, async_copy_sm90=none
    )
    found = check_sass.check(
        functions, **rules, counting_reference={"float32": per_key - 0.1, "float16": per_key - 0.1}
    )
    assert sorted(f.name for f in found) == ["block_row_topk_float32", "cluster_topk_float16_blocks4"], found
    assert all("FlashInfer's" in f.problem for f in found), found  # sm_80 is not held to it
    assert check_sass.check(functions, **rules, counting_reference={"float32": per_key}) == []
    assert set(check_sass.flashinfer_counting()) == {"float32", "float16", "bfloat16"}


def test_a_row_copied_without_cp_async_fails(planted):
    def problems(name):
        mine = {key: code for key, code in planted.items() if key[1] == name}
        return [f.problem for f in check_sass.check(mine, async_copy=re.compile(r"^copy_"))]

    assert any("no asynchronous copy" in p for p in problems("copy_plain")), problems("copy_plain")
    assert problems("copy_async") == []
    # The cluster family's rule holds from sm_90 only (its earlier builds trap): the sm_80 code
    # passes it, the same code labelled sm_90 fails it.
    ((arch, _), code) = next((key, c) for key, c in planted.items() if key[1] == "copy_plain")
    for label, wanted in ((arch, False), ("sm_90", True)):
        found = check_sass.check({(label, "copy_plain"): code}, async_copy_sm90=re.compile(r"^copy_"))
        assert any("no asynchronous copy" in f.problem for f in found) == wanted, (label, found)


def test_the_rules_name_the_entry_points_of_the_streaming_kernels():
    # The rules find kernels by the names the launcher compiles (cutopk/cuda/kernel_source.py): every
    # entry point of a streaming kernel, and no other.
    from cutopk.cuda import launcher as _launcher

    streaming = {
        "radix_topk",
        "warp_radix_topk",
        "digit_pass",
        "resident_topk",
        "split_topk",
        "block_row_topk",
    }
    names = [n for p in _launcher.programs() for n in p.kernels]
    assert "radix_topk_float32" in names and "warp_radix_topk_uint8" in names
    for name in names:
        base = re.sub(r"_(u?int\d+|b?float\d+)(_\w+)?$", "", name)
        assert bool(check_sass.STREAMING.search(name)) == (base in streaming), name
        assert bool(check_sass.SAMPLED.search(name)) == (base == "sample_threshold"), name
        one_digit = name in ("digit_pass_int8", "digit_pass_uint8")
        assert bool(check_sass.FILTERED.search(name)) == (base == "digit_pass" and not one_digit), name
        assert bool(check_sass.ON_CHIP.search(name)) == (
            base in ("resident_topk", "split_topk", "cluster_topk", "block_row_topk")
        ), name
        assert bool(check_sass.ASYNC_COPY.search(name)) == (base == "block_row_topk"), name
        assert bool(check_sass.ASYNC_COPY_SM90.search(name)) == (base == "cluster_topk"), name
        assert bool(check_sass.RINGED.search(name)) == (base == "streaming_topk"), name


SMALL = r"""
extern "C" __global__ void small_loop(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = x[i] * 2.0f + 1.0f;
}
"""


def test_cubins_read_together_give_what_each_cubin_gives_alone(tmp_path_factory, planted_cubin, planted):
    """One nvdisasm call over several cubins (CI's NVRTC check reads all of an architecture's
    cubins so) answers as cuobjdump does for each: the same functions, each with its addresses
    and its branch and call targets counted from its own start, wherever it lies in the batch."""
    small = _cubin(tmp_path_factory, SMALL, "small")
    alone = {**check_sass.disassemble(str(small)), **planted}
    for order in ([small, planted_cubin], [planted_cubin, small]):
        together = check_sass.disassemble_cubins("sm_80", [c.read_bytes() for c in order])
        assert together == alone
    assert any(t.startswith("CALL.REL") for code in planted.values() for _, _, t in code)
    assert check_sass.disassemble_cubins("sm_80", []) == {}


def test_text_sections_refuses_what_is_not_a_cubin():
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF file"):
        check_sass.text_sections(b"CUBIN")
