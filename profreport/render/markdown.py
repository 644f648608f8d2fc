"""Markdown renderer: a GitHub-flavoured summary short enough for a pull-request comment.

What a reviewer reads first stays visible and short (the headline table, one line per mode);
everything else (all numbers, why-not-fused, the noise guard, ceilings, top kernels, the method)
is folded inside `<details>` blocks. The visible part stays under `VISIBLE_CHARS` and the whole
comment under `TOTAL_CHARS` (GitHub refuses a comment past 65,536 characters): long lists are cut
with a count, and folded blocks that would not fit are left to report.html, saying so.

Every string from the record goes through `md_cell` / `md_line` / `md_code`: model and file names,
errors and kernel names are user input, and TensorBoard's text plugin renders this same Markdown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from profreport.format import md_cell, md_code, md_line, md_table
from profreport.record.model import Run, Section
from profreport.render.headline import HeadlineCell, HeadlineRow, short_text
from profreport.render.module_view import savings_markdown
from profreport.render.roofline_view import BOUND_NAMES
from profreport.render.viewmodel import build_view
from profreport.render.views import PageView

if TYPE_CHECKING:
    from profreport.analysis.budget import BudgetCheck

VISIBLE_CHARS = 5_000  # outside <details>: what a reviewer sees without a click
TOTAL_CHARS = 60_000  # the whole comment, under GitHub's 65,536
VERDICTS_CHARS = 2_400  # the visible verdict lines share this (each shown whole or folded)
VERDICT_CHARS = 1_000  # one verdict longer than this is folded whatever room is left
FOLDED_VERDICTS_CHARS = 20_000  # the folded verdicts, together; past it: report.html
WHY_ITEMS = 40  # why-not-fused entries listed (each distinct, with its count)
TOP_KERNELS = 5  # per mode, in the folded kernel tables
NAME_CHARS = 120  # a kernel or op name in a folded table (hostile or generated names run long)


def _time_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where each mode's median step went, one line per mode, then what each timed saving is
    made of (the verdicts carry its short clause)."""
    if not rows:
        return []
    out = [
        "**Where the time goes** (median step per part, profiler's cost removed; timed beside)",
        "",
    ]
    for r in rows:
        parts = ", ".join(f"{label} {value}" for label, value in r["parts"])
        busy = "; profiled while the machine was busy" if r.get("busy") else ""
        out.append(
            f"- {md_cell(r['mode'])}: {r['wall']}, timed {r['timed']} ({parts}; {r['ops']} "
            f"{r['ops_label']}); {md_cell(r['bound'])}{busy}"
        )
    details = [r for r in rows if r.get("detail")]
    if details:
        out += ["", "What each timed saving is made of:", ""]
        out += [f"- {md_cell(r['mode'])}: {md_cell(r['detail'])}" for r in details]
    return [*out, ""]


def _or_na(section: Section, key: str) -> object:
    """The field, or "n/a" where the record has none (a field written as null stays)."""
    return getattr(section, key) if section.has(key) else "n/a"


def folded(summary: str, body: list[str]) -> list[str]:
    """A `<details>` block; the blank lines let GitHub render the Markdown inside it."""
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]


def _text(cell: HeadlineCell | None) -> str:
    return "" if cell is None else cell["text"]


def _speedup(cell: HeadlineCell | None) -> str:
    if cell is None:
        return ""
    # the CI without its ", measured": the column header says where it comes from
    detail = cell["detail"].removesuffix(", measured")
    return f"{cell['text']} ({detail})" if detail else cell["text"]


def _bytes(cell: HeadlineCell | None) -> str:
    # "-38% modeled": the detail's first part, its source; the totals are in the folded table
    if cell is None:
        return ""
    return f"{cell['text']} {cell['detail'].split(',')[0]}".strip()


def _headline_rows(rows: list[HeadlineRow], cuda: bool) -> list[list[object]]:
    out: list[list[object]] = []
    for r in rows:
        if r["kernels"] is None:
            out.append([r["mode"], r["status"]["text"], r["error"], "", "", ""])
            continue
        kernels = _text(r["kernels"])
        if cuda and r["launches"] is not None:
            kernels += f" (launches {r['launches']['text']})"
        answers = [_bytes(r["bytes"]), _speedup(r["speedup"]), _text(r["output"])]
        out.append([r["mode"], r["status"]["text"], kernels, *answers])
    return out


