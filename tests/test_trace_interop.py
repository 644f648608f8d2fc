"""The traces generate writes are valid Chrome-trace JSON (Perfetto) and load in HTA."""

import gzip
import json
import logging
import numbers
import shutil
from pathlib import Path

import pytest

from profreport.capture.profiling import SINGLE_PROCESS_RANK, add_rank_info
from profreport.modes import default_modes
from profreport.record import load

DATA = Path(__file__).parent / "data"
MODES = list(default_modes())


def _trace(run: Path, mode: str) -> Path:
    return run / load(run)["modes"][mode]["trace"]


def _check_event(ev: dict) -> str | None:
    """Why `ev` is not a well-formed Chrome trace event, or None."""
    ph = ev.get("ph")
    if not isinstance(ph, str) or not ph:
        return "no ph"
    for key in ("pid", "tid"):
        # Kineto names its synthetic tracks with strings ("Spans"); both forms are legal.
        if not isinstance(ev.get(key), (int, str)) or isinstance(ev.get(key), bool):
            return f"{key} is {type(ev.get(key)).__name__}"
    ts = ev.get("ts")
    if not isinstance(ts, numbers.Real) or isinstance(ts, bool):
        return f"ts is {type(ts).__name__}"
    if ph == "X":
        dur = ev.get("dur")
        if not isinstance(dur, numbers.Real) or isinstance(dur, bool) or dur < 0:
            return f"X event with dur {dur!r}"
    if ph in ("s", "f", "t") and "id" not in ev:
        return "flow event without id"
    return None


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_traces_are_chrome_trace_json(gated_run, mode):
    data = json.loads(_trace(gated_run, mode).read_text())
    events = data["traceEvents"]
    assert isinstance(events, list) and events
    bad = [(e.get("name"), why) for e in events if (why := _check_event(e))]
    assert bad == []
    assert {"X", "M"} <= {e["ph"] for e in events}
    steps = [e for e in events if e["ph"] == "X" and str(e["name"]).startswith("ProfilerStep#")]
    assert len(steps) == 3  # the active steps
    assert data["distributedInfo"] == SINGLE_PROCESS_RANK


def test_checker_rejects_malformed_events():
    assert _check_event({"ph": "X", "pid": 1, "tid": 1, "ts": 0.5, "dur": -1})
    assert _check_event({"ph": "X", "pid": 1, "tid": 1, "ts": "0", "dur": 1})
    assert _check_event({"ph": "i", "pid": None, "tid": 1, "ts": 0})
    assert _check_event({"ph": "X", "pid": 1, "tid": "Spans", "ts": 1.0, "dur": 2}) is None


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*inplace keyword")
def test_hta_loads_a_generated_trace_folder(gated_run, tmp_path):
    hta = pytest.importorskip("hta.trace_analysis")
    logging.getLogger("hta").setLevel(logging.ERROR)
    folder = tmp_path / "compile"  # a copy: HTA must not add files to the shared run
    shutil.copytree(gated_run / "tensorboard" / "compile", folder)
    analysis = hta.TraceAnalysis(trace_dir=str(folder))
    t = analysis.t
    assert t.get_ranks() == [0]
    assert t.meta_data[0]["distributedInfo"]["rank"] == 0
    df = t.get_trace(0)
    names = set(t.symbol_table.get_sym_table()[i] for i in df["name"].unique())
    fused = [r["name"] for r in load(gated_run)["modes"]["compile"]["kernels"]["table"]]
    assert len(fused) == 1 and fused[0] in names  # the Inductor kernel profreport counted
    assert {f"ProfilerStep#{n}" for n in (2, 3)} <= names
    assert len(analysis.get_profiler_steps()) >= 2


def _kineto_like(path: Path, gz: bool) -> bytes:
    text = '{\n  "schemaVersion": 1,\n  "traceEvents": [\n  {"ph": "X", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2, "name": "aten::add", "args": {"rank": 7}}\n  ]\n}'
    raw = text.encode()
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return raw


@pytest.mark.parametrize("gz", [False, True])
def test_rank_info_is_added_first_and_the_rest_is_kept(tmp_path, gz):
    path = tmp_path / ("w.1.pt.trace.json" + (".gz" if gz else ""))
    original = _kineto_like(path, gz)
    assert add_rank_info(path) is True
    raw = gzip.decompress(path.read_bytes()) if gz else path.read_bytes()
    text = raw.decode()
    data = json.loads(text)
    assert next(iter(data)) == "distributedInfo" and data["distributedInfo"]["rank"] == 0
    # HTA takes the first `"rank": N` it finds: ours must come before the one in the event args.
    assert text.index('"rank": 0') < text.index('"rank": 7')
    inserted = '\n  "distributedInfo": ' + json.dumps(SINGLE_PROCESS_RANK) + ","
    assert text.replace(inserted, "", 1).encode() == original
    assert add_rank_info(path) is False  # idempotent
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left


def test_existing_rank_info_is_left_alone(tmp_path):
    path = tmp_path / "rank34.json.gz"
    shutil.copy(DATA / "cpu_only_rank34.json.gz", path)
    before = path.read_bytes()
    assert add_rank_info(path) is False
    assert path.read_bytes() == before
