"""Build the plain view-model of a run record: every number already formatted, with its source.

Over 400 lines on purpose: it is the report page section by section (summary, modes, kernels,
fusion map, environment, failures); the sections with logic of their own are already apart
(why_view, noise_view, roofline_view, charts)."""

from __future__ import annotations

from typing import Any

from profreport.analysis.kernel_definitions import is_inductor_kernel
from profreport.format import fmt_bytes, fmt_ms
from profreport.render.noise_view import noise_text, speedup_cell
from profreport.render.roofline_view import (
    ceiling_rows,
    floor_cells,
    kernel_cells,
    peak_cells,
    peak_method,
)
from profreport.render.timeline import TIMELINE_NAME
from profreport.render.why_view import why_rows
from profreport.text import one_line, without_tensor_reprs

TOP_KERNELS = 15

METHOD = {
    "kernels": (
        "Each mode runs under torch.profiler with a schedule of {wait} wait, {warmup} warm-up and "
        "{active} active steps (one forward call per step, shapes and FLOPs recorded). Counts are "
        "per profiled step (median over the active steps). {definition}"
    ),
    "bytes": (
        "Modeled, not measured: the compulsory traffic each kernel must move, a lower bound on what "
        "the memory system does. read = bytes of every distinct input tensor, written = bytes of "
        "every output and every input mutated in place, numel x element size; views, reshapes and "
        "allocations move nothing. eager, script, trace and optimize: from the tensors of every "
        "dispatched operation in one forward (TorchDispatchMode). compile: from Inductor's "
        "scheduler, the buffers crossing each generated or library kernel's boundary "
        "(intermediates kept inside a fused kernel count zero). Kernels that run outside the "
        "dispatcher and outside Inductor's accounting are listed as not modeled, never counted as zero."
    ),
    "latency": (
        "Measured outside the profiler, after warm-up: each mode runs in blocks of back-to-back "
        "calls sized to last at least {block_ms:.0f} ms, the device synchronized before the clock "
        "starts and stops; modes are interleaved round by round in rotating order so machine drift "
        "hits all alike; timing stops when every mode has at least {min_blocks} blocks and "
        "{min_time_s:g} s of measured time. Median, IQR and p10/p90 are over blocks (per-call time "
        "of each block). Speedup = the median over rounds of eager's block / the mode's block "
        "in the same round (paired, so drift that hits both cancels), with a distribution-free "
        "95% interval from order statistics of those ratios (records written before this used "
        "eager median / mode median with a {resamples}-resample bootstrap)."
    ),
    "output": (
        "Measured: after a mode is built and warmed up, one more call on the example inputs (no "
        "gradients, outside the profiler) is compared with eager's output on the same inputs. "
        "Both outputs are flattened the same way (torch.utils._pytree order, tensors only) and "
        "compared pairwise in float64: abs err = max |mode - eager|, rel err = abs err / max "
        "|eager| (norm-wise, so elements near zero do not inflate it). A pair is within "
        "tolerance when abs err <= atol + rtol x max |eager|; tolerances per dtype from "
        "torch.testing (float32 rtol 1e-4, atol 1e-5; float16 1e-3, 1e-3; bfloat16 1.6e-2, "
        "1e-5; float64 1e-5, 1e-8; integers and bool exact). A different number of tensors, "
        "shape or dtype is flagged as a difference."
    ),
    "roofline": (
        "Ceilings measured on this machine before the modes ran (see Environment): copy "
        "bandwidth through main memory and inside the cache (read + written bytes per second of "
        "Tensor.copy_), and the rate of a square matmul in the run's dtype; each the best of "
        "several samples. Per kernel: achieved bandwidth = modeled bytes / profiler time, achieved "
        "FLOP/s = flop-counter FLOPs / profiler time (FLOPs unknown where torch's flop counter has "
        "no formula, never 0), and its bound = the larger of bytes / bandwidth and FLOPs / matmul "
        "rate, where the bandwidth is the in-cache ceiling when one call's traffic fits the "
        "last-level cache, else the memory ceiling; % of ceiling = that bound / the kernel's time. "
        "Kernels that share one operation's bytes are taken together. Floor = the sum of the "
        "bounds over every kernel with modeled bytes: since modeled bytes are a lower bound and "
        "the ceilings are measured, a measured median below it means the bytes model or a ceiling "
        "is wrong, and the mode is flagged inconsistent."
    ),
    "compile_s": (
        "compile: wall time of the first call (Dynamo capture, Inductor code generation and C++/"
        "Triton build; Inductor's FX graph cache disabled). script / trace / optimize: "
        "scripting, tracing or freezing plus the {jit_calls} warm-up calls after which the "
        "profiling executor runs its optimized graph."
    ),
}


