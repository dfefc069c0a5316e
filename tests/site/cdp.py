"""A small Chrome DevTools Protocol client: headless Chromium (the system's, e.g. Debian's ``chromium``)
driven over its remote-debugging WebSocket. Enough for the site tests: open a page, wait for it to load,
evaluate JavaScript, and collect console errors, uncaught exceptions and failed requests.

Playwright's Python package would do the same, but its own browser download cannot be fetched everywhere
this suite runs; the protocol itself is small (https://chromedevtools.github.io/devtools-protocol/).
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser():
    """Path of a Chromium-family browser, or None."""
    env = os.environ.get("CHROMIUM")
    if env and shutil.which(env):
        return shutil.which(env)
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """``with Browser() as b: b.open(url); b.evaluate("document.title"); b.errors``."""

    def __init__(self, executable=None, timeout=30.0):
        import websocket                        # websocket-client (the site extra)
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="minigrad-chromium-")
        exe = executable or find_browser()
        if exe is None:
            raise RuntimeError("no Chromium-family browser found")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = self._port()
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout))
        page = next(p for p in pages if p.get("type") == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True)
        self._id = 0
        self.events = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def _port(self):
        path = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if os.path.exists(path):
                lines = open(path).read().split()
                if lines:
                    return int(lines[0])
            if self.proc.poll() is not None:
                raise RuntimeError(f"the browser exited with code {self.proc.returncode}")
            time.sleep(0.05)
        raise RuntimeError("the browser did not open its debugging port")

    # --- protocol -----------------------------------------------------------------------------------
    def send(self, method, **params):
        self._id += 1
        ident = self._id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, method, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        for i, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(i)
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == method:
                return msg
            self.events.append(msg)
        raise TimeoutError(f"no {method} within {timeout or self.timeout} s")

    # --- what the tests use -------------------------------------------------------------------------------
    def open(self, url):
        """Navigate and wait for the load event; returns the errors seen while loading."""
        self.events.clear()
        self.send("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")
        self.evaluate("new Promise(r => setTimeout(r, 100))")   # let deferred scripts run
        return self.errors()

    def evaluate(self, expression):
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate({expression[:60]!r}): {res['exceptionDetails'].get('text')}")
        return res["result"].get("value")

    def wait_until(self, expression, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"{expression!r} stayed false for {timeout} s")

    def errors(self):
        """Console errors, uncaught exceptions, error log entries (failed resources) since the last open."""
        out = []
        for ev in self.events:
            m, p = ev.get("method"), ev.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append("exception: " + p["exceptionDetails"].get("text", "") + " " +
                           str(p["exceptionDetails"].get("exception", {}).get("description", "")))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(str(a.get("value", a.get("description", "")))
                                                        for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
            elif m == "Network.loadingFailed" and not p.get("canceled"):
                out.append(f"request failed: {p.get('errorText')}")
        return out

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
