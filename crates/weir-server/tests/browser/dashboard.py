#!/usr/bin/env python3
"""Drives weir serve's /dashboard in headless Chromium (Debian's `chromium`) through the
DevTools protocol over a pipe (--remote-debugging-pipe: no port, no websocket, standard
library only). Run by crates/weir-server/tests/dashboard_browser.rs against a server it
started (a ManualClock, a rule `d.user` of one request per hour, an admin token); usable by
hand against any weir serve whose rules deny the second of two `--check-body` requests.

It checks that the page
  1. without a token, asks for one and its data endpoint refuses (401);
  2. with a wrong token, says it was refused and keeps nothing;
  3. with the token, loads: the rule and its file, the store's mode;
  4. shows a denial (its rule's chart and the most denied keys) within two seconds;
and keeps a screenshot (--screenshot, under target/). Bounded: --budget seconds in all.
Exit status 0 when every check passed, 1 otherwise (the reason on stderr).
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
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise Failed("%s: %s" % (method, answer["error"]))
                return answer.get("result", {})

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


def submit_token(browser, token):
    browser.eval(
        "document.getElementById('token').value = %s;"
        "document.getElementById('login').requestSubmit(); true" % json.dumps(token)
    )


def run(args, browser):
    base = args.url.rstrip("/")
    browser.open_page()

    # 1. No token: the page asks for one; its data endpoint refuses.
    browser.navigate(base + "/dashboard")
    browser.wait_for("document.body.dataset.state === 'locked'", 5, "the locked page")
    if not browser.eval("document.getElementById('board').hidden"):
        raise Failed("the board is shown without a token")
    status = browser.eval("fetch('/dashboard/data').then(r => r.status)", await_promise=True)
    if status != 401:
        raise Failed("/dashboard/data without a token answered %s, not 401" % status)
    print("ok: without a token the page is locked and its data refused (401)")

    # 2. A wrong token: refused, said so, nothing kept.
    submit_token(browser, "wrong-token-0123456789")
    browser.wait_for(
        "document.body.dataset.state === 'locked' &&"
        " document.getElementById('login-error').textContent.includes('401')",
        5,
        "the refusal of a wrong token",
    )
    if browser.eval("sessionStorage.length") != 0:
        raise Failed("a refused token was kept in sessionStorage")
    print("ok: a wrong token is refused and forgotten")

    # 3. The token: the rules, their file, the store's mode.
    submit_token(browser, args.token)
    browser.wait_for("document.body.dataset.state === 'live'", 5, "the live board")
    rule = json.dumps(args.rule)
    browser.wait_for(
        "!!document.querySelector('#rules tr[data-rule=%s]')" % json.dumps(rule)[1:-1], 5,
        "the rule in the rules table",
    )
    row = browser.eval(
        "document.querySelector('#rules tr[data-rule=%s]').textContent" % json.dumps(rule)[1:-1]
    )
    if args.rules_file not in row:
        raise Failed("the rule's row does not name its file %s: %r" % (args.rules_file, row))
    mode = browser.eval("document.getElementById('store-mode').textContent")
    if mode != "normal":
        raise Failed("the store's mode reads %r, not 'normal'" % mode)
    if args.token in browser.eval("location.href"):
        raise Failed("the token is in the page's URL")
    print("ok: with the token the page is live: rule %s from %s, store %s" % (args.rule, args.rules_file, mode))

    # 4. A denial shows within two seconds.
    shown = (
        "(() => { const chart = document.querySelector('.chart[data-rule=%s]');"
        " const top = document.querySelector('#top tbody td.key');"
        " return !!chart && Number(chart.dataset.denied) >= 1 &&"
        " !!top && top.textContent.includes(%s); })()"
        % (json.dumps(rule)[1:-1], json.dumps(args.key))
    )
    if browser.eval(shown):
        raise Failed("a denial is shown before any happened")
    statuses = [post(base + "/v1/check", args.check_body) for _ in range(2)]
    denied_at = time.monotonic()
    if statuses != [200, 429]:
        raise Failed("the two checks answered %s, not [200, 429]" % statuses)
    browser.wait_for(shown, 2.0, "the denial on the page")
    took = time.monotonic() - denied_at
    print("ok: the denial was on the page %.0f ms after it happened" % (took * 1000))

    browser.screenshot(args.screenshot)
    print("ok: screenshot kept in %s" % args.screenshot)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", required=True, help="the Chromium binary")
    parser.add_argument("--url", required=True, help="weir serve's HTTP address, http://host:port")
    parser.add_argument("--token", required=True, help="its admin token")
    parser.add_argument("--check-body", required=True, help="a /v1/check body denied the 2nd time")
    parser.add_argument("--rule", required=True, help="the id of the rule that denies it")
    parser.add_argument("--rules-file", required=True, help="the file that defines the rule")
    parser.add_argument("--key", required=True, help="text of the denied key")
    parser.add_argument("--screenshot", required=True, help="where to keep the screenshot")
    parser.add_argument("--budget", type=int, default=45, help="seconds for everything")
    args = parser.parse_args()

    def out_of_time(signum, frame):
        raise Failed("out of time: %d s" % args.budget)

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(args.budget)
    log = os.path.join(os.path.dirname(os.path.abspath(args.screenshot)), "chromium.log")
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


if __name__ == "__main__":
    sys.exit(main())
