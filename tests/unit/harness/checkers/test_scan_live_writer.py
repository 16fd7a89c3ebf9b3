"""The end-of-run checkpoint scan reads folders that live copies may still write: a writer that
replaces the manifest and removes the file it named between the scan's two reads has not torn a
checkpoint (the CI of 2026-12-03 failed latency-100-primary-replica on exactly this). The writer
here is psnodes' own `write_checkpoint`, run at the worst moment: right after each manifest read."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pschaos.harness.backends.process.observe import ProcessObservation
from pschaos.psnodes.store.blob import pack
from pschaos.psnodes.store.checkpoint import MANIFEST, write_checkpoint

BLOB = pack({"seq": 0}, {"w": np.zeros(100, dtype=np.float32)})


def _write_after_each_manifest_read(monkeypatch: pytest.MonkeyPatch, folder: Path, times: int) -> list[int]:
    """Every read of `folder`'s manifest (up to `times`) is followed by a newer checkpoint."""
    real, seqs, busy = Path.read_bytes, [0], [False]

    def read_bytes(self: Path, *a, **kw) -> bytes:
        text = real(self, *a, **kw)
        if self == folder / MANIFEST and seqs[0] < times and not busy[0]:
            seqs[0] += 1
            busy[0] = True          # the writer reads the manifest too
            try:
                write_checkpoint(folder, BLOB, seqs[0], 1, "shard-1-1")
            finally:
                busy[0] = False
        return text
    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    return seqs


def test_a_checkpoint_replaced_between_the_two_reads_is_read_again(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "data" / "shard-1-1"
    write_checkpoint(folder, BLOB, 0, 1, "shard-1-1")
    seqs = _write_after_each_manifest_read(monkeypatch, folder, times=2)
    [v] = ProcessObservation.scan_tree(tmp_path, tmp_path)
    assert seqs[0] >= 1, "the writer never ran between the reads: the test proved nothing"
    assert v["loadable"] and v["size_ok"], v
    assert v["seq"] >= 1 and v["dir"] == "data/shard-1-1"


def test_a_writer_that_never_stops_moving_leaves_the_last_reading_as_found(tmp_path: Path, monkeypatch) -> None:
    """Bounded: the scan re-reads a few times, then records what it found (unloadable, with the
    error), never loops for ever beside a busy writer."""
    folder = tmp_path / "data" / "shard-1-1"
    write_checkpoint(folder, BLOB, 0, 1, "shard-1-1")
    _write_after_each_manifest_read(monkeypatch, folder, times=10_000)
    [v] = ProcessObservation.scan_tree(tmp_path, tmp_path)
    assert v["loadable"] is False and "FileNotFoundError" in v["error"]


def test_a_manifest_naming_a_missing_file_is_still_a_finding(tmp_path: Path) -> None:
    folder = tmp_path / "data" / "shard-1-1"
    write_checkpoint(folder, BLOB, 0, 1, "shard-1-1")
    for f in folder.glob("state-*.psb"):
        f.unlink()
    [v] = ProcessObservation.scan_tree(tmp_path, tmp_path)
    assert v["loadable"] is False and "FileNotFoundError" in v["error"]
