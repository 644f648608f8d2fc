"""All modes in one timeline: one profiled step of every mode's Kineto trace, each mode its own
named process, every mode's step moved to start at time 0, as one Chrome-trace JSON document.

Open it in Perfetto or chrome://tracing to see eager above compile above export. It is written
at the run folder's root as ``all_modes.timeline.json``: the PyTorch Profiler TensorBoard plugin
takes every ``<worker>[.<span>].pt.trace.json[.gz]`` under its logdir for a run (its
``WORKER_PATTERN``), so a merged file under ``tensorboard/`` would show up as one more run.

Which events belong to the chosen step (the one of median duration, so neither the first nor a
trailing partial one by chance): host events that start inside the ``ProfilerStep#N`` window
``[start, end)`` (the next step starts at ``end``); device events (kernels, copies, fills) whose launch call is among those host events (same
correlation id), wherever they ran in time; the ``ac2g`` flows of those launches; the device's
own ``ProfilerStep#N`` annotation. ``build`` is pure (parsed documents in, a document out);
``RunResult.save`` reads the traces and writes the file.
"""

from __future__ import annotations

from collections.abc import Mapping

from profreport.analysis.kernel_definitions import STEP_RE
from profreport.record.section import JSONObject
from profreport.traceio.categories import DEVICE_KINDS

DEVICE_CATS = frozenset(DEVICE_KINDS) | {"gpu_user_annotation"}
# Flow ids are correlation ids, which every trace numbers from 1: each mode gets its own range.
FLOW_ID_STRIDE = 1 << 40


def step_window(events: list[JSONObject]) -> tuple[str, float, float] | None:
    """(name, start_us, end_us) of the ``ProfilerStep#N`` of median duration (upper median, then
    earliest), from host step annotations; ``None`` when the trace has no step."""
    steps = [
        (float(e["dur"]), float(e["ts"]), str(e["name"]))
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") not in DEVICE_CATS
        and STEP_RE.match(str(e.get("name", "")))
        and isinstance(e.get("ts"), int | float)
        and isinstance(e.get("dur"), int | float)
    ]
    if not steps:
        return None
    by_duration = sorted(steps, key=lambda s: (s[0], s[1]))
    dur, ts, name = by_duration[len(by_duration) // 2]
    return name, ts, ts + dur


def step_events(events: list[JSONObject], window: tuple[str, float, float]) -> list[JSONObject]:
    """The events of one step, by the rules in the module docstring (metadata excluded)."""
    name, start, end = window
    host = [
        e
        for e in events
        if e.get("ph") not in ("M", "s", "t", "f")
        and e.get("cat") not in DEVICE_CATS
        and isinstance(e.get("ts"), int | float)
        and start <= e["ts"] < end  # the next step starts at end
    ]
    correlations = {(e.get("args") or {}).get("correlation") for e in host} - {None}
    chosen = {id(e) for e in host}
    out = []
    for e in events:
        if id(e) in chosen:
            out.append(e)
        elif e.get("cat") in DEVICE_CATS:
            corr = (e.get("args") or {}).get("correlation")
            if corr in correlations or (corr is None and e.get("name") == name):
                out.append(e)
        elif (
            e.get("ph") in ("s", "t", "f")
            and e.get("cat") == "ac2g"
            and e.get("id") in correlations
        ):
            out.append(e)
    return out


def build(traces: Mapping[str, JSONObject]) -> JSONObject:
    """One document from ``{mode: parsed Kineto trace}`` (insertion order = track order)."""
    out: list[JSONObject] = []
    steps: dict[str, str | None] = {}
    for index, (mode, doc) in enumerate(traces.items()):
        events = [e for e in doc.get("traceEvents", []) if isinstance(e, dict)]
        window = step_window(events)
        steps[mode] = window[0] if window else None
        pid = index + 1
        out.append(_meta("process_name", pid, {"name": mode}))
        out.append(_meta("process_sort_index", pid, {"sort_index": index}))
        if window is None:
            out.append(_meta("process_labels", pid, {"labels": "no ProfilerStep in this trace"}))
            continue
        out.extend(_moved(step_events(events, window), events, pid, window[1], index))
    return {
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": {
            "profreport": "all modes, one profiled step each, aligned at the step start (t = 0)",
            "steps": steps,
        },
    }


def _meta(name: str, pid: int, args: JSONObject, tid: int = 0) -> JSONObject:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": args}


def _moved(
    chosen: list[JSONObject], events: list[JSONObject], pid: int, start: float, index: int
) -> list[JSONObject]:
    """``chosen`` on process ``pid``: times from ``start``, one thread per original (pid, tid)
    (named after the original thread or device stream), flow ids in this mode's own range."""
    names = {
        (e.get("pid"), e.get("tid")): str((e.get("args") or {}).get("name"))
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    lanes: dict[tuple[object, object], int] = {}
    out: list[JSONObject] = []
    for e in chosen:
        if not isinstance(e.get("ts"), int | float):
            continue  # no time to place it at
        lane = (e.get("pid"), e.get("tid"))
        if lane not in lanes:
            lanes[lane] = tid = len(lanes) + 1
            device = e.get("cat") in DEVICE_CATS
            label = names.get(lane) or (
                f"GPU {lane[0]} stream {lane[1]}" if device else f"thread {lane[1]}"
            )
            out.append(_meta("thread_name", pid, {"name": label}, tid))
            out.append(_meta("thread_sort_index", pid, {"sort_index": tid + 1000 * device}, tid))
        moved = {**e, "pid": pid, "tid": lanes[lane], "ts": e["ts"] - start}
        if e.get("ph") in ("s", "t", "f") and type(e.get("id")) is int:
            moved["id"] = index * FLOW_ID_STRIDE + e["id"]
        out.append(moved)
    return out
