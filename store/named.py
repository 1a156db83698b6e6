"""Statements by name: `conn.execute(S.GET_JOB, {"b_id": job_id})` on any connection of the store.

`S.NAME` is a handle on the statement `NAME` of store/statements.py. A
SQLAlchemy connection (sync, async or inline) runs that Core statement: the
handle is executable as it is (SQLAlchemy asks an executable for
`_execute_on_connection` / `_execute_on_scalar`, and the handle hands over to
the statement). A lite SQLite store (store/lite.py) runs its compiled form from
store/compiled_sqlite.py with sqlite3. Neither this module nor that one
imports SQLAlchemy: a one-shot verb on SQLite names its statements without
loading it (issue 13: start-up).
"""

from __future__ import annotations

from .compiled_sqlite import STATEMENTS

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Any

    from sqlalchemy.sql.base import Executable


class Statement:
    """The statement `name` of store/statements.py."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"S.{self.name}"

    @property
    def core(self) -> Any:
        """The SQLAlchemy statement itself."""
        from . import host_statements, statements  # late: the Core statements load SQLAlchemy; a lite store runs their compiled forms

        found = getattr(statements, self.name, None)  # not `or`: a clause has no truth value
        return found if found is not None else getattr(host_statements, self.name)

    @property
    def compiled(self) -> tuple:
        """(SQL, constant parameters, parameter kinds, result columns, result kinds) for sqlite3."""
        return STATEMENTS[self.name]

    def _execute_on_connection(self, connection: Any, distilled_params: Any, execution_options: Any) -> Any:
        return self.core._execute_on_connection(connection, distilled_params, execution_options)

    def _execute_on_scalar(self, connection: Any, distilled_params: Any, execution_options: Any) -> Any:
        return self.core._execute_on_scalar(connection, distilled_params, execution_options)


class _Catalogue:
    """`S.NAME`: a handle for each compiled statement (an unknown name fails at once, not at execution)."""

    def __init__(self) -> None:
        self._handles: dict[str, Statement] = {}

    # To the type checker a handle is the statement it names: SQLAlchemy's connections take it as one.
    def __getattr__(self, name: str) -> Executable:
        if name not in STATEMENTS:
            raise AttributeError(f"no statement {name!r} in store/statements.py (or scripts/compile_sqlite.py was not run)")
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = Statement(name)
        return handle  # type: ignore[return-value]


S = _Catalogue()
