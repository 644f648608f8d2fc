"""The decode workload's pure parts: the --workload axis, the greedy check, the per-token table
(floor, achieved fraction, overhead-bound words) and the record's decode fields, old records
still read."""

import pytest
import torch

from profreport.analysis.decode_tokens import decode_tokens
from profreport.decode import BuiltStep, greedy_check, parse_workloads
from profreport.record.model import (
    Bytes,
    Ceiling,
    Ceilings,
    DecodeInfo,
    InputSpec,
    KernelCounts,
    Latency,
    MedianStep,
    ModelInfo,
    OkMode,
    Run,
    Speedup,
    StepTime,
)
from profreport.render.decode_view import decode_view
from profreport.runner import GenerateRequest

INFO = DecodeInfo(
    context=128,
    position=128,
    cache_len=144,
    kv_cache_bytes=1_000_000,
    greedy_tokens=((5, 6, 7, 8),),
    weight_bytes=8_000_000,
    kv_read_bytes=1_000_000,
    cache_written_bytes=1_000,
    total_bytes=9_500_000,
)


def test_workloads_parse_in_order_and_refuse_the_rest():
    assert parse_workloads("decode") == ("decode",)
    assert parse_workloads("prefill, decode") == ("prefill", "decode")
    for bad in ("", "decod", "decode,decode", "prefill,train"):
        with pytest.raises(ValueError, match="--workload takes"):
            parse_workloads(bad)


def test_default_decode_modes_offer_cuda_graphs_on_cuda_only():
    decode = GenerateRequest(workload="decode")
    assert decode.options("cpu").modes == ("eager", "compile", "export")
    assert decode.options("cuda").modes == ("eager", "compile", "compile-cudagraphs", "export")
    assert decode.options("mps").modes == decode.options("cpu").modes  # any other device: CPU's
    assert GenerateRequest(workload="decode", modes=("eager",)).options().modes == ("eager",)
    assert "export" not in GenerateRequest().options().modes  # prefill keeps its defaults


def _stepper(tokens):
    """A step function that answers `tokens` in order, as logits [B, 1, vocab]."""
    answers = iter(tokens)

    def step(token, position):
        logits = torch.zeros(1, 1, 10)
        logits[0, 0, next(answers)] = 1.0
        return logits

    return step


def test_greedy_check_finds_the_first_step_that_differs():
    inputs = (torch.tensor([[1]]), torch.tensor([128]))
    built = BuiltStep(context=128, cache_len=144, kv_cache_bytes=0, greedy_tokens=((5, 6, 7, 8),))
    same = greedy_check(_stepper([5, 6, 7, 8]), inputs, built)
    assert same == {"greedy_steps": 4, "greedy_equal": True}
    differs = greedy_check(_stepper([5, 6, 9, 8]), inputs, built)
    assert differs["greedy_equal"] is False and differs["greedy_first_difference"] == 2


def _mode(kernels, latency_ms, wall_us, work_us, speedup=None):
    step = StepTime(wall_us=wall_us, op_us=work_us, dispatched_ops=kernels)
    mode = OkMode(
        kernels=KernelCounts(per_step=kernels, launches=0),
        bytes=Bytes(read=9_000_000, written=500_000, source="modeled", method="m"),
        latency_ms=Latency(median=latency_ms, p10=latency_ms, p90=latency_ms),
        median_step=MedianStep(step=step),
    )
    if speedup is not None:
        mode = mode.adding(speedup_vs_eager=Speedup(median=speedup, ci95=(speedup - 0.1, speedup)))
    return mode


def _run(bandwidth=1e10):
    ceilings = Ceilings(memory_bandwidth=Ceiling(value=bandwidth, unit="B/s"))
    return Run(
        schema=Run.SCHEMA,
        model=ModelInfo(
            name="lm-decode",
            inputs=(InputSpec(shape=(1, 1), dtype="int64"), InputSpec(shape=(1,), dtype="int64")),
            workload="decode",
            decode=INFO,
        ),
        modes={
            "eager": _mode(100, 4.0, 4000.0, 1000.0),  # 75% host overhead: overhead-bound
            "compile": _mode(30, 1.8, 1800.0, 1620.0, speedup=2.2),  # 10%: bound by kernels
        },
        ceilings=ceilings,
    )


