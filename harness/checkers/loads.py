"""checkpoint-loads: what a restarted or restoring node loaded is the checkpoint it should have.

Nothing looked at what a node actually loaded: a reader that took the newest `state-*` file by
mtime (a half-written temporary one included) passed every checkpoint and restart scenario. Now
every write records what it put in force (`checkpoint` for the shard's shared folder,
`checkpoint-local` for a copy's own: file, (term, epoch, seq), size and CRC-32), and every load
records what it read (`load` at a restart, `loaded` inside a `restore`: the manifest's file and
position, the CRC-32 it promised and the CRC-32 of the bytes read, the manifest's seal and its
fields' CRC-32; psnodes/store/checkpoint.py). A load fails when the bytes are not the file the
manifest names, whole, when the manifest's seal is not its fields' CRC-32 or its position is not
the one the file's name carries (state-t<term>-<seq>-e<epoch>-...), or when it is older than
the newest checkpoint that node had published before it (its own folder for a restart, the
shard's for a restore); a restart fails when the copy had published a checkpoint before it went
down and loaded nothing (a copy killed before its first checkpoint rightly loads nothing: its
restart is judged, and passes), unless a bit-rot fault damaged its checkpoint (the state file or
the manifest) while it was down and the copy said so (a `checkpoint-error` marked `damaged`) instead of loading it. A load with
no record of its bytes (an older psnodes) is unknown.
"""
from __future__ import annotations

import re
from collections import defaultdict

from pschaos.psnodes.store.checkpoint import MANIFEST

from pschaos.harness.checkers.base import KILLS, Verdict, by_f, unknown, victims
from pschaos.harness.checkers.durability import checkpoint_order

LOAD_SLACK_S = 5.0       # a restarted copy's load is recorded as it starts: around its `start` event
RACE_S = 0.5             # a shared write this close before a restore may have renamed after the restorer read


# what psnodes.store.checkpoint.loaded records of every load, each compared with its promise
LOAD_FIELDS = ("crc32", "manifest_crc32", "read_bytes", "bytes", "seal", "fields_crc32")

def _published(history: list[dict], f: str, key: str) -> dict:
    """`key` (node or shard) -> [(t, order, file)] of the `f` events, in time order."""
    out: dict = defaultdict(list)
    for e in by_f(history, f):
        v = e["value"]
        if v.get("seq") is not None:
            out[e.get("node") if key == "node" else v.get("shard")].append((e["t"], checkpoint_order(v), v.get("file")))
    return out


def _rotted(fault: dict) -> dict | None:
    """What a bit-rot fault flipped, when it flipped the file the copy's manifest named or the
    manifest itself (its seal tells)."""
    rot = fault.get("rotted") if fault.get("kind") == "bit-rot" else None
    if not isinstance(rot, dict) or not rot.get("file"):
        return None
    return rot if rot.get("manifest_file") or str(rot["file"]).rsplit("/", 1)[-1] == MANIFEST else None


def _damage_said(history: list[dict], node: str, rot: dict | None, down_t: float, until: float) -> dict | None:
    """The copy's own word, after the bit-rot `rot` of its manifest's file took it down and before
    it went down again, that its local checkpoint is that file and is damaged; None without both."""
    if rot is None:
        return None
    said = next((e["value"] for e in by_f(history, "checkpoint-error") if e.get("node") == node
                 and e["value"].get("damaged") and down_t < e["t"] <= until
                 and str(e["value"].get("error", "")).startswith(f"local checkpoint: {rot['file']}:")), None)
    return {"rotted": rot, "said": said.get("error")} if said else None


def _wiped(history: list[dict]) -> dict[str, list[float]]:
    """node -> when a kill wiped its disk (its folder's history starts again)."""
    out: dict[str, list[float]] = defaultdict(list)
    for e in by_f(history, "fault-start"):
        if (e["value"].get("params") or {}).get("wipe"):
            for n in victims(e["value"]):
                out[n].append(e["t"])
    return out


