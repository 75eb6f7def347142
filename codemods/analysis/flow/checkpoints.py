"""Checkpoints: whether a `torch.load` reads a file the script saved itself, and whether what
it loads only reaches `load_state_dict` (which copies onto the model's own device).
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.flow.ranks import ProcessRanks
from devfix.codemods.analysis.names import (
    argument,
    call_tail,
    code_of,
    dotted_name,
    keyword_argument,
)

if TYPE_CHECKING:
    pass


#: Checkpoint keys that conventionally hold Python numbers or configuration, not tensors.
METADATA_KEY = re.compile(
    r"^(epoch|epochs|start_epoch|step|steps|global_step|iteration|iter|it|best\w*|acc\w*|lr|"
    r"args|config|cfg|hparams|hyper_parameters|version|arch|meta|metadata|n_\w+|num_\w+)$"
)

#: What a launcher's configuration calls the process's rank (`args.rank`, `self.local_rank`):
#: in a file's name, it makes the file the process's own.
_RANK_NAMES = frozenset({"rank", "local_rank", "global_rank", "process_index"})


def _same_path(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """Two path expressions that name the same file: equal string literals, one name, or the
    same expression however it is laid out (`os.path.join(root, "best.pth")` over two lines)."""
    if isinstance(a, cst.SimpleString) and isinstance(b, cst.SimpleString):
        return a.evaluated_value == b.evaluated_value
    if isinstance(a, cst.Name) and isinstance(b, cst.Name):
        return a.value == b.value
    if isinstance(a, (cst.Call, cst.BinaryOperation, cst.FormattedString)):
        return _expression_shape(a) == _expression_shape(b) is not None
    return False


def _expression_shape(node: cst.BaseExpression) -> str | None:
    """The expression as Python's parser sees it (layout, parentheses and quotes aside)."""
    try:
        return ast.dump(ast.parse(code_of(node).strip(), mode="eval"))
    except (SyntaxError, ValueError, RecursionError):
        return None


def _is_parameter(function: cst.FunctionDef, name: str) -> bool:
    params = function.params
    return any(
        param.name.value == name
        for param in (*params.posonly_params, *params.params, *params.kwonly_params)
    )


def _template(node: cst.BaseExpression) -> str | None:
    """The file-name template of `"{}.pkl".format(x)` or `f"{x}.pkl"`: its literal parts."""
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "format"
        and isinstance(node.func.value, cst.SimpleString)
    ):
        text = node.func.value.evaluated_value
        return text if isinstance(text, str) else None
    if isinstance(node, cst.FormattedString):
        return "{}".join(
            part.value if isinstance(part, cst.FormattedStringText) else "" for part in node.parts
        )
    return None


