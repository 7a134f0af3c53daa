"""``--do reproduce``: re-run a finished run from its record into a new folder and compare the metrics.

The run in ``trainer.output_dir`` is re-run from its resolved ``config.json`` and the data files its
``run_record.json`` names, into ``<output_dir>/reproduce/N/`` (the original is never written to), after
checking that each data file (and each other file the settings name: a label file, an encoder's config)
still has its recorded sha256. The new run's metrics are compared with the
recorded ones: "bit-identical" when every dev and test metric is equal and the versions, the machine, the
code's commit and its uncommitted changes are the same; otherwise each difference is stated, with the facts
that differ (:func:`appzoo.reports.record.environment`).

A reproduction re-runs the recorded settings and nothing else: a ``--set`` other than ``trainer.output_dir``
(which names the run), or a param file whose settings differ from the run's ``config.json``, is refused
before anything runs, rather than silently ignored.
"""
import copy
import os

from appzoo.errors import DataError, UserError
from appzoo.params.dataset import SPLITS
from appzoo.params.param_file import get_key, set_key
from appzoo.params.trainer import Do, TrainerConfig
from appzoo.reports import record as records
from appzoo.run.plan import validate
from appzoo.run.runner import run
from appzoo.store.bundle_files import digest
from appzoo.store.archive import RunFolder
from appzoo.store.run_files import BY_KEY
from appzoo.utils import files

#: metrics that measure the machine's speed, not the model: never compared
TIMING = ("time", "per_second")
#: the one key a reproduction takes from the command line: it names the run to reproduce
NAMES_THE_RUN = "trainer.output_dir"


def reproduce(config, param_path, argv=(), overrides=()):
    """Re-run the run in ``config``'s ``trainer.output_dir``; print and return 0 (the comparison is in
    ``reproduce.json`` of the new folder). UserError (exit 2) when there is no record, a data file changed, or
    ``overrides`` (the ``--set`` items) or the param file ``config`` ask for settings other than the recorded ones."""
    root = (config.get("trainer") or {}).get("output_dir", TrainerConfig.output_dir)
    folder = RunFolder(root)
    _check_overrides(overrides, folder)
    recorded = _record(folder)
    _check_data(recorded, root)
    _check_settings(recorded, folder)
    target = _next_folder(folder)
    do = (recorded.get("trained_by") or {}).get("do") or recorded["do"]  # the training's modes, not a later eval's
    settings = _settings(folder, do, recorded, target)
    plan = validate(settings, folder.config, do=list(do))
    _check_param_file(config, param_path, folder, recorded, plan, do)
    plan.command = {"argv": list(argv), "overrides": [], "reproduces": os.path.abspath(root)}
    run(plan)
    comparison = compare(recorded, records.read(RunFolder(target)), root, target)
    files.write_json(RunFolder(target).reproduction, comparison)
    for line in comparison["summary"]:
        print(line)
    return 0


def _check_settings(recorded, folder):
    """Refuse, in one line, a config.json whose bytes changed since the run trained (its record keeps their
    sha256; a record from before that is taken as it is): a reproduction re-runs the recorded settings."""
    then = recorded.get("settings_sha256")
    now = files.file_sha256(folder.config) if os.path.isfile(folder.config) else None
    if then and now != then:
        raise DataError(f"--do reproduce: {folder.config}: the run's settings changed since it trained (recorded "
                        f"sha256 {then[:12]}, now {now[:12] if now else 'no file'}); a reproduction re-runs them as "
                        f"recorded: put the file back, or train anew without --do reproduce")


