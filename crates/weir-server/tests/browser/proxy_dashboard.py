#!/usr/bin/env python3
"""Drives weir proxy's /dashboard (on --api) in headless Chromium (chromium.py) and checks
that the proxy's own panels are drawn: the upstream breakers and the in-flight limit. Run
by crates/weir-cli/tests/dashboard_browser.rs against `weir proxy --max-in-flight auto
--breaker` in front of a backend that answers 200, and 500 on --fail-path; usable by hand
against any such proxy whose rules let a few hundred requests through and whose breaker
window is longer than the run.

It checks that
  1. with the token, the page is live and draws both panels before any traffic: the
     upstream's breaker closed with no call, the limit adaptive and not measured yet;
  2. after answered requests (--requests at least, until a latency is sampled), the page shows what /dashboard/data says: the
     in-flight limit, nothing in flight or queued, the unloaded and sampled latencies (in
     ms), every request admitted at the reader's priority, none shed; the breaker closed
     with every call in its window, none failed or slow, and its state strip;
  3. once the backend fails until the breaker opens, the row is open (marked hot) with the
     time left before probes and one opening counted;
  4. the page reported no error (console, uncaught exception, failed load, CSP refusal);
and keeps a screenshot (--screenshot, under target/). Bounded: --budget seconds in all.
Exit status 0 when every check passed, 1 otherwise (the reason on stderr).
"""

import json
import sys
import time
import urllib.request

from chromium import Failed, get, main, submit_token


def panels(args):
    """/dashboard/data's panels, asked with the token."""
    request = urllib.request.Request(
        args.url.rstrip("/") + "/dashboard/data",
        headers={"authorization": "Bearer " + args.token},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)["panels"]


def breaker_row(args):
    return "document.querySelector('#breaker-table tr[data-upstream=%s]')" % json.dumps(
        json.dumps(args.upstream)
    )[1:-1]


def text_of(browser, id_):
    return browser.eval("document.getElementById(%s).textContent" % json.dumps(id_))


