#!/usr/bin/env python3
"""The chat page's controls in headless chromium, against the mock server: Shift+Enter adds
a line and Enter sends, Stop cancels a reply mid-stream (kept, marked "stopped"), a second
turn goes out with the first in its history (the mock refuses a malformed one), the copy
button copies, New chat clears. Uses browser_test.py's DevTools client.

    interact_test.py BASE_URL SCREENSHOT.png
"""
import base64
import os
import shutil
import sys
import time

sys.dont_write_bytecode = True     # no __pycache__ beside the sources
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_test import PRELUDE, Chromium, DevTools, Fail, WebSocket, page_websocket  # noqa: E402


def wait_for(dt, cond, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if dt.eval(cond):
                return
        except Fail:
            pass                                  # the document was being swapped
        time.sleep(0.05)
    raise Fail("timed out waiting for " + what)


def press_enter(dt, shift=False):
    for kind in ("keyDown", "keyUp"):
        ev = {"type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13,
              "modifiers": 8 if shift else 0}
        if kind == "keyDown":
            ev["text"] = "\r"
        dt.call("Input.dispatchKeyEvent", ev)


def check(cond, message):
    if not cond:
        raise Fail(message)


def run(base, screenshot):
    browser = Chromium(shutil.which("chromium"), 900, 1000)
    ws = None
    try:
        ws = WebSocket(page_websocket(browser.devtools_port(60)))
        dt = DevTools(ws)
        for method in ("Page.enable", "Runtime.enable"):
            dt.call(method)
        dt.call("Page.addScriptToEvaluateOnNewDocument", {"source": PRELUDE})
        dt.call("Emulation.setDeviceMetricsOverride",
                {"width": 900, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
        dt.call("Page.navigate", {"url": base.rstrip("/") + "/"})
        wait_for(dt, "document.getElementById('model').textContent === 'mock-model-q4'", "the model name")

        # Shift+Enter is a new line; Enter sends. [slow] makes the mock take ~10 s.
        dt.eval("document.getElementById('input').focus()")
        dt.call("Input.insertText", {"text": "first line [slow]"})
        press_enter(dt, shift=True)
        dt.call("Input.insertText", {"text": "second line"})
        value = dt.eval("document.getElementById('input').value")
        check(value == "first line [slow]\nsecond line", "Shift+Enter: input is %r" % value)
        check(dt.eval("document.body.dataset.state") == "idle", "Shift+Enter sent the message")
        press_enter(dt)
        wait_for(dt, "document.body.dataset.state === 'streaming' && "
                     "document.querySelector('.msg.assistant .content').textContent.length > 40",
                 "the reply to stream")
        check(dt.eval("document.getElementById('input').value") == "", "the input was not cleared")
        check(dt.eval("!document.getElementById('stop').hidden && document.getElementById('send').hidden"),
              "Stop is not shown while streaming")

        # Stop: the partial reply stays, marked stopped.
        dt.eval("document.getElementById('stop').click()")
        wait_for(dt, "document.body.dataset.state === 'done'", "Stop to end the reply", 10)
        meta = dt.eval("document.querySelector('.msg.assistant .meta').textContent")
        check(meta.endswith("stopped"), "after Stop the timing line is %r" % meta)
        partial = dt.eval("document.querySelector('.msg.assistant .content').textContent")
        check("The capital of France" not in partial, "the reply was not stopped: %r" % partial)

        # A second turn: the request carries user, assistant (the partial one), user.
        dt.call("Input.insertText", {"text": "and a follow-up"})
        press_enter(dt)
        wait_for(dt, "['done', 'error'].includes(document.body.dataset.state) && "
                     "document.querySelectorAll('.msg.assistant').length === 2", "the second reply")
        check(dt.eval("document.body.dataset.state") == "done", "the second turn failed: %r"
              % dt.eval("(document.querySelector('.msg .error') || {}).textContent"))
        last = dt.eval("[...document.querySelectorAll('.msg.assistant')].pop().textContent")
        check("The capital of France is Paris." in last, "second reply: %r" % last[-200:])

        dt.eval("[...document.querySelectorAll('button.copy')].pop().click()")
        wait_for(dt, "[...document.querySelectorAll('button.copy')].pop().textContent === 'Copied'",
                 "the copy button to say Copied", 5)
        shot = dt.call("Page.captureScreenshot", {"format": "png"})
        with open(screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

        dt.eval("document.getElementById('new').click()")
        check(dt.eval("document.querySelectorAll('.msg').length === 0 && "
                      "!document.getElementById('empty').hidden && document.body.dataset.state === 'idle'"),
              "New chat did not clear the conversation")
        errors = (dt.eval("window.__errors") or []) + dt.exceptions
        check(not errors, "JS errors: " + "; ".join(errors))
        print("interact_test: ok (Shift+Enter, Enter, Stop, second turn, copy, New chat); screenshot "
              + screenshot)
        return 0
    finally:
        if ws:
            ws.close()
        browser.stop()


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    if not shutil.which("chromium"):
        print("interact_test: chromium not found; install it: apt-get install -y chromium", file=sys.stderr)
        return 2
    import signal

    def on_signal(signum, _frame):
        raise SystemExit("interact_test: killed by signal %d" % signum)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, on_signal)
    try:
        return run(sys.argv[1], sys.argv[2])
    except (Fail, OSError, ValueError) as e:
        print("interact_test: FAIL: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
