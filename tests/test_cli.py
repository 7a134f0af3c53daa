"""appzoo/cli.py: the command line's commands in one table (COMMANDS), the first one the arguments give runs;
--do serve and --do reproduce run alone, so a sweep's or search's flags beside them are refused in one line."""
import dataclasses

import pytest

from appzoo import cli

PARAMS = "examples/cls_ernie_fc_ch.json"


def test_the_commands_are_one_table_and_a_run_is_the_last():
    assert [c.name for c in cli.COMMANDS] == ["list", "describe", "resave", "serve", "reproduce", "search", "sweep",
                                                  "run"]
    args = cli.parse_args(["--param_path", PARAMS])
    assert cli.chosen(cli.Call(args, [])).name == "run"
    assert cli.chosen(cli.Call(cli.parse_args(["--param_path", PARAMS, "--sweep", "a=1,2"]), [])).name == "sweep"
    assert cli.chosen(cli.Call(args, [], {}, ["reproduce"])).name == "reproduce"
    assert cli.chosen(cli.Call(cli.parse_args(["--list"]), [])).name == "list"


def test_a_command_added_as_one_entry_runs(monkeypatch, capsys):
    """One entry of COMMANDS, and main runs it with the param file read and --do parsed."""
    seen = []

    def greet(call):
        seen.append((call.config["trainer"]["epochs"], call.do))
        print("hello from a new command")
        return 7

    new = cli.Command("greet", lambda call: call.args.set == ["trainer.epochs=9"], greet)
    monkeypatch.setattr(cli, "COMMANDS", (new, *cli.COMMANDS))
    assert cli.main(["--param_path", PARAMS, "--set", "trainer.epochs=9", "--do", "eval"]) == 7
    assert seen == [(9, ["eval"])] and "hello from a new command" in capsys.readouterr().out


@pytest.mark.parametrize("mode,flags,flag", [("reproduce", ["--sweep", "model.loss.name=ce,focal"], "--sweep"),
                                              ("reproduce", ["--search", "trainer.learning_rate=uniform(1e-5,1e-4)"],
                                               "--search"),
                                              ("serve", ["--seeds", "3"], "--seeds")])
def test_a_sweep_or_search_beside_a_mode_that_runs_alone_is_one_line(capsys, mode, flags, flag):
    assert cli.main(["--param_path", PARAMS, "--do", mode, *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"error: --do {mode} runs alone") and f"{flag} has no place in it" in err


def test_trials_without_a_search_is_one_line(capsys):
    assert cli.main(["--param_path", PARAMS, "--trials", "3"]) == 2
    assert capsys.readouterr().err.strip() == "error: --trials and --timeout belong to --search"


def test_a_call_says_how_it_was_typed():
    call = cli.Call(cli.parse_args(["--param_path", "a b.json"]), ["--param_path", "a b.json"])
    assert call.command_line == "python run_trainer.py --param_path 'a b.json'"
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.do = ["train"]