def _num(x: float | None, fmt: str = "{:.3g}") -> str:
    return "n/a" if x is None else fmt.format(x)


def _err(x: float | None) -> str:
    return "n/a" if x is None else ("0" if x == 0 else f"{x:.2g}")


def output_check_view(name: str, mode: dict[str, Any]) -> dict[str, Any]:
    """The output check of one mode as text: `state` is reference / ok / DIFFERS / not checked."""
    check = mode.get("output_check")
    if name == "eager":
        return {"state": "reference", "text": "reference", "differs": False, "note": ""}
    if not check:
        return {"state": "not checked", "text": "not checked", "differs": False, "note": ""}
    within = check.get("within_tolerance")
    state = {True: "ok", False: "DIFFERS", None: "not compared"}[within]
    text = state
    if check.get("compared_tensors"):
        text += (
            f": max abs err {_err(check.get('max_abs_err'))}, rel {_err(check.get('max_rel_err'))}"
            f" (rtol {_err(check.get('rtol'))}, atol {_err(check.get('atol'))};"
            f" {check['compared_tensors']} tensor{'s' if check['compared_tensors'] != 1 else ''})"
        )
    return {
        "state": state,
        "text": text,
        "differs": within is False,
        "note": check.get("note") or "",
    }


def _mode_summary(name: str, mode: dict[str, Any], eager: dict[str, Any] | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "mode": name,
        "status": mode["status"],
        "verdict": mode.get("verdict", ""),
        "why_count": len(mode.get("why_not_fused") or []),
    }
    if mode["status"] != "ok":
        # a record written before error lines were cleaned may still hold a tensor repr
        row["error"] = one_line(mode.get("error") or "")
        row["verdict"] = without_tensor_reprs(row["verdict"])
        return row
    k, b = mode["kernels"], mode["bytes"]
    lat = mode.get("latency_ms") or {}
    sp = mode.get("speedup_vs_eager")
    row.update(
        kernels=k["per_step"],
        launches=k["launches"],
        memcpy=k["memcpy"],
        memset=k["memset"],
        read=fmt_bytes(b["read"]),
        written=fmt_bytes(b["written"]),
        total=fmt_bytes(b["read"] + b["written"]),
        bytes_source=b["source"],
        bytes_partial=bool(b.get("not_modeled")),
        median=fmt_ms(lat.get("median")),
        iqr=fmt_ms(lat.get("iqr")),
        p10_p90=f"{fmt_ms(lat.get('p10'))} - {fmt_ms(lat.get('p90'))}" if lat else "n/a",
        n=lat.get("n", "n/a"),
        speedup=speedup_cell(sp),
        compile_s=_num(mode.get("compile_s"), "{:.2f} s"),
        output=output_check_view(name, mode),
        floor=floor_cells(mode),
        memory=peak_cells(mode, eager),
    )
    if eager and eager.get("status") == "ok" and name != "eager":
        row["kernel_delta"] = k["per_step"] - eager["kernels"]["per_step"]
    return row


