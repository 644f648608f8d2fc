"""The reports of two checked-in run records are the same both ways they are written:
`profreport render` and `RunResult.save` give the same report.html and summary.md, and the API's
`to_html`/`to_markdown` give those bytes too.

(During issue 12 this file also pinned the SHA-256 of every output as the dict-reading renderers
wrote it, to prove the typed renderers byte-identical; that was checked and the digests dropped:
a pinned digest is a golden file, and every intended change to a report would have to edit it.)

- `run1_simple_cpu_before.json.gz`: a profreport.run/1 record written before ceilings, roofline,
  peak memory, the noise guard and the output check (see test_derive.py).
- `run1_simple_cpu_ceilings.json.gz`: `generate --model simple --device cpu --min-time 0.05`,
  five modes, on a 2-core CPU at commit 2432498: all of them.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from profreport import cli
from profreport.api import RunResult
from profreport.render import charts, html
from profreport.render.tensorboard_summary import scalars

DATA = Path(__file__).parent / "data"
RECORDS = ("run1_simple_cpu_before.json.gz", "run1_simple_cpu_ceilings.json.gz")


def _chart_inputs(kind: str):
    def chart(*args) -> str:
        return f"<svg><text>{kind} {args!r}</text></svg>"

    return chart


@pytest.fixture
def charts_as_inputs(monkeypatch):
    for name in ("bar_chart", "stacked_bytes_chart", "latency_chart"):
        monkeypatch.setattr(charts, name, _chart_inputs(name))
    monkeypatch.setattr(html, "roofline_chart", _chart_inputs("roofline_chart"))


@pytest.mark.parametrize("name", RECORDS)
def test_a_checked_in_record_renders_the_same_both_ways(name, tmp_path, charts_as_inputs):
    document = json.loads(gzip.decompress((DATA / name).read_bytes()))
    # save sets the timeline from the traces beside the record, and there are none here
    document.pop("timeline", None)
    source = tmp_path / "cli"
    source.mkdir()
    (source / "run.json").write_text(json.dumps(document))
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["render", str(source / "run.json")], out, err) == 0, err.getvalue()

    (tmp_path / "saved").mkdir()
    result = RunResult.of_record(json.loads(json.dumps(document)), tmp_path / "saved")
    saved = result.save()
    for report in ("report.html", "summary.md"):
        assert (saved / report).read_bytes() == (source / report).read_bytes(), report
    assert result.to_html().encode() == (saved / "report.html").read_bytes()
    assert result.to_markdown().encode() == (saved / "summary.md").read_bytes()
    assert json.loads((saved / "run.json").read_text()) == result.run.to_json()
    assert {p.name for p in saved.glob("kernels_*.csv")} == {
        f"kernels_{m}.csv" for m in result.run.ok_modes
    }
    assert scalars(result.run)  # the TensorBoard summary has the run's numbers to show
