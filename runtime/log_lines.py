"""What a hosting process (`swarmkit worker`, `swarmkit serve`) prints as it works: a line with its time, or a JSON object.

`--log-format text` (the default) puts an RFC 3339 UTC time before each line;
`--log-format json` prints one object a line, `{"at", "level", "logger", "msg"}`,
for a log shipper. Python's logging (SWARMKIT_LOG) follows the same format, so a
worker's stderr and stdout read alike.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from datetime import datetime

FORMATS = ("text", "json")


def utc_stamp(at: datetime | None = None) -> str:
    from datetime import UTC, datetime  # late: the hosting verbs' parsers take FORMATS from here, and `swarmkit --help` loads no json, logging or records

    from swarmkit.store.records import rfc3339  # late: as above

    return rfc3339(at or datetime.now(UTC))


class LogLines:
    """Turns a message of the worker into the line it prints, in the chosen format."""

    def __init__(self, fmt: str = "text", logger: str = "swarmkit.worker"):
        self.fmt = fmt
        self.logger = logger

    def __call__(self, message: str, level: str = "info") -> str:
        if self.fmt == "json":
            import json  # late: as above

            # json.dumps (ASCII) escapes every control and bidi character: the line stays inert text.
            return json.dumps({"at": utc_stamp(), "level": level, "logger": self.logger, "msg": message})
        from .text import plain_lines  # late: as above

        stamp = utc_stamp()
        return "\n".join(f"{stamp} {line}" for line in plain_lines(message).split("\n"))

    def install(self) -> None:
        """Python's logging records in the same format, on the handlers `log_to_stderr` set up."""
        import json  # late: as above
        import logging  # late: as above
        from datetime import UTC, datetime  # late: as above

        from swarmkit.store.masked_log import MaskedFormatter  # late: as above

        fmt = self.fmt

        class _Formatter(MaskedFormatter):
            def format(self, record: logging.LogRecord) -> str:
                if fmt == "json":
                    return json.dumps({"at": utc_stamp(datetime.fromtimestamp(record.created, UTC)), "level": record.levelname.lower(), "logger": record.name, "msg": self._masked(record)})
                return f"{utc_stamp(datetime.fromtimestamp(record.created, UTC))} {super().format(record)}"

            def _masked(self, record: logging.LogRecord) -> str:
                from swarmkit.store.masking import masked  # late: as above

                text = record.getMessage()
                if record.exc_info:
                    text += "\n" + self.formatException(record.exc_info)
                return masked(text)

        for handler in logging.getLogger().handlers:
            handler.setFormatter(_Formatter("swarmkit: %(name)s: %(message)s"))
