"""The roofline analysis (analysis/roofline.py) on hand-made kernel rows, through derive on the
checked-in old record, and in the report's view-model and Markdown."""

import copy
import gzip
import json
from pathlib import Path

import pytest

from profreport.analysis.derive import derived_run
from profreport.analysis.roofline import (
    bandwidth,
    kernel_bound,
    kernel_roofline,
    mode_floor,
    roofs_of,
)
from profreport.modes import mode_analyses
from profreport.record import KernelRow, Run
from profreport.record.model import Ceilings, Latency, OkMode, Roofs
from profreport.render import markdown
from profreport.render.roofline_view import ceiling_rows, chart_points, floor_cells, kernel_cells
from profreport.render.viewmodel import build_view

OLD = Path(__file__).parent / "data" / "run1_simple_cpu_before.json.gz"
MiB = 2**20
# 10 GB/s through memory, 100 GB/s in cache (for up to 32 MiB per call), 1 TFLOP/s
ROOFS = Roofs(10e9, 1e12, 100e9, 32 * MiB)


def _ceilings(memory=10e9, cache=100e9, rate=1e12, llc=32 * MiB) -> dict:
    def one(v, unit):
        return {"value": v, "median": v * 0.9, "worst": v * 0.8, "samples": 7, "spread_pct": 10.0,
                "unit": unit, "method": "test"}  # fmt: skip

    return {
        "source": "measured",
        "timer": "time.perf_counter around each sample",
        "last_level_cache_bytes": llc,
        "memory_bandwidth": one(memory, "B/s"),
        "cache_bandwidth": one(cache, "B/s"),
        "matmul_rate": one(rate, "FLOP/s"),
        "measured_utc": "2026-01-01T00:00:00Z",
        "cached": True,
    }


def test_roofs_from_a_record_and_when_there_are_none():
    assert roofs_of(Ceilings.from_json(_ceilings())) == ROOFS
    assert roofs_of(None) is None
    unavailable = Ceilings.from_json({"source": "unavailable", "reason": "x"})
    assert roofs_of(unavailable) is None
    without_llc = _ceilings(llc=None)
    # no cache roof without its size
    assert roofs_of(Ceilings.from_json(without_llc)) == Roofs(10e9, 1e12)


def test_bandwidth_roof_depends_on_whether_one_call_fits_the_cache():
    assert bandwidth(ROOFS, 32 * MiB) == ("cache", 100e9)
    assert bandwidth(ROOFS, 32 * MiB + 1) == ("memory", 10e9)
    assert bandwidth(Roofs(10e9, 1e12), 1) == ("memory", 10e9)


def test_kernel_bound_memory_and_compute():
    # 64 MiB in one call: memory roof, 6.7 ms at 10 GB/s; run in 13.4 ms -> 50%
    mem = kernel_bound(64 * MiB, None, 1, 2 * 64 * MiB / 10e9, ROOFS)
    assert mem.bound == "memory"
    assert mem.bound_s == pytest.approx(64 * MiB / 10e9)
    assert mem.ceiling_pct == pytest.approx(50.0)
    assert mem.achieved_bytes_per_s == pytest.approx(5e9)
    assert mem.achieved_flops_per_s is None
    # the same bytes in 4 calls fit the cache: 100 GB/s; 2 GFLOP at 1 TFLOP/s = 2 ms dominates
    comp = kernel_bound(64 * MiB, 2e9, 4, 4e-3, ROOFS)
    assert kernel_bound(64 * MiB, None, 4, 4e-3, ROOFS).bound == "cache"  # without the FLOPs
    assert comp.bound == "compute"
    assert comp.bound_s == pytest.approx(2e-3)
    assert comp.ceiling_pct == pytest.approx(50.0)
    assert comp.achieved_flops_per_s == pytest.approx(0.5e12)
    nothing = kernel_bound(0, None, 1, 1e-3, ROOFS)
    assert nothing.bound is None and nothing.ceiling_pct is None


