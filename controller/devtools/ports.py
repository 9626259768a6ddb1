"""Free ports for the local control plane and the real node, each handed out once per process.

A probed port is free again once the probe socket closes, so until its taker binds it the kernel may
offer it to the next probe (etcd's client and peer ports, picked one after the other, could coincide).
Both `devcluster` and `realnode` pick ports here, so neither hands out a port the other already did."""

from __future__ import annotations

import socket

#: Ports `free_port` handed out in this process: never handed out twice.
_HANDED_OUT: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A free port on `host` ("" for every interface) for a process about to bind it."""
    while True:
        with socket.socket() as sock:
            sock.bind((host, 0))
            port: int = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def free_port_near(preferred: int, host: str = "127.0.0.1") -> int:
    """`preferred` when nothing listens there and it was not handed out, else any free port (for the
    UI of `zonda up`, which people open by its usual port)."""
    if preferred not in _HANDED_OUT:
        with socket.socket() as probe:
            try:
                probe.bind((host, preferred))
            except OSError:
                pass
            else:
                _HANDED_OUT.add(preferred)
                return preferred
    return free_port(host)
