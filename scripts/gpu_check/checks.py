"""What must be true of a CUDA run of profreport: pure checks over the evidence, and the table.

Each check is a function `Evidence -> list[Result]` registered with `@check`; a result is `ok`,
`FAIL` (with the numbers that failed) or `skip` (the machine cannot show it, and why). One more
check (module attribution, time breakdown, ...) is one more decorated function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from gpu_check.evidence import JSON, Evidence, analysis_by_mode
from gpu_check.spec import CONV, GATED, MLP, OPT_IN, RUN_SPECS, SIMPLE

Status = Literal["ok", "FAIL", "skip"]

# Nsight Compute's DRAM bytes against the modeled ones (gated-residual, tensors well beyond L2):
READ_FACTOR = 1.25  # measured reads within 1/1.25 .. 1.25 x modeled reads
WRITE_FACTOR = 1.25  # measured writes at most 1.25 x modeled writes, and at least modeled writes
# less one L2 per kernel: a kernel's last writes can sit in L2 when ncu stops counting
ORDER_RATIO = 1.5  # modes whose modeled totals differ this much are ordered alike when measured
PROBE_READ = (0.9, 1.5)  # the ncu probe's measured read / the bytes its kernel must read
CEILING_AGREEMENT = (0.7, 1.5)  # profreport's ceiling / torch.utils.benchmark's figure
NNC_KINDS = ("prim::TensorExprGroup", "prim::FusionGroup", "prim::CudaFusionGroup")
GEMM_OPS = ("aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::linear")
NO_KERNEL_NOTE = "eager ops with no compiled kernel"
MB = 1e6
MiB = 2**20


@dataclass(frozen=True)
class Result:
    name: str
    status: Status
    detail: str

    def line(self) -> str:
        return f"{self.status:<5} {self.name:<36} {self.detail}"


Check = Callable[[Evidence], list[Result]]
CHECKS: list[Check] = []


def check(fn: Check) -> Check:
    """Register `fn` as one of gpu-check's checks (they run in the order registered)."""
    CHECKS.append(fn)
    return fn


class Missing(Exception):
    """A check's evidence is absent: `results` say why (FAIL, or skip for a run left out)."""

    def __init__(self, results: list[Result]) -> None:
        super().__init__(results[0].detail)
        self.results = results


def run_checks(evidence: Evidence, checks: Iterable[Check] = CHECKS) -> list[Result]:
    """Every check's results; a check that raises on evidence it did not expect is a FAIL that
    names the exception, so the summary is always complete."""
    results: list[Result] = []
    for fn in checks:
        try:
            results.extend(fn(evidence))
        except Missing as missing:
            results.extend(missing.results)
        except Exception as exc:  # shown as a FAIL line, never hidden
            results.append(Result(fn.__name__, "FAIL", f"check raised {type(exc).__name__}: {exc}"))
    return results


# ---------------------------------------------------------------------------------------------
# helpers over a run record (plain run.json dicts)
# ---------------------------------------------------------------------------------------------


def _ok(name: str, detail: str) -> Result:
    return Result(name, "ok", detail)


def _fail(name: str, detail: str) -> Result:
    return Result(name, "FAIL", detail)


def _verdict(name: str, problems: list[str], detail: str) -> Result:
    """ok with `detail` when there are no problems, else FAIL listing them, then `detail`."""
    if problems:
        return _fail(name, "; ".join(problems) + (f" ({detail})" if detail else ""))
    return _ok(name, detail)


def _run(ev: Evidence, label: str) -> JSON | None:
    return ev.runs.get(label)


def _no_run(name: str, ev: Evidence, label: str) -> list[Result]:
    step = "generate " + label
    if step not in ev.steps:  # a rerun of some runs only (--runs)
        return [Result(name, "skip", f"{label} is not in this check's runs")]
    return [_fail(name, f"no {label} run record: {ev.missing(step)}")]


def _no_output(name: str, ev: Evidence, step: str, what: str) -> list[Result]:
    if step not in ev.steps:  # its run is not in this check's runs (--runs)
        return [Result(name, "skip", f"{step} is not in this check's steps")]
    return [_fail(name, f"no {what}: {ev.missing(step)}")]


def _mode(record: JSON, name: str) -> JSON | None:
    """The mode's entry when it ran (status ok), else None."""
    mode = record.get("modes", {}).get(name)
    return mode if mode is not None and mode.get("status") == "ok" else None


def _mode_problem(record: JSON, name: str) -> str:
    mode = record.get("modes", {}).get(name)
    if mode is None:
        return f"{name} not in the run"
    return f"{name} {mode.get('status')}: {mode.get('error')}"


