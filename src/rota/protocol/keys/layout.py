"""The key names of one shard of a namespace, as Python builds them: :class:`Keys`
(see :mod:`rota.protocol.keys`; the same suffixes as :mod:`rota.protocol.keys.names`).
"""

from __future__ import annotations

from rota.protocol.keys.names import PAIR_KEYS, PARAM_KEYS, validate_namespace
from rota.protocol.shards import shard_tag

__all__ = ["Keys", "key_rest", "prefix_of", "renamed", "tag_of"]


# What reads a key name rather than naming a key: functions, so that every public member
# of Keys stays a key name (tests/unit/test_key_slots.py holds each to the namespace's slot).


def tag_of(prefix: str) -> str:
    """The hash tag of a shard's ``prefix`` (``{ns~1}:``), without its braces (``ns~1``):
    how an operator and the retired note (:attr:`Keys.retired`) name a shard."""
    return prefix[1:-2]


def prefix_of(tag: str) -> str:
    """The key prefix of the shard of hash tag ``tag`` (``ns~1`` -> ``{ns~1}:``): the
    inverse of :func:`tag_of`, and the one place a prefix is spelled."""
    return "{" + tag + "}:"


def key_rest(key: str, prefix: str) -> str:
    """What follows ``prefix`` in ``key`` (``job:<id>``, ``stats``, ...); a ValueError for
    a key under another prefix (another shard's or namespace's)."""
    if not key.startswith(prefix):
        raise ValueError(f"{key!r} is not a key of {prefix!r}")
    return key[len(prefix) :]


def renamed(key: str, prefix: str, into: str) -> str:
    """``key`` under ``prefix`` renamed under the prefix ``into``: the same kind and
    argument in another shard (what a change of the shard count copies)."""
    return into + key_rest(key, prefix)


