"""The preflight checks: what the GPU machine is, read by torch in the preflight, held against
what the profiler wrote into every trace (deviceProperties), what profreport recorded in every
run (device, env) and nvidia-smi; the requirements evaluated here, not trusted; Nsight Compute
against a kernel whose bytes are known; the ceilings against torch.utils.benchmark."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpu_check.evidence import JSON, Evidence
from gpu_check.rawtrace import RawTrace
from gpu_check.registry import MB, Result, check, fail, preflight, verdict

PROBE_READ = (0.9, 1.5)  # the ncu probe's measured read / the bytes its kernel must read
CEILING_AGREEMENT = (0.7, 1.5)  # profreport's ceiling / torch.utils.benchmark's figure
MEMORY_AGREEMENT = 0.02  # device memory as torch, the profiler and nvidia-smi see it
GiB = 2**30


def _traces(ev: Evidence) -> Iterator[tuple[str, RawTrace]]:
    for label, modes in ev.traces.items():
        for mode, trace in modes.items():
            if isinstance(trace, RawTrace):
                yield f"{label}/{mode}", trace


def _differs(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) > tolerance * max(abs(a), abs(b))


@check
def preflight_cuda(ev: Evidence) -> list[Result]:
    """The device torch sees in the preflight is the one the profiler describes in every trace,
    profreport recorded in every run, and nvidia-smi lists (when it was read)."""
    name = "preflight.cuda"
    p = preflight(ev, name)
    cuda = p.get("cuda") or {}
    versions = (
        f"torch {p.get('torch')}, CUDA {cuda.get('runtime')}, driver {cuda.get('driver')}, "
        f"triton {p.get('triton')}, python {p.get('python')}"
    )
    if not cuda.get("available"):
        return [fail(name, f"torch sees no CUDA device ({cuda.get('reason')}); {versions}")]
    device, capability = str(cuda.get("device")), str(cuda.get("capability"))
    memory = float(cuda.get("memory_bytes") or 0)
    problems: list[str] = []
    traces = list(_traces(ev))
    for where, trace in traces:
        if not trace.device_properties:
            problems.append(f"{where}: no deviceProperties in the trace")
            continue
        props = trace.device_properties[0]
        seen = f"{props.get('computeMajor')}.{props.get('computeMinor')}"
        if props.get("name") != device or seen != capability:
            problems.append(f"{where}: the profiler saw {props.get('name')} (sm {seen})")
        if _differs(float(props.get("totalGlobalMem") or 0), memory, MEMORY_AGREEMENT):
            problems.append(f"{where}: {float(props.get('totalGlobalMem') or 0) / GiB:.1f} GiB")
        sms = cuda.get("multiprocessors")
        if sms is not None and props.get("numSms") != sms:
            problems.append(f"{where}: {props.get('numSms')} SMs, torch {sms}")
    for label, record in ev.runs.items():
        d, env = record.get("device") or {}, record.get("env") or {}
        if d.get("name") != device or str(d.get("capability")) != capability:
            problems.append(f"{label}: recorded {d.get('name')} (sm {d.get('capability')})")
        if _differs(float(d.get("memory_gib") or 0) * GiB, memory, MEMORY_AGREEMENT):
            problems.append(f"{label}: recorded {d.get('memory_gib')} GiB")
        if env.get("torch") != p.get("torch") or env.get("cuda_runtime") != cuda.get("runtime"):
            problems.append(
                f"{label}: recorded torch {env.get('torch')}, CUDA {env.get('cuda_runtime')}"
            )
    smi = cuda.get("smi") or {}
    if smi:
        if smi.get("name") != device:
            problems.append(f"nvidia-smi lists {smi.get('name')}")
        if _differs(float(smi.get("memory_bytes") or 0), memory, MEMORY_AGREEMENT):
            problems.append(f"nvidia-smi: {float(smi.get('memory_bytes') or 0) / GiB:.1f} GiB")
    detail = (
        f"{device} (sm {capability}, {memory / GiB:.0f} GiB, "
        f"L2 {(cuda.get('l2_bytes') or 0) / MB:.0f} MB) as torch, {len(traces)} traces' "
        f"deviceProperties, {len(ev.runs)} run records"
        f"{' and nvidia-smi' if smi else ''} see it; {versions}"
    )
    return [verdict(name, problems, detail)]


def _recorded(ev: Evidence, *path: str) -> dict[str, Any]:
    """Each run record's value at `path` (env.fusers...), by run label."""
    found = {}
    for label, record in ev.runs.items():
        value: Any = record
        for key in path:
            value = (value or {}).get(key)
        found[label] = value
    return found


@check
def preflight_nnc(ev: Evidence) -> list[Result]:
    """TorchScript's NNC can fuse on this GPU, and every run recorded the same."""
    name = "preflight.nnc_gpu"
    p = preflight(ev, name)
    can = (p.get("fusers") or {}).get("nnc_can_fuse_on_gpu")
    problems = [] if can is True else ["NNC cannot fuse on this GPU"]
    recorded = _recorded(ev, "env", "fusers", "nnc_can_fuse_on_gpu")
    problems += [f"{label} recorded {v}" for label, v in recorded.items() if v != can]
    detail = f"torch._C._jit_can_fuse_on_gpu() = {can}, as {len(recorded)} run records say"
    return [verdict(name, problems, detail)]


