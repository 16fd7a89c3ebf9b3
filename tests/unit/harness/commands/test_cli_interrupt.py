"""Ctrl-C while the CLI is still building its parser exits 130 without a traceback.

CI saw `pschaos run` SIGINTed 0.5 s after start on a loaded machine: the signal landed while
build_parser() imported the subcommands' modules, outside main's KeyboardInterrupt handler, and
the harness died with a traceback instead of its one-line message.
"""
import pschaos.harness.commands.cli as cli


def test_interrupt_while_building_the_parser_exits_130(monkeypatch, capsys):
    def interrupted():
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["run", "x.yaml"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_interrupt_while_running_exits_130(monkeypatch, capsys):
    def fn(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "cmd_clean", fn)        # build_parser binds it when called
    assert cli.main(["clean"]) == 130
    assert "interrupted" in capsys.readouterr().err
