"""``--do export``: the static graph of the run's model in ``<output_dir>/inference``."""
from appzoo.inference import export


class Export:
    name = "export"
    reads = ()
    writes = ("inference",)
    main_only = True

    def run(self, ctx):
        """A new folder swapped in whole, recording what it is of."""
        folder = export.export(ctx.trained.model, ctx.folder.inference, export.source_key(ctx.trained, ctx.source()))
        ctx.result.export = {"folder": folder}
