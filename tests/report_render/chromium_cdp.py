"""A headless Chromium driven over the DevTools protocol, with the standard library only.

Chromium is started with --remote-debugging-pipe: it reads protocol messages from file
descriptor 3 and writes them to descriptor 4, each a JSON object ended by a NUL byte, so no
websocket client is needed. One browser serves every page of a test run (a launch costs about
a second on 2 cores). For each page, Page.open() records every network request the page makes
(Network.requestWillBeSent), every console or log entry (Content-Security-Policy violations
are reported there), evaluates an expression in the loaded page and takes a PNG screenshot.
"""
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
import zlib


class CdpError(Exception):
    pass


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, binary, width=1200, height=900, timeout=60):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="ncert-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def at_3_and_4():
            # Move both ends above 10 first, so that placing one at 3 or 4 cannot close the other.
            r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)

        args = [binary, "--headless", "--disable-gpu", "--no-sandbox", "--remote-debugging-pipe",
                "--user-data-dir=" + self.profile, "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--hide-scrollbars", "--mute-audio",
                "--window-size=%d,%d" % (width, height), "about:blank"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=at_3_and_4, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events = []  # events not yet consumed: (sessionId, method, params)

    # ---- the protocol ------------------------------------------------------------------

    def _read_message(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError("no answer from Chromium within %d s" % self.timeout)
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise CdpError("Chromium closed the pipe (exit %s)" % self.proc.poll())
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=None):
        self._next_id += 1
        mid = self._next_id
        message = {"id": mid, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == mid:
                if "error" in m:
                    raise CdpError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            if "method" in m:
                self.events.append((m.get("sessionId"), m["method"], m.get("params", {})))

    def wait_event(self, method, session):
        deadline = time.monotonic() + self.timeout
        while True:
            for i, (s, name, params) in enumerate(self.events):
                if s == session and name == method:
                    del self.events[i]
                    return params
            m = self._read_message(deadline)
            if "method" in m:
                self.events.append((m.get("sessionId"), m["method"], m.get("params", {})))

    def close(self):
        try:
            if self.proc.poll() is None:
                self.call("Browser.close")
                self.proc.wait(timeout=20)
        except Exception:  # the browser is gone or stuck: stop it
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        finally:
            os.close(self._to_browser)
            os.close(self._from_browser)
            shutil.rmtree(self.profile, ignore_errors=True)

    # ---- one page ----------------------------------------------------------------------

    def open(self, path, expression, screenshot=True):
        """Loads file `path` in a new tab; returns a Page with what happened."""
        url = "file://" + os.path.abspath(path)
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(domain + ".enable", {}, session)
        self.events = [e for e in self.events if e[0] != session]
        self.call("Page.navigate", {"url": url}, session)
        self.wait_event("Page.loadEventFired", session)
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        if "exceptionDetails" in result:
            raise CdpError("evaluation failed: %s" % result["exceptionDetails"])
        png = None
        if screenshot:
            png = base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"}, session)["data"])
        # Everything the page did, as the protocol reported it (requests, console, log).
        mine = [e for e in self.events if e[0] == session]
        self.events = [e for e in self.events if e[0] != session]
        self.call("Target.closeTarget", {"targetId": target})
        requests = [p["request"]["url"] for (_, m, p) in mine if m == "Network.requestWillBeSent"]
        messages = [p["entry"]["text"] for (_, m, p) in mine if m == "Log.entryAdded"]
        messages += [" ".join(str(a.get("value", "")) for a in p.get("args", []))
                     for (_, m, p) in mine if m == "Runtime.consoleAPICalled"]
        return Page(url, result["result"].get("value"), png, requests, messages)


class Page:
    def __init__(self, url, value, png, requests, messages):
        self.url = url
        self.value = value        # what the expression returned
        self.png = png            # bytes of the screenshot
        self.requests = requests  # URLs the page requested (its own URL included)
        self.messages = messages  # console and log entries


def png_colours(png, rows=None):
    """Distinct RGB(A) colours of a PNG (8-bit RGB or RGBA, not interlaced): the screenshot is
    decoded with zlib and its scanline filters undone, here, with no image library. Only the
    first `rows` rows are decoded when given (filters depend on the row above, so decoding
    starts at the top)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat = 8, b""
    width = height = None
    while pos < len(png):
        length = int.from_bytes(png[pos:pos + 4], "big")
        kind = png[pos + 4:pos + 8]
        data = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = int.from_bytes(data[0:4], "big"), int.from_bytes(data[4:8], "big")
            depth, colour, interlace = data[8], data[9], data[12]
            if depth != 8 or colour not in (2, 6) or interlace != 0:
                raise ValueError("unsupported PNG: depth %d colour %d interlace %d" % (depth, colour, interlace))
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    colours = set()
    for y in range(height if rows is None else min(rows, height)):
        start = y * (stride + 1)
        f = raw[start]
        line = bytearray(raw[start + 1:start + 1 + stride])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif f == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 0xFF
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        elif f != 0:
            raise ValueError("bad filter %d" % f)
        for x in range(0, stride, bpp * 4):  # every 4th pixel: enough to count colours
            colours.add(bytes(line[x:x + bpp]))
        prev = line
    return colours
