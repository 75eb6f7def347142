"""Small node builders shared by the passes; each keeps the user's formatting around the edit."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from devfix.codemods.analysis.moves import device_argument, free_names
from devfix.codemods.analysis.names import code_of
from devfix.types import Edit, ImportSpec

#: Arguments of `.to(...)` that only say how to copy: without the device, the call does nothing.
_COPY_ONLY_KEYWORDS = frozenset({"non_blocking", "copy", "memory_format"})
_EQUAL = cst.AssignEqual(
    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
)


def keyword_arg(keyword: str, value: cst.BaseExpression) -> cst.Arg:
    """`keyword=value`, without spaces around `=`."""
    return cst.Arg(value=value, keyword=cst.Name(keyword), equal=_EQUAL)


def positional_as_keywords(args: Sequence[cst.Arg], keywords: Sequence[str]) -> list[cst.Arg]:
    """`args` with each positional argument given by its keyword (`keywords` in positional
    order; there must be enough of them)."""
    result = []
    for index, arg in enumerate(args):
        if arg.keyword is None:
            arg = arg.with_changes(keyword=cst.Name(keywords[index]), equal=_EQUAL)
        result.append(arg)
    return result


def comma_separated(args: Sequence[cst.Arg], original: cst.Call) -> list[cst.Arg]:
    """Comma-separate rebuilt arguments; keep a trailing comma if `original` had one."""
    trailing = bool(original.args) and isinstance(original.args[-1].comma, cst.Comma)
    result = []
    for index, arg in enumerate(args):
        if index < len(args) - 1:
            comma = (
                arg.comma
                if isinstance(arg.comma, cst.Comma)
                else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
            result.append(arg.with_changes(comma=comma))
        else:
            result.append(
                arg.with_changes(comma=arg.comma if trailing else cst.MaybeSentinel.DEFAULT)
            )
    return result


def rebuilt_call(
    call: cst.Call, func: cst.BaseExpression, leading: Sequence[cst.Arg], rest: Sequence[cst.Arg]
) -> cst.Call:
    """`call` as `func(<leading>, <rest>)`, comma-separated as `call` was (a trailing comma
    stays)."""
    return call.with_changes(func=func, args=comma_separated([*leading, *rest], call))


def and_keyword(args: Sequence[cst.Arg], keyword: str, condition: str) -> list[cst.Arg]:
    """`args` with the value of `keyword=` and also `condition` (source text), or with
    `keyword=<condition>` appended where it is not given."""
    found = False
    result = []
    for arg in args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            arg, found = arg.with_changes(value=and_also(arg.value, condition)), True
        result.append(arg)
    if not found:
        result.append(keyword_arg(keyword, cst.parse_expression(condition)))
    return result


def and_also(value: cst.BaseExpression, condition: str) -> cst.BaseExpression:
    """`value and <condition>` (source text), parenthesising `value` where `and` would bind
    into it."""
    text = cst.Module([]).code_for_node(value)
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Call)) and not getattr(
        value, "lpar", ()
    ):
        text = f"({text})"
    return cst.parse_expression(f"{text} and {condition}")


def append_keyword(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """`f(a, b)` -> `f(a, b, keyword=value)`, keeping trailing commas and one-per-line layouts."""
    new_arg = keyword_arg(keyword, value)
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new_arg])
    last = args[-1]
    if not isinstance(last.comma, cst.Comma):
        # `f(\n    a, b\n)`: the line break before `)` follows the new last argument.
        args[-1] = last.with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
        new_arg = new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        return call.with_changes(args=[*args, new_arg])
    closing = last.comma.whitespace_after
    if not isinstance(closing, cst.ParenthesizedWhitespace):
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return call.with_changes(args=[*args, new_arg.with_changes(comma=last.comma)])
    # One argument per line with a trailing comma: the old last argument keeps its comma and
    # comment, the new one goes on its own line at the same indentation.
    argument_indent = _line_indent_before(args, call) or closing.last_line
    args[-1] = last.with_changes(
        comma=last.comma.with_changes(
            whitespace_after=closing.with_changes(last_line=argument_indent)
        )
    )
    new_closing = cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(),
        empty_lines=[],
        indent=closing.indent,
        last_line=closing.last_line,
    )
    args.append(new_arg.with_changes(comma=cst.Comma(whitespace_after=new_closing)))
    return call.with_changes(args=args)


def defaulted_in(star: cst.Arg, keyword: str, value: cst.BaseExpression) -> cst.Arg:
    """`**kw` as `**{"<keyword>": <value>, **kw}`: a default that a `keyword` in `kw` still
    overrides."""
    default = cst.DictElement(cst.SimpleString(f'"{keyword}"'), value)
    return star.with_changes(value=cst.Dict([default, cst.StarredDictElement(star.value)]))


def made_on(call: cst.Call, device: cst.BaseExpression, *, takes_device: bool) -> cst.Call:
    """The tensor `call` makes, on `device`: `device=` for a factory that takes it, else
    `.to(device)` after the call (a legacy constructor, `torch.from_numpy`)."""
    if takes_device:
        return append_keyword(call, "device", device)
    return method_call(call, "to", device)


def _line_indent_before(args: list[cst.Arg], call: cst.Call) -> cst.SimpleWhitespace | None:
    """The indentation that precedes the last argument of a one-per-line call."""
    if len(args) >= 2:
        comma = args[-2].comma
        if isinstance(comma, cst.Comma) and isinstance(
            comma.whitespace_after, cst.ParenthesizedWhitespace
        ):
            return comma.whitespace_after.last_line
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return call.whitespace_before_args.last_line
    return None


def method_call(receiver: cst.BaseExpression, method: str, *args: cst.BaseExpression) -> cst.Call:
    """`receiver.method(args...)`."""
    arg_nodes = [
        cst.Arg(
            value=arg,
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            if index < len(args) - 1
            else cst.MaybeSentinel.DEFAULT,
        )
        for index, arg in enumerate(args)
    ]
    return cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name(method)), args=arg_nodes)


def method_chain(receiver: cst.BaseExpression, *methods: str) -> cst.BaseExpression:
    """`receiver.m1().m2()...` without arguments, parenthesising `receiver` where needed."""
    chained = receiver
    if methods and needs_parentheses(receiver):
        chained = receiver.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    for method in methods:
        chained = cst.Call(func=cst.Attribute(value=chained, attr=cst.Name(method)))
    return chained


def as_call_of(call: cst.Call, func: str, **keywords: cst.BaseExpression) -> cst.Call:
    """`call`'s arguments given to `func` (dotted code), with `keyword=value` appended."""
    new = call.with_changes(func=cst.parse_expression(func))
    for keyword, value in keywords.items():
        new = append_keyword(new, keyword, value)
    return new


