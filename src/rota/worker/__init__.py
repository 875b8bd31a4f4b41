"""The worker side: a pool of coroutine workers with its fetcher, acker and scheduler."""