def run(args, browser):
    base = args.url.rstrip("/")
    proxy = args.proxy.rstrip("/")
    browser.open_page()
    browser.navigate(base + "/dashboard")
    browser.wait_for("document.body.dataset.state === 'locked'", 5, "the locked page")
    submit_token(browser, args.token)
    browser.wait_for("document.body.dataset.state === 'live'", 5, "the live board")

    # 1. Both panels, before any traffic.
    browser.wait_for(
        "!document.getElementById('breakers').hidden && !!%s" % breaker_row(args),
        5,
        "the breakers' panel with the upstream's row",
    )
    browser.wait_for("!document.getElementById('in-flight').hidden", 5, "the in-flight panel")
    row = browser.eval("%s.textContent" % breaker_row(args))
    if "closed" not in row or "0 calls in the window, 0 failed, 0 slow" not in row:
        raise Failed("the upstream's row before any call reads %r" % row)
    if text_of(browser, "in-flight-mode") != "adaptive":
        raise Failed("the in-flight mode reads %r" % text_of(browser, "in-flight-mode"))
    if "not measured yet" not in text_of(browser, "in-flight-rtt"):
        raise Failed("latency shown before any was measured: %r" % text_of(browser, "in-flight-rtt"))
    print("ok: both panels drawn before any traffic: %s closed, limit adaptive, not measured yet" % args.upstream)

    # 2. Answered requests: the page shows the data's figures. The sampled latency needs
    # answers across more than one --adaptive-window after the unloaded latency is known:
    # requests go on (bounded) until the data has both.
    sent = 0
    deadline = time.monotonic() + 15
    while True:
        for _ in range(10):
            status = get(proxy + "/", {"user-agent": "Mozilla/5.0 Firefox/128.0"})
            if status != 200:
                raise Failed("request %d through the proxy answered %s" % (sent + 1, status))
            sent += 1
        data = panels(args)
        flight = data["in_flight"]
        if sent >= args.requests and flight["min_rtt_ms"] is not None and flight["sample_rtt_ms"] is not None:
            break
        if time.monotonic() >= deadline:
            raise Failed("no sampled latency after %d requests: %s" % (sent, json.dumps(data)))
    flight = data["in_flight"]
    breaker = [u for u in data["upstreams"] if u["upstream"] == args.upstream]
    if len(breaker) != 1:
        raise Failed("no breaker for %s in %s" % (args.upstream, data["upstreams"]))
    breaker = breaker[0]
    if flight["admitted"] != [{"priority": 1, "count": sent}] or flight["shed"] or flight["in_flight"]:
        raise Failed("the data's admissions: %s, shed %s" % (flight["admitted"], flight["shed"]))
    if (breaker["state"], breaker["window_calls"], breaker["window_failures"]) != ("closed", sent, 0):
        raise Failed("the data's breaker: %s" % breaker)
    # The texts the page must draw from these figures, written by the page's own rules
    # (toFixed for the latencies), compared once the page has polled the same data.
    drawn = """(() => {
      const f = %s, b = %s, row = %s;
      const ms = (v) => v.toFixed(1) + ' ms';
      const want = {
        now: 'limit ' + f.limit + ' · 0 in flight · 0 queued',
        rtt: 'unloaded latency (min RTT) ' + ms(f.min_rtt_ms) + ' · sampled latency ' + ms(f.sample_rtt_ms),
        priorities: [['1', String(b.window_calls), '0']],
        breaker: [b.upstream, 'closed', b.window_calls + ' calls in the window, 0 failed, 0 slow', '', '0', '0', '0'],
      };
      const cells = (tr) => [...tr.cells].map((c) => c.textContent);
      const got = {
        now: document.getElementById('in-flight-now').textContent,
        rtt: document.getElementById('in-flight-rtt').textContent,
        priorities: [...document.querySelectorAll('#in-flight-table tbody tr')].map(cells),
        breaker: row ? cells(row) : null,
      };
      return JSON.stringify(want) === JSON.stringify(got) ? '' : JSON.stringify({want, got});
    })()""" % (json.dumps(flight), json.dumps(breaker), breaker_row(args))
    deadline = time.monotonic() + 5
    while browser.eval(drawn):
        if time.monotonic() >= deadline:
            raise Failed("the page does not show the data: %s" % browser.eval(drawn))
        time.sleep(0.05)
    charts = browser.eval(
        "[document.querySelectorAll('#in-flight-chart svg path').length,"
        " %s.querySelectorAll('svg.strip rect.mark-closed').length]" % breaker_row(args)
    )
    if charts[0] != 3 or charts[1] < 1:
        raise Failed("the in-flight chart's lines and the strip's closed marks: %s" % charts)
    print(
        "ok: after %d requests the page shows the data: %s; %s; breaker closed, %d calls"
        % (sent, text_of(browser, "in-flight-now"), text_of(browser, "in-flight-rtt"), sent)
    )

    # 3. The backend fails until the breaker opens: the row says so.
    failed = 0
    while panels(args)["upstreams"][0]["state"] != "open":
        if failed > sent + 10:
            raise Failed("the breaker did not open after %d failed calls of %d" % (failed, sent + failed))
        status = get(proxy + args.fail_path, {"user-agent": "Mozilla/5.0 Firefox/128.0"})
        if status not in (500, 503):
            raise Failed("a call to the failing path answered %s" % status)
        failed += 1
    open_row = (
        "(() => { const row = %s; if (!row) return false;"
        " const badge = row.querySelector('.badge');"
        " return badge.textContent === 'open' && row.classList.contains('hot') &&"
        " /^probes in [0-9]+ s$/.test(row.cells[2].textContent) && row.cells[4].textContent === '1' &&"
        " row.querySelectorAll('svg.strip rect.mark-open').length >= 1; })()" % breaker_row(args)
    )
    browser.wait_for(open_row, 5, "the open breaker on the page")
    print("ok: after %d failed calls the breaker is open on the page: %r" % (
        failed, browser.eval("%s.cells[2].textContent" % breaker_row(args))))

    # 4. No error on the page, from the login on.
    browser.expect_no_errors()
    print("ok: the page reported no error")
    browser.screenshot(args.screenshot)
    print("ok: screenshot kept in %s" % args.screenshot)


def add_arguments(parser):
    parser.add_argument("--url", required=True, help="weir proxy's --api address, http://host:port")
    parser.add_argument("--proxy", required=True, help="weir proxy's own address, http://host:port")
    parser.add_argument("--token", required=True, help="its admin token")
    parser.add_argument("--upstream", required=True, help="its --upstream, as given")
    parser.add_argument("--fail-path", required=True, help="a path the upstream answers with 500")
    parser.add_argument("--requests", type=int, default=30, help="answered requests to send at least")


if __name__ == "__main__":
    sys.exit(main(__doc__, add_arguments, run))
