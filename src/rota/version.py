"""rota's version, below every module that names it (spans, pools, the web UI, the CLI)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
