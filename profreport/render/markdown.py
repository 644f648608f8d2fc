"""Markdown renderer: a GitHub-flavoured summary short enough for a pull-request comment.

Every string from the record goes through `md_cell` / `md_line` / `md_code`: model and file names,
errors and kernel names are user input, and TensorBoard's text plugin renders this same Markdown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from profreport.format import md_cell, md_code, md_line, md_table
from profreport.record.model import Run, Section
from profreport.render.module_view import savings_markdown
from profreport.render.viewmodel import build_view
from profreport.render.views import ModeSummaryView, OutputView, PageView


def _kernels(row: ModeSummaryView) -> str:
    delta = row.get("kernel_delta")
    return f"{row['kernels']} ({delta:+d})" if delta else str(row["kernels"])


def _output(view: OutputView) -> str:
    # cells are escaped, so no bold: a difference reads "DIFFERS", in capitals
    return f"{view['text']} ({view['note']})" if view["note"] else view["text"]


_CEILINGS = ("memory bandwidth", "in-cache bandwidth", "matmul rate")


def _memory(cells: dict[str, str]) -> str:
    return (
        cells["peak"]
        if cells["compression"] == "-"
        else f"{cells['peak']} ({cells['compression']})"
    )


def _why_not_fused(view: PageView) -> list[str]:
    """Why it did not fuse, per mode: each reason with its evidence source and any hint."""
    lines = []
    for d in view["details"]:
        for w in d.get("why") or []:
            item = f"- {md_cell(d['mode'])}, {md_cell(w['kind'])}: {md_cell(w['reason'])}"
            if w["where"]:
                item += f" at {md_code(w['where'])}"
            if w["source_text"]:
                item += f" {md_code(w['source_text'])}"
            item += f" ({md_cell(w['source'])})"
            if w["hint"]:
                test = f" (test with {md_code(w['hint_test'])})" if w["hint_test"] else ""
                item += f"; would change it: {md_cell(w['hint'])}{test}"
            lines.append(item)
    return ["**Why it did not fuse**", "", *lines, ""] if lines else []


def _time_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where each mode's profiled step went, one line per mode (the decomposition of its
    speedup is in its verdict)."""
    if not rows:
        return []
    out = ["**Where the time goes** (profiled step of median wall time, profiler on)", ""]
    for r in rows:
        parts = ", ".join(f"{label} {value}" for label, value in r["parts"])
        out.append(
            f"- {md_cell(r['mode'])}: {r['wall']} ({parts}; {r['ops']} {r['ops_label']}); "
            f"{md_cell(r['bound'])}"
        )
    return [*out, ""]


def _or_na(section: Section, key: str, value: object) -> object:
    """`value`, or "n/a" where the record has no such field (a field written as null stays)."""
    return value if section.has(key) else "n/a"


def render(run: Run) -> str:
    """The pull-request summary of a run (with findings: analysis.derive.derived_run)."""
    view = build_view(run)
    model, env = view["model"], run.env
    cuda = view["is_cuda"]
    lines = [
        f"### {md_line(view['title'])}",
        "",
        f"{md_code(model['name'])}: {md_cell(model['description'])}",
        "",
        md_cell(
            f"inputs {model['inputs']} ({model['memory_format']}), dtype {model['dtype']}; "
            f"torch {_or_na(env, 'torch', env.torch)}, "
            f"{_or_na(env, 'threads', env.threads)} threads; "
            f"recorded {view['created_utc']} UTC"
        ),
        "",
    ]
    if view["failure_notice"]:
        lines += [f"**{md_cell(view['failure_notice'])}**", ""]
    header = ["mode", "status", "kernels/step (vs eager)"]
    header += ["launches/step"] if cuda else []
    header += ["read", "written", "latency median", "IQR", "speedup vs eager (95% CI)"]
    header += ["latency floor (x of it)"] if view["has_roofline"] else []
    header += ["peak memory (compression)", "output vs eager"]
    rows: list[list[object]] = []
    for row in view["summary"]:
        if row["status"] != "ok":
            blanks = [""] * (len(header) - 3)
            rows.append([row["mode"], row["status"], row.get("error", ""), *blanks])
            continue
        partial = " (partial)" if row["bytes_partial"] else ""
        cells: list[object] = [row["mode"], row["status"], _kernels(row)]
        cells += [row["launches"]] if cuda else []
        cells += [
            row["read"] + partial,
            row["written"] + partial,
            f"INCONSISTENT (measured {row['median']})"
            if row["floor"]["inconsistent"]
            else row["median"],
            row["iqr"],
            row["speedup"],
        ]
        if view["has_roofline"]:
            cells.append(f"{row['floor']['floor']} ({row['floor']['x_of_floor']})")
        cells += [_memory(row["memory"]), _output(row["output"])]
        rows.append(cells)
    lines += md_table(header, rows, "ll" + "r" * (len(header) - 3) + "l")
    lines += ["", *[f"- {md_line(row['verdict'])}" for row in view["summary"]], ""]
    lines += [
        f"- **{md_cell(row['mode'])}**: {md_line(row['floor']['inconsistent'])}"
        for row in view["summary"]
        if row["status"] == "ok" and row["floor"]["inconsistent"]
    ]
    lines += _time_lines(view["time_rows"])
    ceilings = [f"{k} {str(v).split(':', 1)[0]}" for k, v in view["env_rows"] if k in _CEILINGS]
    if ceilings:
        lines += [md_line("Ceilings: " + "; ".join(ceilings)), ""]
    lines += _why_not_fused(view)
    lines += savings_markdown(run)
    lines += [f"Noise guard: {md_line(view['method']['noise'])}", ""]
    flattened = [
        f"- {md_cell(d['mode'])}: outputs {md_cell(d['compiler']['outputs'])}"
        for d in view["details"]
        if d["status"] == "ok" and d["compiler"].get("outputs")
    ]
    lines += [*flattened, ""] if flattened else []
    lines.append(
        f"<sub>kernels: profiler, {md_cell(view['definition_name'])} definition, per step; "
        "bytes: modeled (compulsory traffic from tensor sizes; partial = some kernels not "
        "modeled); latency: measured outside the profiler, speedup = median of paired per-round "
        "ratios with an order-statistic 95% interval; "
        "output vs eager: measured on the example inputs, max abs err and norm-wise rel err "
        "against torch.testing's tolerances for the dtype; latency floor: each kernel at its "
        "measured ceiling (modeled bytes / bandwidth or FLOPs / matmul rate); peak memory: one "
        "call, compression = eager peak / mode peak.</sub>"
    )
    return "\n".join(lines) + "\n"