def replace_argument(call: cst.Call, arg: cst.Arg, value: cst.BaseExpression) -> cst.Call:
    """`f(a, b)` with the value of the argument `arg` (by identity) replaced, its keyword and
    layout kept."""
    return call.with_changes(
        args=[other.with_changes(value=value) if other is arg else other for other in call.args]
    )


def remove_argument(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """`f(a, b=1, c=2)` without `b=1`; a removed last argument hands its layout (trailing comma,
    the line break before `)`) to the argument before it."""
    args = list(call.args)
    index = next(i for i, candidate in enumerate(args) if candidate is arg)
    del args[index]
    if index == len(args) and args:
        previous = args[-1]
        if isinstance(arg.comma, cst.Comma):
            comma = previous.comma if isinstance(previous.comma, cst.Comma) else arg.comma
            after = comma.whitespace_after
            closing = arg.comma.whitespace_after
            if isinstance(after, cst.ParenthesizedWhitespace) and isinstance(
                closing, cst.ParenthesizedWhitespace
            ):
                after = after.with_changes(last_line=closing.last_line, indent=closing.indent)
            elif not isinstance(closing, cst.ParenthesizedWhitespace):
                after = closing
            args[-1] = previous.with_changes(comma=comma.with_changes(whitespace_after=after))
        elif isinstance(previous.comma, cst.Comma) and isinstance(
            previous.comma.whitespace_after, cst.ParenthesizedWhitespace
        ):
            # `a,  # note` + newline + `b=1)`: keep the comment, close on a line of its own.
            args[-1] = previous.with_changes(
                comma=previous.comma.with_changes(
                    whitespace_after=previous.comma.whitespace_after.with_changes(
                        last_line=cst.SimpleWhitespace("")
                    )
                )
            )
        else:
            args[-1] = previous.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def without_device(call: cst.Call) -> cst.BaseExpression:
    """`x.to(device)` -> `x`; `x.to(device, torch.float)` -> `x.to(torch.float)`; `x.cuda()`
    -> `x`."""
    assert isinstance(call.func, cst.Attribute)
    receiver = call.func.value
    if call.func.attr.value == "cuda":
        return receiver
    device = device_argument(call)
    rest = [a for a in call.args if a.value is not device]
    if all(a.keyword is not None and a.keyword.value in _COPY_ONLY_KEYWORDS for a in rest):
        return receiver
    return remove_argument(call, next(a for a in call.args if a.value is device))


def statement_before(
    anchor: cst.SimpleStatementLine | cst.BaseCompoundStatement, code: str, split: int | None = None
) -> Edit:
    """Insert the statement `code` before `anchor`; it takes the blank lines and comments above
    `anchor` (the first `split` of them, when given) so that they stay above both."""
    keep = len(anchor.leading_lines) if split is None else split
    early = cst.parse_statement(f"{code}\n").with_changes(leading_lines=anchor.leading_lines[:keep])
    kept = anchor.with_changes(leading_lines=anchor.leading_lines[keep:])
    return Edit(anchor, cst.FlattenSentinel([early, kept]))


def wrapped_in_call(func: str, value: cst.BaseExpression) -> cst.Call:
    """`func(value)` (`nn.ModuleList([...])`); an empty literal becomes `func()`. A bracket that
    opens a line of its own hugs the call (`nn.ModuleDict({`); otherwise a value over several
    lines goes on lines of its own, so that its first line does not grow by `func`."""
    called = cst.parse_expression(func)
    if isinstance(value, (cst.List, cst.Dict, cst.Tuple)) and not value.elements:
        return cst.Call(func=called)
    inner = value
    if isinstance(value, cst.Tuple) and not value.lpar:
        inner = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    lines = code_of(value).splitlines()
    if len(lines) == 1 or lines[0].rstrip() in ("[", "{", "(", "(["):
        return cst.Call(func=called, args=[cst.Arg(value=inner)])
    return cst.Call(
        func=called,
        whitespace_before_args=line_break("    "),
        args=[cst.Arg(value=inner, whitespace_after_arg=line_break(""))],
    )


def line_break(indent: str) -> cst.ParenthesizedWhitespace:
    """A line break inside brackets, the next line indented by the block's indent + `indent`."""
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(),
        empty_lines=[],
        indent=True,
        last_line=cst.SimpleWhitespace(indent),
    )


