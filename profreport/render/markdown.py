"""Markdown renderer: a GitHub-flavoured summary short enough for a pull-request comment."""

from __future__ import annotations

from typing import Any

from profreport.render.viewmodel import build_view


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def render(record: dict[str, Any]) -> str:
    view = build_view(record)
    lines = [
        f"### {view['title']}",
        "",
        f"`{view['model']['name']}`: {view['model']['description']} - inputs {view['model']['inputs']}, "
        f"{view['model']['dtype']}",
        "",
        "| mode | status | kernels/step | read | written | latency median | IQR | speedup vs eager (95% CI) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in view["summary"]:
        if row["status"] != "ok":
            lines.append(
                f"| {row['mode']} | {row['status']} | {_cell(row.get('error', ''))} | | | | | |"
            )
            continue
        lines.append(
            "| "
            + " | ".join(
                _cell(v)
                for v in (
                    row["mode"],
                    row["status"],
                    row["kernels"],
                    row["read"],
                    row["written"],
                    row["median"],
                    row["iqr"],
                    row["speedup"],
                )
            )
            + " |"
        )
    lines += ["", *[f"- {_cell(row['verdict'])}" for row in view["summary"]], ""]
    lines.append(
        f"<sub>kernels: profiler, {view['definition_name']} definition, per step; bytes: modeled "
        "(compulsory traffic from tensor sizes); latency: measured outside the profiler.</sub>"
    )
    return "\n".join(lines) + "\n"