def _row(name, read, written, time_us, flops=None, op=None, shared=1, calls=1.0):
    return {
        "name": name,
        "kind": "cpu",
        "calls_per_step": calls,
        "time_us_per_step": time_us,
        "bytes_read": read,
        "bytes_written": written,
        "bytes_op": op or name,
        "bytes_shared_by": shared,
        "flops": flops,
    }


def attach_roofline(mode: dict, roofs, eager: dict | None = None):
    """kernel_roofline over a mode written as JSON: its rows get the fields in place (what these
    tests check), and the floor is returned."""
    typed_eager = OkMode.from_json(eager) if eager is not None else None
    found = kernel_roofline(OkMode.from_json(mode), roofs, typed_eager)
    if found is None:
        return None
    for row, typed in zip(mode["kernels"]["table"], found.rows, strict=True):
        row.update(typed.to_json())
    return found.floor.to_json()


def _mode(rows, median_ms):
    return {"kernels": {"table": rows}, "latency_ms": {"median": median_ms}}


def test_attach_roofline_groups_shared_bytes_and_sums_the_floor():
    rows = [
        # two kernels of one op (cuDNN-style): 40 MiB + 24 MiB over their summed 10 ms
        _row("conv_kernel_a", 40 * MiB, 24 * MiB, 6000.0, flops=3e9, op="aten::conv", shared=2),
        _row("conv_kernel_b", 40 * MiB, 24 * MiB, 4000.0, flops=3e9, op="aten::conv", shared=2),
        _row("aten::relu", 8 * MiB, 8 * MiB, 1000.0),  # in cache: 16 MiB / 100 GB/s
        _row("prim::unrecorded", 64 * MiB, 0, None),  # no time: in the floor, no percentage
        {
            "name": "aten::mystery",
            "calls_per_step": 1.0,
            "time_us_per_step": 50.0,
            "bytes_read": None,
            "bytes_written": None,
        },
    ]
    mode = _mode(rows, median_ms=20.0)
    floor = attach_roofline(mode, ROOFS)
    conv_s = max(64 * MiB / 10e9, 3e9 / 1e12)  # 64 MiB > 32 MiB: memory roof, 6.7 ms
    relu_s = 16 * MiB / 100e9
    unrec_s = 64 * MiB / 10e9
    assert floor["floor_ms"] == pytest.approx((conv_s + relu_s + unrec_s) * 1e3)
    assert floor["kernels_in_floor"] == 4 and floor["kernels_without_bytes"] == 1
    assert floor["kernels_by_bound"] == {"memory": 3, "cache": 1, "compute": 0}
    assert floor["consistent"] is True
    assert floor["x_of_floor"] == pytest.approx(20.0 / floor["floor_ms"])
    a, b, relu, unrec, mystery = rows
    assert a["ceiling_pct"] == b["ceiling_pct"] == pytest.approx(conv_s / 10e-3 * 100)
    assert a["achieved_bytes_per_s"] == pytest.approx(64 * MiB / 10e-3)
    assert "shared by 2 kernels" in a["roofline_note"] and a["roofline_note"] == b["roofline_note"]
    assert relu["bound"] == "cache" and "FLOPs unknown" in relu["roofline_note"]
    assert relu["ceiling_pct"] == pytest.approx(relu_s / 1e-3 * 100)
    assert unrec["bound"] == "memory" and unrec["ceiling_pct"] is None
    assert mystery["bound"] is None and mystery["achieved_bytes_per_s"] is None


def test_a_median_below_the_floor_is_flagged_inconsistent():
    rows = [_row("aten::copy_", 64 * MiB, 64 * MiB, 5000.0)]  # floor 13.4 ms
    floor = attach_roofline(_mode(rows, median_ms=5.0), ROOFS)
    assert floor["consistent"] is False
    assert "below the floor" in floor["note"]
    assert "faster than its ceiling" in rows[0]["roofline_note"]
    assert rows[0]["ceiling_pct"] > 100
    assert mode_floor(None, 1e-3, 1, 1, {}).consistent is None  # not timed: no verdict


