"""Gather-aware modeled bytes: indirect reads and writes count the elements they touch.

Every expected figure is derived by hand in the comments from the shapes used.
"""

import torch
from torch import nn

from profreport.analysis.bytes_model import model_from_tensor_io
from profreport.analysis.kernels import BOOKKEEPING_OPS
from profreport.capture.opio import record_tensor_io

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


def test_out_of_place_scatter_copies_the_destination_whole():
    index = torch.randint(0, 50, (20, 30))
    src = torch.ones(20, 30)
    read, written = _one_op(
        lambda t: t.scatter_add(0, index, src), torch.zeros(50, 30), op="aten::scatter_add"
    )
    # a new 50x30 tensor: the destination is read and the result written in full
    assert read == 50 * 30 * F32 + 600 * I64 + 600 * F32 == 13_200
    assert written == 50 * 30 * F32 == 6_000
