#!/usr/bin/env python3
"""A webhook receiver for capfleet's notifications (the tests' real HTTP peer).

    notify_receiver.py PORT_FILE LOG_FILE MODE

Listens on a free loopback port (written to PORT_FILE), checks each POST's
`X-Capfleet-Signature: sha256=<hex>` against HMAC-SHA256 of the body under the
secret in $NOTIFY_SECRET (Python's own hmac, not capfleet's code), and appends
one JSON line per request to LOG_FILE: the event and delivery headers, whether
the signature holds, the body, the status answered. MODE:
  ok     every request 200
  flaky  the first attempt of each delivery 500, the next ones 200
  hang   never answers (holds the connection for 120 s)
"""
import hashlib
import hmac
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port_file, log_file, mode = sys.argv[1], sys.argv[2], sys.argv[3]
secret = os.environ["NOTIFY_SECRET"].encode()
seen = set()
lock = threading.Lock()


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if mode == "hang":
            time.sleep(120)
            return
        delivery = self.headers.get("X-Capfleet-Delivery", "")
        want = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
        got = self.headers.get("X-Capfleet-Signature", "")
        with lock:
            first = delivery not in seen
            seen.add(delivery)
        status = 500 if (mode == "flaky" and first) else 200
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        line = {
            "event": self.headers.get("X-Capfleet-Event"),
            "delivery": delivery,
            "signature_ok": hmac.compare_digest(want, got),
            "content_type": self.headers.get("Content-Type"),
            "body": parsed,
            "status": status,
        }
        with lock, open(log_file, "a") as f:
            f.write(json.dumps(line) + "\n")
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
server.daemon_threads = True
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
