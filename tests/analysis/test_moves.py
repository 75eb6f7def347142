"""codemods.analysis.moves: one answer to "is this a device move?", and device values."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.moves import DeviceMove, cuda_type, is_move_call, states_device
from devfix.codemods.analysis.names import code_of
from tests.analysis._parsed import parse

SOURCE = """
import torch
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
cpu = "cpu"
model.to(device)
model.to(torch.float16)
model.to(cpu)
model.to("meta")
model.to(torch.device("cpu"))
model.to(other)
model.cuda(1)
loss.to(args.gpu)
"""


def test_move_of_excludes_casts_and_cpu_and_marks_unknown_devices() -> None:
    parsed = parse(SOURCE)
    moves = parsed.facts.moves

    def move(code: str) -> DeviceMove | None:
        return moves.move_of(parsed.one(cst.Call, code))

    assert move("model.to(device)") is not None and move("model.to(device)").kind == "device"
    assert move("model.to(torch.float16)") is None
    assert move("model.to(cpu)") is None  # bound to "cpu" only
    assert move('model.to("meta")') is None
    assert move('model.to(torch.device("cpu"))') is None
    unknown = move("model.to(other)")
    assert unknown is not None and unknown.kind is None
    cuda = move("model.cuda(1)")
    assert cuda is not None and cuda.code == "cuda(1)"
    assert cuda.as_to_argument().value == '"cuda:1"'  # type: ignore[attr-defined]
    assert move("loss.to(args.gpu)").kind == "device"  # type: ignore[union-attr]
    assert moves.moved_name(parsed.one(cst.Call, "model.to(device)")) == "model"


def test_device_names_and_moved_devices_seen_from_a_node() -> None:
    parsed = parse(SOURCE)
    moves = parsed.facts.moves
    last = parsed.one(cst.Call, "loss.to(args.gpu)")
    assert moves.device_names(last) == ["device", "cpu"]
    assert moves.moved_devices(last) == ["device", "other", ".cuda(1)", "args.gpu"]


def test_device_map_kinds_and_module_casts() -> None:
    parsed = parse(
        """
        m = A.from_pretrained(p, device_map="auto")
        n = A.from_pretrained(p, device_map={"": 0})
        o = A.from_pretrained(p, device_map=get_map())
        self.head.to(x.device, torch.float16)
        self.head.to(x)
        self.head.to(dtype=torch.half)
        """
    )
    moves = parsed.facts.moves
    maps = [a.value for a in parsed.all(cst.Arg) if a.keyword and a.keyword.value == "device_map"]
    assert [moves.device_map_kind(v, v) for v in maps] == ["spread", "fixed", None]
    both = parsed.one(cst.Call, "self.head.to(x.device, torch.float16)")
    assert moves.casts_besides_moving(both) == "it also casts the submodule's dtype"
    tensor = parsed.one(cst.Call, "self.head.to(x)")
    assert "may be a dtype or a tensor" in (moves.casts_besides_moving(tensor) or "")
    assert moves.only_casts(parsed.one(cst.Call, "self.head.to(dtype=torch.half)"))


def test_values_the_file_treats_as_possibly_none() -> None:
    parsed = parse(
        """
        class Trainer:
            def run(self):
                if self.gpu_id is None:
                    return
        t = Trainer(rank=None)
        if None != local:
            pass
        """
    )
    moves = parsed.facts.moves
    assert moves.compared_with_none("self.gpu_id")
    assert moves.compared_with_none("self.rank")  # passed as `rank=None`
    assert moves.compared_with_none("local")
    assert not moves.compared_with_none("device")


def test_a_helper_that_moves_its_argument() -> None:
    parsed = parse(
        """
        import torch

        def to_var(x):
            if torch.cuda.is_available():
                x = x.cuda()
            return x

        def describe(x):
            y = x.cuda()
            return str(x)
        """
    )
    moves = parsed.facts.moves
    assert moves.is_move_helper(parsed.function("to_var"))
    assert not moves.is_move_helper(parsed.function("describe"))


def test_moved_module_sees_through_a_wrapper() -> None:
    parsed = parse(
        """
        import torch
        from torch.nn import DataParallel as DP
        import torch.nn as tnn
        a = net.to(device)
        b = DP(net).cuda()
        c = tnn.parallel.DistributedDataParallel(module=net).to(device)
        d = wrap(net).cuda()
        e = net.to(torch.float16)
        """
    )
    moves = parsed.facts.moves
    found = [moves.moved_module(a.value) for a in parsed.all(cst.Assign)]
    assert found == [("net", False), ("net", True), ("net", True), None, None]


def test_states_device_and_the_files_move_helper() -> None:
    parsed = parse(
        """
        import torch

        def to_var(x):
            if torch.cuda.is_available():
                x = x.cuda()
            return x

        def scale(x, k):
            return x * k

        a = to_var(torch.randn(2))
        b = scale(torch.randn(3), 2)
        c = scale(2, torch.randn(4))
        torch.zeros(2, device=d); torch.zeros(2, out=o); torch.zeros(2, **kw); torch.zeros(5)
        """
    )
    moves = parsed.facts.moves
    assert [
        states_device(call) for call in parsed.all(cst.Call) if code_of(call.func) == "torch.zeros"
    ] == [
        True,
        True,
        True,
        False,
    ]
    assert moves.move_helper() == "to_var"

    def by_helper(code: str) -> bool:
        arg = parsed.context.parent(parsed.one(cst.Call, code))
        assert isinstance(arg, cst.Arg)
        return moves.moved_by_helper(arg)

    assert by_helper("torch.randn(2)")
    assert not by_helper("torch.randn(3)")  # `scale` moves nothing
    assert not by_helper("torch.randn(4)")  # not the first argument


def test_no_move_helper_where_the_file_has_two() -> None:
    parsed = parse(
        """
        def to_var(x):
            x = x.cuda()
            return x

        def to_gpu(x):
            x = x.to("cuda")
            return x
        """
    )
    assert parsed.facts.moves.move_helper() is None


def test_applied_move_and_the_text_it_adds_after_the_receiver() -> None:
    parsed = parse(SOURCE)
    moves = parsed.facts.moves
    receiver = cst.parse_expression("metric.update(preds)")
    for code, added in (("model.to(device)", ".to(device)"), ("model.cuda(1)", ".cuda(1)")):
        move = moves.move_of(parsed.one(cst.Call, code))
        assert move is not None
        moved, shown = move.applied(receiver)
        assert (code_of(moved), shown) == ("metric.update(preds)" + added, added)


def test_cuda_type_is_the_plain_device_type_string() -> None:
    assert cuda_type(cst.parse_expression('"cuda"'))
    assert not cuda_type(cst.parse_expression('"cuda:0"'))
    assert not cuda_type(cst.parse_expression("cuda"))


def test_is_move_call_whatever_the_argument() -> None:
    assert is_move_call(cst.parse_expression("x.to(dev)"))
    assert is_move_call(cst.parse_expression("torch.zeros(2).cuda()"))
    assert not is_move_call(cst.parse_expression("x.cpu()"))
    assert not is_move_call(cst.parse_expression("to(x)"))
