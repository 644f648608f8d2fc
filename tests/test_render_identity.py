"""The reports of two checked-in run records, byte for byte, both ways they are written:
`profreport render` and `RunResult.save` give the same report.html and summary.md, and every
output (run.json, report.html, summary.md, kernels_<mode>.csv, the TensorBoard scalars) has the
SHA-256 the renderers that read the record as a dict gave before it was typed (issue 12).

A refactor guard: a change to what a report says fails here. When the change is meant, render
both records before and after it (`profreport render RECORD --out DIR`), read the diff, then
update the digests. The charts' SVG depends on the matplotlib version, so the charts are replaced
by their inputs (modes, values, points, roofs), which are what the record decides.

- `run1_simple_cpu_before.json.gz`: a profreport.run/1 record written before ceilings, roofline,
  peak memory, the noise guard and the output check (see test_derive.py).
- `run1_simple_cpu_ceilings.json.gz`: `generate --model simple --device cpu --min-time 0.05`,
  five modes, on a 2-core CPU at commit 2432498: all of them.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from pathlib import Path

import pytest

from profreport import cli
from profreport.api import RunResult
from profreport.render import charts, html
from profreport.render.tensorboard_summary import scalars

DATA = Path(__file__).parent / "data"
# file -> sha256 of its content, as written by the dict-reading renderers (commit 2432498)
EXPECTED = {
    "run1_simple_cpu_before.json.gz": {
        "run.json": "aa28f215526177c2b3c152562f59d0e73b97ff4379472a3e875f542b2e3f125b",
        "report.html": "f3dc62220ffa7fcb0580ba58eb134552a9a26792addb36ca095d8337a7a226b9",
        "summary.md": "330839547c57c75c93e10a386d5e81d3ed9d2f3cde6960c705687f7b9cc1fb05",
        "kernels_compile.csv": "b2a64dd0446bd0f9395dc148a94e506f463fbaccad24862490c875e80d87ac84",
        "kernels_eager.csv": "769c02149708618623206d0b4da1e9647e03cc31f57e599cccb1cbfabc8f587f",
        "kernels_optimize.csv": "4ce6dff952cc5722da2ddfe778d7824d3ccf5ca21bb1e4e49e3048ebcbb34b8b",
        "kernels_script.csv": "794cf7b7a33ea5e612789b0ad4a4718e7d65c0518e2cdce2ec6c48fa2f9834f9",
        "kernels_trace.csv": "fb58e4af827a7f63b26e9ac5c8de15a8f98a391e045e6eb799e8b7cb51d5c8cb",
        "scalars": "189e9b3bf7e8d4222a84d9ff3eaff17d25a582ae2eee84f058adf3518bbc0496",
    },
    "run1_simple_cpu_ceilings.json.gz": {
        "run.json": "9dc420ab0c8825a99646375245679a0cd9224b7bc18a60bed5e875bb5daf9e70",
        "report.html": "54af8bb3f5560147c19f0d6a3eeed9c8ba91a2a62d5ccc21b7cda467277b0ae9",
        "summary.md": "37772ac0e2e1e2b92bc73c6f4d496d8256727382bdd1b6a6347667dadb776f7b",
        "kernels_compile.csv": "7ce511f232169234cf2b1163fcdccc6f7fb99f2839f86ac68d59318d789cd7d5",
        "kernels_eager.csv": "725ddfd4fc57cfeb4172dd3943e7858ea815c72e514727c7ab5c1f3e9413f456",
        "kernels_optimize.csv": "02e5bac1e8518017c12be83fae1cd8813e49ae0ed4a384850691df4ee619520f",
        "kernels_script.csv": "6b8258b463403a8b44c383e2e23fed1515577a2c61467d34c62bc9013be9f06e",
        "kernels_trace.csv": "c18206dedf93aadf47e723df5ba26c34beba0da4b007e089c9d3e7cd5e782ce3",
        "scalars": "b5719e3504d8e140f66f522a7ec5b77fb8014dcb7d64b1384d361ccff05be6df",
    },
}


def _chart_inputs(kind: str):
    def chart(*args) -> str:
        return f"<svg><text>{kind} {args!r}</text></svg>"

    return chart


@pytest.fixture
def charts_as_inputs(monkeypatch):
    for name in ("bar_chart", "stacked_bytes_chart", "latency_chart"):
        monkeypatch.setattr(charts, name, _chart_inputs(name))
    monkeypatch.setattr(html, "roofline_chart", _chart_inputs("roofline_chart"))


def _digests(folder: Path) -> dict[str, str]:
    names = ["run.json", "report.html", "summary.md"]
    names += sorted(p.name for p in folder.glob("kernels_*.csv"))
    return {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in names}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_checked_in_record_renders_as_before_both_ways(name, tmp_path, charts_as_inputs):
    document = json.loads(gzip.decompress((DATA / name).read_bytes()))
    # save sets the timeline from the traces beside the record, and there are none here
    document.pop("timeline", None)
    source = tmp_path / "cli"
    source.mkdir()
    (source / "run.json").write_text(json.dumps(document))
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["render", str(source / "run.json")], out, err) == 0, err.getvalue()

    (tmp_path / "saved").mkdir()
    result = RunResult(json.loads(json.dumps(document)), tmp_path / "saved")
    saved = result.save()
    for report in ("report.html", "summary.md"):
        assert (saved / report).read_bytes() == (source / report).read_bytes(), report
    assert result.to_html().encode() == (saved / "report.html").read_bytes()
    assert result.to_markdown().encode() == (saved / "summary.md").read_bytes()

    found = _digests(saved)
    found["scalars"] = hashlib.sha256(json.dumps(scalars(result.run)).encode()).hexdigest()
    assert found == EXPECTED[name], json.dumps(found, indent=1)
