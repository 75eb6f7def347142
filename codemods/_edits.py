"""Small node builders shared by the passes; each keeps the user's formatting around the edit."""

from __future__ import annotations

import libcst as cst


def append_keyword(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """`f(a, b)` -> `f(a, b, keyword=value)`, keeping trailing commas and one-per-line layouts."""
    new_arg = cst.Arg(
        value=value,
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new_arg])
    last = args[-1]
    if not isinstance(last.comma, cst.Comma):
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
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
