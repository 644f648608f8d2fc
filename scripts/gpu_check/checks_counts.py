"""The checks of what each run counted: every mode ran; the record's counts per step are those of
its trace's raw events (rawtrace: device events by category, launch calls by correlation id,
the ProfilerStep windows); and what each compiler was to do shows in the raw trace as in the
record (NNC's fused kernels, Triton through the driver, cuDNN's fused conv+ReLU, BatchNorm
folded, cuBLAS kept as library calls, CUDA graphs replaying kernels, AOTInductor's kernels)."""

from __future__ import annotations

from gpu_check.evidence import JSON, Evidence, analysis_by_mode
from gpu_check.rawtrace import DeviceEvent, RawTrace
from gpu_check.registry import (
    Missing,
    Result,
    calls,
    check,
    fail,
    kernel_rows,
    mode_entry,
    mode_problem,
    names,
    needed,
    no_run,
    ok_modes,
    per_run,
    per_step,
    raw,
    row_names,
    verdict,
)
from gpu_check.spec import (
    CONV,
    CUDAGRAPHS,
    DECODER,
    EXPORT,
    GATED,
    MAX_AUTOTUNE,
    MLP,
    RUN_SPECS,
    SIMPLE,
)

NNC_KINDS = ("prim::TensorExprGroup", "prim::FusionGroup", "prim::CudaFusionGroup")
NNC_PREFIX = "fused_"  # NNC names a fusion group's kernel fused_<its ops>
GEMM_OPS = ("aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::linear")
RELU_OPS = ("aten::relu", "aten::relu_", "aten::clamp_min", "aten::clamp_min_", "aten::threshold")
NO_KERNEL_NOTE = "eager ops with no compiled kernel"
# the GEMMs of Linear layers, which compile keeps as library calls; attention's bmm is not among
# them (Inductor may replace eager attention's bmm-softmax-bmm with one SDPA library call)
LINEAR_GEMMS = ("addmm", "mm", "linear")
# (record's kernels field, raw trace's per-step count)
COUNTS = (
    ("per_step", "kernels"),
    ("launches", "launches"),
    ("graph_launches", "graph_launches"),
    ("memcpy", "memcpy"),
    ("memset", "memset"),
)


def _fmt(x: float) -> str:
    return f"{x:g}"


@check
def modes_ok(ev: Evidence) -> list[Result]:
    """Every run has every mode it asked for, each status ok with a trace, on CUDA, in the
    requested dtype; a run that did not finish says which modes it kept."""
    results = []
    for label, spec in RUN_SPECS.items():
        name = f"{label}.modes"
        record = ev.runs.get(label)
        if record is None:
            results += no_run(name, ev, label)
            continue
        problems = [
            mode_problem(record, m)
            for m in spec.modes
            if mode_entry(record, m) is None and m not in spec.may_fail
        ]
        if label in ev.partial:
            problems.insert(0, ev.partial[label])
        dtype = (record.get("model") or {}).get("dtype")
        device = (record.get("device") or {}).get("type")
        if device != "cuda":
            problems.append(f"ran on {device}, not cuda")
        if dtype != spec.dtype:
            problems.append(f"dtype {dtype}, not {spec.dtype}")
        unread = [
            f"{m}: {t}" for m, t in ev.traces.get(label, {}).items() if not isinstance(t, RawTrace)
        ]
        problems += unread
        ran = ", ".join(ok_modes(record)) or "none"
        results.append(verdict(name, problems, f"ok: {ran}; {dtype} on {device}"))
    return results


def _raw_counts(trace: RawTrace) -> dict[str, float]:
    return trace.per_step()


