"""Gather-aware modeled bytes: indirect reads and writes count the elements they touch.

Every expected figure is derived by hand in the comments from the shapes used.
"""

import pytest
import torch
from torch import nn

from profreport.analysis.kernels import BOOKKEEPING_OPS
from profreport.capture.opio import record_tensor_io
from profreport.modes import prepare_mode
from profreport.record import OkMode
from profreport.render.viewmodel import _compiler_view
from tests.independent_bytes import GatherAwareReads
from tests.test_bytes_model import model_from_inductor_nodes, model_from_tensor_io

F32, I64 = 4, 8


def _one_op(fn, *inputs, op):
    """(read, written) of the single call of `op` in fn(*inputs), dispatcher side."""
    with torch.no_grad():
        ops = record_tensor_io(fn, inputs, lambda: None)
    rows = {r.op: r for r in model_from_tensor_io(ops, BOOKKEEPING_OPS).table}
    assert rows[op].calls == 1
    return rows[op].read, rows[op].written


def test_embedding_reads_the_looked_up_rows_not_the_table():
    emb = nn.Embedding(50_000, 512).eval()
    idx = torch.randint(0, 50_000, (4, 64))
    read, written = _one_op(emb, idx, op="aten::embedding")
    # indices 4*64 int64 + 4*64 rows of 512 float32; the 102.4 MB table is not read whole
    assert read == 4 * 64 * I64 + 4 * 64 * 512 * F32 == 526_336
    assert written == 4 * 64 * 512 * F32 == 524_288


def test_gathered_bytes_never_exceed_the_table():
    emb = nn.Embedding(10, 4).eval()
    idx = torch.randint(0, 10, (100,))
    read, _ = _one_op(emb, idx, op="aten::embedding")
    # 100 lookups x 4 floats = 1600 B gathered, but the table holds only 10*4*4 = 160 B
    assert read == 100 * I64 + 10 * 4 * F32 == 960


def test_index_select_reads_the_selected_rows():
    x = torch.randn(1000, 64)
    index = torch.tensor([3, 14, 15, 92, 65, 35, 89, 79, 323, 846])
    read, written = _one_op(lambda t: t.index_select(0, index), x, op="aten::index_select")
    # 10 int64 indices + 10 rows of 64 float32
    assert read == 10 * I64 + 10 * 64 * F32 == 2_640
    assert written == 10 * 64 * F32 == 2_560


def test_gather_reads_one_element_per_index():
    x = torch.randn(100, 200)
    index = torch.randint(0, 200, (100, 5))
    read, written = _one_op(lambda t: t.gather(1, index), x, op="aten::gather")
    # 500 int64 indices + 500 float32 gathered elements
    assert read == 100 * 5 * I64 + 100 * 5 * F32 == 6_000
    assert written == 100 * 5 * F32 == 2_000


def test_advanced_indexing_reads_the_indexed_slices():
    x = torch.randn(300, 40, 10)
    idx = torch.tensor([0, 7, 299, 150, 3, 4, 5])
    read, written = _one_op(lambda t: t[idx], x, op="aten::index")
    # 7 int64 indices + 7 slices of 40*10 float32 (the 480 KB tensor is not read whole)
    assert read == 7 * I64 + 7 * 40 * 10 * F32 == 11_256
    assert written == 7 * 40 * 10 * F32 == 11_200


def test_index_put_writes_only_the_indexed_rows():
    idx = torch.arange(0, 1000, 40)  # 25 distinct rows
    values = torch.randn(25, 16)

    def put(t):
        t[idx] = values
        return t

    read, written = _one_op(put, torch.zeros(1000, 16), op="aten::index_put_")
    # reads 25 int64 indices + the 25x16 float32 values; the destination is not read
    assert read == 25 * I64 + 25 * 16 * F32 == 1_800
    # writes 25 rows of 16 float32, not the whole 64,000 B destination it returns
    assert written == 25 * 16 * F32 == 1_600

    def accumulate(t):
        return t.index_put_((idx,), values, accumulate=True)

    read, written = _one_op(accumulate, torch.zeros(1000, 16), op="aten::index_put_")
    # accumulate reads the 25 destination rows it adds to: +1,600 B
    assert (read, written) == (1_800 + 25 * 16 * F32, 1_600)


def test_index_put_through_a_mask_writes_the_selected_elements():
    x = torch.zeros(100, 16)
    mask = torch.zeros(100, 16, dtype=torch.bool)
    mask[::4, :3] = True  # 25 rows x 3 columns = 75 elements

    def fill(t):
        t[mask] = 1.0
        return t

    read, written = _one_op(fill, x, op="aten::index_put_")
    # the 1,600-byte bool mask + the 0-dim float32 value tensor; 75 float32 elements written
    assert read == 100 * 16 * 1 + F32 == 1_604
    assert written == 75 * F32 == 300


