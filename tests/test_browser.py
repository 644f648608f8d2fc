"""report.html in a real browser: headless Chromium opens it from file:// with networking off.

The page must load without console errors, draw its inline-SVG charts and request nothing but
itself. Chromium is driven through Playwright with the system browser (no Playwright download).
Without Chromium or Playwright the tests skip locally and fail under CI (the env var CI is set).
Screenshots are kept under the pytest tmp dir, and copied to $PROFREPORT_ARTIFACTS when set.
"""

import os
import shutil
from pathlib import Path

import pytest

from profreport.analysis.derive import derived_run
from profreport.modes import mode_analyses
from profreport.record import Run, load
from profreport.render.why_view import why_rows

pytestmark = pytest.mark.slow  # Chromium over real generate runs

MAX_REPORT_BYTES = 2 * 1024 * 1024
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # no name resolves: nothing can leave the machine
]


def _chromium() -> str | None:
    candidates = [
        os.environ.get("PROFREPORT_CHROMIUM"),
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ]
    return next((c for c in candidates if c and Path(c).is_file()), None)


def _missing(what: str):
    if os.environ.get("CI"):
        pytest.fail(f"{what} is required in CI (see .ci/run)")
    pytest.skip(f"{what} not available")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    executable = _chromium()
    if executable is None:
        _missing("Chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package")
    with sync_playwright() as pw:
        # Playwright gives the browser a fresh temporary profile (user data dir) of its own.
        chromium = pw.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield chromium
        finally:
            chromium.close()


class PageLog:
    """Everything a page did while loading: requests, console messages, uncaught errors."""

    def __init__(self, page):
        self.requests: list[str] = []
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        page.on("request", lambda r: self.requests.append(r.url))
        page.on(
            "console",
            lambda m: self.console_errors.append(m.text) if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))


def _open(browser, path: Path):
    context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    log = PageLog(page)
    page.goto(path.as_uri(), wait_until="load")
    return context, page, log