def _counts(ev: Evidence, label: str) -> Result:
    """The record's counts per step against the raw trace's."""
    name = f"{label}.counts"
    record, _ = needed(ev, name, label)
    problems, shown = [], []
    for mode_name, mode in ok_modes(record).items():
        trace = raw(ev, name, label, mode_name)
        counted = _raw_counts(trace)
        k = dict(mode["kernels"])
        # CPU only: ops the TorchScript interpreter runs unrecorded count in the record alone
        k["per_step"] = k["per_step"] - len(k.get("unrecorded") or [])
        pairs = [(float(k.get(a) or 0), counted.get(b, 0.0)) for a, b in COUNTS]
        wrong = [
            f"{b} {_fmt(x)} recorded, {_fmt(y)} in the trace"
            for (_, b), (x, y) in zip(COUNTS, pairs, strict=True)
            if x != y
        ]
        if int(k.get("steps") or 0) != trace.steps:
            wrong.append(f"{k.get('steps')} steps recorded, {trace.steps} in the trace")
        if len(set(trace.step_kernel_counts())) > 1:
            wrong.append(f"kernels per step window {trace.step_kernel_counts()}")
        if wrong:
            problems.append(f"{mode_name}: " + ", ".join(wrong))
        shown.append(f"{mode_name} " + "/".join(_fmt(x) for x, _ in pairs))
    return verdict(
        name,
        problems,
        "kernels/launches/graph launches/memcpy/memset per step, as the raw trace counts them: "
        + ", ".join(shown),
    )


@check
def trace_counts(ev: Evidence) -> list[Result]:
    """Each mode's counts per step in its record are its trace's raw events counted again."""
    return per_run(ev, _counts, *((label,) for label in RUN_SPECS))


def _analyze(ev: Evidence, label: str) -> Result:
    name = f"{label}.analyze"
    record, _ = needed(ev, name, label)
    analysis = ev.analyses.get(label)
    if analysis is None:
        return fail(name, f"no analysis: {ev.missing(f'analyze {label}')}")
    traced = analysis_by_mode(analysis, record, ev.run_dirs[label])
    problems, shown = [], []
    for mode_name in ok_modes(record):
        trace = raw(ev, name, label, mode_name)
        got = traced.get(mode_name)
        if got is None:
            problems.append(f"{mode_name}: trace not analyzed")
            continue
        counted = _raw_counts(trace)
        pairs = [
            (float(got["per_step"].get(what, 0)), counted[what])
            for what in ("kernels", "launches", "graph_launches")
        ]
        if any(x != y for x, y in pairs):
            problems.append(
                f"{mode_name}: analyze {'/'.join(_fmt(x) for x, _ in pairs)}, raw trace "
                + "/".join(_fmt(y) for _, y in pairs)
            )
        shown.append(f"{mode_name} " + "/".join(_fmt(y) for _, y in pairs))
    return verdict(
        name, problems, "analyze's kernels/launches/graph launches per step: " + ", ".join(shown)
    )


@check
def analyze_counts(ev: Evidence) -> list[Result]:
    """`profreport analyze` on a run's traces counts per step what the raw events hold."""
    return per_run(ev, _analyze, *((label,) for label in RUN_SPECS))


def _nnc_fusion(ev: Evidence, mode_name: str) -> Result:
    name = f"{GATED}.nnc_fusion[{mode_name}]"
    _, (mode,) = needed(ev, name, GATED, mode_name)
    eager_raw, mode_raw = raw(ev, name, GATED, "eager"), raw(ev, name, GATED, mode_name)
    groups = [
        g for g in (mode.get("compiler") or {}).get("fusion_groups", []) if g["kind"] in NNC_KINDS
    ]
    fused = mode_raw.kernels_per_step_by("name")
    nnc = {n: c for n, c in fused.items() if n.startswith(NNC_PREFIX)}
    k, ek = mode_raw.per_step()["kernels"], eager_raw.per_step()["kernels"]
    problems = [] if groups else ["no NNC fusion group in the record's optimized graph"]
    if not nnc:
        problems.append(f"no {NNC_PREFIX}* kernel in the trace")
    recorded = {str(r["name"]): float(r.get("calls_per_step") or 0) for r in kernel_rows(mode)}
    problems += [
        f"{n}: {_fmt(c)} per step in the trace, {_fmt(recorded.get(n, 0))} recorded"
        for n, c in nnc.items()
        if recorded.get(n) != c
    ]
    if k >= ek:
        problems.append(f"{_fmt(k)} kernels per step in the trace, not fewer than eager's {ek:g}")
    kinds = ", ".join(f"{g['kind']} of {len(g['ops'])} ops" for g in groups)
    detail = f"{kinds or 'no group'}; trace: {names(nnc)}; {_fmt(k)} vs eager's {_fmt(ek)} kernels"
    return verdict(name, problems, detail)


