"""Markdown renderer: a GitHub-flavoured summary short enough for a pull-request comment."""

from __future__ import annotations

from typing import Any

from profreport.render.viewmodel import build_view


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _kernels(row: dict[str, Any]) -> str:
    delta = row.get("kernel_delta")
    return f"{row['kernels']} ({delta:+d})" if delta else str(row["kernels"])


def render(record: dict[str, Any]) -> str:
    view = build_view(record)
    model, env = view["model"], record.get("env", {})
    cuda = view["is_cuda"]
    lines = [
        f"### {view['title']}",
        "",
        f"`{model['name']}`: {model['description']}",
        "",
        f"inputs {model['inputs']} ({model['memory_format']}), dtype {model['dtype']}; "
        f"torch {env.get('torch', 'n/a')}, {env.get('threads', 'n/a')} threads; "
        f"recorded {view['created_utc']} UTC",
        "",
    ]
    header = ["mode", "status", "kernels/step (vs eager)"]
    header += ["launches/step"] if cuda else []
    header += ["read", "written", "latency median", "IQR", "speedup vs eager (95% CI)"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|---|---|" + "---:|" * (len(header) - 2))
    for row in view["summary"]:
        if row["status"] != "ok":
            blanks = " |" * (len(header) - 3)
            lines.append(
                f"| {row['mode']} | {row['status']} | {_cell(row.get('error', ''))} |{blanks}"
            )
            continue
        partial = " (partial)" if row["bytes_partial"] else ""
        cells = [row["mode"], row["status"], _kernels(row)]
        cells += [row["launches"]] if cuda else []
        cells += [
            row["read"] + partial,
            row["written"] + partial,
            row["median"],
            row["iqr"],
            row["speedup"],
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += ["", *[f"- {_cell(row['verdict'])}" for row in view["summary"]], ""]
    lines.append(
        f"<sub>kernels: profiler, {view['definition_name']} definition, per step; bytes: modeled "
        "(compulsory traffic from tensor sizes; partial = some kernels not modeled); latency: "
        "measured outside the profiler, speedup interval by bootstrap.</sub>"
    )
    return "\n".join(lines) + "\n"
