"""`GET /metrics`: the Prometheus text format, written by hand.

Counters live in this process (served requests, store errors); gauges are read
from the store at scrape time (runs by status, heartbeat ages), so every
server in front of one store reports the same runs. No client library at run
time: the format is a few lines, and the tests parse it with prometheus_client.
"""

from __future__ import annotations

import time
from collections import Counter

from swarmkit.runtime import host_metrics
from swarmkit.runtime.deliveries import delivery_counts
from swarmkit.runtime.host_metrics import Histogram
from swarmkit.store.models import STORED_STATUSES
from swarmkit.store.pages import heartbeat_ages
from swarmkit.store.queries import status_counts

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str, int]] = Counter()
        self.store_errors = 0
        self.started = time.time()
        self.latency = Histogram("swarmkit_http_request_duration_seconds", "Time to answer a request (a stream counts until its headers).", _BUCKETS)

    def served(self, route: str, method: str, code: int, seconds: float) -> None:
        self.requests[(route, method, code)] += 1
        self.latency.observe(seconds)

    def render(self, counts: dict[str, int], ages: list[float], notes: dict[str, int] | None = None) -> str:
        out: list[str] = []

        def head(name: str, kind: str, text: str) -> None:
            out.append(f"# HELP {name} {text}")
            out.append(f"# TYPE {name} {kind}")

        head("swarmkit_runs", "gauge", "Runs in the store by stored status.")
        for status in STORED_STATUSES:
            out.append(f'swarmkit_runs{{status="{status}"}} {counts.get(status, 0)}')
        head("swarmkit_heartbeat_age_seconds_max", "gauge", "Oldest heartbeat among running runs, on the store's clock (0 when none run).")
        out.append(f"swarmkit_heartbeat_age_seconds_max {max(ages, default=0.0):.3f}")
        if notes is not None:
            head("swarmkit_notifications", "gauge", "Webhook deliveries by state: pending (due or in flight), dead (dead letters an operator may retry).")
            for state in ("pending", "dead"):
                out.append(f'swarmkit_notifications{{state="{state}"}} {notes.get(state, 0)}')
            head("swarmkit_notifications_outbox", "gauge", "Notifications not yet settled for every receiver (none are delivered while no process runs --notify).")
            out.append(f"swarmkit_notifications_outbox {notes.get('outbox', 0)}")
        head("swarmkit_http_requests_total", "counter", "Requests served, by route template, method and status code.")
        for (route, method, code), n in sorted(self.requests.items()):
            out.append(f'swarmkit_http_requests_total{{route="{_label(route)}",method="{method}",code="{code}"}} {n}')
        out.extend(self.latency.lines())
        head("swarmkit_store_errors_total", "counter", "Requests that found the store unavailable.")
        out.append(f"swarmkit_store_errors_total {self.store_errors}")
        head("swarmkit_serve_start_time_seconds", "gauge", "When this server started (Unix time).")
        out.append(f"swarmkit_serve_start_time_seconds {self.started:.3f}")
        # What this process measured of the runs it hosts (none with --no-host).
        for hist in host_metrics.ALL:
            out.extend(hist.lines())
        return "\n".join(out) + "\n"


def read_gauges(conn) -> tuple[dict[str, int], list[float], dict[str, int]]:
    return status_counts(conn), heartbeat_ages(conn), delivery_counts(conn)
