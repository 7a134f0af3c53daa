"""Train, evaluate, predict and export from a param file; or serve, reproduce, sweep and search.

    python run_trainer.py --param_path examples/cls_ernie_fc_with_focal.json
    python run_trainer.py --param_path examples/cls_ernie_fc_ch.json --set trainer.epochs=1
    python run_trainer.py --list
    python run_trainer.py --param_path examples/cls_ernie_fc_ch.json --sweep model.loss.name=ce,focal --seeds 3
    python run_trainer.py --param_path examples/cls_ernie_fc_ch.json --search 'trainer.learning_rate=log_uniform(1e-5,1e-3)' --trials 20

The command line itself is appzoo/cli.py (one module, each command an entry of its COMMANDS); this file is how
a clone runs it, and the names below are those the tests and the bad-input harness call.
"""
from appzoo.cli import error_line, exit_with, main, parse_args, parse_do, plan_search_of  # noqa: F401

if __name__ == "__main__":
    exit_with(main())
