"""A small Debug Adapter Protocol client for the tests: it starts
`python3 -m ljgdb dap`, sends requests and collects the events."""
import json
import subprocess
import sys

from .stop import ROOT


class DapClient(object):
    def __init__(self):
        self.p = subprocess.Popen([sys.executable, "-m", "ljgdb", "dap"], cwd=ROOT,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.seq = 0
        self.events = []

    def _recv(self):
        length = None
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise EOFError("the server closed its output: %s" % self.p.stderr.read().decode())
            line = line.strip()
            if not line:
                if length is not None:
                    break
                continue
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return json.loads(self.p.stdout.read(length).decode("utf-8"))

    def request(self, command, **arguments):
        """The response to `command` (a dict); events before it are kept."""
        self.seq += 1
        body = json.dumps({"seq": self.seq, "type": "request", "command": command,
                           "arguments": arguments}).encode()
        self.p.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.p.stdin.flush()
        while True:
            m = self._recv()
            if m["type"] == "event":
                self.events.append(m)
                continue
            assert m["type"] == "response" and m["request_seq"] == self.seq, m
            return m

    def ok(self, command, **arguments):
        r = self.request(command, **arguments)
        assert r["success"], r
        return r.get("body")

    def event(self, name):
        """The first event `name` received so far (it comes before the
        response to the request after it, at the latest)."""
        for e in self.events:
            if e["event"] == name:
                return e
        return None

    def close(self):
        if self.p.poll() is None:
            try:
                self.request("disconnect")
            except (EOFError, BrokenPipeError):
                pass
            self.p.stdin.close()
            self.p.wait(30)
        return self.p.returncode