def _record(folder):
    name = BY_KEY["run_record"].name
    if not os.path.exists(folder.run_record):
        raise UserError(f"--do reproduce: {folder.root!r} has no {name} (written by every run that trains); "
                        f"give the run's folder as trainer.output_dir, or its config.json as --param_path")
    recorded = records.read(folder)
    if not isinstance(recorded, dict):
        raise UserError(f"--do reproduce: {folder.run_record}: holds a JSON {type(recorded).__name__}, not a run's "
                        f"record (an object): it was edited or damaged, and a reproduction needs it as the run "
                        f"wrote it")
    if recorded.get("record_version") != records.VERSION:
        raise UserError(f"--do reproduce: {folder.run_record}: record_version {recorded.get('record_version')!r} "
                        f"(this appzoo reads {records.VERSION})")
    if not Do(recorded.get("do", ())).trains and not recorded.get("trained_by"):
        raise UserError(f"--do reproduce: {folder.run_record}: this run did not train (do: {recorded.get('do')}); "
                        f"reproduce the run that trained the model")
    for key, kind in (("data", dict), ("metrics", dict), ("do", list)):
        if not isinstance(recorded.get(key), kind):
            what = "missing" if key not in recorded else f"not a JSON {'object' if kind is dict else 'list'}"
            raise UserError(f"--do reproduce: {folder.run_record}: {key!r} is {what}: the record was edited or "
                            f"damaged, and a reproduction needs it as the run wrote it")
    return recorded


def _check_overrides(overrides, folder):
    """Refuse every ``--set`` but :data:`NAMES_THE_RUN`: the reproduction would run without it."""
    ignored = [item for item in overrides if item.partition("=")[0].strip() != NAMES_THE_RUN]
    if ignored:
        sets = " ".join(f"--set {item}" for item in ignored)
        raise UserError(f"--do reproduce: {sets}: a reproduction re-runs the recorded settings ({folder.config}); "
                        f"only {NAMES_THE_RUN}, which names the run, may be set; to train with other settings, "
                        f"run without --do reproduce")


def _check_param_file(config, param_path, folder, recorded, plan, do):
    """Refuse a param file other than the run's ``config.json`` whose settings (resolved, every default written
    out, as the run's ``plan`` is) differ from the recorded ones, naming the first key that differs: the
    reproduction would run without it. The keys :func:`_as_rerun` sets (output_dir and how the run is written)
    may differ; paths in the file are read from this working folder."""
    if param_path and os.path.isfile(param_path) and os.path.samefile(param_path, folder.config):
        return  # the recorded settings themselves (its relative paths are the run's, not this folder's)
    given = _as_rerun(config, do, plan.trainer.output_dir)
    for key in {*(f"dataset_reader.{split}" for split in SPLITS), *_recorded_files(recorded)}:
        if isinstance(get_key(given, key), str):  # as the run's own are: absolute
            set_key(given, key, os.path.abspath(get_key(given, key)), "--do reproduce")
    differs = _first_difference(plan.config, validate(given, param_path, do=list(do)).config)
    if differs:
        key, was, now = differs
        raise UserError(f"--do reproduce: {param_path}: {key} is {now!r}, but the run in {folder.root} was "
                        f"trained with {was!r} ({folder.config}); a reproduction re-runs the recorded settings, "
                        f"so give its config.json as --param_path; to train with these settings, run without "
                        f"--do reproduce")


def _first_difference(recorded, given, prefix=""):
    """``(key path, recorded value, given value)`` of the first key (in sorted order) where two param trees
    differ, or None when they are equal."""
    if not (isinstance(recorded, dict) and isinstance(given, dict)):
        return None if recorded == given else (prefix, recorded, given)
    missing = object()
    for name in sorted({*recorded, *given}):
        was, now = recorded.get(name, missing), given.get(name, missing)
        key = f"{prefix}.{name}" if prefix else name
        if was is missing or now is missing:
            return key, None if was is missing else was, None if now is missing else now
        differs = _first_difference(was, now, key)
        if differs:
            return differs
    return None


def _recorded_files(recorded):
    """``{key path: {"path", "abs_path", "sha256"}}``: the data splits, then every other file the run read."""
    return {**{f"dataset_reader.{split}": d for split, d in recorded["data"].items()}, **recorded.get("files", {})}


