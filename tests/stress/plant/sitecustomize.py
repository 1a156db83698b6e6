"""Planted bugs, to prove the race harness catches them (never used unless SWARMKIT_RACE_PLANT is set).

    python -m tests.stress.race --plant cached_stop ...

- cached_stop: the boundary check caches a "not stopped" answer for a second
  (the bug the seed note's demo caught: a stop on a fast pipeline is missed).
- ignore_cancel: the host never sees a cancel and completes the run over it
  (the cancel that reports success while the work runs on).
"""

import os

_plant = os.environ.get("SWARMKIT_RACE_PLANT")
if _plant:
    import time

    import swarmkit.runtime.executor as _ex

    if _plant == "cached_stop":
        import dataclasses

        # The boundary trusts a "not stopped" answer for a second after it first saw one.
        _orig_decide = _ex.RunHost._decide

        def _decide(self, flags, step, agent):
            now = time.monotonic()
            seen = getattr(self, "_plant_clear_at", None)
            if flags.stop_requested_at is None:
                if seen is None or now - seen >= 1.0:
                    self._plant_clear_at = now
            elif self.stops.stopped_by is None and seen is not None and now - seen < 1.0:
                flags = dataclasses.replace(flags, stop_requested_at=None)
            return _orig_decide(self, flags, step, agent)

        _ex.RunHost._decide = _decide
    elif _plant == "ignore_cancel":
        import dataclasses

        # The host never sees a cancel: its heartbeat and its boundaries read it as unset,
        # and it completes the run over the request.
        _orig_touch = _ex.RunHost.touch

        def touch(self, conn, *args, **kwargs):
            flags = _orig_touch(self, conn, *args, **kwargs)
            if flags is not None and flags.cancel_requested_at is not None:
                flags = dataclasses.replace(flags, cancel_requested_at=None)
            return flags

        _orig_end = _ex.RunHost._end

        async def _end(self, status, *args, **kwargs):
            kwargs["allow_if_cancel"] = True
            return await _orig_end(self, status, *args, **kwargs)

        _ex.RunHost.touch = touch
        _ex.RunHost._end = _end
    else:
        raise SystemExit(f"unknown SWARMKIT_RACE_PLANT {_plant!r}")
