"""Build the CUB shim (``cutopk_cub.cu``) for the benchmark's ``cub`` peer; no GPU needed.

    python benchmarks/cub/build.py                  # sm_90, into build/cub/ (skipped if up to date)
    python benchmarks/cub/build.py --arch sm_80 --force
    python benchmarks/cub/build.py --copy-headers   # also copy CCCL's headers to build/cub/cccl/

Needs nvcc and CCCL >= 3.3 headers (the ``nvidia-cuda-cccl`` wheel of the ``test`` extra; CUDA
13.0's own CCCL 3.0 has no ``cub::DeviceTopK``). The lent GPU machines have nvcc but no package
index: build here and carry ``build/cub`` (the library, a few MB), or copy the headers here with
``--copy-headers`` and build there (``tools/gpu_session.sh cub``). See ``benchmarks/cutopk_bench/cub.py``.
"""

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # this checkout's cutopk
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/: the benchmark package

from cutopk_bench import cub


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/cub/build.py", description=__doc__.split("\n")[0])
    p.add_argument("--arch", default=cub.DEFAULT_ARCH, help=f"nvcc -arch (default {cub.DEFAULT_ARCH})")
    p.add_argument("--force", action="store_true", help="rebuild even if the library is up to date")
    p.add_argument("--copy-headers", action="store_true", help=f"copy CCCL's headers to {cub.HEADERS_COPY}")
    args = p.parse_args(argv)
    try:
        if args.copy_headers:
            print(f"copied CCCL headers to {cub.copy_headers()}")
        path = cub.library_path(args.arch)
        if path.is_file() and not args.force:
            print(f"up to date: {path}")
            return 0
        include = cub.cccl_include()
        print(f"nvcc -arch={args.arch}, CUB {cub.cub_version(include)} from {include} ...", flush=True)
        t0 = time.monotonic()
        print(f"built {cub.build(args.arch, path, include)} in {time.monotonic() - t0:.0f} s")
    except cub.CubUnavailable as exc:
        print(f"cannot build the CUB shim: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