class Checkpoints(ProcessRanks):
    """What the file loads with `torch.load`, and where it goes."""

    def loads_its_own_save(self, load: cst.Call) -> bool:
        """`torch.load(path)` reads a file that this program writes itself with
        `torch.save(obj, path)` (the same string, or the same module-level or local name):
        in one process the saved tensors come back on the device they were saved from, which
        is this program's own."""
        path = argument(load, "f")
        return path is not None and any(
            self._same_file(saved, path) for saved in self._saved_paths()
        )

    def reads_back_its_own_devices(self, load: cst.Call) -> bool:
        """`load` reads a file the program saves itself (`loads_its_own_save`), on GPUs that
        are the same in every run: not ones each run picks on its command line."""
        return self.loads_its_own_save(load) and not self.gpu_chosen_per_run()

    def gpu_chosen_per_run(self) -> bool:
        """The program works on a GPU each run picks on its command line (`.cuda(GPU)` with
        `GPU = args.gpu`, `.to(torch.device(opt.device))`): a file one run saved comes back on
        that run's GPU, which the next run may not have (found once)."""
        key = "flow.gpu_chosen_per_run"
        cached = self.context.shared.get(key)
        if isinstance(cached, bool):
            return cached
        found = any(
            call_tail(call.func) in ("cuda", "to")
            and isinstance(call.func, cst.Attribute)
            and call.args
            and self._read_from_options(call.args[0].value, call, 0)
            for call in self.scopes.find(self.context.module, cst.Call)
        )
        self.context.shared[key] = found
        return found

    def _read_from_options(self, value: cst.BaseExpression, at: cst.CSTNode, depth: int) -> bool:
        """`value` is a field of the parsed command line (`args.gpu`, through names bound to
        it and `torch.device(...)` / `"cuda:%d" % ...` around it)."""
        if depth > 3:
            return False
        if isinstance(value, cst.Name):
            bound = self.scopes.value_at(value.value, at)
            return bound is not None and self._read_from_options(bound, at, depth + 1)
        if isinstance(value, cst.Call) and call_tail(value.func) == "device" and value.args:
            return self._read_from_options(value.args[-1].value, at, depth + 1)
        if isinstance(value, cst.BinaryOperation):  # `"cuda:%d" % args.gpu`
            return self._read_from_options(value.right, at, depth + 1)
        if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name):
            # `args = parser.parse_args()`, `opts, _ = parser.parse_known_args()`
            binding = self.scopes.binding_before(value.value.value, at)
            parsed = binding[1] if binding is not None else None
            return parsed is not None and any(
                isinstance(inner, cst.Call)
                and call_tail(inner.func) in ("parse_args", "parse_known_args")
                for inner in self.context.subtree(parsed)
            )
        return False

    def other_branch_maps(self, load: cst.Call, loaders: frozenset[str]) -> bool:
        """`load` is in one branch of an `if` whose other branch loads (a call ending in one of
        `loaders`) with a `map_location` (`if args.gpu is None: torch.load(path)` / `else:
        torch.load(path, map_location=loc)`): the author chose where each branch's tensors go."""
        return any(
            isinstance(inner, cst.Call)
            and call_tail(inner.func) in loaders
            and keyword_argument(inner, "map_location") is not None
            for _, _, other in self.scopes.other_branches(load)
            for inner in self.context.subtree(other)
        )

    def per_process_file(self, load: cst.Call) -> bool:
        """The path `torch.load` reads is named after the process's rank (`"queue" +
        str(args.rank) + ".pth"`, also through a local name): a file each process of the job
        writes and reads for itself."""
        path = argument(load, "f")
        if isinstance(path, cst.Name):
            path = self.scopes.value_at(path.value, load) or path
        return path is not None and any(
            self.rank_of(part, load) is not None
            or (dotted_name(part) or "").rsplit(".", 1)[-1] in _RANK_NAMES
            for part in self.context.subtree(path)
            if isinstance(part, (cst.Name, cst.Attribute, cst.Call))
        )

    def _same_file(self, saved: cst.BaseExpression, loaded: cst.BaseExpression) -> bool:
        """`_same_path`, but a parameter names the file its caller chooses: the same name in
        two functions (`save(self, path)`, `load(self, path)`: a resume API), or a path built
        from one (`f"model-{milestone}.pt"` in `save(self, milestone)` and in `load(self,
        milestone)`), is two files; and one file-name template in one scope
        (`"{}.pkl".format(epoch)`, then `.format(best_epoch)`) is the file the run wrote."""
        saved_in = self.scopes.enclosing_function(saved)
        loaded_in = self.scopes.enclosing_function(loaded)
        if saved_in is not loaded_in and any(
            function is not None
            and any(
                _is_parameter(function, name.value) and name.value not in ("self", "cls")
                for name in self.context.of_type(node, cst.Name)
            )
            for function, node in ((saved_in, saved), (loaded_in, loaded))
        ):
            return False
        if saved_in is loaded_in and _template(saved) is not None:
            return _template(saved) == _template(loaded)
        return _same_path(saved, loaded)

    def _saved_paths(self) -> list[cst.BaseExpression]:
        """The path argument of every `torch.save(obj, path)` of the file (found once)."""
        key = "flow.saved_paths"
        cached = self.context.shared.get(key)
        if isinstance(cached, list):
            return cached
        found = [
            saved
            for call in self.scopes.find(self.context.module, cst.Call)
            if call_tail(call.func) == "save"
            and self.names.qualified_name(call.func) == "torch.save"
            and (saved := argument(call, "f", 1)) is not None
        ]
        self.context.shared[key] = found
        return found

    def feeds_only_state_dicts(self, node: cst.Call) -> bool:
        """Everything a loaded checkpoint (`torch.load(...)`) is used for is a
        `load_state_dict(...)` argument or a metadata read (`ckpt["epoch"]`, `"k" in ckpt`)."""
        parent = self.context.parent(node)
        if isinstance(parent, cst.Arg):
            return self._is_state_dict_argument(parent)
        if not (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            return False
        name = parent.targets[0].target.value
        start = self.scopes.line_of(parent)
        uses = [
            candidate
            for candidate in self.scopes.statements(self.scopes.enclosing_scope(node))
            if isinstance(candidate, cst.Name)
            and candidate.value == name
            and self.scopes.line_of(candidate) > start
        ]
        return all(self._harmless_use(use) for use in uses)

    def _harmless_use(self, use: cst.Name) -> bool:
        parent = self.context.parent(use)
        if isinstance(parent, cst.Attribute) and parent.attr is use:
            return True
        if isinstance(parent, cst.Subscript) and parent.value is use:
            key = parent.slice[0].slice if len(parent.slice) == 1 else None
            if (
                isinstance(key, cst.Index)
                and isinstance(key.value, cst.SimpleString)
                and isinstance(key.value.evaluated_value, str)
                and METADATA_KEY.match(key.value.evaluated_value)
            ):
                return True
        if isinstance(parent, cst.ComparisonTarget):
            return True  # `"key" in checkpoint`
        current: cst.CSTNode = use
        for ancestor in self.context.ancestors(use):
            if isinstance(ancestor, cst.Arg):
                return self._is_state_dict_argument(ancestor)
            if isinstance(ancestor, cst.BaseStatement):
                return False
            if (
                isinstance(ancestor, cst.Attribute)
                and ancestor.value is current
                and ancestor.attr.value in ("keys", "items", "values")
                and isinstance(self.context.parent(ancestor), cst.Call)
            ):
                return ancestor.attr.value == "keys"
            current = ancestor
        return False

    def _is_state_dict_argument(self, arg: cst.Arg) -> bool:
        call = self.context.parent(arg)
        return isinstance(call, cst.Call) and call_tail(call.func) in (
            "load_state_dict",
            "load_state_dict_from_checkpoint",
        )
