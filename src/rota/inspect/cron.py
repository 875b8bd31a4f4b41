"""Periodic jobs turned off, and turning them off and on again.

A name turned off is a field of one hash (``Keys.cron_off``: name -> since when, ms),
which every pool's scheduler looks up when a fire time of the name comes: the time passes
without a job on every pool, and the pools keep their schedules, so turning it on again
takes effect at its next fire time. Kept in Redis, it outlives the pools and the UI.
"""

from __future__ import annotations

from rota.client.admin_reads import cron_rows as turned_off
from rota.client.admin_reads import cron_switch as switch

__all__ = ["switch", "turned_off"]