@check
def nnc_fusion(ev: Evidence) -> list[Result]:
    """script and trace on CUDA: NNC fuses the pointwise chain into a fused_* kernel, so fewer
    kernels than eager, in the raw trace as in the record."""
    return per_run(ev, _nnc_fusion, ("script",), ("trace",))


def _generated(trace: RawTrace, mode: JSON) -> tuple[list[DeviceEvent], float, list[JSON]]:
    """Generated (triton_*) kernels: those launched in the trace's step windows, the record's
    calls per step of them, and the record's rows of them."""
    rows = [r for r in kernel_rows(mode) if str(r["name"]).startswith("triton_")]
    traced = [k for k in trace.kernels() if k.step is not None and k.name.startswith("triton_")]
    return traced, calls(rows), rows


@check
def compile_triton(ev: Evidence) -> list[Result]:
    """compile on CUDA runs Triton kernels launched through the driver (cuLaunchKernel), per step
    in the raw trace as many as the record's table says, and fewer kernels than eager."""
    name = f"{GATED}.compile_triton"
    _, (compiled,) = needed(ev, name, GATED, "compile")
    eager_raw, compiled_raw = raw(ev, name, GATED, "eager"), raw(ev, name, GATED, "compile")
    triton, recorded, triton_rows = _generated(compiled_raw, compiled)
    steps = compiled_raw.steps or 1
    traced = sum(k.call == "cuLaunchKernel" for k in triton) / steps
    problems = [] if triton_rows else ["no triton_* kernel in compile's kernel table"]
    if traced != recorded:
        problems.append(
            f"{_fmt(traced)} Triton kernels per step launched by cuLaunchKernel in the trace, "
            f"{_fmt(recorded)} recorded"
        )
    others = sorted({str(k.call) for k in triton if k.call != "cuLaunchKernel"})
    if others:
        problems.append(f"Triton kernels launched by {', '.join(others)}")
    k, ek = compiled_raw.per_step()["kernels"], eager_raw.per_step()["kernels"]
    if k >= ek:
        problems.append(f"{_fmt(k)} kernels per step, not fewer than eager's {_fmt(ek)}")
    detail = (
        f"{_fmt(recorded)} Triton kernel(s) per step recorded ({row_names(triton_rows)}); trace: "
        f"{_fmt(traced)} per step by cuLaunchKernel in {steps} step windows; {_fmt(k)} vs eager's "
        f"{_fmt(ek)} kernels"
    )
    return [verdict(name, problems, detail)]


def _under(trace: RawTrace, ops: tuple[str, ...] | str) -> float:
    """Kernels per step launched under any of `ops` (an op name, or names it contains)."""
    found = trace.kernels_per_step_by("op")
    if isinstance(ops, str):
        return sum(n for op, n in found.items() if ops in op)
    return sum(n for op, n in found.items() if op in ops)


def _recorded_under(mode: JSON, ops: tuple[str, ...] | str) -> float:
    rows = kernel_rows(mode)
    if isinstance(ops, str):
        return calls(r for r in rows if ops in str(r.get("launched_by") or ""))
    return calls(r for r in rows if r.get("launched_by") in ops)


