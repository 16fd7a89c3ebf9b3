"""Shared checkpoints under concurrent writers (issue 7, bug 4.3): a manifest never names a missing
file, and a checkpoint older by (epoch, seq) never replaces a newer one."""
from __future__ import annotations

import json
import threading

from pschaos.psnodes.store.checkpoint import MANIFEST, read_checkpoint, write_checkpoint


def test_concurrent_writers_never_leave_a_manifest_without_its_file(tmp_path):
    errors: list[str] = []
    stop = threading.Event()

    def writer(name: str, epoch: int) -> None:
        try:
            for seq in range(1, 300):
                write_checkpoint(tmp_path, b"x" * (1000 + seq), seq, epoch, name)
        except Exception as e:  # noqa: BLE001 - the finding
            errors.append(f"{name}: {e.__class__.__name__}: {e}")

    def reader() -> None:
        while not stop.is_set():
            try:
                man = json.loads((tmp_path / MANIFEST).read_text())
            except (OSError, ValueError):
                continue
            if read_checkpoint(tmp_path) is None and json.loads((tmp_path / MANIFEST).read_text()) == man:
                errors.append(f"manifest names a missing or torn file: {man}")

    ws = [threading.Thread(target=writer, args=(f"shard-0/{i}", 1)) for i in range(2)]
    r = threading.Thread(target=reader)
    r.start()
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    stop.set()
    r.join()
    assert not errors, errors[:5]
    assert read_checkpoint(tmp_path) is not None


def test_an_older_checkpoint_never_replaces_a_newer_one(tmp_path):
    write_checkpoint(tmp_path, b"new", 41, 2, "shard-0/1")
    write_checkpoint(tmp_path, b"stale", 60, 1, "shard-0/0")       # higher seq, older epoch
    write_checkpoint(tmp_path, b"older", 30, 2, "shard-0/1")       # same epoch, lower seq
    man, blob = read_checkpoint(tmp_path)
    assert (man["epoch"], man["seq"], blob) == (2, 41, b"new")
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".psb", ".tmp")) == [man["file"]]


def test_a_checkpoint_damaged_at_rest_is_not_read_and_the_reader_hears_why(tmp_path):
    """A bit flipped in the state file (its CRC-32 no longer the manifest's), a short file, a
    manifest that does not parse: no checkpoint, and `on_damage` says which (psnodes loaded the
    rotted bytes before: bit-rot-newest-checkpoint failed checkpoint-loads)."""
    man, _ = write_checkpoint(tmp_path, b"x" * 100, seq=3, epoch=1, node="shard-0/0")
    heard: list[str] = []
    assert read_checkpoint(tmp_path, on_damage=heard.append) == (man, b"x" * 100) and heard == []
    f = tmp_path / man["file"]
    f.write_bytes(b"x" * 50 + b"y" + b"x" * 49)
    assert read_checkpoint(tmp_path, on_damage=heard.append) is None and "CRC-32" in heard[-1]
    f.write_bytes(b"x" * 60)
    assert read_checkpoint(tmp_path, on_damage=heard.append) is None and "incomplete" in heard[-1]
    (tmp_path / MANIFEST).write_text("")
    assert read_checkpoint(tmp_path, on_damage=heard.append) is None and "does not parse" in heard[-1]
    assert read_checkpoint(tmp_path) is None                  # no listener: still nothing read


def test_a_torn_manifest_that_still_parses_is_refused_by_its_seal_and_written_over(tmp_path):
    """A new manifest's prefix over the old one's tail can parse, and name the old file under the
    new position (torn-manifest with the zoo's manifest-in-place, seed 1: the copy loaded seq 184's
    file as seq 214). The seal refuses it, the reader hears why, and the next write replaces it."""
    import json

    from pschaos.psnodes.store.checkpoint import SEAL, loaded

    old, _ = write_checkpoint(tmp_path, b"a" * 10, seq=184, epoch=1, node="shard-0/0")
    new = json.dumps({**old, "seq": 214}).encode()
    raw = (tmp_path / MANIFEST).read_bytes()
    torn = new[:12] + raw[12:]                                  # '{"seq": 214,' then the old tail
    assert json.loads(torn)["seq"] == 214 and json.loads(torn)["file"] == old["file"]
    (tmp_path / MANIFEST).write_bytes(torn)
    heard: list[str] = []
    assert read_checkpoint(tmp_path, on_damage=heard.append) is None
    assert heard == [f"{MANIFEST}: its fields' CRC-32 {json.loads(torn) and _fields(torn):08x} is not its seal "
                     f"{old[SEAL]:08x} (torn, or changed at rest)"]
    (tmp_path / MANIFEST).write_text(json.dumps({k: v for k, v in old.items() if k != SEAL}))
    assert read_checkpoint(tmp_path, on_damage=heard.append) is None and "carries no seal" in heard[-1]
    man, wrote = write_checkpoint(tmp_path, b"b" * 10, seq=100, epoch=1, node="shard-0/0")   # lower, yet in force
    assert wrote and read_checkpoint(tmp_path) == (man, b"b" * 10)
    got = loaded(man, b"b" * 10)
    assert got["seal"] == got["fields_crc32"] == man[SEAL]
    assert loaded({**man, "seq": 7}, b"b" * 10)["fields_crc32"] != man[SEAL]     # a changed field shows


def _fields(raw: bytes) -> int:
    import json

    from pschaos.psnodes.store.checkpoint import seal

    return seal(json.loads(raw))["seal"]