def test_scatter_add_reads_and_writes_the_scattered_elements():
    index = torch.randint(0, 50, (20, 30))
    src = torch.ones(20, 30)
    read, written = _one_op(
        lambda t: t.scatter_add_(0, index, src), torch.zeros(50, 30), op="aten::scatter_add_"
    )
    # index 600 int64 + src 600 float32 + the 600 destination elements it adds to
    assert read == 600 * I64 + 600 * F32 + 600 * F32 == 9_600
    assert written == 600 * F32 == 2_400  # the 6,000-byte destination is not written whole


def test_index_add_touches_one_slice_per_index_along_dim():
    index = torch.tensor([0, 2])
    source = torch.ones(10, 2, 4)
    read, written = _one_op(
        lambda t: t.index_add_(1, index, source), torch.zeros(10, 3, 4), op="aten::index_add_"
    )
    # 2 indices along dim 1, each a 10x4 slice: 80 float32 elements added to
    assert written == 2 * 10 * 4 * F32 == 320
    # the 2 int64 indices + the 80-element source + the 80 elements read before adding
    assert read == 2 * I64 + 80 * F32 + 80 * F32 == 656


def test_out_of_place_scatter_copies_the_destination_whole():
    index = torch.randint(0, 50, (20, 30))
    src = torch.ones(20, 30)
    read, written = _one_op(
        lambda t: t.scatter_add(0, index, src), torch.zeros(50, 30), op="aten::scatter_add"
    )
    # a new 50x30 tensor: the destination is read and the result written in full
    assert read == 50 * 30 * F32 + 600 * I64 + 600 * F32 == 13_200
    assert written == 50 * 30 * F32 == 6_000


class _EmbeddingThen(nn.Module):
    """Embedding(50_000, 512) looked up by 4x64 indices, then `after` (pointwise or LayerNorm)."""

    def __init__(self, layer_norm: bool):
        super().__init__()
        self.emb = nn.Embedding(50_000, 512)
        self.ln = nn.LayerNorm(512) if layer_norm else nn.Identity()

    def forward(self, idx):
        return self.ln(self.emb(idx)) * 2


def _compile_nodes(module, *inputs):
    with torch.no_grad():
        prepared = prepare_mode("compile", module.eval(), inputs, lambda: None)
    return prepared.compiler.inductor_nodes


@pytest.mark.slow
def test_compiled_lookup_and_pointwise_read_the_rows_and_write_once():
    nodes = _compile_nodes(_EmbeddingThen(layer_norm=False), torch.randint(0, 50_000, (4, 64)))
    est = model_from_inductor_nodes(nodes)
    # one fused kernel: 256 int64 indices + 256 rows of 512 float32 in, the product out; the
    # looked-up rows (the eager embedding's output) never reach memory
    assert len(nodes) == 1
    assert est.read == 4 * 64 * I64 + 4 * 64 * 512 * F32 == 526_336
    assert est.written == 4 * 64 * 512 * F32 == 524_288


@pytest.mark.slow
def test_compiled_lookup_fused_into_layer_norm_counts_rows_not_the_table():
    nodes = _compile_nodes(_EmbeddingThen(layer_norm=True), torch.randint(0, 50_000, (4, 64)))
    est = model_from_inductor_nodes(nodes)
    # indices + gathered rows + LayerNorm weight and bias (512 float32 each); Inductor's own
    # sizing of this fused node counts the whole 102.4 MB table
    assert est.read == 4 * 64 * I64 + 4 * 64 * 512 * F32 + 2 * 512 * F32 == 530_432
    assert est.written == 4 * 64 * 512 * F32 == 524_288
    (table,) = [r for n in nodes for r in n.indirect_reads]
    assert table.full_bytes == 50_000 * 512 * F32 == 102_400_000
    assert table.scheduler_bytes == 102_400_000  # what Inductor's sizing gave the fused node
    assert table.counted_bytes == 4 * 64 * 512 * F32
    summary = _compiler_view(
        OkMode.from_json(
            {"compiler": {"inductor_nodes": [n.to_json() for n in nodes]}, "kernels": {"table": []}}
        )
    )["inductor_summary"]
    assert "1 buffer access(es) through an index tensor" in summary
    assert "(512.00 KiB) where Inductor's per-kernel sizing gives 97.66 MiB" in summary


@pytest.mark.parametrize("mode", ["script", "trace", "optimize"])
def test_torchscript_modes_read_the_rows_too(mode):
    module = _EmbeddingThen(layer_norm=False).eval()
    idx = torch.randint(0, 50_000, (4, 64))
    with torch.no_grad():
        prepared = prepare_mode(mode, module, (idx,), lambda: None)
        ops = record_tensor_io(prepared.fn, (idx,), lambda: None)
    rows = {r.op: r for r in model_from_tensor_io(ops, BOOKKEEPING_OPS).table}
    # the same lookup as eager, dispatched by the TorchScript interpreter
    assert rows["aten::embedding"].read == 4 * 64 * I64 + 4 * 64 * 512 * F32 == 526_336


