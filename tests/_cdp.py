"""A headless Chromium driven over the DevTools protocol, with the standard library only: a
page opened, JavaScript evaluated in it (clicks are real DOM events), downloads saved to a
folder. Enough to use a self-contained page as a person would."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import struct
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any


class _WebSocket:
    def __init__(self, url: str):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        assert m, url
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {m.group(3)} HTTP/1.1\r\nHost: {m.group(1)}:{m.group(2)}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert b" 101 " in head.split(b"\r\n")[0], head

    def send(self, text: str) -> None:
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        header = bytes([0x81])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(header + mask + body)

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("DevTools socket closed")
            buf += chunk
        return buf

    def recv(self) -> str:
        parts = []
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            parts.append(self._exact(n))
            if b0 & 0x80:  # FIN
                return b"".join(parts).decode()


class Chromium:
    """`with Chromium(binary, tmp) as c: c.open(url); c.js("...")`."""

    def __init__(self, binary: str, tmp: Path):
        self.tmp = tmp
        self.proc = subprocess.Popen(
            [
                binary,
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={tmp / 'profile'}",
                "about:blank",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        line = ""
        while "DevTools listening on" not in line:
            line = self.proc.stderr.readline()
            if not line and (self.proc.poll() is not None or time.monotonic() > deadline):
                raise RuntimeError("chromium did not start its DevTools endpoint")
        self.port = int(re.search(r"ws://127\.0\.0\.1:(\d+)/", line).group(1))
        self.browser = _WebSocket(line.split("listening on ")[1].strip())
        self.page: _WebSocket | None = None
        self._id = 0

    def _call(self, ws: _WebSocket, method: str, **params: Any) -> dict:
        self._id += 1
        ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def downloads_to(self, folder: Path) -> None:
        self._call(
            self.browser, "Browser.setDownloadBehavior", behavior="allow", downloadPath=str(folder)
        )

    def open(self, url: str) -> None:
        target_url = urllib.parse.quote(url, safe="")  # a '#' or '?' of the page's own
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/json/new?{target_url}", method="PUT"
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            target = json.loads(resp.read())
        self.page = _WebSocket(target["webSocketDebuggerUrl"])
        # a new target starts on about:blank, already "complete": wait for the page itself
        self.wait_for(
            "location.href !== 'about:blank' && document.readyState === 'complete' && "
            "!!document.body",
            timeout=60,
        )

    def js(self, expression: str) -> Any:
        assert self.page is not None, "open a page first"
        r = self._call(self.page, "Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression[:80]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        """Poll a JavaScript expression until it is truthy (a page rendering after load)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.js(expression)
            except RuntimeError:  # e.g. the element not there yet: the page is still rendering
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"never true within {timeout:g} s: {expression[:120]}")
            time.sleep(0.25)

    def rendered_text(self, selector: str) -> str:
        """The text an element shows, CSS generated content (`::after`, counters) included:
        its static text in the accessibility tree, which the DOM's innerText leaves out."""
        assert self.page is not None, "open a page first"
        self._call(self.page, "Accessibility.enable")
        root = self._call(self.page, "DOM.getDocument")["root"]["nodeId"]
        node = self._call(self.page, "DOM.querySelector", nodeId=root, selector=selector)
        tree = self._call(
            self.page, "Accessibility.getPartialAXTree", nodeId=node["nodeId"], fetchRelatives=False
        )
        kids = self._call(
            self.page, "Accessibility.getChildAXNodes", id=tree["nodes"][0]["nodeId"]
        )["nodes"]
        return "".join(
            n.get("name", {}).get("value", "")
            for n in kids
            if n.get("role", {}).get("value") == "StaticText"
        )

    def click_button(self, label: str) -> None:
        """Click the last button whose text (or aria-label) starts with `label`."""
        ok = self.js(
            "(() => { const b = Array.from(document.querySelectorAll('button')).filter(b => "
            f"(b.innerText || b.getAttribute('aria-label') || '').trim().startsWith({label!r}));"
            " if (!b.length) return false; b[b.length - 1].click(); return true; })()"
        )
        if not ok:
            raise LookupError(f"no button {label!r} on the page")

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()
