"""What a check is, how checks are registered and run, and the helpers they share over the
evidence (plain run.json dicts and raw traces)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from gpu_check.evidence import JSON, Evidence
from gpu_check.rawtrace import RawTrace

Status = Literal["ok", "FAIL", "skip"]
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


def ok(name: str, detail: str) -> Result:
    return Result(name, "ok", detail)


def fail(name: str, detail: str) -> Result:
    return Result(name, "FAIL", detail)


def skip(name: str, detail: str) -> Result:
    return Result(name, "skip", detail)


def verdict(name: str, problems: list[str], detail: str) -> Result:
    """ok with `detail` when there are no problems, else FAIL listing them, then `detail`."""
    if problems:
        return fail(name, "; ".join(problems) + (f" ({detail})" if detail else ""))
    return ok(name, detail)


def no_run(name: str, ev: Evidence, label: str) -> list[Result]:
    step = "generate " + label
    if step not in ev.steps:  # a rerun of some runs only (--runs)
        return [skip(name, f"{label} is not in this check's runs")]
    return [fail(name, f"no {label} run record: {ev.missing(step)}")]


def no_output(name: str, ev: Evidence, step: str, what: str) -> list[Result]:
    if step not in ev.steps:  # its run is not in this check's runs (--runs)
        return [skip(name, f"{step} is not in this check's steps")]
    return [fail(name, f"no {what}: {ev.missing(step)}")]


def mode_entry(record: JSON, name: str) -> JSON | None:
    """The mode's entry when it ran (status ok), else None."""
    mode = record.get("modes", {}).get(name)
    return mode if mode is not None and mode.get("status") == "ok" else None


def mode_problem(record: JSON, name: str) -> str:
    mode = record.get("modes", {}).get(name)
    if mode is None:
        return f"{name} not in the run"
    return f"{name} {mode.get('status')}: {mode.get('error')}"


def needed(ev: Evidence, name: str, label: str, *modes: str) -> tuple[JSON, list[JSON]]:
    """The run labelled `label` and its `modes`, each ok; else Missing with the line that says
    why the check `name` cannot look."""
    record = ev.runs.get(label)
    if record is None:
        raise Missing(no_run(name, ev, label))
    found = []
    for mode in modes:
        entry = mode_entry(record, mode)
        if entry is None:
            raise Missing([fail(name, mode_problem(record, mode))])
        found.append(entry)
    return record, found


def raw(ev: Evidence, name: str, label: str, mode: str) -> RawTrace:
    """The mode's trace read raw; else Missing with why (the check FAILs: a mode that ran
    without a readable trace is a fault)."""
    trace = ev.traces.get(label, {}).get(mode)
    if isinstance(trace, RawTrace):
        return trace
    raise Missing([fail(name, f"{label}/{mode}: no trace to count: {trace or 'none recorded'}")])


def preflight(ev: Evidence, name: str) -> JSON:
    if ev.preflight is None:
        raise Missing([fail(name, f"no preflight readings: {ev.missing('preflight')}")])
    return ev.preflight


def lines(check_one: Callable[[], Result]) -> list[Result]:
    """One result of a check that looks at several runs or modes, each on its own."""
    try:
        return [check_one()]
    except Missing as missing:
        return missing.results


def per_run(ev: Evidence, one: Callable[..., Result], *runs: tuple[Any, ...]) -> list[Result]:
    """The results of `one(ev, *run)` for each of `runs` (a run label and its arguments)."""
    return [r for run in runs for r in lines(partial(one, ev, *run))]


def kernel_rows(mode: JSON) -> list[JSON]:
    return [r for r in mode["kernels"]["table"] if r.get("kind") == "kernel"]


def calls(rows: Iterable[JSON]) -> float:
    return sum(float(r.get("calls_per_step") or 0) for r in rows)


def names(rows: Iterable[str], limit: int = 2) -> str:
    found = list(dict.fromkeys(rows))
    shown = ", ".join(n[:60] for n in found[:limit])
    return shown + (f" and {len(found) - limit} more" if len(found) > limit else "")


def row_names(rows: Iterable[JSON], limit: int = 2) -> str:
    return names((str(r["name"]) for r in rows), limit)


def per_step(mode: JSON) -> int:
    return int(mode["kernels"]["per_step"])


def ok_modes(record: JSON) -> dict[str, JSON]:
    return {n: m for n, m in record.get("modes", {}).items() if m.get("status") == "ok"}


def each_run(ev: Evidence, labels: Iterable[str]) -> Iterable[tuple[str, JSON]]:
    return ((label, ev.runs[label]) for label in labels if label in ev.runs)


def measured(mode: JSON) -> JSON | None:
    found = (mode.get("bytes") or {}).get("measured") or {}
    return found if found.get("available") else None


def l2_bytes(ev: Evidence, record: JSON) -> int | None:
    ceilings = record.get("ceilings") or {}
    if ceilings.get("l2_bytes"):
        return int(ceilings["l2_bytes"])
    cuda = (ev.preflight or {}).get("cuda") or {}
    return int(cuda["l2_bytes"]) if cuda.get("l2_bytes") else None


def within(x: float, low: float, high: float) -> bool:
    return low <= x <= high
