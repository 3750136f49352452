#!/usr/bin/env python3
"""Drive real Claude Code (`claude -p` stream-json) against capfleet's fake LLM
and record every frame it prints: the ground truth for capfleet's stream-json
driver (tests/fixtures/claude/*.ndjson).

  drive_claude_stream.py [--claude PATH] [--out-dir DIR] [--keep] SCENARIO...

SCENARIO is one of: allow, deny, partial, interrupt, eof, resume, all.
Without --out-dir frames are only printed ("<-" = stdout of claude, "->" = what
we wrote to its stdin). With --out-dir, for each scenario NAME:
  NAME.ndjson        claude's stdout, verbatim line by line, temp paths scrubbed
  NAME.stdin.ndjson  the frames this driver sent, in order
  NAME.llm.json      a summary of the model requests the fake LLM received
                     (turn served, usage served, message count) and the
                     process exit code(s)
Scrubbing replaces the per-run temp dirs: working dir -> /tmp/WORKDIR,
HOME -> /tmp/HOME (also in Claude's "-tmp-...-work" project-dir form).

Every scenario gets a fresh fake LLM (port 0), HOME and working dir; the
environment is the one tests/support/peer_env.sh documents.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASE_FLAGS = ["-p", "--input-format", "stream-json", "--output-format", "stream-json",
              "--verbose", "--permission-prompt-tool", "stdio"]

BASH_TURN = {"text": "I'll create the file.",
             "tool": {"name": "Bash", "input": {"command": "echo hello > out.txt",
                                                "description": "Create out.txt"}}}


def default_claude() -> str:
    out = subprocess.run([str(HERE / "install_peers.sh"), "--path", "claude-code"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"claude-code not installed: {out.stderr.strip()}")
    return out.stdout.strip()


class FakeLLM:
    def __init__(self, root: Path):
        self.port_file = root / "fake_llm.port"
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "fake_llm.py"), "--port", "0",
             "--port-file", str(self.port_file), "--log", str(root / "fake_llm.jsonl")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if self.port_file.exists():
                break
            time.sleep(0.05)
        self.port = int(self.port_file.read_text())
        self.url = f"http://127.0.0.1:{self.port}"

    def call(self, path, obj=None):
        data = None if obj is None else json.dumps(obj).encode()
        with urllib.request.urlopen(urllib.request.Request(self.url + path, data=data)) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


class Run:
    """One scenario: temp dirs, a fake LLM, and zero or more claude processes."""

    def __init__(self, name, args):
        self.name, self.args = name, args
        self.root = Path(tempfile.mkdtemp(prefix=f"cc-{name}-"))
        self.work = self.root / "work"
        self.home = self.root / "home"
        self.work.mkdir()
        self.home.mkdir()
        self.llm = FakeLLM(self.root)
        seed = json.loads((HERE / "configs" / "claude.json").read_text()
                          .replace("<CWD>", str(self.work)))
        (self.home / ".claude.json").write_text(json.dumps(seed, indent=2))
        self.env = dict(os.environ, HOME=str(self.home),
                        ANTHROPIC_BASE_URL=self.llm.url, ANTHROPIC_API_KEY="dummy",
                        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                        DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1",
                        DISABLE_ERROR_REPORTING="1")
        self.env.pop("ANTHROPIC_AUTH_TOKEN", None)
        self.stdout_lines: list[str] = []
        self.stdin_lines: list[str] = []
        self.exit_codes: list[int | None] = []
        self.argvs: list[list[str]] = []
        self.p = None

    # -- process ---------------------------------------------------------------
    def start(self, extra=()):
        cmd = [self.args.claude, *BASE_FLAGS, *extra]
        self.argvs.append(["claude", *cmd[1:]])
        self.p = subprocess.Popen(cmd, cwd=self.work, env=self.env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  bufsize=1)
        self.frames: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        p = self.p

        def pump_out():
            for line in p.stdout:
                self.stdout_lines.append(line.rstrip("\n"))
                self.frames.put(line)
            self.frames.put(None)

        def pump_err():
            for line in p.stderr:
                self.stderr.append(line)

        threading.Thread(target=pump_out, daemon=True).start()
        threading.Thread(target=pump_err, daemon=True).start()
        print(f"== {self.name}: {' '.join(cmd[1:])}", flush=True)

    def send(self, obj):
        line = json.dumps(obj)
        self.stdin_lines.append(line)
        print("->", line[:300], flush=True)
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def user(self, text):
        self.send({"type": "user", "message": {"role": "user", "content": text}})

    def next_frame(self, timeout=60.0):
        line = self.frames.get(timeout=timeout)
        if line is None:
            return None
        try:
            m = json.loads(line)
        except ValueError:
            print("<- (not JSON)", line.rstrip()[:300], flush=True)
            return {"type": "_non_json", "line": line}
        t = m.get("type")
        detail = m.get("subtype") or (m.get("event") or {}).get("type") or ""
        if t == "control_request":
            detail = m["request"].get("subtype")
        print("<-", t, detail, line.rstrip()[:240], flush=True)
        return m

    def until(self, pred, on_frame=None, timeout=90.0):
        """Read frames until pred(frame) is true; returns that frame (None on EOF)."""
        end = time.time() + timeout
        while True:
            m = self.next_frame(timeout=max(0.1, end - time.time()))
            if m is None:
                return None
            if on_frame:
                on_frame(m)
            if pred(m):
                return m

    def answer_permission(self, behavior, message="Denied by the capfleet test driver"):
        def on_frame(m):
            if m.get("type") == "control_request" and m["request"].get("subtype") == "can_use_tool":
                req = m["request"]
                if behavior == "allow":
                    resp = {"behavior": "allow", "updatedInput": req.get("input", {})}
                else:
                    resp = {"behavior": "deny", "message": message}
                self.send({"type": "control_response",
                           "response": {"subtype": "success", "request_id": m["request_id"],
                                        "response": resp}})
        return on_frame

    def close_and_wait(self, timeout=30):
        if self.p.stdin and not self.p.stdin.closed:
            self.p.stdin.close()
        while self.until(lambda m: False, timeout=timeout) is not None:
            pass
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        self.exit_codes.append(rc)
        print(f"== exit {rc}", flush=True)
        if self.stderr:
            print("== stderr:", "".join(self.stderr)[-2000:], flush=True)
        return rc

    # -- output ------------------------------------------------------------------
    def scrub(self, text: str) -> str:
        for real, fake in ((self.work, "/tmp/WORKDIR"), (self.home, "/tmp/HOME"),
                           (self.root, "/tmp/ROOT")):
            for form in {str(real), os.path.realpath(real)}:
                text = text.replace(form, fake)
                dashed = "".join(c if c.isalnum() else "-" for c in form)
                text = text.replace(dashed, "".join(c if c.isalnum() else "-" for c in fake))
        return text

    def save(self, suffix=""):
        out = self.args.out_dir
        if not out:
            return
        out.mkdir(parents=True, exist_ok=True)
        base = out / f"{self.name}{suffix}"
        base.with_suffix(".ndjson").write_text(
            self.scrub("\n".join(self.stdout_lines) + "\n"))
        Path(f"{base}.stdin.ndjson").write_text(self.scrub("\n".join(self.stdin_lines) + "\n"))
        reqs = self.llm.call("/_requests")
        summary = [{"seq": r["seq"], "method": r["method"], "path": r["path"], "query": r["query"],
                    "api": r["api"], "status": r.get("status"),
                    "model": (r.get("body") or {}).get("model"),
                    "stream": (r.get("body") or {}).get("stream"),
                    "messages": len((r.get("body") or {}).get("messages") or []),
                    "turn": r.get("turn"), "usage": r.get("usage"),
                    "disconnected": r.get("disconnected", False)} for r in reqs]
        Path(f"{base}.llm.json").write_text(self.scrub(json.dumps(
            {"argv": self.argvs, "exit_codes": self.exit_codes, "requests": summary},
            indent=1)) + "\n")
        self.stdout_lines, self.stdin_lines, self.exit_codes, self.argvs = [], [], [], []

    def cleanup(self):
        if self.p and self.p.poll() is None:
            self.p.kill()
        self.llm.stop()
        if not self.args.keep:
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            print("== kept", self.root)


def is_result(m):
    return m.get("type") == "result"


# ------------------------------------------------------------------ scenarios ---

def two_turns(r: Run, behavior: str, extra=()):
    follow = ({"text": "Created out.txt."} if behavior == "allow"
              else {"text": "Understood, I did not run it."})
    r.llm.call("/_script", [BASH_TURN, follow, {"text": "Second answer."}])
    r.start(extra)
    r.user("Create out.txt containing hello.")
    r.until(is_result, r.answer_permission(behavior))
    created = (r.work / "out.txt").exists()
    print(f"== out.txt created: {created}", flush=True)
    if created != (behavior == "allow"):
        raise AssertionError(f"out.txt created={created} after {behavior}")
    r.user("Now just say something.")
    r.until(is_result, r.answer_permission(behavior))
    r.close_and_wait()
    r.save()


def sc_allow(r):
    two_turns(r, "allow")


def sc_deny(r):
    two_turns(r, "deny")


def sc_partial(r):
    two_turns(r, "allow", ["--include-partial-messages"])


def sc_interrupt(r):
    # Turn 1: a slow streamed answer (~60 chunks * 0.25 s); interrupt once the
    # first text delta arrived. Turn 2 checks the process is still usable.
    slow = {"text": " ".join(f"word{i}" for i in range(120)), "chunk": 10, "delay": 0.25}
    r.llm.call("/_script", [slow, {"text": "After the interrupt."}])
    r.start(["--include-partial-messages"])
    r.user("Write a long answer.")
    r.until(lambda m: m.get("type") == "stream_event"
            and m["event"].get("type") == "content_block_delta")
    time.sleep(1.0)
    r.send({"type": "control_request", "request_id": "x",
            "request": {"subtype": "interrupt"}})
    r.until(is_result)
    r.user("Are you still there?")
    r.until(is_result)
    r.close_and_wait()
    r.save()


def sc_interrupt_permission(r):
    # Interrupt while a can_use_tool request is pending (never answered).
    r.llm.call("/_script", [BASH_TURN, {"text": "After the interrupt."}])
    r.start()
    r.user("Create out.txt containing hello.")
    r.until(lambda m: m.get("type") == "control_request")
    r.send({"type": "control_request", "request_id": "x",
            "request": {"subtype": "interrupt"}})
    r.until(is_result)
    r.user("Are you still there?")
    r.until(is_result, r.answer_permission("allow"))
    r.close_and_wait()
    r.save()


def sc_eof(r):
    # stdin closed right after the first user frame, mid-turn: is the turn
    # finished before exit?
    r.llm.call("/_script", [{"text": "Slow answer " * 8, "chunk": 8, "delay": 0.2}])
    r.start()
    r.user("Answer slowly.")
    r.close_and_wait()
    r.save()


def sc_resume(r):
    r.llm.call("/_script", [{"text": "I will remember 42."}, {"text": "The number was 42."}])
    r.start()
    r.user("Remember the number 42.")
    res = r.until(is_result)
    r.close_and_wait()
    r.save("-1")
    sid = res["session_id"]
    r.start(["--resume", sid])
    r.user("Which number?")
    r.until(is_result)
    r.close_and_wait()
    r.save("-2")


SCENARIOS = {"allow": sc_allow, "deny": sc_deny, "partial": sc_partial,
             "interrupt": sc_interrupt, "interrupt-permission": sc_interrupt_permission,
             "eof": sc_eof, "resume": sc_resume}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenarios", nargs="+", choices=[*SCENARIOS, "all"])
    ap.add_argument("--claude", help="claude executable (default: install_peers.sh --path)")
    ap.add_argument("--out-dir", type=Path)
    ap.add_argument("--keep", action="store_true", help="keep the temp dirs")
    args = ap.parse_args()
    args.claude = args.claude or default_claude()
    names = list(SCENARIOS) if "all" in args.scenarios else args.scenarios
    failed = []
    for name in names:
        r = Run(name, args)
        try:
            SCENARIOS[name](r)
        except Exception as e:  # noqa: BLE001
            print(f"== {name} FAILED: {e!r}", flush=True)
            failed.append(name)
        finally:
            r.cleanup()
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
