"""A small Chrome DevTools Protocol client: headless Chromium driven over its remote
debugging WebSocket (Debian's python3-websocket), for the dashboard's browser test.

    with Browser(chromium, workdir) as b:
        b.navigate("http://127.0.0.1:8080/")
        b.eval("document.title")

Errors the page logs (uncaught exceptions, console.error) are collected in b.errors.
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

try:
    import websocket  # Debian's python3-websocket (scripts/deps.sh --test)
except ImportError:  # an interpreter other than Debian's (pyenv, a venv): its package directory
    sys.path.append("/usr/lib/python3/dist-packages")
    import websocket

START_TIMEOUT_S = 60  # Chromium starts in a few seconds; this is for a loaded machine
CALL_TIMEOUT_S = 60


class CdpError(RuntimeError):
    pass


class Browser:
    def __init__(self, chromium, workdir):
        self.profile = tempfile.mkdtemp(prefix="profile-", dir=workdir)
        self.log = open(os.path.join(workdir, "chromium.log"), "wb")
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-quic",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={self.profile}",
             "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=self.log, start_new_session=True)
        self.errors = []
        self.next_id = 0
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + START_TIMEOUT_S
        while not (os.path.exists(port_file) and open(port_file).read().count("\n") >= 1):
            if self.proc.poll() is not None or time.time() > deadline:
                self.close()
                raise CdpError("chromium did not open its debugging port (see chromium.log)")
            time.sleep(0.05)
        port = int(open(port_file).read().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=CALL_TIMEOUT_S))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=CALL_TIMEOUT_S,
                                              suppress_origin=True)
        self.call("Runtime.enable")
        self.call("Page.enable")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if getattr(self, "ws", None):
            self.ws.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def _event(self, msg):
        method = msg.get("method")
        if method == "Runtime.exceptionThrown":
            d = msg["params"]["exceptionDetails"]
            self.errors.append(f'{d.get("text", "exception")} {d.get("exception", {}).get("description", "")} line {d.get("lineNumber")}')
        elif method == "Runtime.consoleAPICalled" and msg["params"]["type"] == "error":
            self.errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in msg["params"]["args"]))

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise CdpError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def eval(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise CdpError(f"evaluating {expression[:80]!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def viewport(self, width, height, mobile):
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=mobile)

    def navigate(self, url):
        """Opens url and returns once its document has loaded."""
        self.call("Page.navigate", url=url)
        deadline = time.time() + CALL_TIMEOUT_S
        while self.eval("document.readyState + ' ' + location.href") != "complete " + url:
            if time.time() > deadline:
                raise CdpError(f"{url} did not load within {CALL_TIMEOUT_S} s")
            time.sleep(0.05)

    def screenshot(self, path, max_height=3000):
        """The whole page (up to max_height CSS pixels) at the viewport's width."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        width = self.eval("document.documentElement.clientWidth")
        clip = {"x": 0, "y": 0, "width": width, "height": min(size["height"], max_height), "scale": 1}
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
