"""Measured ceilings (capture/ceilings.py) and peak memory (capture/peak_memory.py): the pure
parts on fixed numbers, the cache on a temporary folder, and one real CPU measurement."""

import dataclasses
import json

import pytest
import torch

from profreport.capture import ceilings
from profreport.capture.peak_memory import measure_peak, peak_from_memory_events
from profreport.record.model import Ceiling, Ceilings, Device, MachineLoad

MiB = 2**20
CPU = Device(type="cpu", name="Test CPU")


def test_rate_summary_best_is_the_ceiling_median_and_worst_its_spread():
    s = ceilings.rate_summary(100.0, [1.0, 0.5, 2.0, 0.8, 0.0])
    assert s.value == 200.0  # the fastest sample
    assert s.median == pytest.approx(112.5)  # of 200, 125, 100, 50
    assert s.worst == 50.0
    assert s.samples == 4  # a sample of no measurable time is dropped
    assert s.spread_pct == pytest.approx((200 - 112.5) / 200 * 100)
    with pytest.raises(ValueError):
        ceilings.rate_summary(1.0, [0.0])


def test_copy_sizes_follow_the_caches_within_bounds():
    assert ceilings.memory_copy_bytes(32 * MiB, "cpu") == (
        128 * MiB,
        "4 x the last-level cache (32.0 MiB), at least 64 MiB",
    )
    assert ceilings.memory_copy_bytes(64 * MiB, "cpu")[0] == 256 * MiB
    assert ceilings.memory_copy_bytes(4 * MiB, "cpu")[0] == 64 * MiB
    size, why = ceilings.memory_copy_bytes(480 * MiB, "cpu")
    assert size == 256 * MiB and "capped at 256 MiB" in why and "1920 MiB" in why
    assert ceilings.memory_copy_bytes(480 * MiB, "cuda")[0] == 1024 * MiB
    assert ceilings.memory_copy_bytes(50 * MiB, "cuda")[0] == 200 * MiB
    assert ceilings.memory_copy_bytes(None, "cpu")[0] == 256 * MiB
    assert ceilings.cache_copy_bytes(2 * MiB, 2) == MiB
    assert ceilings.cache_copy_bytes(None, 4) == MiB
    assert ceilings.cache_copy_bytes(128 * 1024, 1) == 64 * 1024


def test_samples_size_each_sample_to_the_target_time():
    seen = []

    def fake_seconds(op, calls):  # each call "takes" 1 ms
        seen.append(calls)
        return calls * 1e-3

    per_call, calls = ceilings._samples(lambda: None, fake_seconds, sample_s=0.01)
    assert calls == 11 and seen[:3] == [1, 1, 1] and seen[3:] == [11] * ceilings.SAMPLES
    assert per_call == pytest.approx([1e-3] * ceilings.SAMPLES)


def test_cache_is_keyed_by_machine_and_dtype_and_remeasured_on_request(tmp_path, monkeypatch):
    calls = []

    def fake_measure(device, dtype, threads):
        calls.append(str(dtype))
        return Ceilings(source="measured", memory_bandwidth=Ceiling(value=1.0 + len(calls)))

    monkeypatch.setattr(ceilings, "measure_quietly", fake_measure)
    cpu = torch.device("cpu")
    first = ceilings.ceilings_for(cpu, CPU, torch.float32, folder=tmp_path)
    assert first.cached is False and calls == ["torch.float32"]
    assert first.key.device_name == "Test CPU" and first.key.dtype == "float32"
    again = ceilings.ceilings_for(cpu, CPU, torch.float32, folder=tmp_path)
    assert again.cached is True and again.memory_bandwidth == first.memory_bandwidth
    assert len(calls) == 1
    ceilings.ceilings_for(cpu, CPU, torch.bfloat16, folder=tmp_path)  # another dtype
    ceilings.ceilings_for(cpu, Device(type="cpu", name="Other"), torch.float32, folder=tmp_path)
    assert len(calls) == 3
    fresh = ceilings.ceilings_for(cpu, CPU, torch.float32, folder=tmp_path, remeasure=True)
    assert fresh.cached is False and len(calls) == 4
    assert ceilings.ceilings_for(cpu, CPU, torch.float32, folder=tmp_path).cached is True
    # a damaged cache file is measured again, not trusted
    (path,) = [p for p in tmp_path.iterdir() if "float32" in p.name and p.read_text().count("Test")]
    path.write_text("{not json")
    assert ceilings.ceilings_for(cpu, CPU, torch.float32, folder=tmp_path).cached is False
    assert json.loads(path.read_text())["key"]["device_name"] == "Test CPU"


