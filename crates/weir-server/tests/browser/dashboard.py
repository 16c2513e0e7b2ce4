#!/usr/bin/env python3
"""Drives weir serve's /dashboard in headless Chromium (Debian's `chromium`) through the
DevTools protocol over a pipe (chromium.py: no port, no websocket, standard library
only). Run by crates/weir-server/tests/dashboard_browser.rs against a server it
started (a ManualClock, a rule `d.user` of one request per hour, an admin token); usable by
hand against any weir serve whose rules deny the second of two `--check-body` requests.

It checks that the page
  1. without a token, asks for one and its data endpoint refuses (401);
  2. with a wrong token, says it was refused and keeps nothing;
  3. with the token, loads: the rule and its file, the store's mode;
  4. shows a denial (its rule's chart and the most denied keys) within two seconds;
and that, once opened, it reports no error (console, uncaught exception, failed load);
and keeps a screenshot (--screenshot, under target/). Bounded: --budget seconds in all.
Exit status 0 when every check passed, 1 otherwise (the reason on stderr).
"""

import json
import sys
import time

from chromium import Failed, main, post, submit_token


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
    # The two refusals above are logged by Chromium as failed loads (401), as they should:
    # from here on, any error the page reports fails the test.
    browser.errors.clear()

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

    browser.expect_no_errors()
    print("ok: the page reported no error once opened")
    browser.screenshot(args.screenshot)
    print("ok: screenshot kept in %s" % args.screenshot)


def add_arguments(parser):
    parser.add_argument("--url", required=True, help="weir serve's HTTP address, http://host:port")
    parser.add_argument("--token", required=True, help="its admin token")
    parser.add_argument("--check-body", required=True, help="a /v1/check body denied the 2nd time")
    parser.add_argument("--rule", required=True, help="the id of the rule that denies it")
    parser.add_argument("--rules-file", required=True, help="the file that defines the rule")
    parser.add_argument("--key", required=True, help="text of the denied key")


if __name__ == "__main__":
    sys.exit(main(__doc__, add_arguments, run))
