"""Build the FlashInfer shim (``cutopk_flashinfer.cu``) for the benchmark's ``flashinfer`` peers; no GPU needed.

    python benchmarks/flashinfer/build.py                 # sm_90, with FlashInfer's CUB backend
    python benchmarks/flashinfer/build.py --arch sm_80 --no-cub
    python benchmarks/flashinfer/build.py --wheel /tmp/flashinfer_python-0.7.2.post1-py3-none-any.whl

Downloads the FlashInfer wheel with pip (``pip download flashinfer-python==<version> --no-deps``)
unless ``--wheel`` names one, extracts its headers, bundled CCCL and ``csrc/cub_topk.cu`` into
build/flashinfer-src/, and compiles with nvcc and FlashInfer's own JIT flags into
build/flashinfer/libcutopk_flashinfer-<arch>-<hash>.so (skipped if up to date). The lent GPU
machines have no package index and compiling there costs GPU time: build here and name
``build/flashinfer`` in the device run's ``carry``. See ``benchmarks/cutopk_bench/flashinfer_build.py``.
"""

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # this checkout's cutopk
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/: the benchmark package

from cutopk_bench import flashinfer as fi
from cutopk_bench import flashinfer_build as fb


def _arch(text: str) -> str:
    try:
        fb.gencode(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _wheel(text: str) -> pathlib.Path:
    path = pathlib.Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    try:
        fb.wheel_version(path)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchmarks/flashinfer/build.py", description=__doc__.split("\n")[0])
    p.add_argument("--arch", type=_arch, action="append", help=f"sm_75 or newer; repeat for several "
                   f"(default {fi.DEFAULT_ARCH})")  # fmt: skip
    p.add_argument("--wheel", type=_wheel, help=f"a downloaded {fb.wheel_name()} (default: pip download)")
    p.add_argument("--no-cub", dest="cub", action="store_false", help="leave out FlashInfer's CUB backend "
                   "(flashinfer-unsorted then skips the shapes FlashInfer sends to it)")  # fmt: skip
    p.add_argument("--force", action="store_true", help="rebuild even if the library is up to date")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        wheel = None
        for arch in args.arch or [fi.DEFAULT_ARCH]:
            path = fi.library_path(arch)
            if path.is_file() and not args.force:
                print(f"up to date: {path}")
                continue
            wheel = wheel or args.wheel or fb.download()
            print(f"nvcc {fb.gencode(arch)}, FlashInfer {fb.wheel_version(wheel)} from {wheel} "
                  f"({'with' if args.cub else 'without'} its CUB backend) ...", flush=True)  # fmt: skip
            t0 = time.monotonic()
            out = fb.build(wheel, arch, path, with_cub=args.cub)
            print(f"built {out} ({out.stat().st_size / 2**20:.1f} MiB) in {time.monotonic() - t0:.0f} s")
    except fi.FlashInferUnavailable as exc:
        print(f"cannot build the FlashInfer shim: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
