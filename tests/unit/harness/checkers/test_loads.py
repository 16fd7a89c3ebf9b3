"""checkpoint-loads (issue 32, item 5): what a restarted or restoring node loaded. The planted
checkpoint-by-mtime (tests/zoo) made kill-during-checkpoint's restarted primary load nothing (its
newest file was the torn one the kill left) and failed it here on processes; the old checks passed."""
from __future__ import annotations

from pschaos.harness.checkers import CHECKERS

from tests.unit.histories import ev, fault_start


def local(t, node, seq, file):
    return ev(t, "checkpoint-local", {"shard": 0, "seq": seq, "epoch": 1, "term": 1, "file": file, "bytes": 10,
                                      "crc32": 7, "written": t}, node=node)


def load(t, node, seq, file, crc=7, manifest_crc=7, read=10):
    return ev(t, "load", {"shard": 0, "seq": seq, "source": "local", "file": file, "epoch": 1, "term": 1,
                          "bytes": 10, "manifest_crc32": manifest_crc, "crc32": crc, "read_bytes": read,
                          "seal": 5, "fields_crc32": 5}, node=node)


def test_a_load_missing_a_field_it_is_held_to_is_unknown_not_passed():
    """None compared equal to None: a load whose manifest promised no CRC-32, or that recorded no
    seal, passed every comparison (review of issue 32, nit on loads.py)."""
    for field in ("manifest_crc32", "bytes", "read_bytes", "seal", "fields_crc32"):
        partial = load(4, N, 9, "b")
        del partial["value"][field]
        v = CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), KILL, partial, start(4.1, N)], {})
        assert v.valid == "unknown" and field in v.details["reason"], (field, v.details)


def start(t, node):
    return ev(t, "start", {"shard": 0, "seq": 0, "role": "replica", "epoch": 1}, node=node)


KILL = fault_start(3.0, "kill", "shard-0/1")
N = "shard-0/1"


def test_a_restart_loads_the_newest_file_it_published_whole():
    h = [local(1, N, 5, "a"), local(2, N, 9, "b"), KILL, load(4, N, 9, "b"), start(4.1, N)]
    assert CHECKERS["checkpoint-loads"](h, {}).valid is True
    older = CHECKERS["checkpoint-loads"]([local(1, N, 5, "a"), local(2, N, 9, "b"), KILL, load(4, N, 5, "a"),
                                          start(4.1, N)], {})
    assert older.valid is False and older.details["older_than_newest"][0]["newest_file"] == "b"
    torn = CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), KILL, load(4, N, 9, "b", crc=8), start(4.1, N)], {})
    assert torn.valid is False and torn.details["not_the_manifests_file"]


def test_a_restart_that_loads_nothing_fails_only_when_it_had_published_a_checkpoint():
    v = CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), KILL, start(4.1, N)], {})
    assert v.valid is False and v.details["restarts_that_loaded_nothing"][0]["published"] == "b"
    # killed before its first checkpoint: it rightly loads nothing, and nothing was tested
    assert CHECKERS["checkpoint-loads"]([KILL, start(4.1, N)], {}).valid == "unknown"
    wiped = fault_start(3.0, "kill", N, params={"wipe": True})
    assert CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), wiped, start(4.1, N)], {}).valid == "unknown"


def test_no_load_and_no_restart_is_unknown():
    assert CHECKERS["checkpoint-loads"]([local(2, N, 9, "b")], {}).valid == "unknown"