class Keys:
    """Key names of one namespace, or of shard ``shard`` of its ``shards`` (see
    :mod:`rota.protocol.shards`): shard 0 is ``{ns}:``, so one namespace (K = 1) is the
    layout of shard 0."""

    __slots__ = ("namespace", "prefix", "shard")

    def __init__(self, namespace: str, shard: int = 0, shards: int = 1) -> None:
        self.namespace = validate_namespace(namespace)
        self.shard = shard
        self.prefix = prefix_of(namespace if shard == 0 else shard_tag(namespace, shard, shards))

    @classmethod
    def of_tag(cls, namespace: str, tag: str, shard: int) -> Keys:
        """The key names of the shard of hash tag ``tag``, at place ``shard`` among the
        shards served (during a change of the count, old and new tags together: see
        :mod:`rota.protocol.reshard`)."""
        keys = cls(namespace)
        keys.shard = shard
        keys.prefix = prefix_of(tag)
        return keys

    @classmethod
    def other_shards(cls, namespace: str) -> Keys:
        """The key names of every shard of ``namespace`` but shard 0, as one glob
        (``{ns~*}:...``): what an ACL rule grants over them all. A namespace has no
        ``~``, so the glob matches no other namespace's keys."""
        keys = cls(namespace)
        keys.prefix = "{" + namespace + "~*}:"
        return keys

    def job(self, job_id: str) -> str:
        return self.prefix + "job:" + job_id

    def fair_queue(self, name: str, key: str) -> str:
        return self.prefix + PAIR_KEYS["fair_queue"] + name + "/" + key

    def fair_running(self, name: str, key: str) -> str:
        return self.prefix + PAIR_KEYS["fair_running"] + name + "/" + key

    def run_times(self, name: str, slot: str) -> str:
        """Hash of a job name's run-time histogram in one UTC ten-minute slot
        (``YYYYMMDDHHM0``): bucket index -> finished attempts (see
        :mod:`rota.protocol.run_times`); expires 25 hours after its last new field."""
        return self.prefix + PAIR_KEYS["run_times"] + name + "/" + slot

    def fair_keys(self, name: str) -> str:
        return self.prefix + PARAM_KEYS["fair_keys"] + name

    def fair_rest(self, name: str) -> str:
        return self.prefix + PARAM_KEYS["fair_rest"] + name

    def fair_backlog(self, name: str) -> str:
        return self.prefix + PARAM_KEYS["fair_backlog"] + name

    def fair(self, name: str) -> str:
        return self.prefix + PARAM_KEYS["fair"] + name

    def fair_set(self, name: str) -> str:
        return self.prefix + PARAM_KEYS["fair_set"] + name

    def queue(self, name: str) -> str:
        return self.prefix + "queue:" + name

    def running(self, name: str) -> str:
        return self.prefix + "running:" + name

    def unique(self, key: str) -> str:
        return self.prefix + "unique:" + key

    def debounce(self, key: str) -> str:
        """The id of the pending job of a debounce key (see ``lua/_debounce.lua``)."""
        return self.prefix + "debounce:" + key

    def pool(self, pool_id: str) -> str:
        return self.prefix + "pool:" + pool_id

    def stats_bucket(self, bucket: str) -> str:
        """Per-day (``YYYYMMDD``) or per-minute (``YYYYMMDDHHMM``) counters."""
        return self.prefix + "stats:" + bucket

    def wake(self, name: str) -> str:
        return self.prefix + "wake:" + name

    def joblog(self, job_id: str) -> str:
        return self.prefix + "log:" + job_id

    def done(self, job_id: str) -> str:
        """Pub/sub channel telling waiters that a job finished."""
        return self.prefix + "done:" + job_id

    def cron(self, claim: str) -> str:
        """Claim ``<name>:<fire ms>`` of one fire time of a periodic job: the first pool
        to set it enqueues that run."""
        return self.prefix + "cron:" + claim

    def children(self, job_id: str) -> str:
        """Set of the jobs enqueued after ``job_id`` (its children in a workflow)."""
        return self.prefix + "children:" + job_id

    def group(self, group_id: str) -> str:
        """Hash of a group: total, done and failed members, its callback (``then``)."""
        return self.prefix + "group:" + group_id

    def group_results(self, group_id: str) -> str:
        """Hash of a group's results: member id -> result JSON."""
        return self.prefix + "gresults:" + group_id

    def group_members(self, group_id: str) -> str:
        """List of a group's member ids, in the order they were enqueued."""
        return self.prefix + "gmembers:" + group_id

    def quarantine(self, key: str) -> str:
        """Where the repair script (``lua/repair.lua``) moves a key of the namespace that
        held another type than rota reads: ``key`` is what followed the prefix."""
        return self.prefix + "quarantine:" + key

    @property
    def shards(self) -> str:
        """String: how many shards the namespace spans, or the change of that count under
        way (see :mod:`rota.protocol.reshard`), written in shard 0 by the first pool
        (absent: one) or by ``rota shards resize``, and copied into each other shard.
        A pool configured with another count refuses to start unless the namespace was
        resized (it then follows the record); the enqueue scripts compare the
        generation a producer passes with their shard's copy."""
        return self.prefix + "shards"

    @property
    def cron_off(self) -> str:
        """Hash of the periodic jobs turned off (the web's cron page): job name -> when
        (ms). A pool's scheduler skips the fire times of a name in it."""
        return self.prefix + "cronoff"

    @property
    def retired(self) -> str:
        """Set, in shard 0: the tags an online change of the shard count retired whose
        shards are not settled yet (see rota.client.resize); deleted once they are."""
        return self.prefix + "retired"

    @property
    def pool_commands(self) -> str:
        """Hash of what the operator asked of live pools: pool id -> ``quiet`` (fetch no
        more, finish what runs) or ``stop`` (drain and leave, as on SIGTERM); no field:
        run. Kept in shard 0; each pool reads its field at each heartbeat and says in its
        snapshot's ``state`` that it obeyed (see docs/protocol.md, "Pool commands")."""
        return self.prefix + "poolcmds"

    @property
    def pool_commands_told(self) -> str:
        """Pub/sub channel: a pool's command changed (message: the pool id), so that
        the pool reads it now rather than at its next heartbeat."""
        return self.prefix + "poolcmds"

    @property
    def web_audit(self) -> str:
        """List of the changes made through the web UI and its API, newest first (JSON
        entries; see :mod:`rota.web.audit`)."""
        return self.prefix + "web:audit"

    @property
    def web_sessions_ended(self) -> str:
        """Sorted set of the web UI's sessions ended by a logout: id -> when the session
        would have expired (ms), kept until then (see :mod:`rota.web.sessions`)."""
        return self.prefix + "web:ended"

    @property
    def scheduled(self) -> str:
        return self.prefix + "scheduled"

    @property
    def retry(self) -> str:
        return self.prefix + "retry"

    @property
    def dead(self) -> str:
        return self.prefix + "dead"

    @property
    def complete(self) -> str:
        """Kept complete jobs: id -> time it completed (ms); the oldest beyond
        ``complete_max_count`` are deleted by the finish that adds more."""
        return self.prefix + "complete"

    @property
    def expiring(self) -> str:
        """Jobs enqueued with an expiry: id -> the expiry (ms), read by the promote
        script to end those not started in time."""
        return self.prefix + "expiring"

    @property
    def waiting(self) -> str:
        """Jobs waiting for others to complete: id -> time it started waiting (ms)."""
        return self.prefix + "waiting"

    @property
    def never(self) -> str:
        """A key that is never written: Redis 6.2 scripts delete it as their first
        write (see rota.protocol.render)."""
        return self.prefix + "never"

    @property
    def names(self) -> str:
        return self.prefix + "names"

    @property
    def forget_turn(self) -> str:
        """String held for a while by the pool whose turn it is to forget idle names, so
        that one pool of the namespace does it per turn, not each of them."""
        return self.prefix + "forgetturn"

    @property
    def idle(self) -> str:
        """Hash of job names with nothing (no job, limit or pool): name -> since (ms)."""
        return self.prefix + "idle"

    @property
    def paused(self) -> str:
        return self.prefix + "paused"

    @property
    def ready(self) -> str:
        """Job names whose queue may hold runnable jobs: what a fetch visits. Every
        script that fills a queue adds the name; a fetch removes it when it finds the
        queue empty, the name paused or at its concurrency limit."""
        return self.prefix + "ready"

    @property
    def leased(self) -> str:
        """Job names whose running set may hold leases: what most reaper passes visit.
        A fetch adds the names it leases; the reaper removes those with none left."""
        return self.prefix + "leased"

    @property
    def limits(self) -> str:
        return self.prefix + "limits"

    @property
    def limit_totals(self) -> str:
        """(Shard 0) job name -> its whole limit, which the parts (``limits``) keep to."""
        return self.prefix + "limittotals"

    @property
    def rate_totals(self) -> str:
        """(Shard 0) job name -> its whole rate, which the parts (``rates``) keep to."""
        return self.prefix + "ratetotals"

    @property
    def rebalancer(self) -> str:  # (shard 0) '<pool id> <lease number>', with PX
        return self.prefix + "rebalancer"

    @property
    def rebalance_count(self) -> str:  # (shard 0) the last lease number (INCR)
        return self.prefix + "rebalancecount"

    @property
    def rebalance_fence(self) -> str:  # (each shard) the highest lease number that read it
        return self.prefix + "rebalancefence"

    @property
    def rates(self) -> str:
        """Job name -> its rate limit, ``<count>/<period in ms>``."""
        return self.prefix + "rates"

    @property
    def rate_tat(self) -> str:
        """Job name -> when (ms) its next job may start under its rate limit."""
        return self.prefix + "ratetat"

    @property
    def priorities(self) -> str:
        return self.prefix + "priorities"

    @property
    def pools(self) -> str:
        return self.prefix + "pools"

    @property
    def beats(self) -> str:
        """Redis's own clock at the last heartbeat of any pool (``at``) and since when
        heartbeats land without a gap (``since``): a reaper waits while they do not (a
        stopped or paused Redis held every pool's beat back)."""
        return self.prefix + "beats"

    @property
    def stats(self) -> str:
        return self.prefix + "stats"

    @property
    def sched_wake(self) -> str:
        """Wake list of the schedulers: pushed when a job is scheduled or retried."""
        return self.prefix + "schedwake"

    @property
    def abort(self) -> str:
        """Pub/sub channel announcing abort requests for running jobs."""
        return self.prefix + "abort"
