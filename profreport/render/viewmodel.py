"""Build the plain view-model of a run record: every number already formatted, with its source.

Over 400 lines on purpose: it is the report page section by section (summary, modes, kernels,
fusion map, environment, failures); the sections with logic of their own are already apart
(why_view, noise_view, roofline_view, charts)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from profreport.analysis.kernel_definitions import is_inductor_kernel
from profreport.analysis.speedup_breakdown import payback_text
from profreport.capture.ncu_results import WRITES_NOTE
from profreport.files import TIMELINE_NAME
from profreport.format import fmt_bytes, fmt_ms, plural
from profreport.record.model import (
    CompilerEvidence,
    InductorNode,
    ModeResult,
    OkMode,
    Run,
    Settings,
)
from profreport.render.decode_view import decode_view
from profreport.render.folding import fold_ops, grouped, without_serials
from profreport.render.headline import headline
from profreport.render.methods import method_paragraphs, method_values
from profreport.render.module_view import groups_place_text, place_text
from profreport.render.noise_view import noise_text, speedup_cell
from profreport.render.palette import TONE_COLORS
from profreport.render.roofline_view import (
    ceiling_rows,
    floor_cells,
    kernel_cells,
    peak_cells,
    peak_method,
)
from profreport.render.time_view import time_rows
from profreport.render.views import (
    BytesRowView,
    CompilerView,
    DetailView,
    FusionRowView,
    KernelRowView,
    MeasuredView,
    ModeSummaryView,
    OutputView,
    PageView,
)
from profreport.render.why_view import why_rows
from profreport.text import one_line, without_tensor_reprs

TOP_KERNELS = 15


def _num(x: float | None, fmt: str = "{:.3g}") -> str:
    return "n/a" if x is None else fmt.format(x)


def _err(x: float | None) -> str:
    return "n/a" if x is None else ("0" if x == 0 else f"{x:.2g}")


def output_check_view(name: str, mode: ModeResult) -> OutputView:
    check = mode.output_check
    if name == "eager":
        return {"text": "reference", "differs": False, "note": ""}
    if check is None or not check.to_json():
        return {"text": "not checked", "differs": False, "note": ""}
    within = check.within_tolerance
    text = {True: "ok", False: "DIFFERS", None: "not compared"}[within]
    n = check.compared_tensors
    if n:
        text += (
            f": max abs err {_err(check.max_abs_err)}, rel {_err(check.max_rel_err)}"
            f" (rtol {_err(check.rtol)}, atol {_err(check.atol)};"
            f" {plural(n, 'tensor')})"
        )
    return {"text": text, "differs": within is False, "note": check.note or ""}


def _mode_summary(name: str, mode: ModeResult, eager: ModeResult | None) -> ModeSummaryView:
    row: ModeSummaryView = {
        "mode": name,
        "status": mode.status,
        "verdict": mode.verdict or "",
        "finding_failed": mode.failed_finding is not None,
        "why_count": len(mode.why_not_fused or ()),
    }
    if not isinstance(mode, OkMode):
        # a record written before error lines were cleaned may still hold a tensor repr
        row["error"] = one_line(mode.error or "")
        row["verdict"] = without_tensor_reprs(row["verdict"])
        return row
    k, b, lat = mode.kernels, mode.bytes, mode.latency_ms
    payback = None if mode.time_findings is None else mode.time_findings.payback_calls
    median = "not timed" if mode.not_timed else fmt_ms(None if lat is None else lat.median)
    row.update(
        {
            "counts": k,
            "read": fmt_bytes(b.read),
            "written": fmt_bytes(b.written),
            "total": fmt_bytes(b.read + b.written),
            "bytes_source": b.source,
            "bytes_partial": bool(b.not_modeled),
            "median": median,
            "iqr": fmt_ms(None if lat is None else lat.iqr),
            "p10_p90": f"{fmt_ms(lat.p10)} - {fmt_ms(lat.p90)}" if lat else "n/a",
            "n": "n/a" if lat is None or lat.n is None else lat.n,
            "speedup": speedup_cell(mode.speedup_vs_eager),
            "compile_s": _num(mode.compile_s, "{:.2f} s"),
            "payback_calls": "" if payback is None else f"{math.ceil(payback):,}",
            "output": output_check_view(name, mode),
            "floor": floor_cells(mode),
            "memory": peak_cells(mode, eager),
        }
    )
    if isinstance(eager, OkMode) and name != "eager":
        row["kernel_delta"] = k.per_step - eager.kernels.per_step
    return row


def _kernel_rows(mode: OkMode) -> list[KernelRowView]:
    return [
        {
            "name": r.name,
            "kind": r.kind,
            "calls_per_step": _num(r.calls_per_step, "{:g}"),
            "time_per_step": fmt_ms(
                None if r.time_us_per_step is None else r.time_us_per_step / 1000
            ),
            "launched_by": r.launched_by or "",
            "bytes": (
                f"{fmt_bytes(r.bytes_read)} / {fmt_bytes(r.bytes_written)}"
                if r.bytes_read is not None
                else "-"
            ),
            "flops": _flops(r.flops),
            "intensity": "-" if r.flops_per_byte is None else f"{r.flops_per_byte:.2f}",
            "bytes_note": (
                f"op shared by {r.bytes_shared_by} kernels" if (r.bytes_shared_by or 0) > 1 else ""
            ),
            "source": str(r.source) if r.has("source") else "profiler",
            "roofline": kernel_cells(r),
            "place": place_text(r.modules, r.source_lines),
        }
        for r in mode.kernels.table[:TOP_KERNELS]
    ]


def _flops(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, scale in (("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} FLOP"


def _bytes_rows(mode: OkMode) -> list[BytesRowView]:
    return [
        {
            "op": r.op,
            "calls": r.calls,
            "read": fmt_bytes(r.read),
            "written": fmt_bytes(r.written),
            "flops": _flops(r.flops),
            "intensity": "-" if r.flops_per_byte is None else f"{r.flops_per_byte:.2f}",
        }
        for r in mode.bytes.table
    ]


def _sum(values: Sequence[int | None]) -> int | None:
    """The total of byte counts, None when any is unknown (an unknown is never counted as 0)."""
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _fusion_rows(mode: ModeResult) -> list[FusionRowView]:
    """The fusion map, each repeated group (the same ops into the same kernels, in every layer)
    once with its count and its bytes summed over the repeats."""
    groups = mode.fusion.groups if mode.fusion is not None else ()
    rows: list[FusionRowView] = []
    for same in grouped(groups, key=lambda g: (g.eager_ops, _kernel_shape(g.kernels), g.note)):
        g = same[0]
        saved = _sum([s.saved_bytes for s in same])
        rows.append(
            {
                "eager_ops": fold_ops(g.eager_ops),
                "kernels": fold_ops(g.kernels, ", ") if g.kernels else fold_ops(["(none)"]),
                "count": len(same),
                "eager_bytes": fmt_bytes(_sum([s.eager_bytes for s in same])),
                "kernel_bytes": fmt_bytes(_sum([s.kernel_bytes for s in same])),
                "saved": "n/a" if saved is None else ("-" if saved == 0 else fmt_bytes(saved)),
                "saved_sign": "" if not saved else ("saved" if saved > 0 else "cost"),
                "note": g.note,
                "place": groups_place_text(same),
            }
        )
    return rows


def _kernel_shape(kernels: Sequence[str]) -> tuple[str, ...]:
    """Generated kernels' names less their serial numbers; library kernels keep their names."""
    return tuple(without_serials(k) if is_inductor_kernel(k) else k for k in kernels)


