"""The simulator's element-type check: an array argument must hold what the kernel's pointer
parameter points to (after template substitution), which CuPy cannot check."""

from __future__ import annotations

import numpy as np
import pytest

from cutopk import sim
from cutopk.sim import _rewrite

SOURCE = r"""
struct Pair {
  int key;
  float value;
  int tag;
};  // 12 bytes, 4-byte aligned

struct Handle {
  long long id;
};  // 8 bytes, as an object array's elements

enum Colour : unsigned short { RED = 1, BLUE = 2 };

#define SCALE_PARAMS const float* __restrict__ in, float* __restrict__ out

extern "C" __global__ void scale(SCALE_PARAMS, int n) {
  if (threadIdx.x < n) out[threadIdx.x] = 2.0f * in[threadIdx.x];
}

extern "C" __global__ void count(const float* in, unsigned* counter, int n) {
  if (threadIdx.x < n && in[threadIdx.x] > 0) atomicAdd(counter, 1u);
}

template <class T, int N>
__global__ void copy(const T* in, T* out) {
  for (int i = threadIdx.x; i < N; i += blockDim.x) out[i] = in[i];
}

extern "C" __global__ void raw(void* anything, char* bytes, int n) {
  if (threadIdx.x < n) bytes[threadIdx.x] = static_cast<char*>(anything)[threadIdx.x];
}

extern "C" __global__ void pairs(Pair* p, int n) {
  if (threadIdx.x < n) p[threadIdx.x].tag = p[threadIdx.x].key + 1;
}

extern "C" __global__ void handles(Handle* h) { h[0].id += 1; }

extern "C" __global__ void typed(__half* h, __nv_bfloat16* b, bool* flags, Colour* colours, long long* wide) {
  flags[0] = colours[0] == BLUE;
  wide[0] = sizeof(*h) + sizeof(*b);
}

extern "C" __global__ void pointers(const float* const* rows, float* out) { out[0] = rows[0][0]; }

extern "C" __global__ void unnamed(const float*, unsigned* hits) { hits[0] = 1; }
"""
NAMES = ["copy<double, 8>", "copy<float, 8>"]


@pytest.fixture(scope="module")
def mod():
    return sim.RawModule(code=SOURCE, name_expressions=NAMES)


def test_correct_call_passes(mod):
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    mod.get_function("scale")(1, 8, (x, out, np.int32(8)))
    assert out.tolist() == (2 * x).tolist()


def test_float64_for_const_float_pointer(mod):
    out = np.full(8, -1, np.float32)
    with pytest.raises(sim.ElementTypeError) as info:
        mod.get_function("scale")(1, 8, (np.arange(8.0), out, np.int32(8)))
    assert str(info.value) == (
        "kernel 'scale', argument 0 (in: const float*): expected an array of float32, got a float64 array"
    )
    assert (out == -1).all(), "the check comes before the launch"


def test_int64_for_unsigned_pointer(mod):
    counter = np.zeros(1, np.int64)
    with pytest.raises(sim.ElementTypeError) as info:
        mod.get_function("count")(1, 8, (np.ones(8, np.float32), counter, np.int32(8)))
    assert str(info.value) == (
        "kernel 'count', argument 1 (counter: unsigned int*): expected an array of uint32, got an int64 array"
    )
    assert counter[0] == 0


def test_signedness_counts(mod):
    # Same size, other signedness: still a different element type.
    with pytest.raises(
        sim.ElementTypeError, match=r"argument 1 \(counter: unsigned int\*\).*got an int32 array"
    ):
        mod.get_function("count")(1, 8, (np.ones(8, np.float32), np.zeros(1, np.int32), np.int32(8)))
    counter = np.zeros(1, np.uint32)
    mod.get_function("count")(1, 8, (np.ones(8, np.float32), counter, np.int32(8)))
    assert counter[0] == 8


