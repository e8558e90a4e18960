#!/usr/bin/env python3
"""A loopback-only HTTP(S) server for timerd's webhook tests. Python 3 standard library only.

    python3 webhook_server.py --log FILE [--script JSON_FILE] [--tls CERT KEY]

Binds 127.0.0.1 on a free port and prints `PORT <n>` on stdout (flushed) once it is listening.

Every request is appended to FILE as one JSON line, as soon as it has been read (before any delay):
    {"t": time.time(), "mono": time.monotonic(), "method": "POST", "path": "/p?q=1",
     "headers": {"lower-case-name": "value", ...}, "body": "text"}
(a header sent several times has its values joined with ", ").

The script file maps a request path (tried with its query first, then without) to a list of
responses used in order, the last one repeating:
    {"/flaky": [{"status": 503, "body": "down", "delay": 0.2, "headers": {"Retry-After": "1"}},
                {"status": 200}],
     "/moved": [{"status": 302, "headers": {"Location": "http://127.0.0.1:1234/target"}}],
     "/stuck": ["hang"]}
"hang" reads and logs the request, then never answers: the connection is held until the server
is killed. Paths not in the script answer 200 "ok". The script file is re-read whenever it changes
(replace it atomically), so a test can write responses that need the port; how many responses of a
path were used is kept across re-reads.

SIGTERM or SIGINT stops the server and exits with status 0.
"""

import argparse
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Script:
    """The scripted responses, re-read when the file changes, and how many of each path were used."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.stamp = None
        self.responses = {}
        self.used = {}

    def _reload(self):
        if self.path is None:
            return
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            self.responses, self.stamp = {}, None
            return
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        if stamp == self.stamp:
            return
        with open(self.path, encoding="utf-8") as handle:
            responses = json.load(handle)
        if not isinstance(responses, dict):
            raise ValueError("the script must be a JSON object: path -> list of responses")
        self.responses, self.stamp = responses, stamp

    def next(self, path):
        """The response for a request to `path` (with its query): a dict, or the string "hang"."""
        with self.lock:
            self._reload()
            key = path if path in self.responses else path.split("?", 1)[0]
            steps = self.responses.get(key)
            if not steps:
                return {"status": 200, "body": "ok"}
            if not isinstance(steps, list):
                steps = [steps]
            index = self.used.get(key, 0)
            self.used[key] = index + 1
            return steps[min(index, len(steps) - 1)]


class RequestLog:
    def __init__(self, path):
        self.lock = threading.Lock()
        self.handle = open(path, "a", encoding="utf-8")

    def append(self, entry):
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self.lock:
            self.handle.write(line)
            self.handle.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "webhook-test-server"
    # An idle keep-alive connection is dropped after this long (a "hang" does not read the socket).
    timeout = 120

    def setup(self):
        connection = self.request
        if isinstance(connection, ssl.SSLSocket):
            # The handshake runs here, in the connection's own thread, not in the accept loop.
            connection.settimeout(10)
            connection.do_handshake()
        super().setup()

    def version_string(self):
        return self.server_version

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass

    def _read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size_line = self.rfile.readline()
                if not size_line:
                    break
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    # Trailers, up to the empty line.
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _handle(self):
        body = self._read_body()
        headers = {}
        for name, value in self.headers.items():
            name = name.lower()
            headers[name] = headers[name] + ", " + value if name in headers else value
        self.server.request_log.append({
            "t": time.time(),
            "mono": time.monotonic(),
            "method": self.command,
            "path": self.path,
            "headers": headers,
            "body": body.decode("utf-8", errors="replace"),
        })
        step = self.server.script.next(self.path)
        if step == "hang":
            # Hold the connection, unanswered, until the process ends.
            threading.Event().wait()
            return
        delay = float(step.get("delay", 0))
        if delay > 0:
            time.sleep(delay)
        payload = str(step.get("body", "")).encode("utf-8")
        extra = {str(k): str(v) for k, v in (step.get("headers") or {}).items()}
        self.send_response(int(step.get("status", 200)))
        lower = {k.lower() for k in extra}
        if "content-type" not in lower:
            self.send_header("Content-Type", "text/plain; charset=utf-8")
        if "content-length" not in lower:
            self.send_header("Content-Length", str(len(payload)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD" and payload:
            self.wfile.write(payload)
        self.wfile.flush()

    def _safe_handle(self):
        try:
            self._handle()
        except (BrokenPipeError, ConnectionResetError, socket.timeout, ssl.SSLError):
            # The client gave up (its timeout, a retry): nothing to answer.
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _safe_handle


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Many clients connect at once in the concurrency test; the default backlog of 5 would drop SYNs.
    request_queue_size = 1024

    def handle_error(self, request, client_address):
        # A failed TLS handshake (the client does not trust us) or a reset is part of the tests.
        error = sys.exc_info()[1]
        print(f"connection from {client_address[0]}:{client_address[1]}: {type(error).__name__}: {error}",
              file=sys.stderr, flush=True)


def main():
    parser = argparse.ArgumentParser(description="HTTP(S) test server for timerd webhook tests")
    parser.add_argument("--log", required=True, help="append one JSON line per request to this file")
    parser.add_argument("--script", help="JSON file: path -> list of responses")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve HTTPS with this PEM certificate and key")
    options = parser.parse_args()

    server = Server(("127.0.0.1", 0), Handler)
    server.request_log = RequestLog(options.log)
    server.script = Script(options.script)
    if options.tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(options.tls[0], options.tls[1])
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)

    def stop(signum, frame):
        # shutdown() waits for serve_forever() to return, so it cannot run on the thread serving.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