def test_a_median_just_under_the_floor_is_within_what_a_kernel_beats_the_ceilings_by():
    # the H200 run: Triton's fused kernel at 0.99x of a floor from the copy_ ceiling
    floor_s = 0.1932e-3
    assert (
        mode_floor(Latency(median=0.1913, p10=0.19, p90=0.2), floor_s, 1, 1, {}).consistent is True
    )
    assert (
        mode_floor(Latency(median=0.1932 * 0.94, p10=0.18, p90=0.19), floor_s, 1, 1, {}).consistent
        is False
    )


def test_a_compilers_library_call_borrows_eagers_flops_only_on_an_exact_match():
    eager = {"bytes": {"table": [
        {"op": "aten::addmm", "calls": 1, "read": 100, "written": 50, "flops": 4e9},
        {"op": "aten::convolution", "calls": 1, "read": 10, "written": 5, "flops": 1e9},
    ]}}  # fmt: skip
    rows = [
        _row("aten::addmm", 100, 50, 8000.0, op="extern aten::addmm"),
        _row("aten::convolution", 11, 5, 1000.0, op="extern aten::convolution"),
    ]
    attach_roofline(_mode(rows, 10.0), ROOFS, eager)
    assert rows[0]["bound"] == "compute"
    assert rows[0]["achieved_flops_per_s"] == pytest.approx(4e9 / 8e-3)
    assert "FLOPs from eager's aten::addmm" in rows[0]["roofline_note"]
    assert rows[1]["achieved_flops_per_s"] is None  # different bytes: not the same call


def test_no_ceilings_no_roofline():
    rows = [_row("aten::relu", 8, 8, 1.0)]
    assert attach_roofline(_mode(rows, 1.0), None) is None
    assert "bound" not in rows[0]


def _old_record() -> dict:
    return json.loads(gzip.decompress(OLD.read_bytes()))


def test_an_old_record_renders_without_ceilings_and_with_them_when_added():
    old = _old_record()
    assert "ceilings" not in old
    found = derived_run(old, mode_analyses())
    assert all(f.roofline is None for f in found.modes.values())
    view = build_view(derived_run(old, mode_analyses()))
    assert view["has_roofline"] is False
    assert ("ceilings", "not measured (record written before ceilings were measured)") in view[
        "env_rows"
    ]
    withc = copy.deepcopy(old)
    withc["ceilings"] = _ceilings(memory=1e9, cache=2e9, rate=1e10)
    derived = derived_run(withc, mode_analyses())
    eager = derived.ok_modes["eager"]
    assert eager.roofline is not None and eager.roofline.floor_ms > 0
    timed = [r for r in eager.kernels.table if r.bound]
    assert timed and all(r.ceiling_pct is not None for r in timed)
    assert "roofline" not in old["modes"]["eager"]  # derive changed nothing in place


def test_view_and_markdown_flag_an_inconsistent_mode():
    rec = _old_record()
    rec["ceilings"] = _ceilings(memory=1e15, cache=1e15, rate=1e18)
    found = derived_run(rec, mode_analyses()).to_json()
    compile_mode = found["modes"]["compile"]
    assert compile_mode["roofline"]["consistent"] is True
    # impossible ceilings: 1 B/s makes every floor far above the measured medians
    rec["ceilings"] = _ceilings(memory=1.0, cache=1.0, rate=1.0)
    found = derived_run(rec, mode_analyses())
    cells = floor_cells(found.mode("eager"))
    assert cells["inconsistent"].startswith("inconsistent: the measured median")
    text = markdown.render(found)
    assert "INCONSISTENT (measured" in text
    assert "is below the floor" in text


def test_kernel_cells_and_ceiling_rows_carry_units_and_sources():
    row = _row("aten::relu", 8 * MiB, 8 * MiB, 1000.0)
    attach_roofline(_mode([row], 10.0), ROOFS)
    cells = kernel_cells(KernelRow.from_json(row))
    assert cells["achieved_bw"] == "16.8 GB/s"
    assert cells["achieved_flops"] == "FLOPs unknown"
    assert cells["bound"] == "in-cache bandwidth"
    assert cells["ceiling_pct"] == "17%"
    rows = dict(ceiling_rows(derived_run(Run.from_json({"ceilings": _ceilings()}), {})))
    assert rows["memory bandwidth"].startswith("10.0 GB/s measured (best of 7; median 9.0 GB/s")
    assert rows["matmul rate"].startswith("1.0 TFLOP/s measured")
    assert "reused from the per-machine cache" in rows["ceilings measured"]