def test_swapped_bytes_and_objects_are_refused(mod):
    fn = mod.get_function("scale")
    with pytest.raises(
        sim.ElementTypeError,
        match=r"argument 0 \(in: const float\*\): expected an array of float32, got a >f4",
    ):
        fn(1, 8, (np.ones(8, ">f4"), np.zeros(8, np.float32), np.int32(8)))
    handles = mod.get_function("handles")
    ids = np.array([41], np.int64)  # 8-byte elements for the 8-byte Handle
    handles(1, 1, (ids,))
    assert ids[0] == 42
    with pytest.raises(sim.ElementTypeError, match=r"argument 0 \(h: Handle\*\).*got an object array"):
        handles(1, 1, (np.array([None]),))


def test_is_a_launch_argument_error_and_type_error():
    assert issubclass(sim.ElementTypeError, sim.LaunchArgumentError)
    assert issubclass(sim.ElementTypeError, TypeError)


def test_template_parameter_after_substitution(mod):
    src = np.arange(8, dtype=np.float64)
    out = np.zeros(8, np.float64)
    mod.get_function("copy<double, 8>")(1, 8, (src, out))
    assert out.tolist() == src.tolist()
    with pytest.raises(sim.ElementTypeError) as info:
        mod.get_function("copy<double, 8>")(1, 8, (src.astype(np.float32), out))
    assert str(info.value) == (
        "kernel 'copy<double, 8>', argument 0 (in: const double*): expected an array of float64, "
        "got a float32 array"
    )
    with pytest.raises(sim.ElementTypeError, match=r"'copy<float, 8>', argument 1 \(out: float\*\)"):
        mod.get_function("copy<float, 8>")(1, 8, (src.astype(np.float32), out))


def test_void_and_char_pointers_take_any_array(mod):
    fn = mod.get_function("raw")
    for dtype in (np.float64, np.int16, np.uint8, np.complex64):
        source = np.arange(16, dtype=dtype)  # 16 bytes or more
        dest = np.zeros(4, np.float32)
        fn(1, 16, (source, dest, np.int32(16)))
        assert dest.tobytes() == np.ascontiguousarray(source).tobytes()[:16]


def test_struct_pointer_takes_bytes_or_elements_of_its_size(mod):
    fn = mod.get_function("pairs")
    storage = np.zeros(4 * 12, np.uint8)  # raw storage, as the multiblock state is allocated
    storage.view(np.int32)[::3] = [10, 20, 30, 40]
    fn(1, 4, (storage, np.int32(4)))
    assert storage.view(np.int32)[2::3].tolist() == [11, 21, 31, 41]
    records = np.zeros(4, dtype=[("key", "<i4"), ("value", "<f4"), ("tag", "<i4")])
    records["key"] = [1, 2, 3, 4]
    fn(1, 4, (records, np.int32(4)))
    assert records["tag"].tolist() == [2, 3, 4, 5]
    fn(1, 4, (storage.view(np.int8), np.int32(4)))
    with pytest.raises(sim.ElementTypeError) as info:
        fn(1, 4, (np.zeros(8, np.float64), np.int32(4)))
    assert str(info.value) == (
        "kernel 'pairs', argument 0 (p: Pair*): expected a byte array (uint8 or int8: raw storage) or one "
        "of 12-byte elements, for the 12-byte Pair, got a float64 array"
    )


def test_struct_pointer_must_be_aligned(mod):
    storage = np.zeros(64, np.uint8)
    offset = 4 - storage.ctypes.data % 4 + 1  # an address that is 1 past a multiple of 4
    misaligned = storage[offset : offset + 48]
    with pytest.raises(
        sim.LaunchArgumentError, match=r"argument 0 \(p: Pair\*\): the array's address .* not a multiple of 4"
    ):
        mod.get_function("pairs")(1, 4, (misaligned, np.int32(4)))
    assert not storage.any()


def test_half_bfloat16_bool_enum(mod):
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays need ml_dtypes")
    fn = mod.get_function("typed")
    h = np.zeros(1, np.float16)
    b = np.zeros(1, ml_dtypes.bfloat16)
    flags = np.zeros(1, np.bool_)
    colours = np.array([2], np.uint16)  # enum Colour : unsigned short
    wide = np.zeros(1, np.int64)
    fn(1, 1, (h, b, flags, colours, wide))
    assert flags[0] and wide[0] == 4
    cases = [
        (0, "h: __half*", "float16", (np.zeros(1, np.uint16), b, flags, colours, wide)),
        (1, "b: __nv_bfloat16*", "bfloat16", (h, np.zeros(1, np.float16), flags, colours, wide)),
        (2, "flags: bool*", "bool", (h, b, np.zeros(1, np.uint8), colours, wide)),
        (3, "colours: Colour*", "uint16", (h, b, flags, np.zeros(1, np.int32), wide)),
    ]
    for position, label, expected, args in cases:
        with pytest.raises(sim.ElementTypeError) as info:
            fn(1, 1, args)
        assert f"argument {position} ({label}): expected an array of {expected}, got " in str(info.value)


