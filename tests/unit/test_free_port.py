"""The test servers' ports: below the kernel's ephemeral range, so that no outgoing
connection's source port takes one between its check and its server's bind, and one
after another within a process."""

from __future__ import annotations

import socket

from rota.testing.embedded import free_port


def test_free_ports_come_from_below_the_ephemeral_range_one_after_another() -> None:
    first, second = free_port(), free_port()
    assert first != second
    assert all(20000 <= port < 32768 for port in (first, second)), (first, second)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", second))  # free when handed out
