"""Graph constants (AOTInductor's weights) are sized by the rules torch.compile's parameters get:
an embedding table held as a constant counts the rows a kernel looks up, not the whole table.

The fast tests build one synthetic scheduler node (an embedding lookup fused with its consumer)
and a stand-in for Inductor's graph; every expected figure is derived in the comments from the
shapes used. The slow test compiles and exports an embedding model (DistilBERT's export against
compile is in test_real_models_gate.py).
"""

from dataclasses import dataclass, field
from typing import Any

import pytest
import sympy
import torch
from torch._inductor.dependencies import MemoryDep
from torch._inductor.virtualized import V

from profreport.capture.inductor_sizes import NodeSizes, node_buffer_bytes
from profreport.record import OkMode
from profreport.render.viewmodel import _compiler_view
from tests.test_bytes_model import model_from_inductor_nodes

F32, I64 = 4, 8
VOCAB, DIM, TOKENS = 1000, 64, 32
TABLE_BYTES = VOCAB * DIM * F32  # 256,000
ROWS_BYTES = TOKENS * DIM * F32  # 8,192: the rows looked up
INDEX_BYTES = TOKENS * I64  # 256


class _SizeVars:
    def optimization_hint(self, expr: Any, fallback: int = 0) -> int:
        return int(expr)


@dataclass
class _Graph:
    """What inductor_sizes asks of V.graph: constants, graph inputs' numel and dtype."""

    constants: dict[str, torch.Tensor]
    inputs: dict[str, tuple[int, torch.dtype]]
    sizevars: _SizeVars = field(default_factory=_SizeVars)
    name_to_buffer: dict[str, Any] = field(default_factory=dict)
    scheduler: Any = None

    def get_numel(self, name: str) -> int:
        if name in self.constants:
            return self.constants[name].numel()
        return self.inputs[name][0]

    def get_dtype(self, name: str) -> torch.dtype:
        if name in self.constants:
            return self.constants[name].dtype
        return self.inputs[name][1]


@dataclass
class _ReadWrites:
    reads: list[MemoryDep]
    writes: list[MemoryDep]


@dataclass
class _Node:
    """A scheduler node: its dependencies and Inductor's per-buffer figures."""

    read_writes: _ReadWrites
    inductor_reads: dict[str, int]
    inductor_writes: dict[str, int]
    node: Any = None

    def get_read_write_buffer_accesses(
        self, include_reads: bool, include_writes: bool
    ) -> dict[str, int]:
        return dict(self.inductor_reads if include_reads else self.inductor_writes)


X0, X1, TMP0 = sympy.symbols("x0 x1 tmp0", integer=True, nonnegative=True)
RANGES = ((X0, X1), (TOKENS, DIM))


def _lookup_node(table: str, table_figure: int | None) -> _Node:
    """Fused `embedding(table, idx) * 2`: the indices read directly, the table through `tmp0`
    (the loaded index), the output written. Inductor gives the table `table_figure` when it is
    a graph input (a fused node counts it whole) and nothing when it is a constant (None)."""
    reads = [
        MemoryDep("idx", X0, *RANGES),
        MemoryDep(table, DIM * TMP0 + X1, *RANGES),
    ]
    writes = [MemoryDep("buf0", DIM * X0 + X1, *RANGES)]
    inductor_reads = {"idx": INDEX_BYTES}
    if table_figure is not None:
        inductor_reads[table] = table_figure
    return _Node(_ReadWrites(reads, writes), inductor_reads, {"buf0": ROWS_BYTES})


def _sized(node: _Node, graph: _Graph) -> NodeSizes:
    with V.set_graph_handler(graph):  # type: ignore[arg-type]
        return node_buffer_bytes(node)


def _graph(table_is_constant: bool) -> _Graph:
    inputs: dict[str, tuple[int, torch.dtype]] = {"idx": (TOKENS, torch.int64)}
    inputs["buf0"] = (TOKENS * DIM, torch.float32)
    constants = {}
    if table_is_constant:
        constants["weight"] = torch.empty(VOCAB, DIM)
    else:
        inputs["weight"] = (VOCAB * DIM, torch.float32)
    return _Graph(constants, inputs)