def _measured_view(mode: OkMode) -> MeasuredView:
    m = mode.bytes.measured
    if m is None or not m.available:
        reason = None if m is None else m.reason
        return {"available": False, "reason": reason or "not requested (--measure-bytes)"}
    return {
        "available": True,
        "source": str(m.source) if m.has("source") else "measured (Nsight Compute)",
        "read": fmt_bytes(m.read),
        "written": fmt_bytes(m.written),
        "writes_note": WRITES_NOTE,
        "kernels": [
            {
                "name": k.name,
                "calls": k.calls,
                "read": fmt_bytes(k.read),
                "written": fmt_bytes(k.written),
            }
            for k in m.kernels[:TOP_KERNELS]
        ],
    }


def _indirect_note(nodes: Sequence[InductorNode]) -> str:
    """Why the modeled compile bytes can sit below Inductor's: buffers reached through an index
    tensor count the elements touched (runs recorded before this have no such entries); a graph
    constant (AOTInductor's weights), which Inductor does not count, enters whole first."""
    notes = []
    indirect = [r for n in nodes for r in (*n.indirect_reads, *n.indirect_writes)]
    sliced = [r for n in nodes for r in n.sliced_reads]
    for resized_all, what in (
        (indirect, "through an index tensor"),
        (sliced, "of a slice of a buffer inside a fused kernel"),
    ):
        for constant in (False, True):
            resized = [r for r in resized_all if bool(r.constant) is constant]
            if not resized:
                continue
            counted = fmt_bytes(sum(r.counted_bytes for r in resized))
            scheduler = fmt_bytes(sum(r.scheduler_bytes for r in resized))
            subject = "graph constant access(es)" if constant else "buffer access(es)"
            against = f"instead of whole ({scheduler})"
            if not constant:
                against = f"where Inductor's per-kernel sizing gives {scheduler}"
            notes.append(
                f"; {len(resized)} {subject} {what} modeled as the elements touched ({counted}) "
                + against
            )
    return "".join(notes)