def test_a_loaded_machine_is_measured_again_until_quiet_keeping_the_best(tmp_path, monkeypatch):
    from contextlib import contextmanager

    from profreport.capture import noise

    # other processes' CPU share during each attempt: three loaded ones in the first run, a
    # quiet one in the second
    shares = iter([0.5, 0.3, 0.4, 0.05])
    rates = iter([5.0, 9.0, 7.0, 6.0])

    @contextmanager
    def fake_watch():
        watched = noise.LoadWatch()
        yield watched
        watched.load = MachineLoad(other_busy_share=next(shares))

    def fake_measure(device, dtype, threads):
        r = next(rates)
        return Ceilings(memory_bandwidth=Ceiling(value=r), matmul_rate=Ceiling(value=10 - r))

    monkeypatch.setattr(noise, "watch", fake_watch)
    monkeypatch.setattr(ceilings, "measure", fake_measure)
    monkeypatch.setattr(ceilings.time, "sleep", lambda s: None)
    cpu = torch.device("cpu")
    found = ceilings.ceilings_for(cpu, CPU, torch.float32, folder=tmp_path)
    assert found.attempts == ceilings.ATTEMPTS
    assert found.memory_bandwidth.value == 9.0  # the best attempt of each ceiling
    assert found.matmul_rate.value == 5.0
    assert found.other_busy_share == 0.3  # the quietest attempt
    assert ceilings.under_load(found) and found.cached is False
    # the next run does not trust it: measures again (quiet now) and keeps the best of all
    second = ceilings.ceilings_for(cpu, CPU, torch.float32, folder=tmp_path)
    assert second.cached is False and second.attempts == 2 * ceilings.ATTEMPTS
    assert second.memory_bandwidth.value == 9.0 and second.matmul_rate.value == 5.0
    assert not ceilings.under_load(second)
    third = ceilings.ceilings_for(cpu, CPU, torch.float32, folder=tmp_path)
    assert third.cached is True and third.memory_bandwidth.value == 9.0
    # a machine that is never quiet: the best of SETTLED_ATTEMPTS attempts is trusted
    loaded = Ceilings(other_busy_share=0.5)
    assert ceilings.settled(dataclasses.replace(loaded, attempts=ceilings.SETTLED_ATTEMPTS))
    assert not ceilings.settled(dataclasses.replace(loaded, attempts=3))


def test_no_attempt_is_refused_rather_than_returning_nothing():
    # it was an assert: under `python -O` the caller got None for its ceilings
    with pytest.raises(ValueError, match="needs at least one attempt, not 0"):
        ceilings.measure_quietly(torch.device("cpu"), torch.float32, 1, attempts=0)


@pytest.mark.slow
def test_a_real_cpu_measurement_is_complete_and_sane(tmp_path):
    found = ceilings.ceilings_for(torch.device("cpu"), CPU, torch.float32, folder=tmp_path)
    assert found.source == "measured" and found.cached is False
    for key, unit in (
        ("memory_bandwidth", "B/s"),
        ("cache_bandwidth", "B/s"),
        ("matmul_rate", "FLOP/s"),
    ):
        c = getattr(found, key)
        assert c.unit == unit
        assert c.value >= c.median >= c.worst > 0
        assert c.samples == (
            ceilings.MEMORY_SAMPLES if key == "memory_bandwidth" else ceilings.SAMPLES
        )
        assert c.method
    assert found.memory_bandwidth.bytes_per_call == 2 * found.memory_bandwidth.source_bytes
    assert found.matmul_rate.flops_per_call == 2 * 1024**3
    threads = torch.get_num_threads()
    ways = {f"Tensor.copy_, {threads} thread(s)", "Tensor.copy_, 1 thread(s)"}
    ways.add("libc memmove, 1 thread")
    for key in ("memory_bandwidth", "cache_bandwidth"):  # the best of the ways to copy
        c = getattr(found, key)
        assert {c.variant, *c.other_variants} == ways
        assert all(v <= c.value for v in c.other_variants.values())
        assert f"(here {c.variant})" in c.method
    assert f"{threads} intra-op thread(s)" in found.matmul_rate.method
    # a machine moves well under 10 TB/s per core pair and computes under 100 TFLOP/s on CPU
    assert found.memory_bandwidth.value < 1e13 and found.matmul_rate.value < 1e14


