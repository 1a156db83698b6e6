"""A worker: claims queued runs and hosts many at once in one process."""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Callable

from swarmkit.store import STORE_FAULTS, Store, StoreReplaced, clock, describe_db_error
from swarmkit.store.ids import new_id
from swarmkit.store.wakeups import CLAIMED, FLAGS, QUEUED, Wakeups, parse
from swarmkit.store.worker_rows import add_worker, update_worker

from .claims import claim_queued
from .executor import RunHost, host_claimed
from .leases import mark_lost
from .notifier import Notifier
from .notify_config import NotifyConfig
from .queue_hints import QueueHints
from .settings import Settings, host_name
from .steps import step_words
from .workspaces import sweep

log = logging.getLogger("swarmkit.worker")


class Worker:
    def __init__(
        self,
        store: Store,
        *,
        concurrency: int = 4,
        settings: Settings | None = None,
        say: Callable[[str], None] = print,
        notify: NotifyConfig | None = None,
    ):
        self.store = store
        self.concurrency = concurrency
        self.settings = settings or Settings.from_env()
        self.say = say
        self.id = new_id()
        self.hosted: dict[str, asyncio.Task] = {}
        self.hosts: dict[str, RunHost] = {}
        self.name = f"worker {self.id[:8]}@{host_name()}"
        self._draining = asyncio.Event()
        self._wake = asyncio.Event()
        self._hints = QueueHints()  # when to look for queued runs, besides the look every part of the lease
        # Queued runs this worker cannot load and has said so about (once each).
        self._told_unloadable: set[str] = set()
        # --notify URL...: this worker delivers the store's notifications too.
        self.notifier = Notifier(store, notify, poll_s=self.settings.poll_s) if notify else None
        self.wakeups = Wakeups(store, self._told)

    async def _register(self) -> None:
        await self.store.keep_time()
        beat = clock.beat()
        async with self.store.write() as conn:
            await add_worker(
                conn,
                dict(
                    id=self.id, host=host_name(), pid=os.getpid(), concurrency=self.concurrency,
                    started_at=beat["heartbeat_at"], clock_offset_s=clock.offset_s(), lease_s=self.settings.lease_s, **beat,
                ),
            )

    async def _beat(self, stopped: bool = False) -> None:
        await self.store.keep_time()
        values: dict = dict(clock.beat(), clock_offset_s=clock.offset_s())
        if stopped:
            values["stopped_at"] = values["heartbeat_at"]
        async with self.store.write() as conn:
            await update_worker(conn, self.id, values)

    def drain(self) -> None:
        """First signal: claim nothing more, and park every hosted run at its next boundary.

        Parked runs go back to the queue from their checkpoint for any worker
        (audit `run.parked`, naming this worker): the runtime's own shutdown is
        not a person's stop. A run whose stop was requested still ends stopped.
        """
        if self._draining.is_set():
            return
        self._draining.set()
        self._wake.set()
        if self.notifier is not None:
            # No attempt more; those in flight get until their deadline or the shutdown grace.
            self.notifier.drain()
        for host in self.hosts.values():
            host.request_park(self.name)

    @property
    def hosting(self) -> dict[str, int]:
        """The runs this process hosts now, by id, at their epochs: never marked lost by this process (control.mark_lost)."""
        return {h.job_id: h.epoch for h in self.hosts.values()}

    def wake(self) -> None:
        """Look for queued runs now rather than at the next poll (a run was just submitted here)."""
        self._hints.look_now()
        self._wake.set()

    def _hosting(self, host: RunHost) -> None:
        self.hosts[host.job_id] = host
        if self._draining.is_set():
            host.request_park(self.name)

    async def _host(self, job_id: str, epoch: int) -> None:
        try:
            status = await host_claimed(self.store, job_id, epoch, settings=self.settings, on_host=self._hosting)
            self.say(f"{job_id[:8]} {status}")
        except Exception:
            log.exception("hosting %s failed", job_id[:8])
        finally:
            self.hosted.pop(job_id, None)
            self.hosts.pop(job_id, None)
            self._hints.look_now()
            self._wake.set()

    def _told(self, what: str) -> None:
        """A wakeup from the store (store/wakeups.py): a run was queued or claimed, or a hosted run's flags changed."""
        kind, job_id = parse(what)
        if kind == FLAGS:
            if job_id is not None and (host := self.hosts.get(job_id)) is not None:
                host.beat_now()
        elif kind == CLAIMED:
            if job_id is not None:
                self._hints.claimed(job_id)
        else:  # a run queued; or a sender this version does not know, which is looked for as one
            self._hints.queued(job_id if kind == QUEUED else None, asyncio.get_running_loop().time())
            self._wake.set()

    async def _claim(self, free: int) -> None:
        for job in await claim_queued(self.store, free, worker=self.name, told=self._told_unloadable, lease_s=self.settings.lease_s):
            self.say(f"{job.short_id} claimed: {job.flow} at agent {step_words(job.step, job.steps, job.current_node)}")
            self.hosted[job.id] = asyncio.create_task(self._host(job.id, job.epoch), name=f"host-{job.short_id}")

    async def run(self) -> None:
        await self._register()
        await self.wakeups.ensure()
        how = "woken by the store (LISTEN)" if self.wakeups.live else f"polling every {self.settings.poll_s:g}s"
        self.say(f"worker {self.id[:8]} on {host_name()} pid {os.getpid()}: hosting up to {self.concurrency} runs from {self.store.loc.display}, {how}")
        loop = asyncio.get_running_loop()
        # An idle worker's cost must not grow with the fleet: the lost-run judgement, this worker's row
        # and the destroys due come once a part of the lease (each worker at its own phase), not every
        # poll; queued runs are looked for every poll, or where a wakeup can say so, when woken.
        every = self.settings.look_every_s
        look_at = beat_at = claim_at = loop.time()
        notifying = asyncio.create_task(self.notifier.run(), name="notify") if self.notifier else None
        try:
            while True:
                self._wake.clear()  # before looking: a wake that comes meanwhile is not lost
                now = loop.time()
                if self._draining.is_set():
                    if not self.hosted:
                        break
                else:
                    try:
                        if now >= look_at:
                            look_at = now + every * random.uniform(0.75, 1.0)
                            await self.wakeups.ensure()  # again after a lost connection
                            await mark_lost(self.store, self.settings.lease_s, self.hosting)
                        free = self.concurrency - len(self.hosted)
                        if free > 0 and (self._hints.due(now) or now >= claim_at):
                            claim_at = now + (every if self.wakeups.live else self.settings.poll_s)
                            self._hints.looked()
                            await self._claim(free)
                    except StoreReplaced:
                        raise  # hosting ends here: nothing more may be written to what is at the path
                    except STORE_FAULTS as exc:
                        claim_at = min(claim_at, now + self.settings.poll_s)
                        log.warning("worker poll failed: %s", describe_db_error(exc, self.store.loc))
                if now >= beat_at:
                    try:
                        await self._beat()
                        beat_at = now + every
                        for line in await sweep(self.store):
                            self.say(line)
                    except StoreReplaced:
                        raise
                    except STORE_FAULTS as exc:
                        beat_at = now + self.settings.heartbeat_s
                        log.warning("worker heartbeat failed: %s", describe_db_error(exc, self.store.loc))
                room = self.concurrency > len(self.hosted)
                hinted = self._hints.due_at() if room else None
                due = [beat_at] if self._draining.is_set() else [beat_at, look_at] + ([claim_at] if room else []) + ([hinted] if hinted is not None else [])
                wait = min(due) - loop.time()
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=max(0.0, wait))
                except TimeoutError:
                    pass
        finally:
            for task in self.hosted.values():
                task.cancel()
            await asyncio.gather(*self.hosted.values(), return_exceptions=True)
            if notifying is not None and self.notifier is not None:
                # What is not delivered yet stays in the outbox for the next notifier: on a drain the
                # attempts in flight have until their deadline or the grace; a second signal ends them now.
                me = asyncio.current_task()
                if me is not None and me.cancelling():
                    notifying.cancel()
                else:
                    self.notifier.drain()
                await asyncio.gather(notifying, return_exceptions=True)
            try:
                await self._beat(stopped=True)
            except Exception:
                pass
