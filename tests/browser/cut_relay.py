"""A loopback TCP relay that cuts the network once, for the browser tests: connections to
LISTEN_PORT are passed through, both ways, to TARGET_PORT (the server-to-client way by
tests/e2e/tcp_relay.py's pump), and the client-to-server bytes are counted.

A line "arm N DOWN_MS" on CONTROL_PORT resets the counts and arms one cut: the connection
that carries byte N + 1 (counted over all connections since the arm) passes the first N
bytes, then it and every other open connection are reset (RST, both sides), and for
DOWN_MS milliseconds new connections are reset as they arrive: an outage, not just one
dropped connection, so that a browser's own silent re-send of the request (Chrome re-sends
a request whose reused connection was reset) fails too and the page sees the error. Then
the relay disarms. "stats" answers one JSON line: {"up": bytes passed client to server
since the arm, "cuts": cuts since then, "refused": connections reset during the outage}.

Usage: cut_relay.py LISTEN_PORT TARGET_PORT CONTROL_PORT
"""
import asyncio
import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from tcp_relay import pump  # noqa: E402


def reset(writer):
    """Closes a connection with a RST, as a network that drops it does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


class Relay:
    def __init__(self, target):
        self.target = target
        self.cut_after = None  # armed: cut once `up` would pass this many bytes
        self.down_ms = 0
        self.down_until = 0.0
        self.up = self.cuts = self.refused = 0
        self.open = set()  # (client_writer, server_writer) of each open connection

    def outage(self):
        self.cuts += 1
        self.down_until = time.monotonic() + self.down_ms / 1000
        for pair in list(self.open):
            for writer in pair:
                reset(writer)
        self.open.clear()

    async def handle(self, client_reader, client_writer):
        if time.monotonic() < self.down_until:
            self.refused += 1
            reset(client_writer)
            return
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except ConnectionError:
            client_writer.close()
            return
        pair = (client_writer, server_writer)
        self.open.add(pair)
        try:
            await asyncio.gather(self.pump_up(client_reader, server_writer), pump(server_reader, client_writer))
        finally:
            self.open.discard(pair)

    async def pump_up(self, reader, writer):
        try:
            while data := await reader.read(65536):
                if self.cut_after is not None and self.up + len(data) > self.cut_after:
                    keep = self.cut_after - self.up
                    self.cut_after = None
                    self.up += keep
                    writer.write(data[:keep])
                    await writer.drain()
                    self.outage()
                    return
                self.up += len(data)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def control(self, reader, writer):
        while line := await reader.readline():
            words = line.decode().split()
            if words[:1] == ["arm"] and len(words) == 3:
                self.up = self.cuts = self.refused = 0
                self.cut_after, self.down_ms = int(words[1]), int(words[2])
                answer = "ok"
            elif words == ["stats"]:
                answer = json.dumps({"up": self.up, "cuts": self.cuts, "refused": self.refused})
            else:
                answer = "error: arm N DOWN_MS | stats"
            writer.write((answer + "\n").encode())
            await writer.drain()
        writer.close()


async def main(listen, target, control_port):
    relay = Relay(target)
    server = await asyncio.start_server(relay.handle, "127.0.0.1", listen)
    control = await asyncio.start_server(relay.control, "127.0.0.1", control_port)
    async with server, control:
        await asyncio.gather(server.serve_forever(), control.serve_forever())


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
