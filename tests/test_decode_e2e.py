"""The decode workload end to end on CPU, three LM architectures (Llama from the zoo, Mistral with
a sliding window shorter than its prompt, Mixtral's mixture of experts: tests/data/models) in the
default decode modes: every mode ok with eager's greedy tokens, eager's kernels and bytes per
token against the tests' own dispatcher count of one eager decode step
(tests/independent_decode.py), the greedy tokens against the model recomputed without a cache,
and compare, --expect and render on a decode run."""

import json
from pathlib import Path

import pytest
import torch

from profreport.cli import main
from profreport.models import decode_loaded, load_model
from tests.conftest import FAST, run_dir_in
from tests.independent_decode import count_step

LMS = Path(__file__).parent / "data" / "models" / "decode_lms.py"
ARCHS = {
    "llama": ("--model", "hf:llama", "--layers", "1", "--context", "32"),
    "mistral-sliding": ("--model", f"{LMS}:mistral"),
    "mixtral-moe": ("--model", f"{LMS}:mixtral"),
}
# The sliding-window and MoE models (one narrow layer each) check their architecture's decode
# step; their timing needs only to finish: the latency budget is short, the checks timing-free.
TIMING = {"llama": FAST, "mistral-sliding": [*FAST, "--max-time", "3"]}
TIMING["mixtral-moe"] = TIMING["mistral-sliding"]


@pytest.fixture(scope="module", params=list(ARCHS))
def decode_run(request, tmp_path_factory):
    """One generate run per architecture in the default decode modes (one export each), shared
    by every test of the module."""
    args, out = ARCHS[request.param], tmp_path_factory.mktemp("decode")
    flags = ["--workload", "decode", "--out", str(out), *TIMING[request.param]]
    assert main(["generate", *args, *flags]) == 0
    run_dir = run_dir_in(out)
    return args, run_dir, json.loads((run_dir / "run.json").read_text())


def _loaded(args):
    spec = args[1]
    sized = {"layers": 1, "seq_len": 32} if spec.startswith("hf:") else {}
    lm = load_model(spec, torch.device("cpu"), torch.float32, workload="decode", **sized)
    return decode_loaded(lm)  # the step, built as the capture builds it


@pytest.mark.slow
def test_every_default_mode_runs_and_decodes_eagers_tokens(decode_run):
    _, run_dir, rec = decode_run
    assert list(rec["modes"]) == ["eager", "compile", "export"]
    assert {m["status"] for m in rec["modes"].values()} == {"ok"}
    decode = rec["model"]["decode"]
    assert rec["model"]["workload"] == "decode"
    assert len(decode["greedy_tokens"][0]) == 16
    for name in ("compile", "export"):
        check = rec["modes"][name]["output_check"]
        assert check["greedy_steps"] == 16 and check["greedy_equal"] is True, name
    summary = (run_dir / "summary.md").read_text()
    # the decode headline comes first, before the run's mode table
    assert summary.index("#### Decode, per token") < summary.index("| mode | status |")
    assert f"at position {decode['position']}" in summary


@pytest.mark.slow
def test_eager_per_token_counts_equal_an_independent_dispatcher_count(decode_run):
    args, _, rec = decode_run
    model = _loaded(args)
    counted = count_step(model.module, model.example_inputs)
    eager = rec["modes"]["eager"]
    assert eager["kernels"]["per_step"] == counted.profiled_kernels
    modeled = eager["bytes"]["read"] + eager["bytes"]["written"]
    independent = counted.read + counted.written
    assert abs(modeled - independent) <= 0.01 * independent
    # the record's split sums within the modeled total, the cache's share sized from its shapes
    decode = rec["model"]["decode"]
    assert decode["total_bytes"] == modeled
    assert decode["kv_read_bytes"] == decode["kv_cache_bytes"]  # a static cache is read whole
    parts = decode["weight_bytes"] + decode["kv_read_bytes"] + decode["cache_written_bytes"]
    assert parts < decode["total_bytes"]


@pytest.mark.slow
def test_greedy_tokens_equal_the_model_recomputed_without_a_cache(decode_run):
    args, _, rec = decode_run
    model = _loaded(args)
    step, (first, position) = model.module, model.example_inputs
    # the prompt is the cache's first `context` slots' source: rebuild it from the loader
    torch.manual_seed(0)
    spec = args[1]
    if spec.startswith("hf:"):
        from profreport.zoo import ZOO, ZooSize, build_zoo_model

        _, (prompt,) = build_zoo_model(ZOO["llama"], ZooSize(1, 1, 32), causal_lm=True)
    else:
        from profreport.models import _import_factory

        _, (prompt,) = _import_factory(spec)[1]()
    seq, tokens = torch.cat([prompt, first], 1), []
    with torch.no_grad():
        for _ in range(16):
            nxt = step.lm(input_ids=seq, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(int(nxt))
            seq = torch.cat([seq, nxt], 1)
    assert tokens == rec["model"]["decode"]["greedy_tokens"][0]
    assert int(position) == rec["model"]["decode"]["position"] == prompt.shape[1]


@pytest.mark.slow
def test_compare_expect_and_render_work_on_a_decode_run(decode_run, tmp_path):
    args, run_dir, _ = decode_run
    if args[1] != "hf:llama":
        pytest.skip("once is enough")
    assert main(["compare", str(run_dir), str(run_dir), "--out", str(tmp_path / "cmp")]) == 0
    assert main(["render", str(run_dir / "run.json"), "--out", str(tmp_path / "r")]) == 0
    assert "Decode, per token" in (tmp_path / "r" / "report.html").read_text()
    budget = tmp_path / "budget.toml"
    common = [*args, "--workload", "decode", "--modes", "eager", *FAST]
    assert main(["generate", *common, "--update-expect", str(budget), "--out", str(tmp_path)]) == 0
    assert main(["generate", *common, "--expect", str(budget), "--out", str(tmp_path / "e")]) == 0


@pytest.mark.slow
def test_a_model_that_cannot_decode_is_one_line_and_exit_2(tmp_path, capsys):
    args = ["--model", f"{LMS}:encoder", "--workload", "decode", "--out", str(tmp_path)]
    code = main(["generate", *args, *FAST])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "decode needs a transformers causal LM" in err[0] and "BertModel" in err[0]


FIXTURE_TEST = """
import sys

import torch

sys.path.insert(0, {folder!r})
from decode_lms import mixtral


def test_decode_budget(profreport_expect):
    torch.manual_seed(0)
    model, prompt = mixtral()
    profreport_expect(model, prompt, modes=("eager",), device="cpu", workload="decode")
"""


@pytest.mark.slow
def test_the_kernel_budget_fixture_takes_a_decode_step(tmp_path):
    from tests.test_budget_e2e import _pytest

    (tmp_path / "test_block.py").write_text(FIXTURE_TEST.format(folder=str(LMS.parent)))
    written = _pytest(tmp_path, "--profreport-update")
    assert written.returncode == 0, written.stdout
    snapshot = tmp_path / "__profreport__" / "test_decode_budget.json"
    assert '"aten::index_copy_"' in snapshot.read_text()  # the cache update, one a layer
    again = _pytest(tmp_path)
    assert again.returncode == 0, again.stdout