def needed(ev: Evidence, name: str, label: str, *modes: str) -> tuple[JSON, list[JSON]]:
    """The run labelled `label` and its `modes`, each ok; else Missing with the line that says
    why the check `name` cannot look."""
    record = ev.runs.get(label)
    if record is None:
        raise Missing(_no_run(name, ev, label))
    found = []
    for mode in modes:
        entry = _mode(record, mode)
        if entry is None:
            raise Missing([_fail(name, _mode_problem(record, mode))])
        found.append(entry)
    return record, found


def _preflight(ev: Evidence, name: str) -> JSON:
    if ev.preflight is None:
        raise Missing([_fail(name, f"no preflight readings: {ev.missing('preflight')}")])
    return ev.preflight


def _kernel_rows(mode: JSON) -> list[JSON]:
    return [r for r in mode["kernels"]["table"] if r.get("kind") == "kernel"]


def _calls(rows: Iterable[JSON]) -> float:
    return sum(float(r.get("calls_per_step") or 0) for r in rows)


def _names(rows: Iterable[JSON], limit: int = 2) -> str:
    names = list(dict.fromkeys(str(r["name"]) for r in rows))
    shown = ", ".join(n[:60] for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _per_step(mode: JSON) -> int:
    return int(mode["kernels"]["per_step"])


def _ok_modes(record: JSON) -> dict[str, JSON]:
    return {n: m for n, m in record.get("modes", {}).items() if m.get("status") == "ok"}


def _l2_bytes(ev: Evidence, record: JSON) -> int | None:
    ceilings = record.get("ceilings") or {}
    if ceilings.get("l2_bytes"):
        return int(ceilings["l2_bytes"])
    cuda = (ev.preflight or {}).get("cuda") or {}
    return int(cuda["l2_bytes"]) if cuda.get("l2_bytes") else None


# ---------------------------------------------------------------------------------------------
# preflight
# ---------------------------------------------------------------------------------------------


@check
def preflight_cuda(ev: Evidence) -> list[Result]:
    name = "preflight.cuda"
    p = _preflight(ev, name)
    cuda = p.get("cuda") or {}
    versions = (
        f"torch {p.get('torch')}, CUDA {cuda.get('runtime')}, driver {cuda.get('driver')}, "
        f"triton {p.get('triton')}, python {p.get('python')}"
    )
    if not cuda.get("available"):
        return [_fail(name, f"torch sees no CUDA device ({cuda.get('reason')}); {versions}")]
    l2 = cuda.get("l2_bytes") or 0
    return [
        _ok(
            name,
            f"{cuda.get('device')} (sm {cuda.get('capability')}, "
            f"{(cuda.get('memory_bytes') or 0) / 2**30:.0f} GiB, L2 {l2 / MB:.0f} MB); {versions}",
        )
    ]


@check
def preflight_nnc(ev: Evidence) -> list[Result]:
    name = "preflight.nnc_gpu"
    p = _preflight(ev, name)
    can = (p.get("fusers") or {}).get("nnc_can_fuse_on_gpu")
    detail = f"torch._C._jit_can_fuse_on_gpu() = {can}"
    return [_ok(name, detail) if can is True else _fail(name, detail)]


@check
def preflight_cudnn(ev: Evidence) -> list[Result]:
    name = "preflight.cudnn"
    p = _preflight(ev, name)
    cudnn = p.get("cudnn") or {}
    if cudnn.get("available") and cudnn.get("version"):
        return [_ok(name, f"cuDNN {cudnn['version']}, enabled {cudnn.get('enabled')}")]
    return [_fail(name, f"cuDNN not available to torch: {cudnn}")]


@check
def preflight_dependencies(ev: Evidence) -> list[Result]:
    """profreport's requirements are installed at versions it accepts, and profreport is the
    installed wheel (not a source tree) when wheels were carried."""
    name = "preflight.dependencies"
    p = _preflight(ev, name)
    deps = p.get("dependencies") or {}
    if deps.get("error"):
        return [_fail(name, str(deps["error"]))]
    problems = [
        f"{r['requirement']}: installed {r.get('installed') or 'nothing'}"
        for r in deps.get("requirements", [])
        if not r.get("satisfied")
    ]
    location, site = str(deps.get("location") or ""), deps.get("wheels_site")
    if site and not location.startswith(str(site)):
        problems.append(f"profreport imported from {location}, not from the wheels in {site}")
    shown = ", ".join(f"{r['requirement']} ({r.get('installed')})" for r in deps["requirements"])
    return [_verdict(name, problems, f"profreport {deps.get('version')} from {location}; {shown}")]


@check
def preflight_ncu(ev: Evidence) -> list[Result]:
    """Nsight Compute reads DRAM bytes of a tiny kernel with profreport's own ncu options."""
    name = "preflight.ncu_probe"
    p = _preflight(ev, name)
    ncu = p.get("ncu") or {}
    if not ncu.get("available"):
        return [_fail(name, f"ncu cannot read dram__bytes_read.sum here: {ncu.get('reason')}")]
    read, expected = ncu.get("read"), ncu.get("expected_read")
    if read is None or not expected:
        return [_fail(name, f"ncu profiled {ncu.get('kernels')} kernel(s) but read no bytes")]
    ratio = read / expected
    low, high = PROBE_READ
    detail = (
        f"{ncu.get('version')}: {ncu.get('kernels')} kernel, DRAM read {read / MB:.2f} MB of "
        f"{expected / MB:.2f} MB its input holds (x{ratio:.2f}, allowed {low}-{high}); written "
        f"{(ncu.get('written') or 0) / MB:.2f} MB of {(ncu.get('expected_written') or 0) / MB:.2f}"
        " MB (writes can stay in L2)"
    )
    return [_ok(name, detail) if low <= ratio <= high else _fail(name, detail)]


@check
def ceilings_cross_check(ev: Evidence) -> list[Result]:
    """profreport's measured ceilings agree with torch.utils.benchmark's add and matmul."""
    name = "preflight.ceilings"
    p = _preflight(ev, name)
    c = p.get("ceilings") or {}
    if not c.get("available"):
        return [_fail(name, f"not measured: {c.get('reason') or c.get('error')}")]
    copy_x = c["copy_bytes_per_s"] / c["add_bytes_per_s"]
    mm_x = c["matmul_flops"] / c["benchmark_matmul_flops"]
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
    return [_verdict(name, problems, detail)]


# ---------------------------------------------------------------------------------------------
# the runs
# ---------------------------------------------------------------------------------------------


@check
def modes_ok(ev: Evidence) -> list[Result]:
    """Every run has every mode it asked for, each status ok."""
    results = []
    for label, spec in RUN_SPECS.items():
        name = f"{label}.modes"
        record = _run(ev, label)
        if record is None:
            results += _no_run(name, ev, label)
            continue
        problems = [
            _mode_problem(record, m)
            for m in spec.modes
            if _mode(record, m) is None and m not in spec.may_fail
        ]
        dtype = (record.get("model") or {}).get("dtype")
        device = (record.get("device") or {}).get("type")
        if device != "cuda":
            problems.append(f"ran on {device}, not cuda")
        if dtype != spec.dtype:
            problems.append(f"dtype {dtype}, not {spec.dtype}")
        results.append(_verdict(name, problems, f"{len(spec.modes)} modes, {dtype} on {device}"))
    return results


def _lines(check_one: Callable[[], Result]) -> list[Result]:
    """One result of a check that looks at several runs or modes, each on its own."""
    try:
        return [check_one()]
    except Missing as missing:
        return missing.results


def _nnc_fusion(ev: Evidence, mode_name: str) -> Result:
    name = f"{GATED}.nnc_fusion[{mode_name}]"
    _, (eager, mode) = needed(ev, name, GATED, "eager", mode_name)
    compiler = mode.get("compiler") or {}
    groups = [g for g in compiler.get("fusion_groups", []) if g["kind"] in NNC_KINDS]
    k, ek = _per_step(mode), _per_step(eager)
    problems = [] if groups else ["no NNC fusion group in the optimized graph"]
    if k >= ek:
        problems.append(f"{k} kernels per step, not fewer than eager's {ek}")
    kinds = ", ".join(f"{g['kind']} of {len(g['ops'])} ops" for g in groups)
    return _verdict(name, problems, f"{kinds or 'no group'}; {k} vs {ek} kernels")


@check
def nnc_fusion(ev: Evidence) -> list[Result]:
    """script and trace on CUDA: NNC fuses the pointwise chain, so fewer kernels than eager."""
    return [r for m in ("script", "trace") for r in _lines(partial(_nnc_fusion, ev, m))]


@check
def compile_triton(ev: Evidence) -> list[Result]:
    """compile on CUDA runs Triton kernels, launched through the driver (cuLaunchKernel, in the
    trace's cuda_driver category), and fewer of them than eager."""
    name = f"{GATED}.compile_triton"
    record, (compiled, eager) = needed(ev, name, GATED, "compile", "eager")
    triton = [r for r in _kernel_rows(compiled) if str(r["name"]).startswith("triton_")]
    analysis = ev.analyses.get(GATED)
    if analysis is None:
        return [_fail(name, f"no analysis of the traces: {ev.missing('analyze')}")]
    traced = analysis_by_mode(analysis, record, ev.run_dirs[GATED]).get("compile")
    if traced is None:
        return [_fail(name, "analyze did not read compile's trace")]
    driver = int((traced.get("launch_api_counts") or {}).get("cuLaunchKernel", 0))
    k, ek, per_step = _per_step(compiled), _per_step(eager), _calls(triton)
    problems = [] if triton else ["no triton_* kernel in compile's kernel table"]
    if driver < per_step:
        problems.append(f"{driver} cuLaunchKernel calls in the trace for {per_step:g} per step")
    if k >= ek:
        problems.append(f"{k} kernels per step, not fewer than eager's {ek}")
    detail = (
        f"{per_step:g} Triton kernel(s) per step ({_names(triton)}), cuLaunchKernel x{driver} "
        f"in the trace; {k} vs eager's {ek} kernels"
    )
    return [_verdict(name, problems, detail)]


def _measured(mode: JSON) -> JSON | None:
    measured = (mode.get("bytes") or {}).get("measured") or {}
    return measured if measured.get("available") else None


@check
def ncu_bytes(ev: Evidence) -> list[Result]:
    """Each mode's DRAM bytes measured by Nsight Compute against its modeled bytes: reads within
    READ_FACTOR; writes loosely (down to one L2 per kernel short, WRITE_FACTOR above)."""
    name = f"{GATED}.ncu_bytes"
    record, _ = needed(ev, name, GATED)
    l2 = _l2_bytes(ev, record)
    if l2 is None:
        return [_fail(name, "L2 size unknown (neither the ceilings nor the preflight have it)")]
    results = []
    for mode_name, mode in _ok_modes(record).items():
        measured = _measured(mode)
        if measured is None:
            reason = ((mode.get("bytes") or {}).get("measured") or {}).get("reason")
            results.append(_fail(f"{name}[{mode_name}]", f"not measured: {reason}"))
            continue
        read, written = int(mode["bytes"]["read"]), int(mode["bytes"]["written"])
        m_read, m_written = measured.get("read"), measured.get("written")
        if m_read is None or m_written is None or not read or not written:
            results.append(_fail(f"{name}[{mode_name}]", f"no bytes to compare: {measured}"))
            continue
        launches = int(measured.get("launches") or 0)
        floor = max(written - launches * l2, 0)
        read_x, written_x = m_read / read, m_written / written
        problems = []
        if not 1 / READ_FACTOR <= read_x <= READ_FACTOR:
            problems.append(f"reads x{read_x:.2f} of modeled")
        if not floor <= m_written <= WRITE_FACTOR * written:
            problems.append(f"writes x{written_x:.2f} of modeled")
        detail = (
            f"read {m_read / MiB:.1f} MiB measured vs {read / MiB:.1f} modeled (x{read_x:.2f}, "
            f"allowed {1 / READ_FACTOR:.2f}-{READ_FACTOR}); written {m_written / MiB:.1f} vs "
            f"{written / MiB:.1f} (x{written_x:.2f}, allowed {floor / MiB:.1f}-"
            f"{WRITE_FACTOR * written / MiB:.1f}: {launches} kernels x L2 {l2 / MB:.0f} MB may "
            "stay unwritten)"
        )
        results.append(_verdict(f"{name}[{mode_name}]", problems, detail))
    return results or [_fail(name, "no mode ran")]


@check
def ncu_order(ev: Evidence) -> list[Result]:
    """Modes that model clearly different traffic measure in the same order."""
    name = f"{GATED}.ncu_order"
    record, _ = needed(ev, name, GATED)
    totals: dict[str, tuple[int, int]] = {}
    for mode_name, mode in _ok_modes(record).items():
        measured = _measured(mode)
        if measured is not None and measured.get("total") is not None:
            modeled = int(mode["bytes"]["read"]) + int(mode["bytes"]["written"])
            totals[mode_name] = (modeled, int(measured["total"]))
    if len(totals) < 2:
        return [_fail(name, f"measured bytes for {len(totals)} mode(s): nothing to order")]
    problems = [
        f"{a} models {ma / MiB:.0f} MiB > {b}'s {mb / MiB:.0f} but measures {sa / MiB:.0f} <= "
        f"{sb / MiB:.0f}"
        for a, (ma, sa) in totals.items()
        for b, (mb, sb) in totals.items()
        if ma >= ORDER_RATIO * mb and sa <= sb
    ]
    detail = ", ".join(
        f"{n} {m / MiB:.0f}/{s / MiB:.0f}"
        for n, (m, s) in sorted(totals.items(), key=lambda kv: -kv[1][0])
    )
    return [_verdict(name, problems, f"modeled/measured MiB: {detail}")]


@check
def ncu_kernels(ev: Evidence) -> list[Result]:
    """ncu profiles as many kernels in its one step as the profiler counted per step."""
    name = f"{GATED}.ncu_kernels"
    record, _ = needed(ev, name, GATED)
    pairs = {
        n: (int(measured.get("launches") or 0), _per_step(m))
        for n, m in _ok_modes(record).items()
        if (measured := _measured(m)) is not None
    }
    if not pairs:
        return [_fail(name, "no mode has measured bytes")]
    problems = [f"{n}: ncu {a}, profiler {b}" for n, (a, b) in pairs.items() if a != b]
    detail = ", ".join(f"{n} {a}/{b}" for n, (a, b) in pairs.items())
    return [_verdict(name, problems, f"ncu/profiler kernels per step: {detail}")]


def _cudnn_convolutions(ev: Evidence, label: str, convs: int) -> Result:
    name = f"{label}.cudnn_convs"
    _, (eager,) = needed(ev, name, label, "eager")
    rows = _kernel_rows(eager)
    cudnn = [r for r in rows if r.get("launched_by") == "aten::cudnn_convolution"]
    unlinked = [r for r in rows if not r.get("launched_by")]
    problems = []
    if _calls(cudnn) < convs:
        problems.append(f"{_calls(cudnn):g} kernel calls under aten::cudnn_convolution")
    if unlinked:
        problems.append(f"kernels linked to no op: {_names(unlinked)}")
    detail = (
        f"{convs} conv layer(s): {_calls(cudnn):g} kernel calls per step under "
        f"aten::cudnn_convolution ({_names(cudnn)})"
    )
    return _verdict(name, problems, detail)


@check
def cudnn_convolutions(ev: Evidence) -> list[Result]:
    """Convolution kernels (cuDNN's) are attributed to the convolution op that launched them."""
    runs = ((CONV, 2), (SIMPLE, 1))  # run label, conv layers of its model
    return [r for label, n in runs for r in _lines(partial(_cudnn_convolutions, ev, label, n))]


def _batch_norm(rows: Iterable[JSON]) -> list[JSON]:
    return [r for r in rows if "batch_norm" in str(r.get("launched_by") or "")]


@check
def batch_norm_folded(ev: Evidence) -> list[Result]:
    """optimize_for_inference folds BatchNorm into the convolutions: no batch-norm kernel left."""
    name = f"{CONV}.bn_folded"
    _record, (eager, optimized) = needed(ev, name, CONV, "eager", "optimize")
    ops = (optimized.get("compiler") or {}).get("op_counts") or {}
    left_ops = [op for op in ops if "batch_norm" in op]
    eager_bn, left = _batch_norm(_kernel_rows(eager)), _batch_norm(_kernel_rows(optimized))
    k, ek = _per_step(optimized), _per_step(eager)
    problems = [] if eager_bn else ["eager ran no batch-norm kernel to fold"]
    if left_ops or left:
        problems.append(f"optimize still runs {', '.join(left_ops) or _names(left)}")
    if k >= ek:
        problems.append(f"{k} kernels per step, not fewer than eager's {ek}")
    detail = f"eager {_calls(eager_bn):g} batch-norm kernels per step, optimize none; {k} vs {ek}"
    return [_verdict(name, problems, detail)]


def _conv_relu_fused(ev: Evidence, label: str) -> Result:
    name = f"{label}.conv_relu"
    _, (optimized,) = needed(ev, name, label, "optimize")
    ops = (optimized.get("compiler") or {}).get("op_counts") or {}
    fused = [op for op in ops if "conv" in op and "relu" in op]
    if not fused:
        return Result(name, "skip", f"optimize left convolution and ReLU apart here: {ops}")
    rows = [r for r in _kernel_rows(optimized) if r.get("launched_by") in fused]
    detail = f"{', '.join(fused)} runs {_calls(rows):g} kernel(s) per step: {_names(rows)}"
    return _verdict(name, [] if rows else ["no kernel linked to the fused op"], detail)


@check
def conv_relu_fused(ev: Evidence) -> list[Result]:
    """If optimize fused convolution and ReLU into one cuDNN call, the report names its kernel."""
    return [r for label in (CONV, SIMPLE) for r in _lines(partial(_conv_relu_fused, ev, label))]


def _unclaimed_gemms(mode: JSON) -> list[str]:
    """GEMMs the fusion map found no compiled kernel for (a library call it failed to classify,
    such as an extern kernel without an operator)."""
    return [
        op
        for g in (mode.get("fusion") or {}).get("groups", [])
        if str(g.get("note", "")).startswith(NO_KERNEL_NOTE)
        for op in g.get("eager_ops", [])
        if op in ("addmm", "mm", "linear", "matmul")
    ]


def _gemm_rows(mode: JSON) -> list[JSON]:
    return [r for r in _kernel_rows(mode) if r.get("launched_by") in GEMM_OPS]


@check
def cublas_extern(ev: Evidence) -> list[Result]:
    """mlp-block in bfloat16: its Linear layers run cuBLAS(Lt) kernels in eager, and compile keeps
    them as library (extern) calls that the fusion map names, none left unclaimed."""
    name = f"{MLP}.cublas_extern"
    _record, (eager, compiled) = needed(ev, name, MLP, "eager", "compile")
    gemms = _gemm_rows(eager)
    groups = (compiled.get("fusion") or {}).get("groups", [])
    library = [
        g for g in groups if any(str(k).startswith("library ") for k in g.get("kernels", []))
    ]
    unclaimed = _unclaimed_gemms(compiled)
    outside = [r for r in _kernel_rows(compiled) if not str(r["name"]).startswith("triton_")]
    problems = []
    if _calls(gemms) < 2:
        problems.append(f"eager: {_calls(gemms):g} GEMM kernel calls per step for 2 Linear layers")
    if len(library) < 2:
        problems.append(f"compile: {len(library)} library calls in the fusion map")
    if unclaimed:
        problems.append(f"compile: GEMMs with no kernel in the fusion map: {unclaimed}")
    if _calls(outside) < 2:
        problems.append("compile: no library (non-Triton) kernels in its kernel table")
    detail = (
        f"eager {_calls(gemms):g} GEMM kernels per step ({_names(gemms)}); compile "
        f"{', '.join(k for g in library for k in g['kernels'])} running {_names(outside)}"
    )
    return [_verdict(name, problems, detail)]


COUNTS = (("kernels", "per_step"), ("launches", "launches"), ("graph_launches", "graph_launches"))


@check
def analyze_counts(ev: Evidence) -> list[Result]:
    """`profreport analyze` on a run's traces counts per step what the run record counted."""
    results = []
    for label in RUN_SPECS:
        name = f"{label}.analyze"
        record = _run(ev, label)
        if record is None:
            results += _no_run(name, ev, label)
            continue
        analysis = ev.analyses.get(label)
        if analysis is None:
            results.append(_fail(name, f"no analysis: {ev.missing('analyze')}"))
            continue
        traced = analysis_by_mode(analysis, record, ev.run_dirs[label])
        problems, shown = [], []
        for mode_name, mode in _ok_modes(record).items():
            got = traced.get(mode_name)
            if got is None:
                problems.append(f"{mode_name}: trace not analyzed")
                continue
            kernels = dict(mode["kernels"])
            # CPU only: ops the TorchScript interpreter runs unrecorded count in the record alone
            kernels["per_step"] -= len(kernels.get("unrecorded") or [])
            pairs = [(int(got["per_step"].get(a, 0)), int(kernels.get(b, 0))) for a, b in COUNTS]
            if any(x != y for x, y in pairs):
                problems.append(f"{mode_name}: analyze {pairs[0][0]}/{pairs[1][0]}/{pairs[2][0]}")
            shown.append(f"{mode_name} {pairs[0][1]}/{pairs[1][1]}/{pairs[2][1]}")
        results.append(
            _verdict(name, problems, "record kernels/launches/graph launches: " + ", ".join(shown))
        )
    return results


@check
def compare_self(ev: Evidence) -> list[Result]:
    """`profreport compare` of a run with itself finds every mode and no change."""
    name = f"{GATED}.compare"
    if ev.comparison is None:
        return _no_output(name, ev, "compare", "comparison")
    record = _run(ev, GATED) or {}
    modes = ev.comparison.get("modes", [])
    changed = [
        f"{m['mode']} {metric['metric']}"
        for m in modes
        for metric in m.get("metrics", [])
        if metric.get("change") not in (0, 0.0, None)
    ]
    problems = [f"changes against itself: {', '.join(changed)}"] if changed else []
    if ev.comparison.get("regressed"):
        problems.append("regressed against itself")
    if len(modes) != len(record.get("modes", {})):
        problems.append(f"{len(modes)} modes compared of {len(record.get('modes', {}))}")
    return [_verdict(name, problems, f"{len(modes)} modes, every metric unchanged")]


RENDERED_MIN_BYTES = {"report.html": 10_000, "summary.md": 200}


@check
def render_outputs(ev: Evidence) -> list[Result]:
    name = f"{GATED}.render"
    if ev.rendered is None:
        return _no_output(name, ev, "render", "report rendered")
    problems = [
        f"{file} {ev.rendered.get(file, 0)} bytes (at least {size})"
        for file, size in RENDERED_MIN_BYTES.items()
        if ev.rendered.get(file, 0) < size
    ]
    sizes = ", ".join(f"{f} {s / 1e3:.0f} kB" for f, s in sorted(ev.rendered.items()))
    return [_verdict(name, problems, sizes)]


@check
def cuda_graphs(ev: Evidence) -> list[Result]:
    """compile-cudagraphs replays several kernels with one CUDA graph launch."""
    name = f"{OPT_IN}.cudagraphs"
    _, (mode,) = needed(ev, name, OPT_IN, "compile-cudagraphs")
    k = mode["kernels"]
    graphs, launches, per_step = (
        int(k.get("graph_launches", 0)),
        int(k["launches"]),
        _per_step(mode),
    )
    problems = [] if graphs >= 1 else ["no cudaGraphLaunch per step"]
    if launches >= per_step:
        problems.append("as many launches as kernels: nothing replayed")
    detail = f"{graphs} graph launch(es), {launches} launches for {per_step} kernels per step"
    return [_verdict(name, problems, detail)]


@check
def export_package(ev: Evidence) -> list[Result]:
    name = f"{OPT_IN}.export"
    _, (mode,) = needed(ev, name, OPT_IN, "export")
    size = (mode.get("compiler") or {}).get("package_bytes")
    detail = f"AOTInductor package {(size or 0) / MB:.1f} MB, {_per_step(mode)} kernels per step"
    return [_verdict(name, [] if size else ["no package size recorded"], detail)]


@check
def max_autotune(ev: Evidence) -> list[Result]:
    name = f"{OPT_IN}.max_autotune"
    _, (mode,) = needed(ev, name, OPT_IN, "compile-max-autotune")
    k, unclaimed = _per_step(mode), _unclaimed_gemms(mode)
    problems = [] if k else ["no kernel"]
    if unclaimed:
        problems.append(f"GEMMs with no kernel in the fusion map: {unclaimed}")
    groups = (mode.get("fusion") or {}).get("groups", [])
    gemms = [g for g in groups if set(g.get("eager_ops", [])) & {"addmm", "mm"}]
    ran = ", ".join(str(k) for g in gemms for k in g.get("kernels", []))
    detail = f"{k} kernels per step; its GEMMs ran as {ran or 'nothing named'}"
    return [_verdict(name, problems, detail)]


def _each_run(ev: Evidence) -> Iterable[tuple[str, JSON]]:
    return ((label, ev.runs[label]) for label in RUN_SPECS if label in ev.runs)


@check
def ceilings_cuda_events(ev: Evidence) -> list[Result]:
    """Each run measured its ceilings with CUDA events (or read them cached from a run that did)."""
    name = "ceilings.cuda_events"
    runs = list(_each_run(ev))
    if not runs:
        return [_fail(name, "no run record")]
    problems, shown = [], []
    for label, record in runs:
        c = record.get("ceilings") or {}
        if not str(c.get("timer", "")).startswith("CUDA events"):
            problems.append(f"{label}: {c.get('timer') or c.get('reason')}")
            continue
        bw, mm = c["memory_bandwidth"]["value"], c["matmul_rate"]["value"]
        shown.append(f"{label} copy {bw / 1e12:.2f} TB/s, matmul {mm / 1e12:.0f} TFLOP/s")
    return [_verdict(name, problems, "; ".join(shown))]


@check
def latency_floor(ev: Evidence) -> list[Result]:
    """Every timed mode's median is at or above its roofline floor (modeled bytes / measured
    ceilings): a median below it means a bytes model or a ceiling is wrong."""
    name = "latency.floor"
    problems, worst = [], []
    for label, record in _each_run(ev):
        for mode_name, mode in _ok_modes(record).items():
            roof = mode.get("roofline") or {}
            where = f"{label}/{mode_name}"
            if not mode.get("latency_ms"):
                problems.append(f"{where}: not timed ({mode.get('not_timed')})")
            elif roof.get("consistent") is not True:
                problems.append(f"{where}: {roof.get('note') or 'no floor'}")
            else:
                worst.append((roof.get("x_of_floor") or 0.0, where))
    if not worst and not problems:
        return [_fail(name, "no run record")]
    closest = ", ".join(f"{w} x{x:.2f}" for x, w in sorted(worst)[:3])
    return [_verdict(name, problems, f"{len(worst)} medians >= floor; closest: {closest}")]


@check
def allocator_peaks(ev: Evidence) -> list[Result]:
    name = "memory.allocator_peak"
    problems, count = [], 0
    for label, record in _each_run(ev):
        for mode_name, mode in _ok_modes(record).items():
            peak = mode.get("peak_memory") or {}
            if "CUDA caching allocator" not in str(peak.get("source")) or not peak.get("bytes"):
                problems.append(f"{label}/{mode_name}: {peak.get('source')} {peak.get('bytes')}")
            else:
                count += 1
    if not count and not problems:
        return [_fail(name, "no run record")]
    return [_verdict(name, problems, f"{count} modes with a CUDA caching allocator peak")]


@check
def within_budget(ev: Evidence) -> list[Result]:
    name = "steps.budget"
    late = [s.describe() for s in ev.steps.values() if s.status in ("timeout", "not run")]
    if ev.elapsed_s > ev.budget_s:
        late.append(f"{ev.elapsed_s:.0f} s in all, over the {ev.budget_s:.0f} s budget")
    detail = f"{len(ev.steps)} steps in {ev.elapsed_s:.0f} s of {ev.budget_s:.0f} s"
    return [_verdict(name, late, detail)]


# ---------------------------------------------------------------------------------------------
# the summary table
# ---------------------------------------------------------------------------------------------

TABLE_COLUMNS = (
    ("run", "<", 15),
    ("mode", "<", 21),
    ("status", "<", 8),
    ("kernels", ">", 8),
    ("launches", ">", 9),
    ("graphs", ">", 7),
    ("modeled MiB", ">", 12),
    ("measured MiB", ">", 13),
    ("meas/model", ">", 11),
    ("median ms", ">", 10),
)


def table_rows(ev: Evidence) -> list[dict[str, Any]]:
    """One row per run and mode: kernels and launches per step (profiler), bytes per step modeled
    and measured (Nsight Compute, read + written), latency median (measured)."""
    rows = []
    for label, record in _each_run(ev):
        for mode_name, mode in record.get("modes", {}).items():
            row: dict[str, Any] = {"run": label, "mode": mode_name, "status": mode.get("status")}
            if mode.get("status") == "ok":
                k, b = mode["kernels"], mode["bytes"]
                modeled = int(b["read"]) + int(b["written"])
                measured = _measured(mode)
                total = None if measured is None else measured.get("total")
                latency = mode.get("latency_ms") or {}
                row.update(
                    kernels=k["per_step"],
                    launches=k["launches"],
                    graphs=k.get("graph_launches", 0),
                    modeled_bytes=modeled,
                    measured_bytes=total,
                    median_ms=latency.get("median"),
                )
            rows.append(row)
    return rows


def _cell(row: dict[str, Any], column: str) -> str:
    value: Any
    if column == "modeled MiB":
        value = row.get("modeled_bytes")
        return "-" if value is None else f"{value / MiB:.1f}"
    if column == "measured MiB":
        value = row.get("measured_bytes")
        return "-" if value is None else f"{value / MiB:.1f}"
    if column == "meas/model":
        m, s = row.get("modeled_bytes"), row.get("measured_bytes")
        return "-" if not m or s is None else f"{s / m:.2f}"
    if column == "median ms":
        value = row.get("median_ms")
        return "-" if value is None else f"{value:.3f}"
    value = row.get(column)
    return "-" if value is None else str(value)


def format_table(rows: list[dict[str, Any]]) -> str:
    """The summary table as fixed-width text (bytes per step; measured = Nsight Compute DRAM)."""
    lines = ["".join(f"{title:{align}{width}}" for title, align, width in TABLE_COLUMNS)]
    for row in rows:
        lines.append(
            "".join(
                f"{_cell(row, title)[: width - 1]:{align}{width}}"
                for title, align, width in TABLE_COLUMNS
            )
        )
    return "\n".join(lines)