def needs_parentheses(node: cst.BaseExpression) -> bool:
    """Whether `node.method()` needs `node` wrapped in parentheses."""
    if getattr(node, "lpar", None):
        return False
    return not isinstance(
        node,
        (
            cst.Name,
            cst.Attribute,
            cst.Call,
            cst.Subscript,
            cst.SimpleString,
            cst.List,
            cst.Tuple,
            cst.Dict,
            cst.ListComp,
        ),
    )


def move_to(node: cst.BaseExpression, device: cst.BaseExpression) -> cst.Call:
    """`node.to(device)`, parenthesising `node` where needed."""
    receiver = node
    if needs_parentheses(node):
        receiver = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(
        func=cst.Attribute(value=receiver, attr=cst.Name("to")), args=[cst.Arg(value=device)]
    )


def register_buffer_for(
    store: cst.Assign | cst.Call, self_var: str, name: cst.BaseExpression, value: cst.BaseExpression
) -> cst.Call | cst.Expr:
    """What replaces `self.x = value` (a statement) or `setattr(self, name, value)` (a call):
    `<self_var>.register_buffer(<name>, <value>, persistent=False)`."""
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    call = cst.Call(
        func=cst.Attribute(value=cst.Name(self_var), attr=cst.Name("register_buffer")),
        args=[
            cst.Arg(value=name, comma=space),
            cst.Arg(value=value, comma=space),
            keyword_arg("persistent", cst.Name("False")),
        ],
    )
    return call if isinstance(store, cst.Call) else cst.Expr(value=call, semicolon=store.semicolon)


_SELECT_DEVICE = '''

def {name}() -> {torch}.device:
    """CUDA (the process's GPU under torchrun), else Apple MPS, else CPU."""
    if {torch}.cuda.is_available():
        return {torch}.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    if {torch}.backends.mps.is_available():
        return {torch}.device("mps")
    return {torch}.device("cpu")
'''