def checkpoint_loads(history: list[dict], ctx: dict) -> Verdict:
    """Every load read the file its manifest names, whole (its CRC-32), and nothing older than the
    newest checkpoint published to the folder it read before it."""
    local, shared, wiped = _published(history, "checkpoint-local", "node"), _published(history, "checkpoint", "shard"), \
        _wiped(history)
    loads = [(e["t"], e.get("node"), "local", e["value"]) for e in by_f(history, "load")]
    loads += [(e["t"], e.get("node"), "shared", e["value"]["loaded"]) for e in by_f(history, "restore")
              if isinstance(e["value"].get("loaded"), dict)]
    had_any = False
    restarts = _restarts(history)
    if not loads and not restarts:
        return unknown("no copy restarted and no restore took the shared checkpoint: no load to judge")
    torn, older, unrecorded, skipped, refused, unseen = [], [], [], [], [], []
    downs: dict[str, list[float]] = defaultdict(list)
    for node, down_t, _, _ in restarts:
        downs[node].append(down_t)
    for node, down_t, up_t, fault in restarts:   # a restart must load what it had published before it went down
        since = max([w for w in wiped.get(node, []) if w <= down_t], default=float("-inf"))
        spoilt = {r["file"] for n, d, _, f in restarts if n == node and d < down_t and (r := _rotted(f))}
        # a rotted manifest names nothing any more: what it named before is no checkpoint of the copy's
        since = max([since, *(d for n, d, _, f in restarts if n == node and d < down_t
                              and (r := _rotted(f)) and r["file"].rsplit("/", 1)[-1] == MANIFEST)])
        had = [f for tp, _, f in local.get(node, []) if since < tp <= down_t and f not in spoilt]
        until = min([up_t + LOAD_SLACK_S, *(d for d in downs[node] if d > down_t)])
        took = [v for t, n, kind, v in loads if n == node and kind == "local" and down_t < t <= until]
        had_any = had_any or bool(had)
        rot = _rotted(fault)
        if rot and any(v.get("file") == rot["file"] and v.get("crc32") == v.get("manifest_crc32") for v in took):
            unseen.append({"node": node, "down_t": round(down_t, 3), "rotted": rot})     # whole: not what was rotted
        if had and not took:
            row = {"node": node, "down_t": round(down_t, 3), "up_t": round(up_t, 3), "published": had[-1]}
            seen = _damage_said(history, node, rot, down_t, until)
            (refused if seen else skipped).append({**row, **(seen or {})})
    for t, node, kind, v in loads:
        # every field a load is held to: one missing compared None with None and passed
        absent = [k for k in LOAD_FIELDS if v.get(k) is None]
        if absent:
            unrecorded.append({"node": node, "t": round(t, 3), "kind": kind, "absent": absent})
            continue
        row = {"node": node, "t": round(t, 3), "kind": kind, "file": v.get("file"), "seq": v.get("seq")}
        named = _named_position(v.get("file"))
        if v["crc32"] != v["manifest_crc32"] or v["read_bytes"] != v["bytes"] or v["seal"] != v["fields_crc32"] or \
                (named is not None and named != tuple(v.get(k) for k in ("term", "seq", "epoch"))):
            torn.append({**row, "crc32": v["crc32"], "manifest_crc32": v.get("manifest_crc32"),
                         "read_bytes": v.get("read_bytes"), "bytes": v.get("bytes"), "seal": v.get("seal"),
                         "fields_crc32": v.get("fields_crc32"), "file_names": named})
            continue
        if kind == "local":      # a copy's own folder starts again when a kill wiped it
            since = max([w for w in wiped.get(node, []) if w < t], default=float("-inf"))
            before = [(o, f) for tp, o, f in local.get(node, []) if since < tp < t]
        else:                    # the shard's folder as the restorer read it: a write just before may have raced
            before = [(o, f) for tp, o, f in shared.get(_shard_of(node), []) if tp < t - RACE_S]
        if before:
            newest = before[-1] if kind == "local" else max(before)
            mine = checkpoint_order(v)
            if v.get("file") != newest[1] and mine < newest[0]:
                older.append({**row, "order": list(mine), "newest_file": newest[1], "newest_order": list(newest[0])})
    details = {"loads": len(loads), "restarts": len(restarts), "not_the_manifests_file": torn[:10],
               "older_than_newest": older[:10], "restarts_that_loaded_nothing": skipped[:10],
               "damaged_and_refused": refused[:10], "rot_never_read": unseen[:10], "unrecorded": unrecorded[:10]}
    if torn or older or skipped:
        return Verdict(False, details)
    if unseen:
        return unknown(f"{len(unseen)} bit-rot(s) never reached the reader: the copy loaded the rotted file whole",
                       **details)
    if unrecorded:
        return unknown(f"{len(unrecorded)} load(s) recorded no checksum of the bytes read, or of what the "
                       f"manifest promised ({', '.join(sorted({k for u in unrecorded for k in u['absent']}))})",
                       **details)
    if not loads and not had_any:
        return unknown("every restarted copy went down before its first checkpoint and no restore took the "
                       "shared one: no load was owed, so none was tested", **details)
    return Verdict(True, details)


def _restarts(history: list[dict]) -> list[tuple[str, float, float, dict]]:
    """(copy, when a process fault took it down, its next `start`, that fault) for every copy that
    came back."""
    starts: dict[str, list[float]] = defaultdict(list)
    for e in by_f(history, "start"):
        if str(e.get("node", "")).startswith("shard-"):
            starts[e["node"]].append(e["t"])
    out = []
    for e in by_f(history, "fault-start"):
        if e["value"].get("kind") not in (*KILLS, "stop", "restart", "flap"):
            continue
        for n in victims(e["value"]):
            up = min((t for t in starts.get(n, ()) if t > e["t"]), default=None)
            if n.startswith("shard-") and up is not None:
                out.append((n, e["t"], up, e["value"]))
    return out


NAMED = re.compile(r"^state-t(\d+)-(\d+)-e(\d+)-")


def _named_position(file: str | None) -> tuple[int, int, int] | None:
    """(term, seq, epoch) a psnodes state file's name carries (checkpoint.py names it so), or None
    for a name of another form: a load whose manifest says otherwise read a manifest that is not
    the file's (a torn one's prefix over an old one's tail names the old file under the new seq)."""
    m = NAMED.match(str(file or ""))
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _shard_of(node: str | None) -> int | None:
    return int(node.split("-")[1].split("/")[0]) if node and node.startswith("shard-") else None