def test_a_copy_that_refuses_its_rotted_checkpoint_and_says_so_passes():
    """bit-rot flipped a bit of the copy's checkpoint while it was down: loading nothing is right
    when the copy said why (a `checkpoint-error` marked damaged, naming that file), wrong when it
    said nothing or spoke of something else, and a load of the damaged bytes fails as any load of
    bytes that are not the manifest's; one of the rotted file whole shows the rot never reached it."""
    rotted = {"file": "b", "offset": 3, "bit": 1, "before": 0, "after": 2, "manifest_file": True}
    rot = fault_start(3.0, "bit-rot", N, rotted=rotted)
    said = ev(4.05, "checkpoint-error", {"shard": 0, "error": "local checkpoint: b: its bytes' CRC-32 ...",
                                         "damaged": True}, node=N)
    v = CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), rot, said, start(4.1, N)], {})
    assert v.valid is True and v.details["damaged_and_refused"][0]["rotted"]["file"] == "b"
    silent = CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), rot, start(4.1, N)], {})
    assert silent.valid is False and silent.details["restarts_that_loaded_nothing"]
    took = CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), rot, load(4, N, 9, "b", crc=8), start(4.1, N)], {})
    assert took.valid is False and took.details["not_the_manifests_file"]
    whole = CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), rot, load(4, N, 9, "b"), start(4.1, N)], {})
    assert whole.valid == "unknown" and whole.details["rot_never_read"]
    # a copy that says "damaged" when no fault damaged it, or of another file, is not excused
    assert CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), KILL, said, start(4.1, N)], {}).valid is False
    other = ev(4.05, "checkpoint-error", {"shard": 0, "error": "local checkpoint: manifest.json does not parse",
                                          "damaged": True}, node=N)
    assert CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), rot, other, start(4.1, N)], {}).valid is False
    # a rot of a file the manifest did not name (params.file) excuses nothing
    named = fault_start(3.0, "bit-rot", N, rotted={**rotted, "manifest_file": False})
    assert CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), named, said, start(4.1, N)], {}).valid is False
    # killed again before a new checkpoint: the rotted file is owed no more, and saying so again is right
    again = fault_start(6.0, "kill", N)
    said2 = ev(7.05, "checkpoint-error", {"shard": 0, "error": "local checkpoint: b: its bytes' CRC-32 ...",
                                          "damaged": True}, node=N)
    h = [local(2, N, 9, "b"), rot, said, start(4.1, N), again, said2, start(7.1, N)]
    assert CHECKERS["checkpoint-loads"](h, {}).valid is True


def test_a_load_from_a_manifest_whose_seal_fails_fails_and_a_rotted_manifest_refused_passes():
    """The manifest's seal as read beside its fields' CRC-32 (psnodes' `loaded`): a copy that
    loaded from a torn or rotted manifest fails however whole the state file was; one that refused
    its rotted manifest and said so passes, as for a rotted state file."""
    sealed = dict(load(4, N, 9, "b"))
    sealed["value"] = {**sealed["value"], "seal": 11, "fields_crc32": 11}
    broken = dict(sealed, value={**sealed["value"], "fields_crc32": 12})
    assert CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), KILL, sealed, start(4.1, N)], {}).valid is True
    v = CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), KILL, broken, start(4.1, N)], {})
    assert v.valid is False and v.details["not_the_manifests_file"][0]["fields_crc32"] == 12
    rot = fault_start(3.0, "bit-rot", N, rotted={"file": "manifest.json", "offset": 3, "bit": 1, "before": 0,
                                                 "after": 2, "manifest_file": False})
    said = ev(4.05, "checkpoint-error", {"shard": 0, "damaged": True, "error": "local checkpoint: manifest.json: its "
                                         "fields' CRC-32 0000000c is not its seal 0000000b (torn, or changed at rest)"},
              node=N)
    assert CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), rot, said, start(4.1, N)], {}).valid is True
    assert CHECKERS["checkpoint-loads"]([local(2, N, 9, "b"), rot, start(4.1, N)], {}).valid is False


def test_a_load_whose_position_is_not_the_one_its_files_name_carries_fails():
    """Independent of the seal (psnodes' own computation): psnodes names each state file by its
    (term, seq, epoch); a torn manifest's prefix over an old tail named seq 184's file as seq 214."""
    f = "state-t1-000000000184-e1-shard-0-1.psb"
    good = dict(load(4, N, 184, f))
    bad = dict(good, value={**good["value"], "seq": 214})
    assert CHECKERS["checkpoint-loads"]([local(2, N, 184, f), KILL, good, start(4.1, N)], {}).valid is True
    v = CHECKERS["checkpoint-loads"]([local(2, N, 184, f), KILL, bad, start(4.1, N)], {})
    assert v.valid is False and v.details["not_the_manifests_file"][0]["file_names"] == (1, 184, 1)


def test_after_a_rotted_manifest_the_copy_owes_no_load_until_it_publishes_again():
    """A rotted manifest names nothing: a second restart before the copy's next checkpoint rightly
    loads nothing; once it published again, a restart that loads nothing fails as before."""
    rot = fault_start(3.0, "bit-rot", N, rotted={"file": "manifest.json", "offset": 3, "bit": 1, "before": 0,
                                                 "after": 2, "manifest_file": False})
    said = ev(4.05, "checkpoint-error", {"shard": 0, "damaged": True, "error": "local checkpoint: manifest.json: "
                                         "does not parse (torn or empty)"}, node=N)
    again = fault_start(6.0, "kill", N)
    h = [local(2, N, 9, "b"), rot, said, start(4.1, N), again, start(7.1, N)]
    assert CHECKERS["checkpoint-loads"](h, {}).valid is True
    h = [local(2, N, 9, "b"), rot, said, start(4.1, N), local(5, N, 12, "c"), again, start(7.1, N)]
    assert CHECKERS["checkpoint-loads"](h, {}).valid is False
