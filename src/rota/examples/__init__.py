"""Example jobs shipped with rota, so that ``rota demo`` runs after a plain
``pip install rota``, outside any checkout."""
