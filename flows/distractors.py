"""Distractors for any multiple-choice file: the distractor engine (tasks/distractors) on a file
whose columns a preset or a map names, written back in the file's own format and layout.

    csk distractors rebuild --input FILE --preset cicero|paco|corecode|swag|hellaswag
    csk distractors rebuild --input FILE --map context=ctx,choices=endings,answer=label,group=source_id

mcq_file -> counterfactuals -> candidate_filter -> adversarial_filter -> (aflite) -> verification
-> rebuilt_file -> distractor_quality. `csk lineage distractors rebuilt_file --row ID` traces a rebuilt record to its
input record; `csk lineage distractors candidate_filter --row ID` a distractor to its generator and rule.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

import typer

from csk.errors import CskError
from csk.orchestration import PipelineRun
from csk.pipeline import Pipeline, Stage
from csk.release import Release
from data_contracts import distractors as contracts
from flows._distractor_engine import (ENGINE_FIGURES, ENGINE_SHARES, EngineSettings, choose_distractors,
                                     engine_deviations)
from tasks.distractors.adversarial import adversarial_filter
from tasks.distractors.aflite import aflite
from tasks.distractors.candidate_filter import candidate_filter
from tasks.distractors.counterfactuals import counterfactuals
from tasks.distractors import labeling as distractor_labeling
from tasks.distractors.mcq_file import FORMATS, PRESETS, mcq_file, parse_map, rebuilt_file
from tasks.distractors.quality import distractor_quality
from tasks.distractors.verification import verification
from tasks.embed import EmbedSpec


class DistractorSettings(EngineSettings):
    """Settings shared by the engine's stages."""

    embed: EmbedSpec = EmbedSpec()
    """the sentence embedder of retrieval, the linear probes and the quality measurement"""


STAGES = (
    Stage(mcq_file, contract=contracts.MCQFile, unit="instances", parent_column=None),
    Stage(counterfactuals, contract=contracts.Counterfactuals, unit="candidates", parent_column="instance_id",
          conserves_rows=False),
    Stage(candidate_filter, contract=contracts.Candidates, unit="candidates"),
    Stage(adversarial_filter, contract=contracts.AdversarialChoices, unit="instances"),
    Stage(aflite, contract=contracts.AdversarialChoices, unit="instances", enabled=False),
    Stage(verification, contract=contracts.Verified, unit="instances"),
    Stage(rebuilt_file, contract=contracts.RebuiltFile, unit="instances"),
    Stage(distractor_quality, contract=contracts.DistractorQuality, unit="measures", parent_column=None,
          conserves_rows=False),
)


def rebuild(run: PipelineRun, **read) -> None:
    """The file's instances -> counterfactual pool -> candidate filter -> adversarial filtering ->
    (AF-Lite) -> human verification -> the rebuilt file -> distractor quality (rebuilt beside published)."""
    items = run.stage(mcq_file, **read)
    kept, verified = choose_distractors(run, items)
    if verified is None:  # a stage of the engine kept nothing (it said why)
        return
    rebuilt = run.stage(rebuilt_file, distractors=verified, instances=items)
    run.stage(distractor_quality, mcq=rebuilt, instances=items, candidates=kept)


def rebuild_command(
        input: Path = typer.Option(..., "--input", help="the multiple-choice file (JSON Lines, CSV, TSV or Parquet)"),
        preset: str = typer.Option("", "--preset", help=f"a known layout: {', '.join(PRESETS)}"),
        map_: str = typer.Option("", "--map", help="FIELD=COLUMN,... on top of the preset; fields: id, group, "
                                 "context, question, choices, answer, correct, passage; a+b joins columns, a|b "
                                 "lists choice columns (or takes the first present), ending? matches a pattern"),
        format: str = typer.Option("auto", "--format", help=f"{', '.join(sorted(set(FORMATS.values())))}; auto: "
                                   "from the suffix"),
        out: Optional[Path] = typer.Option(None, "--out", help="also copy the rebuilt file here"),
        config: Path = typer.Option(Path("pipelines.toml"), "--config", help="pipelines.toml to read"),
        store: Path = typer.Option(Path("artifacts"), "--store", help="artifact store directory"),
        set_: list[str] = typer.Option([], "--set", help="override a setting, e.g. "
                                       "distractors.adversarial_filter.max_iterations=3")) -> None:
    """Rebuild the distractors of any multiple-choice file; the rebuilt file keeps its format and layout."""
    from csk.cli import console, run_flow
    from csk.lineage import latest_ref
    from csk.store import Store

    from tasks.distractors.mcq_file import check_layout

    check_layout(input, format, preset, parse_map(map_))  # the file, its format and layout: before Prefect starts
    read = {"input": str(input.resolve()), "format": format}
    if preset:
        read["preset"] = preset
    if map_:
        read["map"] = parse_map(map_)
    run_flow("distractors", rebuild, config, store, set_, read)
    try:
        ref = latest_ref(Store(store), "distractors", "rebuilt_file", "latest")
    except CskError:  # the engine kept nothing: its warning above names the stage and why
        console.print("no rebuilt file: a stage of the distractor engine kept nothing (said above)", highlight=False)
        raise typer.Exit(1) from None
    written = Path(ref.path) / ref.manifest()["notes"]["file"]
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(written, out)
        written = out
    console.print(f"rebuilt file: {written}", highlight=False)


rebuild_command.command_name = "rebuild"


RELEASE = Release(
    # the file's records with their rebuilt choices (null where the engine could not fill a record's slots,
    # `rebuilt_reason` says why), the file's own as published_choices; the rebuilt file in its own format
    table="mcq_file", rebuilt=("rebuilt_file", ("choices",)), files=("rebuilt_file",),
    drop=("layout",),  # the file's format and columns, the same on every row: the rebuilt file keeps them
    pretty_name="Multiple-choice items with rebuilt distractors", task_categories=("multiple-choice",),
    figures=ENGINE_FIGURES, shares=ENGINE_SHARES, deviations=engine_deviations("distractors"),
    file_notes={"release/rebuilt_file": "the input file with every record's distractors rebuilt, in its own "
                                        "format and layout (a record the engine could not fill is left out)"})


PIPELINE = Pipeline(
    name="distractors",
    release=RELEASE,
    doc="Distractors for any multiple-choice file: the distractor engine on a mapped file, written back in its layout",
    stages=STAGES,
    flows=(rebuild,),
    settings=DistractorSettings,
    commands=(rebuild_command,),
    labeling=(distractor_labeling.STEP,),
)
