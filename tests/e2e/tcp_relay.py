"""A loopback TCP relay for the end-to-end tests: connections to LISTEN_PORT are passed
through, both ways, to TARGET_PORT. Stopped with SIGSTOP it passes nothing while keeping
every connection open, as a network that drops packets does; SIGCONT heals it.

Usage: tcp_relay.py LISTEN_PORT TARGET_PORT
"""
import asyncio
import sys


async def pump(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def relay(client_reader, client_writer, target):
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
    except ConnectionError:
        client_writer.close()
        return
    await asyncio.gather(pump(client_reader, server_writer), pump(server_reader, client_writer))


async def main(listen, target):
    server = await asyncio.start_server(lambda r, w: relay(r, w, target), "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
