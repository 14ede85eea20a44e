"""A `vmmkit serve` started for a GPU check, and its HTTP API, for the scripts in scripts/gpu/.

    server = ServeProcess("name", [...serve arguments...], log_path)   # waits for "listening on"
    status, answer = server.call("POST", "/api/generate", {"model": "m", "prompt": "hi", "stream": False})
    server.metrics()["vmmkit_device_used_bytes"]
    server.stop(exit_code)                                             # ends it, then exits
"""
import json
import select
import subprocess
import sys
import urllib.error
import urllib.request


class ServeProcess:
    def __init__(self, name, arguments, log_path, start_seconds=60):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "w")
        command = ["./vmmkit", "serve", "--port", "0"] + arguments
        print(f"{name}:", " ".join(command), flush=True)
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.log, text=True)
        ready, _, _ = select.select([self.process.stdout], [], [], start_seconds)
        line = self.process.stdout.readline().strip() if ready else ""
        if not line.startswith("listening on "):
            print(f"{name}: the server did not start:", line or f"(no output in {start_seconds} s)")
            self.stop(1)
        self.base = line[len("listening on "):]
        print(f"{name}:", line, flush=True)

    def end(self):
        """Ends the server."""
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()
        print(f"{self.name}: server log in", self.log_path)

    def stop(self, code):
        """Ends the server and exits with code."""
        self.end()
        sys.exit(code)

    def call(self, method, path, body=None, timeout=300):
        """(status, parsed JSON or text) of one HTTP call."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                text, status = response.read().decode(), response.status
        except urllib.error.HTTPError as e:
            text, status = e.read().decode(), e.code
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def metrics(self):
        """/metrics as {name with labels: value}."""
        _, text = self.call("GET", "/metrics")
        values = {}
        for row in text.splitlines():
            if row and not row.startswith("#"):
                name, value = row.rsplit(" ", 1)
                values[name] = float(value)
        return values
