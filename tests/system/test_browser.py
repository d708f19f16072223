"""The report seen in a real browser: headless Chromium (Debian's `chromium`,
`make setup-browser`) opens index.html over the DevTools protocol, every
image must load and the page must log no error; a full-page screenshot is
taken, into the test's temporary folder (the tree stays clean), or for the
committed report to $IMPRINT_SCREENSHOT when set (`make snapshot`).

Without Chromium the test is skipped, except under CI (`CI` set), where a
missing browser is a failure: a green CI must not hide it."""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from harness.analysis.frames.load import load_frames
from harness.analysis.report.page import write_report

from reportdata import handmade_trace, scenario_traces

ROOT = Path(__file__).resolve().parents[2]
LATEST = ROOT / "reports" / "latest"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
         "--disable-extensions", "--hide-scrollbars", "--remote-debugging-port=0", "--window-size=1280,900"]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class DevTools:
    """Just enough of the Chrome DevTools protocol: commands and the events
    that arrive meanwhile."""

    def __init__(self, ws_url: str):
        import websocket  # websocket-client
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.ids = 0
        self.events: list[dict] = []

    def send(self, method: str, **params) -> dict:
        self.ids += 1
        self.ws.send(json.dumps({"id": self.ids, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.ids:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        for e in self.events:
            if e.get("method") == method:
                return e
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            self.events.append(msg)
            if msg.get("method") == method:
                return msg
        raise TimeoutError(method)

    def close(self) -> None:
        self.ws.close()


def open_in_chromium(page: Path, screenshot: Path) -> dict:
    """Load `page`; return the images' load status and the errors logged."""
    binary = _chromium()
    assert binary is not None
    profile = Path(tempfile.mkdtemp(prefix="imprint-chromium-"))
    proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None:
                raise RuntimeError(f"chromium exited: {proc.stderr.read().decode(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = json.load(resp)
        target = next(t for t in targets if t.get("type") == "page")
        dt = DevTools(target["webSocketDebuggerUrl"])
        try:
            for domain in ("Page", "Runtime", "Log"):
                dt.send(f"{domain}.enable")
            dt.events.clear()
            dt.send("Page.navigate", url=page.resolve().as_uri())
            dt.wait_for("Page.loadEventFired")
            images = dt.send("Runtime.evaluate", returnByValue=True, expression=(
                "Array.from(document.images).map(i => ({src: i.getAttribute('src'), complete: i.complete,"
                " width: i.naturalWidth, height: i.naturalHeight}))"))["result"]["value"]
            title = dt.send("Runtime.evaluate", expression="document.title", returnByValue=True)["result"]["value"]
            metrics = dt.send("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            shot = dt.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                           clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            errors = []
            for e in dt.events:
                m, p = e.get("method"), e.get("params", {})
                if m == "Runtime.exceptionThrown":
                    errors.append(p["exceptionDetails"].get("text", "exception"))
                elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                    errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
                elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                    errors.append(f"{p['entry'].get('text')} {p['entry'].get('url', '')}")
            return {"images": images, "errors": errors, "title": title}
        finally:
            try:
                dt.send("Browser.close")
            except Exception:
                pass
            dt.close()
    finally:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(autouse=True)
def _need_chromium():
    if _chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: `make setup-browser` installs Debian's chromium")
        pytest.skip("chromium is not installed (`make setup-browser`)")
    pytest.importorskip("websocket", reason="websocket-client is not installed (the `test` extra)")


def _check(result: dict, page: Path) -> None:
    names = sorted(re.sub(r"[?#].*$", "", i["src"]) for i in result["images"])
    assert names, "the page shows no image"
    broken = [i["src"] for i in result["images"] if not (i["complete"] and i["width"] > 0 and i["height"] > 0)]
    assert not broken, f"images that did not load: {broken}"
    assert sorted(p.name for p in page.parent.glob("*.png") if p.name != "screenshot.png") == names
    assert not result["errors"], f"the page logged errors: {result['errors']}"


def test_fresh_report_in_chromium(tmp_path: Path) -> None:
    scenario_traces(tmp_path / "traces")
    handmade_trace(tmp_path / "traces" / "local.jsonl", provider="local", provider_kind="local", ratios=[1.0] * 5)
    out = tmp_path / "report"
    write_report(load_frames([tmp_path / "traces"]), out)
    result = open_in_chromium(out / "index.html", out / "screenshot.png")
    _check(result, out / "index.html")
    assert result["title"] == "Imprint research-loop report"
    assert (out / "screenshot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_committed_report_in_chromium(tmp_path: Path) -> None:
    page = LATEST / "index.html"
    if not page.exists():
        pytest.skip("reports/latest/index.html is not generated yet (make snapshot)")
    shot = Path(os.environ.get("IMPRINT_SCREENSHOT") or tmp_path / "screenshot.png")
    result = open_in_chromium(page, shot)
    _check(result, page)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