def _keep_artifact(path: Path) -> None:
    target = os.environ.get("PROFREPORT_ARTIFACTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)


def _check_report_page(browser, run: Path, tmp_path: Path) -> None:
    report = run / "report.html"
    assert report.stat().st_size < MAX_REPORT_BYTES
    record = load(run)
    context, page, log = _open(browser, report)
    try:
        assert log.console_errors == [] and log.page_errors == []
        assert log.requests == [report.as_uri()]  # the file itself, nothing else
        assert (
            page.title() == f"profreport: {record['model']['name']} on {record['device']['name']}"
        )
        charts = page.locator(".charts svg")
        assert charts.count() == 4  # kernels, bytes, latency, roofline
        roofline = page.locator("#chart-roofline svg").bounding_box()
        assert roofline is not None and roofline["width"] > 400
        assert page.locator("th", has_text="% of ceiling").count() == len(
            [m for m in record["modes"].values() if m["status"] == "ok"]
        )
        for i in range(4):
            box = charts.nth(i).bounding_box()
            assert box is not None and box["width"] > 200 and box["height"] > 100
        # The kernel chart's bar labels, in mode order, are the record's kernels per step.
        texts = page.eval_on_selector_all(
            ".charts figure:first-child svg text", "els => els.map(e => e.textContent.trim())"
        )
        ok = [n for n, m in record["modes"].items() if m["status"] == "ok"]
        labels = [f"{record['modes'][n]['kernels']['per_step']:g}" for n in ok]
        assert texts[: len(ok)] == ok  # x tick labels
        assert any(texts[i : i + len(labels)] == labels for i in range(len(texts))), texts
        for name in record["modes"]:
            assert page.locator(f"#mode-{name}").is_visible()
        # Why not fused: a folded section per mode that has entries, linked from its verdict;
        # one row per distinct entry, the repeats counted on it.
        derived = Run.from_json(derived_run(record, mode_analyses()).to_json())
        for name, mode in derived.modes.items():
            entries = mode.why_not_fused or ()
            assert page.locator(f'.verdicts a[href="#why-{name}"]').count() == (1 if entries else 0)
            if entries:
                assert page.locator(f"#why-{name}").is_visible()
                rows = why_rows(mode)
                assert sum(r["count"] for r in rows) == len(entries)
                assert page.locator(f"#why-{name} table tr").count() == 1 + len(rows)
        shot = tmp_path / f"report-{record['model']['name']}.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
        _keep_artifact(shot)
    finally:
        context.close()


def test_gated_report_loads_clean_in_chromium(browser, gated_run, tmp_path):
    _check_report_page(browser, gated_run, tmp_path)


def test_every_builtin_report_is_small_and_clean(browser, builtin_run, tmp_path):
    _check_report_page(browser, builtin_run, tmp_path)


def test_the_harness_sees_network_requests_and_console_errors(browser, tmp_path):
    page_file = tmp_path / "leaky.html"
    page_file.write_text(
        '<!DOCTYPE html><html><body><img src="https://example.com/x.png">'
        '<script>console.error("boom")</script></body></html>'
    )
    context, _page, log = _open(browser, page_file)
    context.close()
    assert "https://example.com/x.png" in log.requests
    assert "boom" in log.console_errors


def test_compare_page_loads_clean(browser, gated_run, tmp_path):
    from profreport.analysis.compare import Thresholds, compare_runs
    from profreport.record.model import Run
    from profreport.render.compare import render_html

    record = load(gated_run)
    page_file = tmp_path / "compare.html"
    # a run against itself at a 0% latency limit: no regression is called. Its latency change is
    # 0, so it is judged clean, unless the run's own noise guard fired (a busy machine): then it
    # is not judged, and the page says so instead of a plain ok (issue 46)
    cmp = compare_runs(Run.from_json(record), Run.from_json(record), Thresholds(0, 0.0, 0.0))
    page_file.write_text(render_html(cmp))
    context, page, log = _open(browser, page_file)
    try:
        assert log.console_errors == [] and log.page_errors == []
        assert log.requests == [page_file.as_uri()]
        assert not cmp.regressions
        outcome = page.locator("#outcome").inner_text()
        if cmp.inconclusive:
            assert outcome.startswith("no regression called; ")
            n = len(cmp.inconclusive)
            assert f"{n} latency result{'s' if n != 1 else ''} inconclusive" in outcome
        else:
            assert outcome == "no regression beyond the thresholds"
        assert page.locator("#modes tr").count() == 1 + len(record["modes"])
    finally:
        context.close()


FIRST_SCREEN = {"width": 1280, "height": 800}


def test_a_zoo_report_answers_on_the_first_screen_without_sideways_scroll(
    browser, gpt2_run, tmp_path
):
    record = load(gpt2_run)
    context = browser.new_context(offline=True, viewport=FIRST_SCREEN)
    page = context.new_page()
    try:
        page.goto((gpt2_run / "report.html").as_uri(), wait_until="load")
        # no page-level horizontal scroll, folded sections open or closed
        for opened in (False, True):
            if opened:
                page.eval_on_selector_all("details", "els => els.forEach(e => e.open = true)")
            width = page.evaluate("document.scrollingElement.scrollWidth")
            assert width <= page.evaluate("window.innerWidth"), (opened, width)
        # each mode's row, with kernels eager -> mode and its speedup, inside the first screen
        eager_kernels = record["modes"]["eager"]["kernels"]["per_step"]
        for name, mode in record["modes"].items():
            row = page.locator("table.headline tr", has=page.locator(f'a[href="#mode-{name}"]'))
            box = row.bounding_box()
            assert box is not None and box["y"] + box["height"] <= FIRST_SCREEN["height"], name
            cells = row.locator("td").all_inner_texts()
            kernels = mode["kernels"]["per_step"]
            expected = str(kernels) if name == "eager" else f"{eager_kernels} → {kernels}"
            assert cells[2].splitlines()[0] == expected
            speedup = cells[4].splitlines()[0]
            if name == "eager":
                assert speedup == "baseline"
            else:
                sp = mode["speedup_vs_eager"]
                assert speedup in ("inconclusive", f"{sp['median']:.2f}x")
                assert f"{sp['median']:.2f}x" in cells[4]  # the value, with its interval
        page.eval_on_selector_all("details", "els => els.forEach(e => e.open = false)")
        shot = tmp_path / "hf-gpt2-first-screen.png"
        page.screenshot(path=str(shot))  # the first screen only, as a reviewer sees it
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        _keep_artifact(shot)
    finally:
        context.close()


DECODE_POINT = Path(__file__).parent / "data" / "runs" / "llama-decode-sweep-cpu"


def test_a_decode_report_reads_per_token_at_1280_without_sideways_scroll(browser, tmp_path):
    """A recorded decode run (the zoo Llama at context 512, eager and compile) rendered again by
    `profreport render`: it loads clean, its per-token section is on the page with a row per
    timed mode, and nothing scrolls sideways at 1280 px, its folded sections open or closed."""
    import gzip
    import io

    from profreport import cli

    with gzip.open(DECODE_POINT / "context-512.run.json.gz", "rb") as f:
        (tmp_path / "run.json").write_bytes(f.read())
    assert cli.main(["render", str(tmp_path)], out=io.StringIO(), err=io.StringIO()) == 0
    record = load(tmp_path)
    report = tmp_path / "report.html"
    context, page, log = _open(browser, report)
    try:
        assert log.console_errors == [] and log.page_errors == []
        assert log.requests == [report.as_uri()]
        assert page.locator("#decode").is_visible()
        table = page.locator("#decode + table")
        assert table.is_visible()
        timed = [n for n, m in record["modes"].items() if m.get("latency_ms")]
        text = table.inner_text()
        assert len(timed) == 2 and all(name in text for name in timed), text
        for opened in (False, True):
            if opened:
                page.eval_on_selector_all("details", "els => els.forEach(e => e.open = true)")
            width = page.evaluate("document.scrollingElement.scrollWidth")
            assert width <= page.evaluate("window.innerWidth"), (opened, width)
        shot = tmp_path / "report-decode.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        _keep_artifact(shot)
    finally:
        context.close()