def _compiler_view(mode: OkMode) -> CompilerView:
    c = mode.compiler or CompilerEvidence(json_keys=())
    view: CompilerView = {
        "notes": list(c.notes or ()),
        "op_changes": [],
        "outputs": c.outputs or "",
    }
    # what the compiler reported decides the sections: a key present (even empty or null) is
    # a section, as the template's `is defined` shows it
    if c.has("graph"):
        view["graph"] = c.graph
        view["fusion_groups"] = [
            {"ops": fold_ops(g.ops), "kind": g.kind} for g in c.fusion_groups or ()
        ]
        view["fused_library_ops"] = sorted(set(c.fused_library_ops or ()))
        before = c.op_counts_before
        after = c.op_counts or {}
        if before is not None:
            view["op_changes"] = [
                {"op": op, "before": before.get(op, 0), "after": after.get(op, 0)}
                for op in sorted(set(before) | set(after))
                if before.get(op, 0) != after.get(op, 0)
            ]
    if c.has("inductor_nodes"):
        nodes = c.inductor_nodes or ()
        view["inductor_nodes"] = [
            {
                "name": n.name,
                "kind": n.kind,
                "origins": fold_ops(n.origins),
                "read": fmt_bytes(n.read),
                "written": fmt_bytes(n.written),
            }
            for n in nodes
        ]
        view["inductor_kernels"] = [
            r.name for r in mode.kernels.table if is_inductor_kernel(r.name)
        ]
        view["inductor_summary"] = (
            f"{c.graphs or 0} graph(s), {c.graph_breaks or 0} graph break(s), "
            f"Inductor's own byte estimate {fmt_bytes(c.inductor_bytes_accessed)} "
            "(compiler estimate, read + written)" + _indirect_note(nodes)
        )
    return view


def failure_notice(modes: Mapping[str, ModeResult]) -> str | None:
    """One sentence at the top of a report when findings failed to derive or modes failed: a
    bug must not read as a finding, nor a broken model as a report with a few blank cells."""
    notices = []
    findings = [
        f"{name}: {mode.failed_finding.finding}"
        for name, mode in modes.items()
        if mode.failed_finding is not None
    ]
    if findings:
        notices.append(
            f"Deriving findings failed ({', '.join(findings)}): a profreport bug, not the model's. "
            "The evidence stands; each verdict says what raised, and `profreport render` derives "
            "the findings again once the bug is fixed."
        )
    failed = [name for name, mode in modes.items() if mode.status == "failed"]
    if "eager" in failed:
        error = one_line(modes["eager"].error or "no error recorded")
        notices.append(
            f"The model does not run in eager mode ({error}), so there is no baseline: fix the "
            "model first. Each mode's error is below."
        )
    elif failed:
        notices.append(
            f"{len(failed)} of {len(modes)} modes failed ({', '.join(failed)}); "
            "their errors are below, and the other modes' numbers stand."
        )
    return " ".join(notices) or None


