"""The test servers' ports: below the kernel's ephemeral range, so that no outgoing
connection's source port takes one between its check and its server's bind, and one
after another within a process, from a slice no other process hands out."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from rota.testing.embedded import free_port, refusing_port


def test_free_ports_come_from_below_the_ephemeral_range_one_after_another() -> None:
    first, second = free_port(), free_port()
    assert first != second
    assert all(20000 <= port < 32768 for port in (first, second)), (first, second)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", second))  # free when handed out


def test_two_processes_whose_ids_pick_one_slice_hand_out_ports_of_different_slices() -> None:
    """Slices picked by process id alone were shared by two processes whose ids agree
    modulo the slice count (one run in ten with four test processes): each holds its
    own, whatever its id."""
    script = (
        "import os, sys\n"
        "from rota.testing import embedded\n"
        "os.getpid = lambda: 7  # both ask first for the same slice\n"
        "print(embedded.free_port(), flush=True)\n"
        "sys.stdin.read()\n"  # holds its slice until told to go
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    try:
        ports = [int(p.stdout.readline()) for p in procs if p.stdout]
    finally:
        for p in procs:
            p.communicate("", timeout=30)
    slices = {(port - 20000) // 192 for port in ports}
    assert len(ports) == 2 and len(slices) == 2, ports


def test_a_refusing_port_refuses_and_cannot_be_taken() -> None:
    with refusing_port() as port:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
        with (
            socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other,
            pytest.raises(OSError, match="in use"),
        ):
            other.bind(("127.0.0.1", port))
