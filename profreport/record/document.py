"""The run record as a versioned JSON document: dump, load, and the fields `validate` checks.

Renderers and comparisons read only this record (and the traces beside it), so a run collected on
a GPU box re-renders anywhere. The names under `modes.<mode>` are a contract for other tools.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from profreport.files import read_text

SCHEMA = "profreport.run/1"
MODE_STATUSES = ("ok", "failed", "skipped")


class RecordError(Exception):
    """Not a readable profreport run record; the message is one line for the user."""


def _clean(value: Any) -> Any:
    # JSON has no NaN/Infinity; a number we could not compute is written as null.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(_clean(record), indent=1, sort_keys=False) + "\n"


# The fields readers (render, compare) rely on, path -> kind. `*` is every key of an object, `[]`
# every item of a list. A kind alone must be there and not null; "or null" must be there and may be
# null; "?" may be absent or null (a writer leaves it out, or had nothing to put there). Children
# of an absent optional field are not checked. MODE_FIELDS apply under `modes.<mode>` of a mode
# whose status is "ok"; a failed or skipped mode has only FAILED_MODE_FIELDS.
RECORD_FIELDS = {
    "model": "object",
    "model.name": "text",
    "model.description": "text?",
    "model.batch_size": "integer?",
    "model.dtype": "text?",
    "model.parameters": "integer?",
    "model.memory_format": "text?",
    "model.inputs": "list?",
    "model.inputs[]": "object",
    "model.inputs[].shape": "list",
    "model.inputs[].shape[]": "integer",
    "model.inputs[].dtype": "text",
    "device": "object",
    "device.type": "text",
    "device.name": "text?",
    "timeline": "text?",
    "env": "object",
    "env.fusers": "object?",
    "settings": "object?",
    "settings.profile_schedule": "object?",
    "settings.profile_schedule.wait": "integer",
    "settings.profile_schedule.warmup": "integer",
    "settings.profile_schedule.active": "integer",
    "settings.timing": "object?",
    "settings.timing.block_s": "number?",
    "settings.timing.min_blocks": "integer?",
    "settings.timing.min_time_s": "number?",
    "settings.bootstrap_resamples": "integer?",
    "kernel_definition": "object?",
    "kernel_definition.name": "text?",
    "kernel_definition.text": "text?",
    "kernel_definition.bookkeeping_ops": "list?",
    "kernel_definition.bookkeeping_ops[]": "text",
    "created_utc": "text?",
    "tool": "object?",
    "tool.version": "text?",
    "modes": "object",
    "modes.*": "object",
    # measured ceilings of the machine (capture/ceilings.py); absent in records written before
    "ceilings": "object?",
    "ceilings.source": "text?",
    "ceilings.reason": "text?",
    "ceilings.memory_bandwidth": "object?",
    "ceilings.memory_bandwidth.value": "number",
    "ceilings.cache_bandwidth": "object?",
    "ceilings.cache_bandwidth.value": "number",
    "ceilings.matmul_rate": "object?",
    "ceilings.matmul_rate.value": "number",
    "ceilings.last_level_cache_bytes": "integer?",
}
FAILED_MODE_FIELDS = {
    "error": "text?",
    "traceback": "text?",
    "verdict": "text?",
    "compile_s": "number?",
}
MODE_FIELDS = {
    **FAILED_MODE_FIELDS,
    "trace": "text?",
    "kernels": "object",
    "kernels.per_step": "integer",
    "kernels.launches": "integer",
    "kernels.memcpy": "integer",
    "kernels.memset": "integer",
    "kernels.table": "list",
    "kernels.table[]": "object",
    "kernels.table[].name": "text",
    "kernels.table[].kind": "text",
    "kernels.table[].calls_per_step": "number or null",
    "kernels.table[].time_us_per_step": "number or null",
    "kernels.table[].launched_by": "text?",
    "kernels.table[].bytes_read": "number?",
    "kernels.table[].bytes_written": "number?",
    "kernels.table[].bytes_shared_by": "integer?",
    "kernels.table[].flops": "number?",
    "kernels.table[].flops_per_byte": "number?",
    "kernels.table[].source": "text?",
    "bytes": "object",
    "bytes.read": "number",
    "bytes.written": "number",
    "bytes.source": "text",
    "bytes.method": "text",
    "bytes.not_modeled": "list?",
    "bytes.not_modeled[]": "text",
    "bytes.table": "list",
    "bytes.table[]": "object",
    "bytes.table[].op": "text",
    "bytes.table[].calls": "integer",
    "bytes.table[].read": "number",
    "bytes.table[].written": "number",
    "bytes.table[].flops": "number?",
    "bytes.table[].flops_per_byte": "number?",
    "bytes.measured": "object?",
    "bytes.measured.available": "flag?",
    "bytes.measured.reason": "text?",
    "bytes.measured.source": "text?",
    "bytes.measured.read": "number?",
    "bytes.measured.written": "number?",
    "bytes.measured.kernels": "list?",
    "bytes.measured.kernels[]": "object",
    "bytes.measured.kernels[].name": "text",
    "bytes.measured.kernels[].read": "number?",
    "bytes.measured.kernels[].written": "number?",
    "latency_ms": "object?",  # absent when the mode failed while being timed
    "latency_ms.median": "number",
    "latency_ms.iqr": "number?",
    "latency_ms.p10": "number",
    "latency_ms.p90": "number",
    "latency_ms.n": "integer?",
    "latency_ms.samples": "list?",
    "latency_ms.samples[]": "number",
    "speedup_vs_eager": "object?",
    "speedup_vs_eager.median": "number",
    "speedup_vs_eager.ci95": "pair",
    "fusion": "object?",
    "fusion.source": "text?",
    "fusion.groups": "list?",
    "fusion.groups[]": "object",
    "fusion.groups[].eager_ops": "list",
    "fusion.groups[].eager_ops[]": "text",
    "fusion.groups[].kernels": "list",
    "fusion.groups[].kernels[]": "text",
    "fusion.groups[].eager_bytes": "number?",
    "fusion.groups[].kernel_bytes": "number?",
    "fusion.groups[].saved_bytes": "number?",
    "fusion.groups[].note": "text?",
    "compiler": "object?",
    "compiler.notes": "list?",
    "compiler.graph": "text?",
    "compiler.fusion_groups": "list?",
    "compiler.fusion_groups[]": "object",
    "compiler.fusion_groups[].ops": "list",
    "compiler.fusion_groups[].ops[]": "text",
    "compiler.fusion_groups[].kind": "text",
    "compiler.fused_library_ops": "list?",
    "compiler.fused_library_ops[]": "text",
    "compiler.op_counts_before": "object?",
    "compiler.op_counts_before.*": "integer",
    "compiler.op_counts": "object?",
    "compiler.op_counts.*": "integer",
    "compiler.inductor_nodes": "list?",
    "compiler.inductor_nodes[]": "object",
    "compiler.inductor_nodes[].name": "text",
    "compiler.inductor_nodes[].kind": "text",
    "compiler.inductor_nodes[].origins": "list",
    "compiler.inductor_nodes[].origins[]": "text",
    "compiler.inductor_nodes[].read": "number?",
    "compiler.inductor_nodes[].written": "number?",
    "compiler.graphs": "integer?",
    "compiler.graph_breaks": "integer?",
    # why-not-fused evidence (modes/compile_logs): Dynamo's and Inductor's own log lines
    "compiler.graph_break_records": "list?",
    "compiler.graph_break_records[]": "object",
    "compiler.graph_break_records[].file": "text",
    "compiler.graph_break_records[].line": "integer",
    "compiler.graph_break_records[].reason": "text",
    "compiler.graph_break_records[].source": "text?",
    "compiler.graph_break_records[].log": "text?",
    "compiler.fusion_refusals": "list?",
    "compiler.fusion_refusals[]": "object",
    "compiler.fusion_refusals[].first": "text",
    "compiler.fusion_refusals[].second": "text",
    "compiler.fusion_refusals[].log": "text",
    # where the profiled step's time went (analysis/time_breakdown); absent in records before
    "time_breakdown": "object?",
    "time_breakdown.step": "object?",
    "time_breakdown.step.wall_us": "number",
    "time_breakdown.step.dispatch_us": "number",
    "time_breakdown.step.python_us": "number",
    "time_findings": "object?",  # a finding (analysis/speedup_breakdown), derived again on reading
    "peak_memory": "object?",
    "peak_memory.bytes": "integer?",
    "peak_memory.source": "text?",
    "roofline": "object?",  # a finding (analysis/roofline), derived again on reading
    "why_not_fused": "list?",  # a finding (analysis/why_not_fused), derived again on reading
    "compiler.inductor_bytes_accessed": "number?",
}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "object": ("an object", lambda v: isinstance(v, dict)),
    "list": ("a list", lambda v: isinstance(v, list)),
    "text": ("a string", lambda v: isinstance(v, str)),
    "integer": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "number": ("a number", _is_number),
    "flag": ("true or false", lambda v: isinstance(v, bool)),
    "pair": (
        "a list of two numbers",
        lambda v: isinstance(v, list) and len(v) == 2 and all(map(_is_number, v)),
    ),
}
_ABSENT = object()


def _tokens(path: str) -> list[str]:
    out: list[str] = []
    for part in path.split("."):
        name = part.replace("[]", "")
        out += ([name] if name else []) + ["[]"] * part.count("[]")
    return out


def _locate(node: Any, tokens: list[str], shown: str) -> Iterator[tuple[str, Any]]:
    """(path as shown to the user, value or _ABSENT) for every place `tokens` names; places under
    a parent of the wrong type are left to the parent's own check."""
    if not tokens:
        yield shown, node
        return
    token, rest = tokens[0], tokens[1:]
    if token == "[]":
        if isinstance(node, list):
            for i, item in enumerate(node):
                yield from _locate(item, rest, f"{shown}[{i}]")
    elif isinstance(node, dict):
        children = node.items() if token == "*" else [(token, node.get(token, _ABSENT))]
        for key, value in children:
            where = f"{shown}.{key}" if shown else str(key)
            if value is _ABSENT or value is None:
                if not rest:
                    yield where, value
            else:
                yield from _locate(value, rest, where)