def _extern_node(nodes):
    (node,) = [n for n in nodes if n.kind == "extern" and n.indirect_reads]
    return node


@pytest.mark.slow
def test_compiled_embedding_bag_library_call_reads_the_bagged_rows():
    bag = nn.EmbeddingBag(5_000, 16, mode="sum")
    node = _extern_node(_compile_nodes(bag, torch.randint(0, 5_000, (8, 10))))
    # Inductor calls aten::_embedding_bag: 80 rows of 16 float32 + the 80 int64 indices + the
    # 8 int64 bag offsets it computed; Inductor's sizing counts the 320,000-byte table whole
    assert node.read == 80 * 16 * F32 + 80 * I64 + 8 * I64 == 5_824
    (table,) = node.indirect_reads
    assert (table.full_bytes, table.counted_bytes) == (5_000 * 16 * F32, 80 * 16 * F32)


class _ScatterAdd(nn.Module):
    def forward(self, x, index, src):
        y = x * 2
        return y.scatter_add_(0, index, src)


@pytest.mark.slow
def test_compiled_scatter_add_library_call_touches_the_scattered_elements():
    index = torch.randint(0, 1_000, (20, 16))
    nodes = _compile_nodes(_ScatterAdd(), torch.zeros(1_000, 16), index, torch.ones(20, 16))
    node = _extern_node(nodes)
    # scatter_reduce_(sum) on the 64,000-byte product: reads the 320 elements it adds to, the
    # 320 int64 indices and the 320 float32 sources; writes those 320 elements only
    assert node.read == 320 * F32 + 320 * I64 + 320 * F32 == 5_120
    assert node.written == 320 * F32 == 1_280
    assert node.indirect_writes[0].scheduler_bytes == 1_000 * 16 * F32


@pytest.mark.slow
def test_gpt2_eager_matches_reference_and_compile_moves_less():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, use_cache=False)
    model = transformers.GPT2Model(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 128))
    with torch.no_grad():
        eager = model_from_tensor_io(record_tensor_io(model, (ids,), lambda: None), BOOKKEEPING_OPS)
        reference = GatherAwareReads()
        with reference:
            model(ids)
    assert eager.read == reference.read
    rows = {r.op: r for r in eager.table}
    # wte: 128 int64 ids + 128 rows of 768 float32; wpe: the same for the 128 positions
    assert rows["aten::embedding"].read == 2 * (128 * I64 + 128 * 768 * F32) == 788_480
    compiled = model_from_inductor_nodes(_compile_nodes(model, ids))
    assert not compiled.not_modeled
    assert compiled.read + compiled.written < eager.read + eager.written


class _SlicedTableThenLayerNorm(torch.nn.Module):
    """GPT-2's position lookup as Inductor sees it: a contiguous slice of a 1,024-row table,
    fused with the residual add and the LayerNorm reduction."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(1024, 64))

    def forward(self, x):
        return torch.nn.functional.layer_norm(x + self.pos[: x.shape[0]], (64,))


@pytest.mark.slow
def test_fused_kernel_reading_a_slice_counts_the_slice_not_the_buffer():
    nodes = _compile_nodes(_SlicedTableThenLayerNorm(), torch.randn(128, 64))
    est = model_from_inductor_nodes(nodes)
    # x (128 x 64 float32) + the first 128 rows of the table in, the normalised rows out
    assert est.read == 128 * 64 * F32 + 128 * 64 * F32 == 65_536
    assert est.written == 128 * 64 * F32 == 32_768
    (table,) = [r for n in nodes for r in n.sliced_reads]
    assert table.full_bytes == table.scheduler_bytes == 1024 * 64 * F32
    assert table.counted_bytes == 128 * 64 * F32
    summary = _compiler_view(
        OkMode.from_json(
            {"compiler": {"inductor_nodes": [n.to_json() for n in nodes]}, "kernels": {"table": []}}
        )
    )["inductor_summary"]
    assert "1 buffer access(es) of a slice of a buffer inside a fused kernel" in summary


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["hf:bert", "hf:llama", "hf:t5"])
def test_zoo_eager_bytes_match_the_reference_and_compile_moves_less(spec):
    pytest.importorskip("transformers")
    from profreport.models import load_model

    model = load_model(spec, torch.device("cpu"), torch.float32, layers=1, seq_len=32)
    inputs = model.example_inputs
    with torch.no_grad():
        eager = model_from_tensor_io(
            record_tensor_io(model.module, inputs, lambda: None), BOOKKEEPING_OPS
        )
        reference = GatherAwareReads()
        with reference:
            model.module(*inputs)
    assert eager.read == reference.read
    assert any(r.op == "aten::embedding" for r in eager.table)
    compiled = model_from_inductor_nodes(_compile_nodes(model.module, *inputs))
    assert not compiled.not_modeled
    assert compiled.read + compiled.written < eager.read + eager.written