def _mem(ts, total, delta):
    return {"name": "[memory]", "ts": ts, "args": {"Total Allocated": total, "Bytes": delta}}


def test_peak_from_memory_events_counts_from_the_first_events_level():
    events = [
        _mem(3, 1500, 500),
        _mem(1, 1200, 200),  # out of order in the file: sorted by time
        _mem(4, 700, -800),
        {"name": "aten::add", "ts": 2},
    ]
    assert peak_from_memory_events(events) == 1500 - 1000
    assert peak_from_memory_events([{"name": "aten::add"}]) is None


def test_cpu_peak_of_one_call_is_the_bytes_alive_at_once():
    x = torch.ones(256, 1024)  # 1 MiB, allocated before the call: not counted

    def fn(t):
        return (t * 2) + 1  # the product (1 MiB) is alive while the sum (1 MiB) is made

    with torch.no_grad():
        peak = measure_peak(fn, (x,), torch.device("cpu"), lambda: None)
    # plus the few bytes of the wrapped Python scalars 2 and 1
    assert 2 * MiB <= peak.bytes < 2 * MiB + 64
    assert "profile_memory=True" in peak.source
    assert "not included" in peak.scope


def test_cuda_path_sizes_and_timer_without_a_gpu(monkeypatch):
    """The CUDA branch of `measure` (never run on a GPU here): copy sizes from the device's L2,
    one shared L2 rather than one per CPU thread, the 8192 matmul, and CUDA-event seconds."""
    calls = {}

    def fake_copy(device, dtype, source_bytes, seconds, sample_s, samples=ceilings.SAMPLES):
        calls.setdefault("copy", []).append((source_bytes, samples, seconds))
        return Ceiling(value=1.0, source_bytes=source_bytes)

    def fake_matmul(device, dtype, n, seconds, sample_s):
        calls["matmul"] = n
        return Ceiling(value=1.0, n=n)

    monkeypatch.setattr(ceilings, "_cache_sizes", lambda d: (50 * MiB, 50 * MiB, "props"))
    monkeypatch.setattr(ceilings, "_copy", fake_copy)
    monkeypatch.setattr(ceilings, "_matmul", fake_matmul)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    found = ceilings.measure(torch.device("cuda"), torch.float16, threads=8)
    (mem, mem_samples, _), (cache, _, _) = calls["copy"]
    assert mem == 200 * MiB and mem_samples == ceilings.MEMORY_SAMPLES
    assert cache == 50 * MiB // 4  # not x 8 CPU threads
    assert calls["matmul"] == 8192
    assert found.timer == "CUDA events around each sample"
    assert "device to device" in found.memory_bandwidth.method
    assert "float16" in found.matmul_rate.method

    events = []

    class FakeEvent:
        def __init__(self, enable_timing):
            assert enable_timing
            events.append(self)

        def record(self):
            self.recorded = True

        def synchronize(self):
            self.synced = True

        def elapsed_time(self, end):
            return 2.5  # milliseconds, as CUDA events report

    synced = []
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: synced.append(d))
    ran = []
    seconds = ceilings._cuda_seconds(torch.device("cuda:0"))(lambda: ran.append(1), 3)
    assert seconds == pytest.approx(2.5e-3) and len(ran) == 3
    assert synced == [torch.device("cuda:0")]  # the queue drained before the start event
    start, end = events
    assert start.recorded and end.recorded and end.synced
