"""TCPStore: the rendezvous every rank meets at, and the job's witness when a rank goes missing.

A key-value store on one TCP socket (the standard library's ``socketserver``; one JSON line per request),
as PyTorch's ``TCPStore``. It carries only small things: who joined, the NCCL unique id, and each rank's
*heartbeat*. Tensors never travel here: NCCL and MPI move them.

Why heartbeats: when a rank dies or never starts, the others must say *which* rank is missing and where
it stopped, instead of hanging. Every rank keeps one connection open on which a background thread reports
"alive, at collective #k (all_reduce)" every ``interval`` seconds. The server stamps each report with its
own clock and notices a closed connection at once (the kernel closes a dead process's sockets), so
``status()`` can tell "rank 1 died 0.8 s ago at collective #4" from "rank 1 is alive but still at #3".
"""
import base64
import json
import socket
import socketserver
import threading
import time

from ..errors import DistTimeoutError, DistributedError

__all__ = ["TCPStore"]


class _Handler(socketserver.StreamRequestHandler):
    def handle(self):
        server, rank = self.server, None
        try:
            for line in self.rfile:
                msg = json.loads(line)
                op = msg["op"]
                if op == "beat":                       # fire and forget: no reply
                    rank = msg["rank"]
                    server.beat(rank, msg)
                    continue
                with server.lock:
                    reply = server.apply(op, msg)
                self.wfile.write((json.dumps(reply) + "\n").encode())
        except (OSError, ValueError):
            pass
        finally:
            if rank is not None:
                server.lost(rank)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address):
        super().__init__(address, _Handler)
        self.lock = threading.Lock()
        self.data = {}
        self.ranks = {}  # rank -> {"seen": server time, "seq", "what", "alive", "left"}

    def apply(self, op, msg):
        if op == "set":
            self.data[msg["key"]] = msg["value"]
            return {}
        if op == "get":
            return {"value": self.data.get(msg["key"])}
        if op == "add":
            value = int(self.data.get(msg["key"], 0)) + int(msg["amount"])
            self.data[msg["key"]] = value
            return {"value": value}
        if op == "status":
            now = time.monotonic()
            return {"ranks": {str(r): dict(v, age=now - v["seen"]) for r, v in self.ranks.items()}}
        raise ValueError(f"unknown store op {op!r}")

    def beat(self, rank, msg):
        with self.lock:
            entry = self.ranks.setdefault(rank, {"left": False})
            entry.update(seen=time.monotonic(), seq=msg["seq"], what=msg["what"], alive=True,
                         groups=msg.get("groups", {}))
            if msg.get("bye"):
                entry["left"] = True

    def lost(self, rank):
        with self.lock:
            entry = self.ranks.get(rank)
            if entry is not None and entry["alive"]:
                entry.update(alive=False, seen=time.monotonic())


class TCPStore:
    """``TCPStore(host, port, is_master=False, timeout=300.0)``: a client, plus the server when
    ``is_master`` (``port=0`` picks a free port; read it back from ``.port``).

    ``set(key, bytes)``, ``get(key)`` (waits up to the timeout), ``add(key, n) -> int``, ``wait(keys)``.
    """

    def __init__(self, host="127.0.0.1", port=0, is_master=False, timeout=300.0):
        self.host, self.timeout = host, float(timeout)
        self._server = None
        if is_master:
            self._server = _Server((host, port))
            port = self._server.server_address[1]
            threading.Thread(target=self._server.serve_forever, name="minigrad-store", daemon=True).start()
        self.port = int(port)
        self._lock = threading.Lock()
        self._sock, self._file = self._connect()
        self._beats = None

    # --- the connection ------------------------------------------------------------------------------
    def _connect(self, deadline=None):
        deadline = deadline or time.monotonic() + self.timeout
        delay = 0.01
        while True:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=max(0.1, min(5.0, self.timeout)))
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return sock, sock.makefile("rwb")
            except OSError as e:
                if time.monotonic() > deadline:
                    raise DistTimeoutError(
                        f"rendezvous: could not reach the store at {self.host}:{self.port} within "
                        f"{self.timeout:g} s ({e}); is rank 0 (or the launcher) running?") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def _request(self, **msg):
        with self._lock:
            try:
                self._file.write((json.dumps(msg) + "\n").encode())
                self._file.flush()
                line = self._file.readline()
            except OSError as e:
                line, err = b"", e
            else:
                err = None
        if not line:
            raise DistributedError(f"store {self.host}:{self.port}: connection lost during {msg['op']} "
                                   f"(the process hosting the store, rank 0 or the launcher, has exited?)"
                                   + (f": {err}" if err else ""))
        return json.loads(line)

    # --- key-value -----------------------------------------------------------------------------------
    def set(self, key, value):
        value = value.encode() if isinstance(value, str) else bytes(value)
        self._request(op="set", key=key, value=base64.b64encode(value).decode())

    def get(self, key, timeout=None):
        """The value of ``key`` (bytes), waiting for it to be set; a DistTimeoutError after ``timeout``."""
        value = self.try_get(key, timeout)
        if value is None:
            raise DistTimeoutError(f"store: key {key!r} was not set within {self._t(timeout):g} s")
        return value

    def try_get(self, key, timeout=0.0):
        deadline, delay = time.monotonic() + self._t(timeout), 0.001
        while True:
            value = self._request(op="get", key=key)["value"]
            if value is not None:
                return base64.b64decode(value)
            if time.monotonic() >= deadline:
                return None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def add(self, key, amount=1):
        return int(self._request(op="add", key=key, amount=int(amount))["value"])

    def wait(self, keys, timeout=None):
        for key in keys:
            self.get(key, timeout)

    def _t(self, timeout):
        return self.timeout if timeout is None else float(timeout)

    # --- heartbeats ----------------------------------------------------------------------------------
    def start_heartbeat(self, rank, progress, interval=0.2):
        """Report ``progress() -> (seq, what[, {group: seq}])`` for ``rank`` every ``interval`` s, and at once
        whenever the returned ``wake()`` is called, on a connection of its own (the server notices when it
        closes)."""
        sock, f = self._connect()
        stop, wake = threading.Event(), threading.Event()

        def beat(bye=False):
            seq, what, *groups = progress()
            f.write((json.dumps({"op": "beat", "rank": rank, "seq": seq, "what": what, "bye": bye,
                                 "groups": groups[0] if groups else {}}) + "\n").encode())
            f.flush()

        def loop():
            try:
                while not stop.is_set():
                    wake.wait(interval)
                    wake.clear()
                    if not stop.is_set():
                        beat()
                beat(bye=True)
            except OSError:
                pass
            finally:
                sock.close()

        beat()
        thread = threading.Thread(target=loop, name=f"minigrad-heartbeat-{rank}", daemon=True)
        thread.start()
        self._beats = (stop, wake, thread)
        return wake.set

    def status(self):
        """{rank: {"alive", "left", "age" (s since last news), "seq", "what", "groups"}} as the server sees
        it (``groups``: the last collective the rank issued in each subgroup)."""
        return {int(r): v for r, v in self._request(op="status")["ranks"].items()}

    def close(self):
        if self._beats is not None:
            stop, wake, thread = self._beats
            stop.set()
            wake.set()
            thread.join(timeout=2.0)
            self._beats = None
        try:
            self._sock.close()
        except OSError:
            pass
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