def _cudnn_convolutions(ev: Evidence, label: str, convs: int) -> Result:
    name = f"{label}.cudnn_convs"
    _, (eager,) = needed(ev, name, label, "eager")
    trace = raw(ev, name, label, "eager")
    op = ("aten::cudnn_convolution",)
    traced, recorded = _under(trace, op), _recorded_under(eager, op)
    problems = []
    if traced < convs:
        problems.append(f"{_fmt(traced)} kernels per step under {op[0]} for {convs} conv layers")
    if traced != recorded:
        problems.append(f"the record links {_fmt(recorded)} per step to it, the trace {traced:g}")
    unlinked = [k.name for k in trace.kernels() if k.step is not None and k.op is None]
    if unlinked:
        problems.append(f"kernels launched outside any op: {names(unlinked)}")
    cudnn = [k.name for k in trace.kernels(0) if k.op == op[0]]
    detail = (
        f"{convs} conv layer(s): {_fmt(traced)} kernels per step under {op[0]} ({names(cudnn)})"
    )
    return verdict(name, problems, detail)


@check
def cudnn_convolutions(ev: Evidence) -> list[Result]:
    """Convolution kernels (cuDNN's) run under the convolution op, in the trace as recorded."""
    runs = ((CONV, 2), (SIMPLE, 1))  # run label, conv layers of its model
    return per_run(ev, _cudnn_convolutions, *runs)


def _conv_relu_fused(ev: Evidence, label: str, convs: int) -> Result:
    """On CUDA, optimize_for_inference fuses convolution and ReLU into one cuDNN call (its
    frozen graph's aten::cudnn_convolution_relu): the fusion not happening is a FAIL."""
    name = f"{label}.conv_relu"
    _, (optimized,) = needed(ev, name, label, "optimize")
    trace, eager_trace = raw(ev, name, label, "optimize"), raw(ev, name, label, "eager")
    ops = (optimized.get("compiler") or {}).get("op_counts") or {}
    fused = tuple(op for op in ops if "conv" in op and "relu" in op)
    problems = [] if fused else [f"optimize left convolution and ReLU apart: {sorted(ops)}"]
    traced = _under(trace, fused) if fused else 0.0
    if traced < convs:
        problems.append(f"{_fmt(traced)} kernels per step under a fused conv+ReLU op in the trace")
    if fused and traced != _recorded_under(optimized, fused):
        problems.append(f"the record links {_fmt(_recorded_under(optimized, fused))} per step")
    relu = _under(trace, RELU_OPS)
    if relu:
        problems.append(f"{_fmt(relu)} ReLU kernels per step still run in the trace")
    k, ek = trace.per_step()["kernels"], eager_trace.per_step()["kernels"]
    if k >= ek:
        problems.append(f"{_fmt(k)} kernels per step, not fewer than eager's {_fmt(ek)}")
    under = [x.name for x in trace.kernels(0) if x.op in fused]
    detail = (
        f"{', '.join(fused) or 'no fused op'} runs {_fmt(traced)} kernel(s) per step "
        f"({names(under)}); no ReLU kernel; {_fmt(k)} vs eager's {_fmt(ek)}"
    )
    return verdict(name, problems, detail)


@check
def conv_relu_fused(ev: Evidence) -> list[Result]:
    """optimize fused convolution and ReLU into one cuDNN call: in its graph, in the trace (its
    kernels under the fused op, no ReLU kernel left) and in the record alike."""
    runs = ((CONV, 2), (SIMPLE, 1))
    return per_run(ev, _conv_relu_fused, *runs)