@check
def preflight_cudnn(ev: Evidence) -> list[Result]:
    """cuDNN is there, and every run recorded its version."""
    name = "preflight.cudnn"
    p = preflight(ev, name)
    cudnn = p.get("cudnn") or {}
    version = cudnn.get("version")
    if not cudnn.get("available") or not version:
        return [fail(name, f"cuDNN not available to torch: {cudnn}")]
    recorded = _recorded(ev, "env", "cudnn")
    problems = [f"{label} recorded cuDNN {v}" for label, v in recorded.items() if v != version]
    detail = f"cuDNN {version}, enabled {cudnn.get('enabled')}, as {len(recorded)} records say"
    return [verdict(name, problems, detail)]


_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$")
_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|~=|>|<)\s*([0-9][0-9A-Za-z.+\-]*)\s*$")


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a version: 2.11.0+cu130 -> (2, 11, 0); a suffix ends it."""
    parts = []
    for part in re.split(r"[.+]", version):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.group() != part:
            break
    return tuple(parts)


def satisfies(installed: str, specifier: str) -> bool | None:
    """Whether `installed` meets `specifier` (">=3.1,<4"); None when a clause is not one of
    the plain comparisons (then the preflight's own answer stands)."""
    have = _release(installed)
    for clause in filter(None, (c.strip() for c in specifier.split(","))):
        m = _CLAUSE.match(clause)
        if m is None:
            return None
        op, want = m.group(1), _release(m.group(2))
        width = max(len(have), len(want))
        a, b = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
        if op == "~=":
            if not (a >= b and a[: len(want) - 1] == want[:-1]):
                return False
        elif not {">=": a >= b, "<=": a <= b, "==": a == b, "!=": a != b, ">": a > b,
                  "<": a < b}[op]:  # fmt: skip
            return False
    return True


@check
def preflight_dependencies(ev: Evidence) -> list[Result]:
    """profreport's requirements are installed at versions it accepts (evaluated here from the
    installed versions, not read from the preflight's answer), and profreport is the installed
    wheel (not a source tree) when wheels were carried."""
    name = "preflight.dependencies"
    p = preflight(ev, name)
    deps = p.get("dependencies") or {}
    if deps.get("error"):
        return [fail(name, str(deps["error"]))]
    problems = []
    for r in deps.get("requirements", []):
        m = _REQUIREMENT.match(str(r["requirement"]).split(";")[0])
        installed = r.get("installed")
        met = None if m is None or not installed else satisfies(installed, m.group(2))
        if not installed or met is False or (met is None and not r.get("satisfied")):
            problems.append(f"{r['requirement']}: installed {installed or 'nothing'}")
    location, site = str(deps.get("location") or ""), deps.get("wheels_site")
    if site and not location.startswith(str(site)):
        problems.append(f"profreport imported from {location}, not from the wheels in {site}")
    if not deps.get("requirements"):
        problems.append("no requirement read")
    shown = ", ".join(
        f"{r['requirement']} ({r.get('installed')})" for r in deps.get("requirements", [])
    )
    return [verdict(name, problems, f"profreport {deps.get('version')} from {location}; {shown}")]


@check
def preflight_ncu(ev: Evidence) -> list[Result]:
    """Nsight Compute reads the DRAM bytes of a kernel whose input size is known, with
    profreport's own ncu options."""
    name = "preflight.ncu_probe"
    p = preflight(ev, name)
    ncu = p.get("ncu") or {}
    if not ncu.get("available"):
        return [fail(name, f"ncu cannot read dram__bytes_read.sum here: {ncu.get('reason')}")]
    read, expected = ncu.get("read"), ncu.get("expected_read")
    if read is None or not expected:
        return [fail(name, f"ncu profiled {ncu.get('kernels')} kernel(s) but read no bytes")]
    ratio = read / expected
    low, high = PROBE_READ
    detail = (
        f"{ncu.get('version')}: {ncu.get('kernels')} kernel, DRAM read {read / MB:.2f} MB of "
        f"{expected / MB:.2f} MB its input holds (x{ratio:.2f}, allowed {low}-{high}); written "
        f"{(ncu.get('written') or 0) / MB:.2f} MB of {(ncu.get('expected_written') or 0) / MB:.2f}"
        " MB (writes can stay in L2)"
    )
    problems = [] if low <= ratio <= high else [f"read x{ratio:.2f} of its input"]
    if ncu.get("kernels") != 1:
        problems.append(f"{ncu.get('kernels')} kernels profiled for the probe's one")
    return [verdict(name, problems, detail)]


def ceiling_ratios(c: JSON) -> tuple[float, float]:
    """profreport's copy and matmul ceilings over torch.utils.benchmark's add and matmul."""
    return (
        c["copy_bytes_per_s"] / c["add_bytes_per_s"],
        c["matmul_flops"] / c["benchmark_matmul_flops"],
    )


@check
def ceilings_cross_check(ev: Evidence) -> list[Result]:
    """profreport's measured ceilings agree with torch.utils.benchmark's add and matmul."""
    name = "preflight.ceilings"
    p = preflight(ev, name)
    c = p.get("ceilings") or {}
    if not c.get("available"):
        return [fail(name, f"not measured: {c.get('reason') or c.get('error')}")]
    copy_x, mm_x = ceiling_ratios(c)
    low, high = CEILING_AGREEMENT
    problems = [
        f"{what} x{x:.2f}"
        for what, x in (("copy", copy_x), ("matmul", mm_x))
        if not low <= x <= high
    ]
    detail = (
        f"copy {c['copy_bytes_per_s'] / 1e12:.2f} TB/s vs add {c['add_bytes_per_s'] / 1e12:.2f} "
        f"(x{copy_x:.2f}); matmul {c['matmul_flops'] / 1e12:.0f} vs "
        f"{c['benchmark_matmul_flops'] / 1e12:.0f} TFLOP/s (x{mm_x:.2f}); allowed {low}-{high}"
    )
    return [verdict(name, problems, detail)]