def test_chart_points_one_per_timed_kernel_or_shared_group():
    rows = [
        _row("a", 40 * MiB, 24 * MiB, 6000.0, flops=3e9, op="aten::conv", shared=2),
        _row("b", 40 * MiB, 24 * MiB, 4000.0, flops=3e9, op="aten::conv", shared=2),
        _row("aten::relu", 8 * MiB, 8 * MiB, 1000.0),
        _row("prim::unrecorded", 64 * MiB, 0, None),
    ]
    mode = {"status": "ok", **_mode(rows, 30.0)}
    attach_roofline(mode, ROOFS)
    points = chart_points(Run.from_json({"modes": {"eager": mode}}))
    assert len(points) == 2
    conv, relu = points
    assert conv.time_s == pytest.approx(10e-3) and conv.flops == pytest.approx(3e9)
    assert relu.flops is None and relu.traffic == 16 * MiB


def test_a_live_run_whose_median_beats_its_floor_measures_the_ceilings_again():
    """Ceilings measured in a slow moment put the floor above the median (CI once: eager at
    0.73x its floor); a live run measures them again (merged best-of) and derives once more."""
    from profreport.pipeline import derive_findings
    from tests.conftest import evidence_of

    slow = copy.deepcopy(_old_record())
    slow["ceilings"] = _ceilings(memory=1e8, cache=1e8, rate=1e8)  # every mode under its floor
    evidence = evidence_of(Run.from_json(slow))
    seen = []

    def again(ceilings: Ceilings) -> Ceilings:
        seen.append(ceilings.memory_bandwidth.value)
        return Ceilings.from_json(_ceilings())

    as_read = derive_findings(evidence)  # no remeasure (a record read back): flagged, kept
    assert {m.roofline.consistent for m in as_read.ok_modes.values()} == {False}
    progress: list[str] = []
    live = derive_findings(evidence, remeasure=again, progress=progress.append)
    assert seen == [1e8] and progress[0].startswith("a median beat its floor")
    assert live.ceilings.memory_bandwidth.value == 10e9
    assert {m.roofline.consistent for m in live.ok_modes.values()} == {True}
    # a run whose medians sit above their floors is not measured again
    assert derive_findings(evidence_of(live), remeasure=again).ceilings == live.ceilings
    assert seen == [1e8]


def test_a_convolutions_direct_flops_bound_nothing():
    """oneDNN ran simple's 3x3 convolution at 1.5-1.9x the measured matmul rate in direct-FLOP
    terms on CI (Winograd-like algorithms do fewer multiplications): every mode's median fell
    under a floor that counted those FLOPs. A convolution is bounded by its bytes; its achieved
    direct-FLOP rate is still shown."""
    from profreport.analysis.roofline import DIRECT_CONVOLUTION, is_convolution

    as_matmul = kernel_bound(MiB, 2e9, 1, 1e-3, ROOFS)  # 2 ms of FLOPs run in 1 ms: 200%
    assert as_matmul.bound == "compute" and as_matmul.ceiling_pct == pytest.approx(200.0)
    conv = kernel_bound(MiB, 2e9, 1, 1e-3, ROOFS, flops_bound=False)
    assert conv.bound == "cache" and conv.bound_s == pytest.approx(MiB / 100e9)
    assert conv.achieved_flops_per_s == pytest.approx(2e12)
    for name in ("aten::convolution", "aten::_convolution", "prim::mkldnn_convolution"):
        assert is_convolution(KernelRow(name=name, bytes_op=name))
    assert not is_convolution(KernelRow(name="aten::addmm", bytes_op="aten::addmm"))
    assert DIRECT_CONVOLUTION.startswith("direct-convolution FLOPs bound nothing")