def _found(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"


def _check_fields(node: Any, fields: dict[str, str], prefix: str, source: str) -> None:
    for path, spec in fields.items():
        optional, nullable = spec.endswith("?"), spec.endswith(" or null")
        noun, accepts = KINDS[spec.removesuffix("?").removesuffix(" or null")]
        for where, value in _locate(node, _tokens(path), prefix):
            if value is _ABSENT:
                if not optional:
                    raise RecordError(f"{source}: {where}: missing (expected {noun})")
            elif value is None:
                if not (optional or nullable):
                    raise RecordError(f"{source}: {where}: expected {noun}, found null")
            elif not accepts(value):
                raise RecordError(f"{source}: {where}: expected {noun}, found {_found(value)}")


def validate(record: Any, source: str = "record") -> dict[str, Any]:
    """Check the fields every reader relies on (the tables above); raise RecordError naming
    the first field that is missing or of the wrong type."""
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        found = record.get("schema") if isinstance(record, dict) else type(record).__name__
        raise RecordError(
            f"{source} is not a profreport run record (schema {found!r}, want {SCHEMA!r})"
        )
    _check_fields(record, RECORD_FIELDS, "", source)
    for name, mode in record["modes"].items():
        if mode.get("status") not in MODE_STATUSES:
            raise RecordError(
                f"{source}: modes.{name}.status: expected one of {', '.join(MODE_STATUSES)}, "
                f"found {_found(mode.get('status'))}"
            )
        fields = MODE_FIELDS if mode["status"] == "ok" else FAILED_MODE_FIELDS
        _check_fields(mode, fields, f"modes.{name}", source)
    return record


def load(path: Path) -> dict[str, Any]:
    """Read and validate a run record from a run.json file or a run folder."""
    path = Path(path)
    if path.is_dir():
        path = path / "run.json"
    try:
        data = json.loads(read_text(path, RecordError))
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except UnicodeDecodeError as exc:
        raise RecordError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return validate(data, str(path))