@check
def batch_norm_folded(ev: Evidence) -> list[Result]:
    """optimize_for_inference folds BatchNorm into the convolutions: eager's trace runs
    batch-norm kernels, optimize's none, and its graph has no batch-norm op."""
    name = f"{CONV}.bn_folded"
    _, (optimized,) = needed(ev, name, CONV, "optimize")
    eager_trace, trace = raw(ev, name, CONV, "eager"), raw(ev, name, CONV, "optimize")
    ops = (optimized.get("compiler") or {}).get("op_counts") or {}
    left_ops = [op for op in ops if "batch_norm" in op]
    eager_bn, left = _under(eager_trace, "batch_norm"), _under(trace, "batch_norm")
    k, ek = trace.per_step()["kernels"], eager_trace.per_step()["kernels"]
    problems = [] if eager_bn else ["eager's trace runs no batch-norm kernel to fold"]
    if left_ops or left:
        problems.append(
            f"optimize still runs {', '.join(left_ops) or f'{_fmt(left)} batch-norm kernels'}"
        )
    if k >= ek:
        problems.append(f"{_fmt(k)} kernels per step, not fewer than eager's {_fmt(ek)}")
    detail = f"eager {_fmt(eager_bn)} batch-norm kernels per step, optimize none; {k:g} vs {ek:g}"
    return [verdict(name, problems, detail)]


def unclaimed_gemms(mode: JSON) -> list[str]:
    """GEMMs the fusion map found no compiled kernel for (a library call it failed to classify,
    such as an extern kernel without an operator)."""
    return [
        op
        for g in (mode.get("fusion") or {}).get("groups", [])
        if str(g.get("note", "")).startswith(NO_KERNEL_NOTE)
        for op in g.get("eager_ops", [])
        if op in LINEAR_GEMMS
    ]


def _library_groups(mode: JSON) -> list[JSON]:
    return [
        g
        for g in (mode.get("fusion") or {}).get("groups", [])
        if any(str(k).startswith("library ") for k in g.get("kernels", []))
    ]


def _cublas_extern(ev: Evidence, label: str, linears: int) -> Result:
    """Eager's Linear layers run GEMM kernels under addmm/mm (trace and record agree); compile
    keeps them as library (extern) calls the fusion map names, none left unclaimed, and their
    kernels run in its trace as recorded."""
    name = f"{label}.cublas_extern"
    _, (eager, compiled) = needed(ev, name, label, "eager", "compile")
    eager_trace, trace = raw(ev, name, label, "eager"), raw(ev, name, label, "compile")
    gemms, recorded = _under(eager_trace, GEMM_OPS), _recorded_under(eager, GEMM_OPS)
    library, unclaimed = _library_groups(compiled), unclaimed_gemms(compiled)
    outside = [k.name for k in trace.kernels() if k.step is not None and not k.name.startswith(
        "triton_")]  # fmt: skip
    outside_recorded = calls(
        r for r in kernel_rows(compiled) if not str(r["name"]).startswith("triton_")
    )
    problems = []
    if gemms < linears:
        problems.append(f"eager: {_fmt(gemms)} GEMM kernels per step for {linears} Linear layers")
    if gemms != recorded:
        problems.append(
            f"eager: the record links {_fmt(recorded)} GEMM kernels, the trace {gemms:g}"
        )
    if len(library) < linears:
        problems.append(f"compile: {len(library)} library calls in the fusion map")
    if unclaimed:
        problems.append(f"compile: GEMMs with no kernel in the fusion map: {unclaimed}")
    steps = trace.steps or 1
    if len(outside) / steps != outside_recorded or not outside:
        problems.append(
            f"compile: {len(outside) / steps:g} library kernels per step in the trace, "
            f"{_fmt(outside_recorded)} recorded"
        )
    detail = (
        f"eager {_fmt(gemms)} GEMM kernels per step ({names(k.name for k in eager_trace.kernels(0) if k.op in GEMM_OPS)}); "
        f"compile {len(library)} library calls running {names(outside)}"
    )  # fmt: skip
    return verdict(name, problems, detail)


@check
def cublas_extern(ev: Evidence) -> list[Result]:
    """GEMMs stay cuBLAS(Lt) library calls under compile, named by the fusion map."""
    runs = ((DECODER, 14), (MLP, 2))  # run label, Linear layers of its model
    return per_run(ev, _cublas_extern, *runs)