def _numbers_table(view: PageView) -> list[str]:
    """Every number per mode (the report's full table), folded."""
    cuda = view["is_cuda"]
    header = ["mode", "kernels/step (vs eager)"]
    header += ["launches/step"] if cuda else []
    header += ["read", "written", "latency median", "IQR", "speedup vs eager (95% CI)"]
    header += ["latency floor (x of it)"] if view["has_roofline"] else []
    header += ["peak memory (compression)", "compile / build", "output vs eager"]
    rows: list[list[object]] = []
    for row in view["summary"]:
        if row["status"] != "ok":
            rows.append([row["mode"], row["status"], *[""] * (len(header) - 2)])
            continue
        partial = " (partial)" if row["bytes_partial"] else ""
        delta = row.get("kernel_delta")
        per_step = row["counts"].per_step
        kernels = f"{per_step} ({delta:+d})" if delta else str(per_step)
        cells: list[object] = [row["mode"], kernels]
        cells += [row["counts"].launches] if cuda else []
        median = row["median"]
        if row["floor"]["inconsistent"]:
            median = f"INCONSISTENT (measured {median})"
        read, written = row["read"] + partial, row["written"] + partial
        cells += [read, written, median, row["iqr"], row["speedup"]]
        if view["has_roofline"]:
            cells.append(f"{row['floor']['floor']} ({row['floor']['x_of_floor']})")
        build = row["compile_s"]
        if row.get("payback_calls"):
            build += f" (paid back after {row['payback_calls']} calls)"
        memory, output = row["memory"], row["output"]
        compression = "" if memory["compression"] == "-" else f" ({memory['compression']})"
        # cells are escaped, so no bold: a difference reads "DIFFERS", in capitals
        note = f" ({output['note']})" if output["note"] else ""
        cells += [memory["peak"] + compression, build, output["text"] + note]
        rows.append(cells)
    return md_table(header, rows, "l" + "r" * (len(header) - 2) + "l")


def _why_not_fused(view: PageView) -> tuple[int, list[str]]:
    """Why it did not fuse, per mode: each distinct reason with its count, evidence source and
    any hint; at most WHY_ITEMS, then how many more the report lists."""
    lines: list[str] = []
    total = 0
    for d in view["details"]:
        for w in d.get("why") or []:
            total += 1
            if len(lines) >= WHY_ITEMS:
                continue
            e = w["entry"]
            count = f" ×{w['count']}" if w["count"] > 1 else ""
            ops = short_text(w["ops"]["short"], NAME_CHARS)
            ops_part = f" ({md_cell(ops)})" if w["ops"]["more"] or ops != "-" else ""
            item = f"- {md_cell(d['mode'])}, {md_cell(w['kind'])}{count}{ops_part}: "
            item += md_cell(short_text(e.reason, 300))
            if e.where:
                item += f" at {md_code(short_text(e.where, NAME_CHARS))}"
            if e.source_text:
                item += f" {md_code(short_text(e.source_text, 200))}"
            item += f" ({md_cell(e.source)})"
            if e.hint:
                item += f"; would change it: {md_cell(short_text(e.hint, 200))}"
                if e.hint_test:
                    item += f" (test with {md_code(short_text(e.hint_test, NAME_CHARS))})"
            lines.append(item)
    if total > len(lines):
        lines.append(f"- … {total - len(lines)} more in report.html")
    return total, lines


def _top_kernels(view: PageView) -> list[str]:
    lines: list[str] = []
    for d in view["details"]:
        if d["status"] != "ok":
            continue
        kernels = d["kernels"][:TOP_KERNELS]
        lines += [f"**{md_cell(d['mode'])}**: top {len(kernels)} of {d['kernel_count']}", ""]
        header = ["kernel", "calls/step", "time/step (profiler)", "read / written (modeled)"]
        rows = [
            [short_text(k["name"], NAME_CHARS), k["calls_per_step"], k["time_per_step"], k["bytes"]]
            for k in kernels
        ]
        lines += [*md_table(header, rows, "lrrr"), ""]
    return lines


def _verdict_lines(verdicts: Sequence[str]) -> list[str]:
    """One line per mode, each verdict whole: in order while they fit VERDICTS_CHARS together
    (and a single one fits VERDICT_CHARS), the others folded whole below the list. A verdict is
    never cut (a cut one reads as a different claim)."""
    shown: list[str] = []
    folded_ones: list[str] = []
    used = folded_used = 0
    for verdict in verdicts:
        line = md_line(verdict)
        mode = verdict.split(":", 1)[0]
        if len(line) <= VERDICT_CHARS and used + len(line) <= VERDICTS_CHARS:
            shown.append(f"- {line}")
            used += len(line)
            continue
        name = md_line(short_text(mode, NAME_CHARS))
        if folded_used + len(line) > FOLDED_VERDICTS_CHARS:
            shown.append(f"- {name}: verdict in report.html (too long for a comment)")
            continue
        shown.append(f"- {name}: verdict folded below")
        folded_ones.append(f"- {line}")
        folded_used += len(line)
    if not folded_ones:
        return shown
    return [
        *shown,
        "",
        *folded(f"Verdicts too long for the list ({len(folded_ones)})", folded_ones),
    ]


