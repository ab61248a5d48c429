"""Which names this server answers to, and who a client is: the upload routes' view of a request.

**Host names.** A page of another site can reach the server through DNS
rebinding: ``evil.example`` resolves to the attacker first, then to this server,
so the page is same-origin with itself, sends any header it likes, and its
``Origin`` matches its ``Host``. What it cannot choose is the name: its requests
say ``Host: evil.example``. So an upload is taken only when the name in ``Host``
(and in ``X-Forwarded-Host``, when that is the one the ``Origin`` matches) is one
this server answers to:

- an IP address, whatever it is (a rebound page always sends its own name);
- ``localhost``, and this machine's host name (``socket.gethostname()``, its
  first label, and its fully qualified name, looked up once, at the first upload
  that needs it: a lookup at start-up could stall a server whose DNS is slow);
- TensorBoard's ``--host``;
- the names of ``--mfu_allowed_hosts`` (``tb.example.com``; ``.example.com`` for
  every name under it; ``*`` turns the check off), for a proxy in front or a DNS
  alias.

**Clients.** The per-client cap on uploads goes by the remote address of the
connection: an IPv4 address, or the /64 network of an IPv6 one (one host
usually holds a whole /64). Behind a proxy, every client has the proxy's
address and so shares one quota: ``X-Forwarded-For`` is not read, as any client
could write it.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

ANY_HOST = "*"


def hostname_of(netloc: str) -> str:
    """The host name of ``name:port`` / ``[v6]:port``, lower case, no trailing dot.
    ValueError when it does not parse (``[::1``)."""
    host = urlsplit("//" + netloc).hostname
    if host is None:
        raise ValueError(netloc)
    return host.rstrip(".")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])  # an IPv6 zone (fe80::1%eth0) is no part of the address
    except ValueError:
        return False
    return True


class AllowedHosts:
    def __init__(self, names: Iterable[str]) -> None:
        cleaned = {n.strip().lower().rstrip(".") for n in names} - {""}
        self.any = ANY_HOST in cleaned
        self.suffixes = tuple(n for n in cleaned if n.startswith("."))
        self.names = frozenset(n for n in cleaned if not n.startswith("."))

    @classmethod
    def from_flags(cls, flags: object) -> AllowedHosts:
        names = ["localhost", *_machine_names()]
        host = getattr(flags, "host", None)
        if host:
            names.append(str(host))
        extra = getattr(flags, "mfu_allowed_hosts", None) or ""
        names.extend(str(extra).split(","))
        return cls(names)

    def allows(self, host: str) -> bool:
        """Whether ``host`` (a host name, as ``hostname_of`` gives it) is one of this server's."""
        host = host.lower().rstrip(".")
        if self.any or _is_ip(host) or host in self.names or any(host.endswith(s) for s in self.suffixes):
            return True
        return host == _qualified_name()


def _machine_names() -> list[str]:
    try:
        name = socket.gethostname()
    except OSError:
        return []
    return [name, name.split(".", 1)[0]]


@functools.cache
def _qualified_name() -> str:
    try:
        return socket.getfqdn().lower().rstrip(".")
    except OSError:
        return ""


def client_key(remote_addr: str | None) -> str:
    """Who a request comes from, for the per-client cap (see the module's docstring)."""
    try:
        ip = ipaddress.ip_address((remote_addr or "").split("%", 1)[0])
    except ValueError:
        return remote_addr or ""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)
