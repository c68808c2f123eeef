"""The browser upload benchmark's collector: appends the body of every POST (one JSON object
from the bench page) as a line to OUT_FILE, answers 204.
Usage: collector.py PORT OUT_FILE"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Collect(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(sys.argv[2], "ab") as out:
            out.write(body.replace(b"\n", b" ") + b"\n")
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Collect).serve_forever()
