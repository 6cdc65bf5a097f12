"""Plays ``horovodrun --host-discovery-script`` for a framework-free training script.

Horovod elastic's launcher runs its host discovery script every few seconds; when the list of
``host:slots`` lines changes it resets the workers to their last committed state and carries on at
the new size.  This launcher does the same with one training process (e.g.
``examples/agent/train_toy.py``, which plays every replica itself): it runs the discovery script
every ``--interval`` seconds, prints each host list it sees, and when a list has held for
``--settle`` seconds and differs from the one training runs at, stops the training (SIGTERM: the
agent writes its checkpoint and exits) and starts it again with ``WORLD_SIZE`` = the slots listed,
so it resumes from the checkpoint at the new size.  With ``--probe-port`` it also connects to each
listed host on that port (as horovodrun reaches its hosts over ssh), resolving names through
``$LAVAFLOW_HOSTS_FILE`` when the process kubelet provides one.

    python discovery_launcher.py --discovery /etc/mpi/discover_hosts.sh --min-np 2 -- \\
        python train_toy.py --epochs 100

Prints one JSON object a line: ``hosts`` (every new list: ``hosts``, ``reachable``), ``launch``
(``np``), ``exit`` (the training's exit code), with ``time``; the training's own lines pass through.
It exits with the training's exit code once training ends by itself, 0 after SIGTERM.
Used by tests/kube/test_kube_elastic_training.py as the stand-in for Horovod, which does not
install from PyPI on this project's machines (docs/elastic-training.md, *Proof*).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

_OUT = threading.Lock()


def emit(line: str) -> None:
    with _OUT:
        sys.stdout.write(line)
        sys.stdout.flush()


def say(event: str, **kw: object) -> None:
    emit(json.dumps({"event": event, "time": round(time.time(), 3), **kw}) + "\n")


def discover(script: str, timeout: float = 10.0) -> list[tuple[str, int]] | None:
    """The script's ``host:slots`` lines (slots 1 when not given); None when it fails."""
    try:
        out = subprocess.run([script], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    hosts = []
    for line in out.stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        host, _, slots = line.partition(":")
        hosts.append((host, int(slots) if slots.strip().isdigit() else 1))
    return hosts


def resolver() -> dict[str, str]:
    """Names from ``$LAVAFLOW_HOSTS_FILE`` (/etc/hosts form), read anew each time."""
    path = os.environ.get("LAVAFLOW_HOSTS_FILE")
    names: dict[str, str] = {}
    if not path:
        return names
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                for name in parts[1:]:
                    names[name] = parts[0]
    except OSError:
        pass
    return names


def reachable(host: str, port: int, tries: int = 10) -> bool:
    for _ in range(tries):
        addr = resolver().get(host, host)
        try:
            with socket.create_connection((addr, port), timeout=1.0):
                return True
        except OSError:
            time.sleep(0.3)
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--discovery", required=True, help="the host discovery script")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between runs of the script")
    ap.add_argument("--settle", type=float, default=1.0, help="a list must hold this long to be acted on")
    ap.add_argument("--min-np", type=int, default=1, help="no training on fewer slots")
    ap.add_argument("--probe-port", type=int, default=0, help="connect to each listed host on this port")
    ap.add_argument("--grace", type=float, default=60.0, help="seconds the training gets to stop after SIGTERM")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- the training command")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no training command")

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    proc: subprocess.Popen[str] | None = None
    running_at: list[tuple[str, int]] | None = None
    seen: list[tuple[str, int]] | None = None
    seen_since = time.monotonic()

    def pump(p: subprocess.Popen[str]) -> None:
        assert p.stdout is not None
        for line in p.stdout:
            emit(line)

    def stop_training() -> None:
        nonlocal proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(args.grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        say("exit", code=proc.returncode)
        proc = None

    while not stopping.is_set():
        hosts = discover(args.discovery)
        now = time.monotonic()
        if hosts is not None and hosts != seen:
            seen, seen_since = hosts, now
            names = [h for h, _ in hosts]
            ok = [reachable(h, args.probe_port) for h in names] if args.probe_port else None
            say("hosts", hosts=names, slots=[s for _, s in hosts], reachable=ok)
        if proc is not None and proc.poll() is not None:
            code = proc.returncode
            say("exit", code=code)
            proc = None
            if code == 0:
                return 0  # training is done
            running_at = None  # failed: start again from the checkpoint
        if seen is not None and seen != running_at and now - seen_since >= args.settle:
            stop_training()
            running_at = seen
            np_ = sum(s for _, s in seen)
            if np_ >= args.min_np:
                env = dict(os.environ, WORLD_SIZE=str(np_), RANK="0")
                say("launch", np=np_, hosts=[h for h, _ in seen])
                proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                threading.Thread(target=pump, args=(proc,), daemon=True).start()
        stopping.wait(args.interval)
    stop_training()
    return 0


if __name__ == "__main__":
    sys.exit(main())
