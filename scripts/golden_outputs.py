"""Golden outputs: every rendered, compared, analysed and derived output of the checked-in run
records and traces, written into one folder, so that a refactor can show them byte-identical.

    scripts/golden write OUTDIR        # write the outputs and OUTDIR/MANIFEST (sha256 per file)
    scripts/golden diff OUTDIR OTHER   # added / removed / changed files; exit 1 if any differ

`write` finds every run record under tests/data by its schema (run.json, run.json.gz, any
*.json.gz holding a profreport.run/ document), copies tests/data into a scratch folder and works
there from a fixed working directory with relative paths (so labels that echo a path read the
same in every checkout), and writes, each through the code path the CLI or the library uses:

- render/<record>/: `profreport render` (report.html, summary.md) and cli.txt (exit code, output);
- resave/<record>/: `RunResult.save` (run.json, report.html, summary.md, kernels_<mode>.csv,
  all_modes.timeline.json; not the TensorBoard event file, whose bytes hold wall times);
- derived/<record>.json: `analysis.derive.derived_run` with `modes.mode_analyses()`, as JSON;
- compare/<base>__<head>.{md,html,json,cli.txt}: `profreport compare` of every ordered pair of
  records of one model, of the kernel_diff records (different models, --allow-different-models),
  and one pair of different models without the flag (refused: exit 2);
- analyze/<group>.{md,html,json,cli.txt}: `profreport analyze` of every trace, of each run's
  tensorboard folder and of A-vs-B pairs, in every format it offers;
- sweep/: two sweeps of the `simple` records (sweep.json, sweep.html, sweep.md, built by
  profreport.sweep.lifecycle at a fixed time) and their comparisons both ways;
- budget/<model>/: the kernel budget (expectation file) written from a model's first record and
  checked against each of its records (the check's lines, summary.md and report.html with it);
- help/: `--help` of profreport and of every command, `profreport models` and `modes` (the
  latter names the modes this machine can run: compare goldens made on one kind of machine).

Text that names OUTDIR is written with `$OUTDIR` in its place. Run it with the code to check on
PYTHONPATH (`PYTHONPATH=/path/to/checkout scripts/golden write OUT`): the data come from the
checkout this script is in, the code from wherever `import profreport` finds it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import permutations
from pathlib import Path
from typing import Any, TextIO

REPO = Path(__file__).resolve().parent.parent
DATA = Path("tests") / "data"  # relative to the scratch folder, which holds a copy
RUN_SCHEMA = '"profreport.run/'
TRACE_SUFFIXES = (".json", ".json.gz")
SWEEP_TIME = datetime(2026, 1, 1, tzinfo=timezone.utc)  # a sweep's folder name and created_utc
HELP_COLUMNS = "100"
SAVED = re.compile(
    r"run\.json|report\.html|summary\.md|kernels_.+\.csv|all_modes\.timeline\.json"
)  # argparse wraps --help to the terminal's width


@dataclass(frozen=True)
class Record:
    """One checked-in run record: its name in the outputs, its path in the scratch copy (always
    a plain run.json, beside its traces), and its model."""

    name: str
    path: Path
    model: str
    device: str


# ---------------------------------------------------------------- finding the inputs


def _read_head(path: Path, size: int = 400) -> bytes:
    if path.name.endswith(".gz"):
        with gzip.open(path) as f:
            return f.read(size)
    with path.open("rb") as f:
        return f.read(size)


def _json_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith(TRACE_SUFFIXES))


def _is_record(path: Path, schema: str = RUN_SCHEMA) -> bool:
    try:
        return schema in _read_head(path).decode("utf-8", "replace")
    except (OSError, EOFError, gzip.BadGzipFile):
        return False


def stage_records(data: Path) -> list[Record]:
    """Every run record under `data` (a scratch copy), each made a plain run.json: a gzipped
    X/run.json.gz becomes X/run.json (beside its traces), any other gzipped record N.json.gz
    (N.run.json.gz) the folder N/run.json. `profreport render` reads no gzip."""
    records = []
    for path in _json_files(data):
        if not _is_record(path):
            continue
        if path.name.endswith(".gz"):
            stem = re.sub(r"(\.run)?\.json\.gz$", "", path.name)
            target = path.parent / ("run.json" if stem == "run" else f"{stem}/run.json")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(gzip.decompress(path.read_bytes()))
        else:
            target = path
        doc = json.loads(target.read_text(encoding="utf-8"))
        rel = target.parent.relative_to(data).as_posix()
        name = rel.removeprefix("runs/").replace("/", "-")
        records.append(Record(name, target, doc["model"]["name"], doc["device"]["type"]))
    names = [r.name for r in records]
    if len(set(names)) != len(names):
        raise SystemExit(f"golden: two records share a name: {sorted(names)}")
    return sorted(records, key=lambda r: r.name)


def trace_groups(data: Path, records: Sequence[Record]) -> list[tuple[str, list[str]]]:
    """What `analyze` is run on: every trace file by itself, each run folder's tensorboard/
    folder, and A-vs-B pairs (the first the baseline)."""
    # neither a run record nor another profreport document (an analysis kept as a test's input)
    traces = [p for p in _json_files(data) if not _is_record(p, '"profreport.')]
    groups: list[tuple[str, list[str]]] = []
    for p in traces:  # a run's own traces are read through its folder, below
        if "tensorboard" not in p.parts:
            name = re.sub(r"\.json(\.gz)?$", "", p.relative_to(data).as_posix())
            groups.append((_slug(name.removeprefix("runs/")), [p.as_posix()]))
    for r in records:
        tb = r.path.parent / "tensorboard"
        if tb.is_dir() and any(tb.rglob("*.pt.trace.json*")):
            groups.append((f"folder-{r.name}", [tb.as_posix()]))
    by_label = {r.name: r for r in records}
    for label in ("h200-simple", "gated-residual-cpu"):  # eager against compile, one run each
        if label in by_label:
            tb = by_label[label].path.parent / "tensorboard"
            pair = [_first(tb / "eager"), _first(tb / "compile")]
            if all(pair):
                groups.append((f"pair-{label}-eager-compile", [str(p) for p in pair]))
    named = {p.name.split(".")[0]: p.as_posix() for p in traces}
    for a, b in (
        ("a100_alexnet_inference", "a100_torch_compile_triton"),
        ("norm_gelu_block", "gelu_norm_block"),
    ):
        if a in named and b in named:
            groups.append((f"pair-{a}-{b}", [named[a], named[b]]))
    return groups


def _first(folder: Path) -> Path | None:
    found = sorted(p for p in folder.glob("*") if p.name.endswith(TRACE_SUFFIXES))
    return found[0] if found else None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


# ---------------------------------------------------------------- running the CLI in-process


@dataclass
class Outputs:
    """The output folder; every write goes through it, so the manifest lists what was written."""

    root: Path

    def write(self, rel: str, content: str | bytes) -> None:
        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.replace(str(self.root), "$OUTDIR").encode("utf-8")
        target.write_bytes(content)

    def cli(self, rel: str, argv: Sequence[str], content: str | None = None) -> str:
        """Run `profreport argv` in-process; write `rel`.cli.txt (argv, exit code, stderr, and
        stdout unless `content` names the file it goes to instead). Returns stdout."""
        from profreport.cli import main

        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), out, err)
        lines = [f"argv: {' '.join(argv)}", f"exit: {code}", "--- stderr", err.getvalue()]
        if content is None:
            lines += ["--- stdout", out.getvalue()]
        elif out.getvalue() or code == 0:  # a refusal writes nothing on stdout: no empty file
            self.write(content, out.getvalue())
        self.write(f"{rel}.cli.txt", "\n".join(lines))
        return out.getvalue()

    def manifest(self) -> list[str]:
        lines = []
        for path in sorted(p for p in self.root.rglob("*") if p.is_file()):
            rel = path.relative_to(self.root).as_posix()
            if rel != "MANIFEST":
                lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {rel}")
        (self.root / "MANIFEST").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return lines


@contextlib.contextmanager
def _in(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


# ---------------------------------------------------------------- the outputs


def write_help(out: Outputs) -> None:
    from profreport.cli import COMMANDS, main

    for argv in [["--help"], *([c.name, "--help"] for c in COMMANDS)]:
        name = "profreport" if len(argv) == 1 else argv[0]
        text, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(text):  # argparse prints help to sys.stdout and exits
            try:
                code: object = main(argv, text, err)
            except SystemExit as exc:
                code = exc.code
        out.write(f"help/{name}.txt", f"exit: {code}\n{err.getvalue()}{text.getvalue()}")
    out.cli("help/models", ["models"])
    out.cli("help/modes", ["modes"])


def write_records(out: Outputs, records: Sequence[Record], scratch: Path) -> None:
    from profreport import record as run_record
    from profreport.analysis.derive import derived_run
    from profreport.api import RunResult
    from profreport.modes import mode_analyses

    for r in records:
        out.cli(
            f"render/{r.name}/render",
            ["render", str(r.path), "--out", str(out.root / "render" / r.name)],
        )
        derived = derived_run(run_record.load(r.path), mode_analyses())
        out.write(f"derived/{r.name}.json", run_record.dumps(derived.to_json()))
        # RunResult.save writes into the run folder: a copy of it, with its traces
        copy = scratch / "resave" / r.name
        shutil.copytree(r.path.parent, copy)
        RunResult.of_record(run_record.load(copy / "run.json"), copy).save()
        # what save writes, but the TensorBoard event file (its bytes hold wall times)
        for path in sorted(copy.iterdir()):
            if SAVED.fullmatch(path.name):
                out.write(f"resave/{r.name}/{path.name}", path.read_bytes())


def compare_pairs(records: Sequence[Record]) -> list[tuple[Record, Record, bool]]:
    """(base, head, allow different models): every ordered pair of one model; every ordered
    pair of the kernel_diff records, which are different models built to be compared; and one
    pair of different models without the flag, which compare refuses."""
    pairs = [(a, b, False) for a, b in permutations(records, 2) if a.model == b.model]
    kernel_diff = [r for r in records if r.name.startswith("kernel_diff-")]
    pairs += [(a, b, True) for a, b in permutations(kernel_diff, 2)]
    if len(kernel_diff) >= 2:
        pairs.append((kernel_diff[0], kernel_diff[1], False))
    return pairs


def write_compares(out: Outputs, records: Sequence[Record]) -> int:
    from profreport.render.registry import COMPARISON, formats

    pairs = compare_pairs(records)
    for base, head, allow in pairs:
        stem = f"compare/{base.name}__{head.name}{'' if allow or base.model == head.model else '.refused'}"
        for fmt in formats(COMPARISON):
            argv = ["compare", str(base.path), str(head.path), "--format", fmt]
            out.cli(
                f"{stem}.{fmt}",
                argv + (["--allow-different-models"] if allow else []),
                f"{stem}.{fmt}",
            )
    # the gates, on one pair of each model that has two records
    for base, head, allow in pairs:
        if not allow and base.model == head.model and base.device == head.device:
            gated = f"compare-gated/{base.name}__{head.name}"
            gates = ["--max-kernel-increase", "0", "--max-bytes-increase", "0"]
            gates += ["--max-latency-regression", "0", "--max-peak-memory-increase", "0"]
            gates += ["--fail-on-new-kernel", "."]
            out.cli(gated, ["compare", str(base.path), str(head.path), *gates], f"{gated}.md")
    return len(pairs)


def write_analyses(out: Outputs, groups: Sequence[tuple[str, list[str]]]) -> None:
    from profreport.render.registry import ANALYSIS, formats

    for name, paths in groups:
        for fmt in sorted(formats(ANALYSIS)):
            stem = f"analyze/{name}.{fmt}"
            out.cli(stem, ["analyze", *paths, "--format", fmt], stem)
    if groups:  # the options that change what is counted or how times are rounded
        name, paths = groups[0]
        for extra in (["--definition", "cpu"], ["--hta-rounding"], ["--top", "3"]):
            stem = f"analyze-options/{name}{'_'.join(extra).replace('--', '-')}.md"
            out.cli(stem, ["analyze", *paths, *extra], stem)


def write_sweeps(out: Outputs, records: Sequence[Record], scratch: Path) -> int:
    """Two sweeps of the `simple` model over two batch sizes, whose points are copies of the
    checked-in `simple` records on the CPU (in the second the first point failed and the second
    takes another record), rendered; then compared both ways."""
    from profreport.sweep.grid import checked_spec
    from profreport.sweep.lifecycle import SweepRun

    simple = [r for r in records if r.model == "simple" and r.device == "cpu"]
    if len(simple) < 3:
        return 0
    spec = checked_spec({"models": ["simple"], "batch_sizes": [1, 2]}, "golden")
    roots = []
    for label, picks in (("a", (simple[0], simple[1])), ("b", (None, simple[2]))):
        sweep_run = SweepRun.new(spec, "local", scratch / "sweeps" / label, now=SWEEP_TIME)
        for point, pick in zip(spec.points(), picks, strict=True):
            if pick is None:
                ended = dataclasses.replace(
                    point, status="failed", error="generate exited 1", exit_code=1, duration_s=2.0
                )
            else:
                run = sweep_run.root / "points" / point.id / "run"
                shutil.copytree(pick.path.parent, run)
                rel = run.relative_to(sweep_run.root).as_posix()
                ended = dataclasses.replace(
                    point, status="ok", run=rel, duration_s=1.0, worker="golden"
                )
            sweep_run.record(ended)
        sweep_run.finish()
        for name in ("sweep.json", "sweep.html", "sweep.md"):
            out.write(f"sweep/{label}/{name}", (sweep_run.root / name).read_bytes())
        # compare takes two sweep.json files (a folder is read as a run folder)
        roots.append((sweep_run.root / "sweep.json").relative_to(scratch).as_posix())
    from profreport.render.registry import SWEEP_COMPARISON, formats

    for base, head, label in ((roots[0], roots[1], "a__b"), (roots[1], roots[0], "b__a")):
        for fmt in formats(SWEEP_COMPARISON):
            stem = f"sweep/compare-{label}.{fmt}"
            out.cli(
                stem, ["compare", base, head, "--format", fmt, "--max-kernel-increase", "0"], stem
            )
    return 2


def write_budgets(out: Outputs, records: Sequence[Record]) -> None:
    """Per model with two records or more: the kernel budget written from its records, and
    each record checked against it (the check's lines, and the reports that open with it)."""
    from profreport import record as run_record
    from profreport.analysis.budget import check_budget
    from profreport.analysis.budget_file import expectation_of
    from profreport.analysis.derive import derived_run
    from profreport.modes import mode_analyses
    from profreport.record import expectation
    from profreport.render import html, markdown
    from profreport.render.budget import budget_text, budget_view

    models: dict[str, list[Record]] = {}
    for r in records:
        models.setdefault(r.model, []).append(r)
    for model, group in models.items():
        if len(group) < 2:
            continue
        runs = [derived_run(run_record.load(r.path), mode_analyses()) for r in group]
        folder = f"budget/{_slug(model)}"
        # the budget as --update-expect writes it: from the first run, then the first run of
        # each other device kind added (a run of a kind it has no section for is not checked)
        written = None
        for run in runs:
            if written is None or run.device.type not in written.devices:
                written = expectation_of(run, written)
        assert written is not None
        text = expectation.dumps(written)
        out.write(f"{folder}/expect.json", text)
        source = f"{folder}/expect.json"
        budget = expectation.parse(text, source)
        for n, (r, run) in enumerate(zip(group, runs, strict=True)):
            check = check_budget(budget, run, source)
            out.write(
                f"{folder}/{r.name}.check.txt", "\n".join(budget_text(budget_view(check))) + "\n"
            )
            out.write(f"{folder}/{r.name}.summary.md", markdown.render(run, budget=check))
            if n < 2:  # the page's budget block: the charts make a page cost ~2 s
                out.write(f"{folder}/{r.name}.report.html", html.render(run, budget=check))


STEPS = ("help", "records", "compare", "analyze", "sweep", "budget")


def write(
    outdir: Path,
    only: Callable[[Record], bool] | None = None,
    steps: Sequence[str] = STEPS,
    log: TextIO = sys.stderr,
) -> list[str]:
    """Write the golden outputs into `outdir` (missing or empty) and its MANIFEST; returns the
    manifest's lines. `only` picks the records and `steps` the kinds of output (the harness's
    own test takes a few)."""
    import profreport

    if outdir.exists() and (not outdir.is_dir() or any(outdir.iterdir())):
        raise SystemExit(f"golden: {outdir} exists and is not an empty folder")
    outdir.mkdir(parents=True, exist_ok=True)
    out = Outputs(outdir.resolve())
    started = time.monotonic()
    print(f"golden: profreport from {Path(profreport.__file__).parent}", file=log)
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp, _help_width():
        scratch = Path(tmp)
        shutil.copytree(REPO / DATA, scratch / DATA)
        with _in(scratch):
            records = [r for r in stage_records(DATA) if only is None or only(r)]
            groups = trace_groups(DATA, records)
            run: dict[str, Callable[[], object]] = {
                "help": lambda: write_help(out),
                "records": lambda: write_records(out, records, scratch),
                "compare": lambda: write_compares(out, records),
                "analyze": lambda: write_analyses(out, groups),
                "sweep": lambda: write_sweeps(out, records, scratch),
                "budget": lambda: write_budgets(out, records),
            }
            for name in steps:
                t0 = time.monotonic()
                result = run[name]()
                more = f" ({result})" if result is not None else ""
                print(f"golden: {name}{more}: {time.monotonic() - t0:.1f} s", file=log)
    lines = out.manifest()
    print(
        f"golden: {len(records)} records, {len(groups)} analyze groups, {len(lines)} files "
        f"in {time.monotonic() - started:.1f} s: {outdir}",
        file=log,
    )
    return lines


@contextlib.contextmanager
def _help_width() -> Iterator[None]:
    """argparse wraps --help to the terminal's width, read from COLUMNS first."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


# ---------------------------------------------------------------- comparing two output folders


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}


def diff(a: Path, b: Path, out: Any = sys.stdout, context_lines: int = 12) -> int:
    """Print the files only in `a`, only in `b`, and those that differ (with the first lines
    that differ, for text); 0 when the two folders hold the same bytes, 1 otherwise."""
    for root in (a, b):
        if not root.is_dir():
            raise SystemExit(f"golden: {root} is not a folder")
    fa, fb = _files(a), _files(b)
    removed = sorted(set(fa) - set(fb))
    added = sorted(set(fb) - set(fa))
    changed = sorted(
        n for n in set(fa) & set(fb) if n != "MANIFEST" and fa[n].read_bytes() != fb[n].read_bytes()
    )
    for name in removed:
        print(f"removed: {name}", file=out)
    for name in added:
        print(f"added: {name}", file=out)
    for name in changed:
        print(f"changed: {name}", file=out)
        try:
            old = fa[name].read_text(encoding="utf-8").splitlines()
            new = fb[name].read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            print("  (binary)", file=out)
            continue
        shown = list(difflib.unified_diff(old, new, f"a/{name}", f"b/{name}", n=1, lineterm=""))
        for line in shown[:context_lines]:
            print(f"  {line[:200]}", file=out)
        if len(shown) > context_lines:
            print(f"  ... ({len(shown) - context_lines} more diff lines)", file=out)
    total = len(removed) + len(added) + len(changed)
    same = len(set(fa) & set(fb)) - len(changed) - int("MANIFEST" in fa and "MANIFEST" in fb)
    print(
        f"golden diff: {same} same, {len(changed)} changed, {len(removed)} removed, "
        f"{len(added)} added",
        file=out,
    )
    return 1 if total else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/golden", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write every golden output into OUTDIR")
    w.add_argument("outdir", type=Path)
    d = sub.add_parser("diff", help="compare two output folders; exit 1 if they differ")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "write":
        write(args.outdir)
        return 0
    return diff(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