def test_per_token_table_against_the_bandwidth_floor():
    t = decode_tokens(_run())
    assert t is not None and t.batch == 1
    assert t.floor_bytes == 9_001_000
    assert t.floor_ms == pytest.approx(9_001_000 / 1e10 * 1000)
    eager, compiled = t.rows
    assert eager.tokens_per_s == pytest.approx(250.0)
    assert eager.achieved == pytest.approx(t.floor_ms / 4.0)
    assert eager.host_share == pytest.approx(0.75)
    assert compiled.host_share == pytest.approx(0.1)
    assert (compiled.speedup, compiled.speedup_high) == (2.2, 2.2)
    assert compiled.speedup_low == pytest.approx(2.1)
    words = " ".join(t.words)
    assert "eager: decode is overhead-bound (75% of its profiled step outside kernels" in words
    assert "compile: decode is bound by its kernels (10% of its" in words
    assert "compile removed 70 of eager's 100 kernels a token" in words


def test_no_bandwidth_no_floor_and_a_prefill_run_has_no_decode_section():
    t = decode_tokens(_run().without("ceilings"))
    assert t is not None and t.floor_ms is None and t.rows[0].achieved is None
    prefill = _run()
    prefill = prefill.adding(model=prefill.model.without("workload", "decode"))
    assert decode_tokens(prefill) is None and decode_view(prefill) is None


def test_decode_view_states_the_positions_and_units():
    run = _run()
    assert decode_view(run) is None  # a finding the renderer shows, never computes
    view = decode_view(run.adding(decode_tokens=decode_tokens(run)))
    assert view is not None
    assert view["rows"][0][:4] == ["eager", "100", "9.06 MiB", "4.000 ms"]
    assert view["rows"][1][4] == "2.20x (2.10-2.20)"
    assert "at position 128" in view["method"] and "positions 128-131" in view["method"]
    assert "bandwidth floor 900.1 µs" in view["floor"]


def test_the_record_round_trips_decode_fields_and_old_records_have_none():
    run = _run()
    again = Run.from_json(run.to_json())
    assert again.model.decode == INFO and again.model.workload == "decode"
    old = run.to_json()
    old["model"].pop("decode")
    old["model"].pop("workload")
    assert Run.from_json(old).model.decode is None
    assert "decode" not in Run.from_json(old).to_json()["model"]


def test_the_time_breakdowns_bound_decides_where_it_was_derived():
    from profreport.record.model import TimeFindings

    run = _run()
    eager = run.modes["eager"].adding(time_findings=TimeFindings(bound="device-bound"))
    compiled = run.modes["compile"].adding(time_findings=TimeFindings(bound="host-bound"))
    words = " ".join(decode_tokens(run.adding(modes={"eager": eager, "compile": compiled})).words)
    assert "eager: decode is bound by its kernels (the time breakdown's device-bound: 75%" in words
    assert "compile: decode is overhead-bound (the time breakdown's host-bound: 10%" in words


def test_a_model_that_cannot_decode_is_bad_input_and_leaves_nothing(tmp_path, capsys):
    from profreport.cli import main

    out = tmp_path / "out" / "deeper"  # made by staging, removed with it
    code = main(["generate", "--model", "simple", "--workload", "decode", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("error: simple: decode needs a transformers causal LM")
    assert "Sequential is not one" in err[0]
    assert not (tmp_path / "out").exists()


def test_ab_names_the_side_whose_model_cannot_decode(tmp_path, capsys):
    from profreport.cli import main

    code = main(["ab", "simple", "simple", "--workload", "decode", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("error: base: simple: decode needs a transformers causal LM")
    assert list(tmp_path.iterdir()) == []