def test_pointer_to_pointer_takes_64_bit_integers(mod):
    fn = mod.get_function("pointers")
    row = np.array([3.5], np.float32)
    out = np.zeros(1, np.float32)
    fn(1, 1, (np.array([row.ctypes.data], np.uint64), out))
    assert out[0] == 3.5
    with pytest.raises(
        sim.ElementTypeError, match=r"argument 0 \(rows: const float\* const\*\).*got a float64"
    ):
        fn(1, 1, (np.zeros(1, np.float64), out))


def test_unnamed_parameter_is_labelled_by_its_type(mod):
    with pytest.raises(sim.ElementTypeError, match=r"'unnamed', argument 0 \(const float\*\): .*float64"):
        mod.get_function("unnamed")(1, 1, (np.zeros(1), np.zeros(1, np.uint32)))


def test_parameters_describe_the_signature(mod):
    params = mod.get_function("copy<double, 8>").parameters
    assert [(p.name, p.type, p.pointee, p.pointee_size) for p in params] == [
        ("in", "const double*", "f", 8),
        ("out", "double*", "f", 8),
    ]
    assert mod.get_function("copy<double, 8>").params == [("p", 8), ("p", 8)]


def test_resolved_once_per_module(monkeypatch):
    calls = []
    real = _rewrite.kernel_parameter_names
    monkeypatch.setattr(_rewrite, "kernel_parameter_names", lambda code: calls.append(1) or real(code))
    mod = sim.RawModule(code=SOURCE, name_expressions=NAMES)
    x, out = np.zeros(8, np.float32), np.zeros(8, np.float32)
    for _ in range(3):
        mod.get_function("scale")(1, 8, (x, out, np.int32(8)))
        mod.get_function("copy<float, 8>")(1, 8, (x, out))
    assert len(calls) == 1
    assert mod.get_function("scale") is mod.get_function("scale")


def test_parameter_names_from_source():
    source = """
    #define ROW_PARAMS const T* in, long long n, \\
        long long stride
    // __global__ void commented(int fake)
    template <class T, int N>
    __global__ void __launch_bounds__(256) k1(ROW_PARAMS, Pair<T, N>* pairs, int /*unused*/, unsigned int) {}
    extern "C" __global__ void k2(void) {}
    extern "C" __global__ void k3(const float* __restrict__ x, int values[]) {}
    """
    assert _rewrite.kernel_parameter_names(source) == {
        "k1": [("in", "n", "stride", "pairs", "", "")],
        "k2": [()],
        "k3": [("x", "values")],
    }


def test_project_kernel_with_a_planted_index_slip():
    # The project's own kernels, built as the sim backend builds them: gather_values reads
    # int64 indices; an int32 index array (a plausible launcher slip) is refused by name.
    from cutopk.cuda import launcher as _launcher

    mod = _launcher._build_family("sim", "float", "sort")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    idx = np.array([[5, 0], [1, 2]])
    out = np.zeros((2, 2), np.float32)
    fn = mod.get_function("gather_values_float32")
    regular = (np.zeros(1, np.int64), np.int32(0))  # extents (never read) and CUTOPK_ROWS_REGULAR
    args = (x, np.int64(2), np.int64(6), np.int64(6), np.int64(1), *regular, np.int32(2))
    fn(1, 64, (*args, idx, out))
    assert out.tolist() == [[5, 0], [7, 8]]
    with pytest.raises(sim.ElementTypeError) as info:
        fn(1, 64, (*args, idx.astype(np.int32), out))
    assert str(info.value) == (
        "kernel 'gather_values_float32', argument 8 (idx: long long int*): expected an array of int64, "
        "got an int32 array"
    )