def test_a_constant_table_looked_up_counts_the_rows_touched():
    sizes = _sized(_lookup_node("weight", None), _graph(table_is_constant=True))
    # 32 int64 indices + 32 rows of 64 float32, not the 256,000-byte table
    assert sizes.read == INDEX_BYTES + ROWS_BYTES == 8_448
    assert sizes.written == ROWS_BYTES
    (entry,) = sizes.indirect_reads
    assert entry.to_json() == {
        "buffer": "weight",
        "full_bytes": TABLE_BYTES,
        "scheduler_bytes": TABLE_BYTES,  # entered whole, as Inductor counts a graph input
        "counted_bytes": ROWS_BYTES,
        "constant": True,
    }


def test_constant_and_graph_input_tables_model_the_same_bytes():
    """export holds the table as a constant, torch.compile passes it as a graph input: the same
    kernel models the same bytes either way."""
    exported = _sized(_lookup_node("weight", None), _graph(table_is_constant=True))
    compiled = _sized(_lookup_node("weight", TABLE_BYTES), _graph(table_is_constant=False))
    assert (exported.read, exported.written) == (compiled.read, compiled.written)
    assert "constant" not in compiled.indirect_reads[0].to_json()


def test_a_constant_read_directly_counts_whole():
    """A weight the kernel reads element by element (a LayerNorm weight) is read whole."""
    node = _Node(
        _ReadWrites([MemoryDep("ln_weight", X1, *RANGES)], [MemoryDep("buf0", X1, *RANGES)]),
        {},
        {"buf0": DIM * F32},
    )
    graph = _Graph({"ln_weight": torch.empty(DIM)}, {"buf0": (DIM, torch.float32)})
    sizes = _sized(node, graph)
    assert sizes.read == DIM * F32 == 256
    assert sizes.indirect_reads == () and sizes.sliced_reads == ()


def test_the_report_names_constant_lookups_apart():
    sizes = _sized(_lookup_node("weight", None), _graph(table_is_constant=True))
    node = {
        "name": "op0",
        "kind": "generated",
        "origins": ["aten::embedding"],
        "read": sizes.read,
        "written": sizes.written,
        "indirect_reads": [r.to_json() for r in sizes.indirect_reads],
    }
    summary = _compiler_view(
        OkMode.from_json({"compiler": {"inductor_nodes": [node]}, "kernels": {"table": []}})
    )["inductor_summary"]
    assert (
        "1 graph constant access(es) through an index tensor modeled as the elements touched "
        "(8.00 KiB) instead of whole (250.00 KiB)" in summary
    )
    assert "Inductor's per-kernel sizing" not in summary


class _EmbeddingThenDouble(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(50_000, 512)
        self.ln = torch.nn.LayerNorm(512)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.ln(self.emb(idx)) * 2


def _inductor_nodes(mode: str, module: torch.nn.Module, *inputs: torch.Tensor) -> list[Any]:
    from profreport.modes import prepare_mode

    with torch.no_grad():
        prepared = prepare_mode(mode, module.eval(), inputs, lambda: None)
    return list(prepared.compiler.inductor_nodes or ())


@pytest.mark.slow  # one torch.compile and one AOTInductor build
def test_export_reads_the_rows_of_its_constant_table_as_compile_does():
    torch.manual_seed(0)
    module, idx = _EmbeddingThenDouble(), torch.randint(0, 50_000, (4, 64))
    exported = model_from_inductor_nodes(_inductor_nodes("export", module, idx))
    compiled = model_from_inductor_nodes(_inductor_nodes("compile", module, idx))
    # indices + 256 rows of 512 float32 + LayerNorm weight and bias; the table is 102.4 MB
    assert exported.read == 4 * 64 * I64 + 4 * 64 * 512 * F32 + 2 * 512 * F32 == 530_432
    assert (exported.read, exported.written) == (compiled.read, compiled.written)
