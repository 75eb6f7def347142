"""What every analysis that builds on others starts from: the file, and the file's other facts."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


class Analysis:
    """One analysis of a file, built by `FileFacts` on first use. It reads the file through
    `context`, `names` and `scopes` (which every analysis needs), and any other analysis
    through `facts`, which builds that one when it is first asked for."""

    def __init__(self, facts: FileFacts) -> None:
        # A weak proxy, like `facts.context`: the facts keep their analyses, and a strong
        # reference back would be a cycle that only the garbage collector frees, with every
        # node the analyses keep in their tables.
        self.facts: FileFacts = weakref.proxy(facts)
        self.context = facts.context
        self.names = facts.names
        self.scopes = facts.scopes
