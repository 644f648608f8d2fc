"""The folder of wheels carried to the GPU machine (scripts/build-gpu-wheels makes it): one wheel
of each package that machine lacks, built for its Python, small enough to travel (the device
tool carries 64 MiB in all, the working tree included), and no torch or CUDA libraries (the
machine has its own). `python -m gpu_check.wheels DIR` lists it and exits 1 on a problem.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

# profreport itself, and the requirements of profreport the machine's image does not hold
# (docs/gpu-check.md; the device tool's KINDS.md lists the image's packages).
REQUIRED = ("profreport", "orjson", "torch_tb_profiler")
# the machine's own: carrying them would replace them (and torch alone is gigabytes)
NEVER = {"torch", "triton", "torchvision", "torchaudio"}
MAX_BYTES = 16 * 2**20
_WHEEL = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<python>[^-]+)-(?P<abi>[^-]+)-"
    r"(?P<platform>[^-]+)\.whl$"
)


def _runs_on(python: str, abi: str, platform: str, python_version: str) -> bool:
    """Whether a wheel's tags fit CPython `python_version` on x86-64 Linux."""
    if platform == "any":
        return python.startswith("py3") or python == f"cp{python_version.replace('.', '')}"
    if "x86_64" not in platform or "linux" not in platform:
        return False
    wanted = int(python_version.split(".")[1])
    for tag in python.split("."):
        minor = int(tag[3:]) if tag.startswith("cp3") and tag[3:].isdigit() else None
        if minor == wanted or (abi == "abi3" and minor is not None and minor <= wanted):
            return True
    return False


def problems(folder: Path, python_version: str = "3.12") -> list[str]:
    """What is wrong with `folder` as the carried wheels for CPython `python_version`."""
    wheels = sorted(folder.glob("*.whl"))
    found: dict[str, list[str]] = {}
    issues = []
    for wheel in wheels:
        m = _WHEEL.match(wheel.name)
        if m is None:
            issues.append(f"{wheel.name}: not a wheel file name")
            continue
        name = m["name"].lower()
        found.setdefault(name, []).append(wheel.name)
        if name in NEVER or name.startswith("nvidia_"):
            issues.append(f"{wheel.name}: the GPU machine has its own {name}")
        if not _runs_on(m["python"], m["abi"], m["platform"], python_version):
            issues.append(f"{wheel.name}: not for CPython {python_version} on x86-64 Linux")
    for name in REQUIRED:
        if len(found.get(name, [])) != 1:
            issues.append(f"{name}: {len(found.get(name, []))} wheels (one is needed)")
    total = sum(w.stat().st_size for w in wheels)
    if total > MAX_BYTES:
        issues.append(f"{total} bytes in all, over {MAX_BYTES}")
    return issues


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="check the wheels to carry to the GPU machine")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--python-version", default="3.12")
    args = parser.parse_args(argv)
    wheels = sorted(args.folder.glob("*.whl"))
    for wheel in wheels:
        print(f"{wheel.stat().st_size / 1e3:9.0f} kB  {wheel.name}")
    print(f"{sum(w.stat().st_size for w in wheels) / 1e6:9.2f} MB in {args.folder}")
    found = problems(args.folder, args.python_version)
    for problem in found:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
