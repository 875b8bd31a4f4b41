"""The worker side: a pool of coroutine workers with its fetcher, acker and scheduler.

A running pool (:mod:`rota.worker.pool`; :mod:`~rota.worker.run` starts and drains it)
is one anyio task group: the fetcher
(:mod:`~rota.worker.fetcher`) leases jobs in batches, the handoff
(:mod:`~rota.worker.handoff`) passes them to free workers, each worker runs one attempt
(:mod:`~rota.worker.runner`, with the context of :mod:`~rota.worker.context`), the
acker (:mod:`~rota.worker.acker`) sends their outcomes in batched finish calls, and the
heartbeat, reaper and abort listener (:mod:`~rota.worker.heartbeat`) and the scheduler
(:mod:`~rota.worker.scheduler`) run beside them. docs/architecture.md follows one job
through these files.
"""