def _check_data(recorded, root):
    """Refuse, in one line, a data file (or a label file, an encoder config) that is gone or whose bytes
    changed since the run, or a distilled run's teacher whose files changed."""
    distill = recorded.get("distill")
    if distill:
        teacher = distill["abs_path"]
        now = digest(teacher) if os.path.isdir(teacher) else None
        if now != distill["digest"]:
            raise DataError(f"--do reproduce: distill.teacher: {teacher} {'changed' if now else 'is gone'} since the "
                            f"run in {root} (recorded digest {distill['digest']}{f', now {now}' if now else ''}); "
                            f"reproduce with the same teacher")
    for key, data in _recorded_files(recorded).items():
        path = data["abs_path"]
        if not os.path.isfile(path):
            raise DataError(f"--do reproduce: {key}: {path} is gone (recorded sha256 {data['sha256']} in "
                            f"{root}); reproduce on the same data")
        now = files.file_sha256(path)
        if now != data["sha256"]:
            raise DataError(f"--do reproduce: {key}: {path} changed since the run in {root} (recorded sha256 "
                            f"{data['sha256']}, now {now}); reproduce on the same data")


def _next_folder(folder):
    """``<run>/reproduce/N``: one more than the reproductions already there."""
    parent = folder.reproductions
    taken = [int(n) for n in os.listdir(parent) if n.isdigit()] if os.path.isdir(parent) else []
    return os.path.join(parent, str(max(taken, default=0) + 1))


def _as_rerun(config, do, target):
    """A copy of the param tree ``config`` that runs into ``target``, from scratch, with the training's modes
    ``do``: the keys that name the run and say how to write it, which a reproduction sets itself."""
    settings = copy.deepcopy(config)
    trainer = settings.setdefault("trainer", {})
    trainer.update(output_dir=target, resume=False, overwrite_output_dir=False, do=list(do))
    return settings


def _settings(folder, do, recorded, target):
    """The run's resolved settings, into ``target``, from scratch, on the recorded data files (absolute: the
    run may have been made from another working directory)."""
    settings = _as_rerun(files.read_json(folder.config, "the run's resolved settings"), do, target)
    data = settings.setdefault("dataset_reader", {})
    cwd = (recorded.get("trained_by") or recorded.get("command") or {}).get("cwd") or os.getcwd()
    for split in SPLITS:  # a split the run did not read (predict, by an eval-only run) is taken from its folder
        if data.get(split) and not os.path.isabs(data[split]):
            data[split] = os.path.join(cwd, data[split])
    for key, recorded_file in _recorded_files(recorded).items():
        if get_key(settings, key) is not None:
            set_key(settings, key, recorded_file["abs_path"], "--do reproduce")
    return settings


def compare(recorded, new, root, target):
    """``{"verdict", "identical", "environment_differences", "metrics", "summary"}``: each dev and test metric
    recorded against the new run's, and the versions and machine facts that differ."""
    before, after = records.environment(recorded), records.environment(new)
    differs = {k: {"recorded": before.get(k), "now": after.get(k)} for k in sorted({*before, *after})
               if before.get(k) != after.get(k)}
    table, unequal = {}, []
    for split in ("dev", "test"):
        old = (recorded["metrics"].get(split) or {}).get("scalars", {})
        now = (new["metrics"].get(split) or {}).get("scalars", {})
        for name in sorted({*old, *now}):
            if any(t in name for t in TIMING):
                continue
            row = {"recorded": old.get(name), "now": now.get(name)}
            if isinstance(row["recorded"], (int, float)) and isinstance(row["now"], (int, float)):
                row["difference"] = row["now"] - row["recorded"]
            table.setdefault(split, {})[name] = row
            if row["recorded"] != row["now"]:
                unequal.append((split, name, row))
    count = sum(len(t) for t in table.values())
    if not unequal and not differs:
        verdict = "bit-identical"
        summary = [f"reproduce: bit-identical: the {count} dev and test metrics of {target} equal those recorded "
                   f"in {root} (same machine, versions and commit)"]
    else:
        verdict = "identical metrics" if not unequal else "different"
        summary = [f"reproduce: {verdict}: {len(unequal)} of {count} dev and test metrics of {target} differ "
                   f"from those recorded in {root}"]
        summary += [f"  {split} {name}: recorded {row['recorded']!r}, now {row['now']!r}"
                    + (f" ({row['difference']:+.6g})" if "difference" in row else "") for split, name, row in unequal]
        summary += [f"  differs: {key}: recorded {v['recorded']!r}, now {v['now']!r}" for key, v in differs.items()]
    return {"reproduces": os.path.abspath(root), "verdict": verdict, "identical": not unequal,
            "environment_differences": differs, "metrics": table, "summary": summary}
