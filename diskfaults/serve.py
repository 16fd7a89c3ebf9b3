"""The power-loss disk's process: `python -m pschaos.diskfaults.serve STORE MOUNT CONTROL` mounts
STORE/disk at MOUNT through FUSE (kept in the foreground, one thread per kernel request) and
answers on the abstract Unix socket CONTROL, one JSON line a request:

    {"op": "power-loss", "torn": {"path": "ckpt/state.bin", "keep_bytes": 4096}}   (torn optional)
    {"op": "arm", "name": "manifest.json", "keep": "prefix", "r": 0.42}   (cut at that file's sync;
                                                                         keep and r optional: a tear)
    {"op": "trap"}        (the trap and whether the power is off: cheap, for polling)
    {"op": "disarm"}      (no more trap; what it cut, if it fired: the power stays off)
    {"op": "power-on"}    (the program is dead: serve its calls again)
    {"op": "status"}

A process of its own, not a thread of the harness: a node's file calls must not wait on the
harness' interpreter, and a harness killed outright leaves a mount `pschaos clean` can find
(its file system type is `fuse.pschaos-disk`, its source `pschaos-disk:<serving pid>`). SIGTERM or SIGINT unmounts and exits.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading
from pathlib import Path

FSTYPE = "pschaos-disk"


def control_loop(sock: socket.socket, disk) -> None:
    """Answer control requests until the process ends (a daemon thread). Only this user's
    processes are answered (the socket's name is visible to all); one that hangs up or sends
    nothing costs its connection, never the loop."""
    while True:
        conn, _ = sock.accept()
        try:
            conn.settimeout(30.0)
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            if struct.unpack("3i", creds)[1] != os.getuid():
                continue
            with conn.makefile("rwb") as f:
                f.write(json.dumps(answer(disk, f.readline())).encode() + b"\n")
                f.flush()
        except OSError:
            pass                          # the caller went away: the next one is answered
        finally:
            conn.close()


def answer(disk, line: bytes) -> dict:
    try:
        req = json.loads(line or b"{}")
        if req.get("op") == "power-loss":
            return {"ok": True, **disk.power_loss(req.get("torn")).as_dict()}
        if req.get("op") == "arm":
            from pschaos.diskfaults.tear import KEEPS, SyncTrap

            keep = req.get("keep")
            if not req.get("name") or keep not in (None, *KEEPS):
                return {"ok": False, "error": f"arm: a file name and keep in {KEEPS} (or none) are needed, not {req}"}
            disk.arm(SyncTrap(str(req["name"]), keep, float(req.get("r", 0.0))))
            return {"ok": True}
        if req.get("op") == "trap":
            return {"ok": True, **disk.trap_status()}
        if req.get("op") == "disarm":
            return {"ok": True, "fired": disk.disarm()}
        if req.get("op") == "power-on":
            disk.power_on()
            return {"ok": True}
        if req.get("op") == "status":
            return {"ok": True, **disk.status()}
        return {"ok": False, "error": f"unknown op {req.get('op')!r}: power-loss, arm, trap, disarm, power-on or status"}
    except Exception as e:  # noqa: BLE001 - the caller gets every failure as an answer
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m pschaos.diskfaults.serve STORE MOUNT CONTROL", file=sys.stderr)
        return 2
    store, mount, control = Path(args[0]), args[1], args[2]
    from mfusepy import FUSE

    from pschaos.diskfaults.disk import Disk
    from pschaos.diskfaults.fuse_ops import DiskOps

    (store / "disk").mkdir(parents=True, exist_ok=True)
    disk = Disk(store / "disk", store / "trash")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind("\0" + control)
    sock.listen(4)
    threading.Thread(target=control_loop, args=(sock, disk), daemon=True, name="control").start()
    FUSE(DiskOps(disk), mount, foreground=True, direct_io=True, hard_remove=True, attr_timeout=0,
         entry_timeout=0, negative_timeout=0, fsname=f"{FSTYPE}:{os.getpid()}", subtype=FSTYPE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
