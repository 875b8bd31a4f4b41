"""One module per benchmarked system: its worker app, its jobs and a ``Producer``.

Each module is imported by that system's own worker process (through the system's CLI)
and by the producer process, both in the system's own virtual environment.
"""