def select_device_edits(
    module: cst.Module,
    anchor: cst.BaseStatement | None,
    *,
    name: str,
    torch: str | None,
    imported: bool,
    define: str | None = None,
) -> tuple[list[Edit], list[ImportSpec]]:
    """The device helper `name()` (CUDA with the process's LOCAL_RANK, else MPS, else CPU)
    after `anchor` (the end of the imports; None: the top), once, and `<define> = name()` after
    it; where the file defines the helper already, or imports it (`imported`), only the
    definition. `torch`: how the file spells torch (None: it does not import it yet)."""
    definition = cst.parse_statement(f"{define} = {name}()\n") if define is not None else None
    added: list[cst.BaseStatement] = [definition] if definition is not None else []
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            return ([_after(module, statement, *added)] if added else []), []
    if imported:
        return ([_after(module, anchor, *added)] if added else []), []
    imports = [ImportSpec("os")] if torch is not None else [ImportSpec("os"), ImportSpec("torch")]
    helper = cst.parse_statement(_SELECT_DEVICE.format(name=name, torch=torch or "torch"))
    position = next((i + 1 for i, statement in enumerate(module.body) if statement is anchor), 0)
    following = module.body[position] if position < len(module.body) else None
    blank = sum(
        1
        for line in (following.leading_lines if following is not None else ())
        if line.comment is None
    )
    assert isinstance(helper, cst.FunctionDef) and isinstance(helper.body, cst.IndentedBlock)
    footer = 2 if definition is not None else max(0, 2 - blank)
    helper = helper.with_changes(
        leading_lines=[cst.EmptyLine(indent=False)] * (2 if anchor is not None else 0),
        body=helper.body.with_changes(footer=[cst.EmptyLine(indent=False)] * footer),
    )
    return [_after(module, anchor, helper, *added)], imports


def accelerator_selection(torch: str | None) -> tuple[cst.BaseExpression, list[ImportSpec]]:
    """PyTorch's own selection (torch 2.6 and newer): the accelerator torch was built for and
    finds (CUDA, MPS, XPU, ...), on the process's `LOCAL_RANK` device under torchrun, else the
    CPU; with the imports it needs (`torch`: how the file spells torch, None: not imported)."""
    spelled = torch or "torch"
    statement = cst.parse_statement(
        "device = (\n"
        f"    {spelled}.device({spelled}.accelerator.current_accelerator().type, "
        'int(os.environ.get("LOCAL_RANK", 0)))\n'
        f"    if {spelled}.accelerator.is_available()\n"
        f'    else {spelled}.device("cpu")\n'
        ")\n"
    )
    assert isinstance(statement, cst.SimpleStatementLine)
    assign = statement.body[0]
    assert isinstance(assign, cst.Assign)
    expression = assign.value
    imports = [ImportSpec("os")] if torch is not None else [ImportSpec("os"), ImportSpec("torch")]
    return expression, imports


def defined_after(
    module: cst.Module, anchor: cst.BaseStatement | None, name: str, value: cst.BaseExpression
) -> Edit:
    """`name = value` after `anchor` (the end of the imports; None: the top), one blank line
    after the imports, as isort and ruff put a statement that is not a definition."""
    statement = cst.SimpleStatementLine(
        [cst.Assign(targets=[cst.AssignTarget(cst.Name(name))], value=value)],
        leading_lines=[cst.EmptyLine(indent=False)] * (1 if anchor is not None else 0),
    )
    return _after(module, anchor, statement)


def _after(module: cst.Module, anchor: cst.BaseStatement | None, *added: cst.BaseStatement) -> Edit:
    """`added` after `anchor`, or at the top of `module` where there is no anchor."""
    if anchor is None:
        first = module.body[0]
        return Edit(first, cst.FlattenSentinel([*added, first]))
    return Edit(anchor, cst.FlattenSentinel([anchor, *added]))


def moved_items(mapping: cst.BaseExpression, device: cst.BaseExpression) -> cst.DictComp:
    """`{key: value.to(device) for key, value in <mapping>.items()}`, with loop names the
    device expression does not use."""
    used = {name.value for name in free_names(device)}
    key, value = "key", "value"
    while key in used or value in used:
        key, value = f"{key}_", f"{value}_"
    return cst.DictComp(
        key=cst.Name(key),
        value=method_call(cst.Name(value), "to", device),
        for_in=cst.CompFor(
            target=cst.Tuple(
                [cst.Element(cst.Name(key)), cst.Element(cst.Name(value))], lpar=[], rpar=[]
            ),
            iter=cst.Call(func=cst.Attribute(value=mapping, attr=cst.Name("items"))),
        ),
    )
