"""The session's store of fault-free runs (harness/run/shared_runs.py): made once, copied after."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from pschaos.harness.run.shared_runs import NOTE, SharedRuns, close_session, key_of, open_session
from pschaos.harness.run.scenario import Scenario


def maker(calls: list, verdict: str = "pass", pause: float = 0.0):
    def make(folder: Path) -> dict:
        calls.append(folder)
        time.sleep(pause)
        folder.mkdir(parents=True, exist_ok=True)
        rep = {"verdict": verdict, "n": len(calls)}
        (folder / "report.json").write_text(json.dumps(rep))
        (folder / "history.jsonl").write_text('{"f": "job-final"}\n')
        return rep
    return make


def test_a_run_is_made_once_and_copied_with_a_note_naming_where(tmp_path):
    store, calls = SharedRuns(tmp_path / "store"), []
    first = store.run("k", tmp_path / "a" / "baseline", maker(calls))
    second = store.run("k", tmp_path / "b" / "baseline", maker(calls))
    assert len(calls) == 1 and first["n"] == second["n"] == 1
    assert second["reused_from"] == str((tmp_path / "a" / "baseline").resolve()) and "reused_from" not in first
    assert (tmp_path / "b" / "baseline" / "history.jsonl").read_text() == '{"f": "job-final"}\n'
    assert json.loads((tmp_path / "b" / "baseline" / NOTE).read_text())["made_in"] == second["reused_from"]
    store.run("other", tmp_path / "c" / "baseline", maker(calls))
    assert len(calls) == 2


def test_a_run_that_did_not_pass_or_a_store_copy_that_is_not_whole_is_made_again(tmp_path):
    store, calls = SharedRuns(tmp_path / "store"), []
    store.run("k", tmp_path / "a", maker(calls, verdict="unknown"))
    store.run("k", tmp_path / "b", maker(calls, verdict="fail"))
    store.run("k", tmp_path / "b", maker(calls))
    assert len(calls) == 3
    store.run("k", tmp_path / "c", maker(calls))
    assert len(calls) == 3
    (tmp_path / "store" / "k" / "history.jsonl").unlink()
    store.run("k", tmp_path / "d", maker(calls))
    assert len(calls) == 4


def test_the_folder_it_was_made_in_may_change_after(tmp_path):
    store, calls = SharedRuns(tmp_path / "store"), []
    store.run("k", tmp_path / "a", maker(calls))
    (tmp_path / "a" / "history.jsonl").write_text("another run of the same name\n")
    rep = store.run("k", tmp_path / "b", maker(calls))
    assert len(calls) == 1 and rep["verdict"] == "pass"
    assert (tmp_path / "b" / "history.jsonl").read_text() == '{"f": "job-final"}\n'


def test_the_same_folder_asked_again_keeps_its_run(tmp_path):
    store, calls = SharedRuns(tmp_path / "store"), []
    store.run("k", tmp_path / "a", maker(calls))
    rep = store.run("k", tmp_path / "a", maker(calls))
    assert len(calls) == 1 and rep["verdict"] == "pass" and (tmp_path / "a" / "history.jsonl").is_file()


def test_two_askers_at_once_make_one_run(tmp_path):
    store, calls, out = SharedRuns(tmp_path / "store"), [], []
    threads = [threading.Thread(target=lambda i=i: out.append(store.run("k", tmp_path / str(i), maker(calls, pause=0.2))))
               for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and sorted("reused_from" in r for r in out) == [False, True]


def test_each_session_has_its_own_store_and_a_killed_ones_is_swept(tmp_path):
    """Two sessions at once in one --pschaos-out: a second session's start emptied the first's
    store under it (the library pass lost a run it had just made)."""
    parent = tmp_path / "stores"
    a, b = open_session(parent), open_session(parent)
    assert a != b and a.parent == b.parent == parent.resolve() and not a.exists()   # made on first use
    calls = []
    SharedRuns(a).run("k", tmp_path / "x", maker(calls))
    SharedRuns(b).run("k", tmp_path / "y", maker(calls))
    assert len(calls) == 2 and a.is_dir()
    dead = parent / "session-999999999-0000"           # a killed session's: no such process
    dead.mkdir()
    open_session(parent)
    assert not dead.exists() and a.exists() and b.exists()
    close_session(a)
    assert not a.exists() and parent.exists()
    close_session(b)
    assert not parent.exists()                          # the last store out removes the folder


def test_a_copy_replaces_only_what_a_run_left_in_the_folder(tmp_path):
    store, calls = SharedRuns(tmp_path / "store"), []
    store.run("k", tmp_path / "a", maker(calls))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "mine.txt").write_text("a user's file")
    (tmp_path / "b" / "report.html").write_text("an older run's page")
    store.run("k", tmp_path / "b", maker(calls))
    assert (tmp_path / "b" / "mine.txt").exists() and not (tmp_path / "b" / "report.html").exists()


def test_the_key_ignores_name_and_description_but_not_options_seed_or_backend():
    a = Scenario(name="tf-one", description="x", system="tf-ps", system_options={"workers": 2})
    b = Scenario(name="tf-two", description="y", system="tf-ps", system_options={"workers": 2})
    c = Scenario(name="tf-two", system="tf-ps", system_options={"workers": 1})
    sys_ = object()
    assert key_of(a, 1, "process", sys_) == key_of(b, 1, "process", sys_)
    assert len({key_of(a, 1, "process", sys_), key_of(c, 1, "process", sys_), key_of(a, 2, "process", sys_),
                key_of(a, 1, "sim", sys_)}) == 4
