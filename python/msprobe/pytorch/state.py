"""Per-process hooking state shared by the API wrappers and the module hooks."""

from __future__ import annotations

import threading
from typing import Optional

from .record import recorder


class _Local(threading.local):
    busy: bool = False  # inside a wrapped API call or one of our hooks: wrapped APIs run plain


class State:
    def __init__(self) -> None:
        self.local = _Local()
        self.construct = False  # level L0 / mix: construct.json is kept
        self.module_stack: list[str] = []
        self.pending: list[tuple[str, Optional[str]]] = []  # module parents not yet merged
        self.scope_start: Optional[str] = None  # mix: scope[0], opened at its module's pre-hook
        # mix: module hooks report each module's span to the recorder (msprobe_module_span), whose
        # `list` filter passes every record inside a listed module, as 1.1.1's MixRangeScope
        self.module_spans = False
        # No module hook has run yet in this step. 1.1.1's api_parent_node starts each step as ""
        # and only becomes the innermost module or None once a module hook ran, so an API called
        # before any module (e.g. in the root model's own forward) has parent "" in construct.json.
        self.no_module_yet = True

    def parent(self) -> Optional[str]:
        """An API record's parent in construct.json (1.1.1's api_parent_node)."""
        if self.module_stack:
            return self.module_stack[-1]
        return "" if self.no_module_yet else None

    def enter_module(self, name: str) -> Optional[str]:
        """A module's forward or backward record `name` starts: it is noted for construct.json
        under the innermost open module (returned) and becomes the innermost itself."""
        parent = self.module_stack[-1] if self.module_stack else None
        self.no_module_yet = False
        if self.construct:
            self.pending.append((name, parent))
        self.module_stack.append(name)
        return parent

    def pop_module(self, name: str) -> None:
        """A module's forward or backward record `name` ends: the innermost open module is
        removed, whichever it is, as 1.1.1's end hook pops its module stack. They differ when a
        module started and never ended (checkpoint's recomputation stops inside a module): its
        entry is what the next end removes, and later parents in construct.json are 1.1.1's."""
        if self.module_stack:
            self.module_stack.pop()

    def note_construct(self, name: str, parent: Optional[str]) -> None:
        """msprobe merges {record: parent} and then the module-parent map at every collection,
        so the record's entry comes first and modules started since then follow."""
        if self.construct:
            recorder.construct(name, parent, self.pending)

    def reset_step(self) -> None:
        self.module_stack.clear()
        self.pending.clear()
        self.no_module_yet = True
        reset = getattr(recorder, "reset_modules", None)  # the native L0 hooks' own stack
        if reset is not None:
            reset()


state = State()
