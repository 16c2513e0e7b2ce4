"""Headless Chromium (Debian's `chromium`) spoken to through the DevTools protocol over a
pipe (--remote-debugging-pipe: no port, no websocket, standard library only), for the
dashboard's browser tests: dashboard.py (weir serve) and proxy_dashboard.py (weir proxy's
panels). Every wait is bounded; main() holds a script to its --budget in all.
"""

import argparse
import base64
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


class Failed(Exception):
    pass


class Browser:
    """A headless Chromium and one page in it, spoken to over fds 3 (in) and 4 (out)."""

    def __init__(self, chromium, log_path):
        self.profile = tempfile.mkdtemp(prefix="weir-dashboard-chromium-")
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()

        def pipes_on_3_and_4():
            # Copies above 4 first, so that neither dup2 clobbers the other's source.
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [
            chromium,
            "--headless",
            "--remote-debugging-pipe",
            "--user-data-dir=" + self.profile,
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-sync",
            "--disable-component-update",
            "--mute-audio",
            "--hide-scrollbars",
            "--window-size=1280,1400",
            "about:blank",
        ]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with it
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            preexec_fn=pipes_on_3_and_4,
            pass_fds=(3, 4),
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self.buffer = b""
        self.next_id = 0
        self.session = None
        # What the page reported as an error (console.error, an uncaught exception, a
        # failed load, a Content-Security-Policy refusal), as read with other answers.
        self.errors = []

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close", timeout=3)
                except Exception:
                    pass
                try:
                    self.proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
        finally:
            for fd in (self.to_child, self.from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failed("Chromium did not answer in time")
            ready, _, _ = select.select([self.from_child], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.from_child, 1 << 16)
            if not chunk:
                raise Failed("Chromium closed its DevTools pipe (exit %s)" % self.proc.poll())
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, timeout=10, page=False):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if page:
            message["sessionId"] = self.session
        os.write(self.to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read_message(deadline)
            if "method" in answer:
                self._note_event(answer)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise Failed("%s: %s" % (method, answer["error"]))
                return answer.get("result", {})

    def _note_event(self, event):
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            texts = [a.get("value", a.get("description", "")) for a in params.get("args", [])]
            self.errors.append("console.%s: %s" % (params["type"], " ".join(map(str, texts))))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            thrown = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append("uncaught: %s" % thrown)
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append("%s: %s %s" % (entry.get("source"), entry.get("text"), entry.get("url", "")))

    def expect_no_errors(self):
        """Fails if the page reported any error since the list was last cleared (the events
        still in the pipe are read first)."""
        self.eval("true")
        if self.errors:
            raise Failed("the page reported errors: %s" % "; ".join(self.errors))

    def open_page(self):
        # The first answer waits for Chromium to start: slow on a loaded machine.
        target = self.send("Target.createTarget", {"url": "about:blank"}, timeout=30)["targetId"]
        self.session = self.send(
            "Target.attachToTarget", {"targetId": target, "flatten": True}
        )["sessionId"]
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 1400, "deviceScaleFactor": 1, "mobile": False},
            page=True,
        )
        # Console messages, uncaught exceptions and the browser's own log (failed loads,
        # CSP refusals) arrive as events from here on.
        self.send("Runtime.enable", page=True)
        self.send("Log.enable", page=True)

    def navigate(self, url):
        self.send("Page.navigate", {"url": url}, page=True)
        self.wait_for("document.readyState === 'complete'", 10, "the page to load")

    def eval(self, expression, await_promise=False):
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": await_promise},
            page=True,
        )
        if "exceptionDetails" in result:
            raise Failed("%s threw %s" % (expression, result["exceptionDetails"]))
        return result["result"].get("value")

    def wait_for(self, expression, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            if self.eval(expression):
                return
            if time.monotonic() >= deadline:
                raise Failed("waited %.1f s for %s (%s)" % (timeout, what, expression))
            time.sleep(0.05)

    def screenshot(self, path):
        shot = self.send(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True},
            page=True,
            timeout=20,
        )
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))


def post(url, body):
    request = urllib.request.Request(
        url, data=body.encode(), method="POST", headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def get(url, headers=None):
    """GET url: its status (an HTTP error's too)."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def submit_token(browser, token):
    """Types token into the dashboard's login form and submits it."""
    browser.eval(
        "document.getElementById('token').value = %s;"
        "document.getElementById('login').requestSubmit(); true" % json.dumps(token)
    )


def main(doc, add_arguments, run):
    """Parses the arguments (--chromium, --screenshot, --budget and the script's own, added
    by add_arguments), runs run(args, browser) within the budget, and keeps a screenshot of
    the page on failure. The exit status: 0 when every check passed, 1 otherwise."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--chromium", required=True, help="the Chromium binary")
    add_arguments(parser)
    parser.add_argument("--screenshot", required=True, help="where to keep the screenshot")
    parser.add_argument("--budget", type=int, default=45, help="seconds for everything")
    args = parser.parse_args()

    def out_of_time(signum, frame):
        raise Failed("out of time: %d s" % args.budget)

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(args.budget)
    # Beside the screenshot, named after it: two scripts' logs never mix.
    log = os.path.splitext(os.path.abspath(args.screenshot))[0] + "-chromium.log"
    os.makedirs(os.path.dirname(log), exist_ok=True)
    browser = Browser(args.chromium, log)
    try:
        run(args, browser)
    except Failed as failure:
        print("FAILED: %s (Chromium's log: %s)" % (failure, log), file=sys.stderr)
        try:
            browser.screenshot(args.screenshot)
            print("the page at the failure: %s" % args.screenshot, file=sys.stderr)
        except Exception:
            pass
        return 1
    finally:
        signal.alarm(0)
        browser.close()
    return 0