@check
def cuda_graphs(ev: Evidence) -> list[Result]:
    """compile-cudagraphs replays several kernels per CUDA graph launch: the trace's
    cudaGraphLaunch calls and the kernels linked to them, as recorded."""
    name = f"{CUDAGRAPHS}.replay"
    _, (mode,) = needed(ev, name, CUDAGRAPHS, "compile-cudagraphs")
    trace = raw(ev, name, CUDAGRAPHS, "compile-cudagraphs")
    counted = trace.per_step()
    replayed = sum(
        1 for k in trace.kernels() if k.step is not None and k.call and "Graph" in k.call
    )
    replayed_per_step = replayed / (trace.steps or 1)
    graphs = counted["graph_launches"]
    problems = [] if graphs >= 1 else ["no cudaGraphLaunch per step in the trace"]
    if replayed_per_step <= graphs:
        problems.append(f"{_fmt(replayed_per_step)} kernels per step replayed by graph launches")
    recorded = int(mode["kernels"].get("graph_launches", 0))
    if recorded != graphs:
        problems.append(f"{recorded} graph launches recorded, {_fmt(graphs)} in the trace")
    detail = (
        f"trace: {_fmt(graphs)} graph launch(es) replaying {_fmt(replayed_per_step)} of "
        f"{_fmt(counted['kernels'])} kernels per step ({_fmt(counted['launches'])} launches)"
    )
    return [verdict(name, problems, detail)]


@check
def export_package(ev: Evidence) -> list[Result]:
    """export + AOTInductor on CUDA: a package was built, and its generated (triton_*) kernels
    run in the trace, as many per step as the record's table says."""
    name = f"{EXPORT}.aoti"
    _, (mode,) = needed(ev, name, EXPORT, "export")
    trace = raw(ev, name, EXPORT, "export")
    size = (mode.get("compiler") or {}).get("package_bytes")
    triton, recorded, _ = _generated(trace, mode)
    traced = len(triton) / (trace.steps or 1)
    problems = [] if size else ["no package size recorded"]
    if not triton:
        problems.append("no generated (triton_*) kernel in the trace")
    if traced != recorded:
        problems.append(
            f"{_fmt(traced)} generated kernels per step traced, {_fmt(recorded)} recorded"
        )
    detail = (
        f"AOTInductor package {(size or 0) / 1e6:.1f} MB; {_fmt(traced)} generated kernels per "
        f"step ({names(k.name for k in triton)}), {per_step(mode)} kernels in all"
    )
    return [verdict(name, problems, detail)]


@check
def max_autotune(ev: Evidence) -> list[Result]:
    """compile-max-autotune ran kernels, as its trace counts them, and its fusion map leaves no
    GEMM unclaimed whichever of Triton templates and cuBLAS(Lt) autotuning picked."""
    name = f"{MAX_AUTOTUNE}.gemms"
    try:
        _, (mode,) = needed(ev, name, MAX_AUTOTUNE, "compile-max-autotune")
    except Missing as missing:
        return missing.results
    trace = raw(ev, name, MAX_AUTOTUNE, "compile-max-autotune")
    k, unclaimed = trace.per_step()["kernels"], unclaimed_gemms(mode)
    problems = [] if k else ["no kernel in the trace"]
    if unclaimed:
        problems.append(f"GEMMs with no kernel in the fusion map: {unclaimed}")
    groups = (mode.get("fusion") or {}).get("groups", [])
    gemms = [g for g in groups if set(g.get("eager_ops", [])) & {"addmm", "mm"}]
    if not gemms:
        problems.append("no GEMM in the fusion map")
    ran = ", ".join(str(x) for g in gemms for x in g.get("kernels", []))
    detail = f"{_fmt(k)} kernels per step; its GEMMs ran as {ran or 'nothing named'}"
    return [verdict(name, problems, detail)]
