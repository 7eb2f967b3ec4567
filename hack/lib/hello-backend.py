#!/usr/bin/env python3
"""A tiny HTTP backend for the local demo: what kube-proxy's NodePort and a pod would answer.

    hello-backend.py ADDRESS:PORT:NAME...

Listens on every ADDRESS:PORT (a Node's InternalIP and the Service's nodePort; with
--cloud gce, whose forwarding rules keep the destination port, the Service port and kube-proxy's
health port 10256; all 127.x addresses are local on Linux) and answers GET with "hello from NAME". Runs until killed.
"""
import http.server
import sys
import threading


def listen(address, port, name):
    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = f"hello from {name} ({address}:{port})\n".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):
            print(f"{name}: {self.client_address[0]} {fmt % args}", flush=True)

    try:
        server = http.server.ThreadingHTTPServer((address, port), Hello)
    except OSError as e:
        sys.exit(f"hello-backend.py: cannot listen on {address}:{port} for {name}: {e}")
    print(f"hello-backend: {name} listening on {address}:{port}", flush=True)
    return server


def main(argv):
    if not argv:
        sys.exit("usage: hello-backend.py ADDRESS:PORT:NAME...")
    servers = []
    for spec in argv:
        try:
            address, port, name = spec.split(":", 2)
            port = int(port)
        except ValueError:
            sys.exit(f"hello-backend.py: bad listener {spec!r}: want ADDRESS:PORT:NAME")
        servers.append(listen(address, port, name))
    # Every port is bound before any is served: a failure above exits non-zero at once.
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main(sys.argv[1:])
