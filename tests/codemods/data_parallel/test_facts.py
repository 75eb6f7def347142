"""codemods.data_parallel.facts: the statements that print or log, and the loggers."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.data_parallel.facts import ScriptOutput
from tests.analysis._parsed import parse


def test_log_statements_print_log_or_use_a_logger() -> None:
    parsed = parse(
        """
        import logging as lg
        log = lg.getLogger(__name__)
        print("cuda:0")
        lg.info("x")
        log.warning("y")
        other.warning("z")
        x = print("w")
        """
    )
    output = parsed.facts.own(ScriptOutput)
    statements = list(parsed.module.body)
    assert [output.logs(s) for s in statements[2:]] == [True, True, True, False, False]
    assert output.loggers() == {"log"}
    string = parsed.one(cst.SimpleString, '"cuda:0"')
    assert output.in_log_statement(string)
    assert not output.in_log_statement(parsed.one(cst.SimpleString, '"w"'))