def _detail(name: str, mode: ModeResult) -> DetailView:
    d: DetailView = {
        "mode": name,
        "status": mode.status,
        "verdict": mode.verdict or "",
        "why": why_rows(mode),
        "failed_traceback": None if mode.failed_finding is None else mode.failed_finding.traceback,
        "payback": "",
    }
    if isinstance(mode, OkMode):
        d["kernels"] = _kernel_rows(mode)
        d["kernel_count"] = len(mode.kernels.table)
        d["bytes"] = _bytes_rows(mode)
        d["bytes_method"] = mode.bytes.method
        d["not_modeled"] = list(mode.bytes.not_modeled or ())
        d["fusion"] = _fusion_rows(mode)
        d["fusion_source"] = (mode.fusion.source if mode.fusion is not None else None) or ""
        d["measured"] = _measured_view(mode)
        d["compiler"] = _compiler_view(mode)
        d["trace"] = mode.trace
        d["output"] = output_check_view(name, mode)
        f, build_s = mode.time_findings, mode.compile_s  # no build time, saving or speedup: ""
        if f is not None and f.payback_calls is not None and build_s is not None and f.saved_us:
            d["payback"] = payback_text(build_s, f.payback_calls, f.saved_us)
    else:
        d["verdict"] = without_tensor_reprs(d["verdict"])
        d["error"] = one_line(mode.error or "")
        d["traceback"] = mode.traceback
    return d


def _method(run: Run) -> dict[str, str]:
    """The method section: the paragraphs of render/methods.md filled from the run's settings,
    and the two that depend on what the run measured."""
    definition = "" if run.kernel_definition is None else run.kernel_definition.text
    values = method_values(run.settings or Settings(), definition or "")
    return {
        **method_paragraphs(values),
        "noise": noise_text(run.timing_noise),
        "peak_memory": peak_method(run),
        "timed_in": str(values["timed_in"]).strip(),
    }


def build_view(run: Run) -> PageView:
    """Turn a run (with findings) into the dict the HTML and Markdown templates lay out."""
    modes, model, env, device = run.modes, run.model, run.env, run.device
    eager, definition = modes.get("eager"), run.kernel_definition
    return {
        "title": f"profreport: {model.name} on "
        f"{device.name if device.has('name') else device.type}",
        "created_utc": run.created_utc,
        "failure_notice": failure_notice(modes),
        "tool_version": None if run.tool is None else run.tool.version,
        "model": model,
        "model_parameters": f"{model.parameters or 0:,}",
        "model_inputs": ", ".join(
            f"{'x'.join(str(s) for s in i.shape)} {i.dtype}" for i in model.inputs
        ),
        "device": device.to_json(),
        # All modes in one trace, beside the report. The link is our own constant, never a
        # string from the record (a record could hold any URL).
        "timeline": TIMELINE_NAME if run.timeline == TIMELINE_NAME else None,
        "is_cuda": device.type == "cuda",
        "headline": headline(run),
        "tones": TONE_COLORS,
        "summary": [_mode_summary(n, m, eager) for n, m in modes.items()],
        "details": [_detail(n, m) for n, m in modes.items()],
        "env_rows": [
            ("torch", env.torch),
            ("python", env.python),
            ("platform", env.platform),
            ("intra-op threads", env.threads),
            ("CUDA runtime", env.cuda_runtime or "-"),
            ("HIP runtime", env.hip_runtime or "-"),
            ("cuDNN", env.cudnn or "-"),
            ("oneDNN (MKLDNN)", env.mkldnn),
        ]
        + [
            (f"fuser: {k}", v if v is not None else "-")
            for k, v in (env.fusers.to_json() if env.fusers is not None else {}).items()
        ]
        + ceiling_rows(run),
        "has_roofline": any(
            m.roofline is not None and m.roofline.to_json() for m in modes.values()
        ),
        "time_rows": time_rows(run),
        "definition_name": "" if definition is None or definition.name is None else definition.name,
        "bookkeeping_ops": ", ".join((definition.bookkeeping_ops if definition else None) or ()),
        "method": _method(run),
        "decode": decode_view(run),
    }