def _kernel_rows(mode: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for r in mode["kernels"]["table"][:TOP_KERNELS]:
        rows.append(
            {
                "name": r["name"],
                "kind": r["kind"],
                "calls_per_step": _num(r["calls_per_step"], "{:g}"),
                "time_per_step": fmt_ms(
                    None if r["time_us_per_step"] is None else r["time_us_per_step"] / 1000
                ),
                "launched_by": r.get("launched_by") or "",
                "bytes": (
                    f"{fmt_bytes(r['bytes_read'])} / {fmt_bytes(r['bytes_written'])}"
                    if r.get("bytes_read") is not None
                    else "-"
                ),
                "flops": _flops(r.get("flops")),
                "intensity": "-"
                if r.get("flops_per_byte") is None
                else f"{r['flops_per_byte']:.2f}",
                "bytes_note": (
                    f"op shared by {r['bytes_shared_by']} kernels"
                    if (r.get("bytes_shared_by") or 0) > 1
                    else ""
                ),
                "source": r.get("source", "profiler"),
                "roofline": kernel_cells(r),
            }
        )
    return rows


def _flops(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, scale in (("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} FLOP"


def _bytes_rows(mode: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "op": r["op"],
            "calls": r["calls"],
            "read": fmt_bytes(r["read"]),
            "written": fmt_bytes(r["written"]),
            "flops": _flops(r.get("flops")),
            "intensity": "-" if r.get("flops_per_byte") is None else f"{r['flops_per_byte']:.2f}",
        }
        for r in mode["bytes"]["table"]
    ]


def _fusion_rows(mode: dict[str, Any]) -> list[dict[str, Any]]:
    fusion = mode.get("fusion") or {}
    rows = []
    for g in fusion.get("groups", []):
        saved = g.get("saved_bytes")
        rows.append(
            {
                "eager_ops": " + ".join(g["eager_ops"]) or "-",
                "kernels": ", ".join(g["kernels"]) or "(none)",
                "eager_bytes": fmt_bytes(g.get("eager_bytes")),
                "kernel_bytes": fmt_bytes(g.get("kernel_bytes")),
                "saved": "n/a" if saved is None else ("-" if saved == 0 else fmt_bytes(saved)),
                "saved_sign": "" if not saved else ("saved" if saved > 0 else "cost"),
                "note": g.get("note", ""),
            }
        )
    return rows


def _measured_view(mode: dict[str, Any]) -> dict[str, Any]:
    m = mode["bytes"].get("measured") or {}
    if not m.get("available"):
        return {"available": False, "reason": m.get("reason") or "not requested (--measure-bytes)"}
    return {
        "available": True,
        "source": m.get("source", "measured (Nsight Compute)"),
        "read": fmt_bytes(m.get("read")),
        "written": fmt_bytes(m.get("written")),
        "kernels": [
            {
                "name": k["name"],
                "calls": k["calls"],
                "read": fmt_bytes(k.get("read")),
                "written": fmt_bytes(k.get("written")),
            }
            for k in m.get("kernels", [])[:TOP_KERNELS]
        ],
    }


def _indirect_note(nodes: list[dict[str, Any]]) -> str:
    """Why the modeled compile bytes can sit below Inductor's: buffers reached through an index
    tensor count the elements touched (runs recorded before this have no such entries)."""
    notes = []
    for keys, what in (
        (("indirect_reads", "indirect_writes"), "through an index tensor"),
        (("sliced_reads",), "of a slice of a buffer inside a fused kernel"),
    ):
        resized = [r for n in nodes for key in keys for r in n.get(key, [])]
        if not resized:
            continue
        counted = sum(r["counted_bytes"] for r in resized)
        scheduler = sum(r["scheduler_bytes"] for r in resized)
        notes.append(
            f"; {len(resized)} buffer access(es) {what} modeled as the elements touched "
            f"({fmt_bytes(counted)}) where Inductor's per-kernel sizing gives "
            f"{fmt_bytes(scheduler)}"
        )
    return "".join(notes)


def _compiler_view(name: str, mode: dict[str, Any]) -> dict[str, Any]:
    c = mode.get("compiler") or {}
    view: dict[str, Any] = {
        "notes": c.get("notes", []),
        "op_changes": [],
        "outputs": c.get("outputs") or "",
    }
    if "graph" in c:
        view["graph"] = c["graph"]
        view["fusion_groups"] = [
            " + ".join(g["ops"]) + f"  [{g['kind']}]" for g in c.get("fusion_groups", [])
        ]
        view["fused_library_ops"] = sorted(set(c.get("fused_library_ops", [])))
        before = c.get("op_counts_before")
        after = c.get("op_counts", {})
        if before is not None:
            ops = sorted(set(before) | set(after))
            view["op_changes"] = [
                {"op": op, "before": before.get(op, 0), "after": after.get(op, 0)}
                for op in ops
                if before.get(op, 0) != after.get(op, 0)
            ]
    if "inductor_nodes" in c:
        view["inductor_nodes"] = [
            {
                "name": n["name"],
                "kind": n["kind"],
                "origins": " + ".join(n["origins"]) or "-",
                "read": fmt_bytes(n.get("read")),
                "written": fmt_bytes(n.get("written")),
            }
            for n in c["inductor_nodes"]
        ]
        view["inductor_kernels"] = [
            r["name"] for r in mode["kernels"]["table"] if is_inductor_kernel(r["name"])
        ]
        view["inductor_summary"] = (
            f"{c.get('graphs', 0)} graph(s), {c.get('graph_breaks', 0)} graph break(s), "
            f"Inductor's own byte estimate {fmt_bytes(c.get('inductor_bytes_accessed'))} "
            "(compiler estimate, read + written)" + _indirect_note(c["inductor_nodes"])
        )
    return view


def failure_notice(modes: dict[str, Any]) -> str | None:
    """One sentence at the top of a report when modes failed: a broken model must not read as a
    report with a few blank cells."""
    failed = [name for name, mode in modes.items() if mode["status"] == "failed"]
    if not failed:
        return None
    if "eager" in failed:
        error = one_line(modes["eager"].get("error") or "no error recorded")
        return (
            f"The model does not run in eager mode ({error}), so there is no baseline: fix the "
            "model first. Each mode's error is below."
        )
    return (
        f"{len(failed)} of {len(modes)} modes failed ({', '.join(failed)}); "
        "their errors are below, and the other modes' numbers stand."
    )


def build_view(record: dict[str, Any]) -> dict[str, Any]:
    """Turn a run record into the dict the HTML and Markdown templates lay out."""
    modes = record["modes"]
    eager = modes.get("eager")
    settings = record.get("settings", {})
    sched = settings.get("profile_schedule", {"wait": 1, "warmup": 1, "active": 3})
    timing = settings.get("timing", {})
    definition = record.get("kernel_definition", {})
    model = record["model"]
    details = []
    for name, mode in modes.items():
        d: dict[str, Any] = {
            "mode": name,
            "status": mode["status"],
            "verdict": mode.get("verdict", ""),
            "why": why_rows(mode),
        }
        if mode["status"] == "ok":
            d["kernels"] = _kernel_rows(mode)
            d["kernel_count"] = len(mode["kernels"]["table"])
            d["bytes"] = _bytes_rows(mode)
            d["bytes_method"] = mode["bytes"]["method"]
            d["not_modeled"] = mode["bytes"].get("not_modeled", [])
            d["fusion"] = _fusion_rows(mode)
            d["fusion_source"] = (mode.get("fusion") or {}).get("source", "")
            d["measured"] = _measured_view(mode)
            d["compiler"] = _compiler_view(name, mode)
            d["trace"] = mode.get("trace")
            d["output"] = output_check_view(name, mode)
        else:
            d["verdict"] = without_tensor_reprs(d["verdict"])
            d["error"] = one_line(mode.get("error") or "")
            d["traceback"] = mode.get("traceback")
        details.append(d)
    env = record["env"]
    return {
        "title": f"profreport: {model['name']} on {record['device'].get('name', record['device']['type'])}",
        "created_utc": record.get("created_utc"),
        "failure_notice": failure_notice(modes),
        "tool_version": record.get("tool", {}).get("version"),
        "model": {
            "name": model["name"],
            "description": model.get("description", ""),
            "batch_size": model.get("batch_size"),
            "dtype": model.get("dtype"),
            "parameters": f"{model.get('parameters', 0):,}",
            "memory_format": model.get("memory_format", "contiguous"),
            "inputs": ", ".join(
                f"{'x'.join(str(s) for s in i['shape'])} {i['dtype']}"
                for i in model.get("inputs", [])
            ),
        },
        "device": record["device"],
        # All modes in one trace, beside the report. The link is our own constant, never a
        # string from the record (a record could hold any URL).
        "timeline": TIMELINE_NAME if record.get("timeline") == TIMELINE_NAME else None,
        "is_cuda": record["device"].get("type") == "cuda",
        "summary": [_mode_summary(n, m, eager) for n, m in modes.items()],
        "details": details,
        "env_rows": [
            ("torch", env.get("torch")),
            ("python", env.get("python")),
            ("platform", env.get("platform")),
            ("intra-op threads", env.get("threads")),
            ("CUDA runtime", env.get("cuda_runtime") or "-"),
            ("HIP runtime", env.get("hip_runtime") or "-"),
            ("cuDNN", env.get("cudnn") or "-"),
            ("oneDNN (MKLDNN)", env.get("mkldnn")),
        ]
        + [(f"fuser: {k}", v if v is not None else "-") for k, v in env.get("fusers", {}).items()]
        + ceiling_rows(record),
        "has_roofline": any(m.get("roofline") for m in modes.values()),
        "definition_name": definition.get("name", ""),
        "bookkeeping_ops": ", ".join(definition.get("bookkeeping_ops", [])),
        "method": {
            "kernels": METHOD["kernels"].format(definition=definition.get("text", ""), **sched),
            "bytes": METHOD["bytes"],
            "latency": METHOD["latency"].format(
                block_ms=timing.get("block_s", 0.02) * 1000,
                min_blocks=timing.get("min_blocks", 15),
                min_time_s=timing.get("min_time_s", 1.0),
                resamples=settings.get("bootstrap_resamples", 2000),
            ),
            "noise": noise_text(record.get("timing_noise")),
            "compile_s": METHOD["compile_s"].format(jit_calls=3),
            "output": METHOD["output"],
            "roofline": METHOD["roofline"],
            "peak_memory": peak_method(record),
        },
    }