def _visible(view: PageView) -> list[str]:
    model, cuda = view["model"], view["is_cuda"]
    rows = view["headline"]["rows"]
    lines = [
        f"### {md_line(short_text(view['title'], 200))}",
        "",
        f"{md_code(short_text(model.name, NAME_CHARS))}: "
        f"{md_cell(short_text(model.description, 300))}",
        "",
    ]
    if view["failure_notice"]:
        lines += [f"**{md_cell(short_text(view['failure_notice'], 300))}**", ""]
    decode = view.get("decode")
    if decode is not None:  # a decode run: its per-token numbers come first
        lines += [
            "#### Decode, per token",
            "",
            *md_table(decode["header"], decode["rows"], "lrrrrrrr"),
            "",
            md_line(decode["floor"]),
            "",
            *[f"- {md_line(w)}" for w in decode["words"]],
            "",
            md_line(decode["method"]),
            "",
        ]
    kernel_label = view["headline"]["kernel_label"]
    header = ["mode", "status", f"{kernel_label}/step (eager → mode)", "bytes vs eager"]
    header += ["speedup vs eager (95% CI, measured)", "output vs eager"]
    lines += [*md_table(header, _headline_rows(rows, cuda), "llllll"), ""]
    lines += _verdict_lines([row["verdict"] for row in view["summary"]])
    lines += [
        f"- **{md_cell(row['mode'])}**: {md_line(row['floor']['inconsistent'])}"  # whole
        for row in view["summary"]
        if row["status"] == "ok" and row["floor"]["inconsistent"]
    ]
    lines.append("")
    return lines


def _folded_blocks(view: PageView, run: Run) -> list[list[str]]:
    """The folded blocks, most useful first: the last ones are left out when the comment would
    pass TOTAL_CHARS."""
    env, model = run.env, view["model"]
    blocks = [folded("All numbers per mode", _numbers_table(view))]
    why_total, why = _why_not_fused(view)
    if why:
        blocks.append(folded(f"Why it did not fuse ({why_total} distinct reasons)", why))
    savings = savings_markdown(run)
    if savings:
        blocks.append(folded("Modules whose fused groups saved the most bytes", savings))
    time = _time_lines(view["time_rows"])
    if time:
        blocks.append(folded("Where the time goes", time))
    blocks.append(folded("Noise guard", [md_line(view["method"]["noise"])]))
    ceilings = [
        f"{k} {str(v).split(':', 1)[0]}" for k, v in view["env_rows"] if k in BOUND_NAMES.values()
    ]
    setup = md_cell(
        f"inputs {view['model_inputs']} ({model.memory_format}), dtype {model.dtype}; "
        f"torch {_or_na(env, 'torch')}, {_or_na(env, 'threads')} threads; "
        f"recorded {view['created_utc']} UTC"
    )
    ceilings_line = [md_line("Ceilings: " + "; ".join(ceilings))] if ceilings else []
    blocks.append(folded("Setup and ceilings", [setup, "", *ceilings_line]))
    blocks.append(folded(f"Top {TOP_KERNELS} kernels per mode", _top_kernels(view)))
    flattened = [
        f"- {md_cell(d['mode'])}: outputs {md_cell(short_text(d['compiler']['outputs'], 300))}"
        for d in view["details"]
        if d["status"] == "ok" and d["compiler"].get("outputs")
    ]
    method = [
        f"kernels: profiler, {md_cell(view['definition_name'])} definition, per step; "
        "bytes: modeled (compulsory traffic from tensor sizes; partial = some kernels not "
        "modeled), measured where Nsight Compute ran; latency: measured outside the profiler, "
        "speedup = median of paired per-round ratios with an order-statistic 95% interval, "
        "inconclusive when the noise guard tripped and the change is within its band; "
        "output vs eager: measured on the example inputs, max abs err and norm-wise rel err "
        "against torch.testing's tolerances for the dtype; latency floor: each kernel at its "
        "measured ceiling (modeled bytes / bandwidth or FLOPs / matmul rate); peak memory: one "
        "call, compression = eager peak / mode peak."
        + (f" {view['method']['timed_in']}" if view["method"]["timed_in"] else ""),
    ]
    blocks.append(folded("Method", [*flattened, "", *method] if flattened else method))
    return blocks


def render(run: Run, budget: BudgetCheck | None = None) -> str:
    """The pull-request summary of a run with findings; `budget`'s check opens it."""
    from profreport.render.budget import budget_markdown, budget_view

    view = build_view(run)
    lines = _visible(view)
    if budget is not None:
        lines = [*budget_markdown(budget_view(budget)), *lines]
    size = sum(len(line) + 1 for line in lines)
    blocks = _folded_blocks(view, run)
    left_out = []
    for block in blocks:
        block_size = sum(len(line) + 1 for line in block)
        if size + block_size > TOTAL_CHARS - 200:  # room for the line that says so
            left_out.append(block[1].removeprefix("<summary>").removesuffix("</summary>"))
            continue
        lines += block
        size += block_size
    if left_out:
        lines += [f"Left out to fit a comment: {'; '.join(left_out)} (see report.html).", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
