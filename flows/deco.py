"""DECO and ACCENT (Ghazarian et al. 2023): the construction steps of docs/method.md section 4.

histories (windows of <= 4 utterances) + responses -> response filter -> 300 samples split
200/100 -> 12 extraction tasks per sample -> event-relation tuples (extractor or human) ->
ACCENT's compatibility score (COMET + Sentence-BERT) -> correlation with the human ratings.

The human steps (`labeling`, tasks/deco/labeling.py) are Label Studio projects: `ratings` (three raters per
sample, read back by sample.ratings) and `tuple_validation` (three validators per tuple, read back by
extract.validations).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from csk.models import display_name
from csk.orchestration import PipelineRun
from csk.pipeline import Pipeline, PipelineSettings, Stage
from csk.release import Release
from data_contracts import deco as contracts
from tasks.deco import labeling as deco_labeling
from tasks.deco.agreement import agreement
from tasks.deco.compatibility import compatibility
from tasks.deco.correlation import correlation
from tasks.deco.extract import extract
from tasks.deco.extraction import extraction_tasks
from tasks.deco.response_filter import response_filter
from tasks.deco.sample import sample
from tasks.deco.sources import sources


class DecoSettings(PipelineSettings):
    """Settings shared by DECO's stages."""

    schedule: str | None = "0 6 * * 1"
    """cron of `csk schedule deco` (Mondays 06:00)"""


STAGES = (
    Stage(sources, contract=contracts.Samples, unit="samples", parent_column=None, conserves_rows=False),
    Stage(response_filter, contract=contracts.Filtered, unit="samples"),
    Stage(sample, contract=contracts.Sampled, unit="samples"),
    Stage(agreement, contract=contracts.Agreement, unit="measures", parent_column=None, conserves_rows=False),
    Stage(extraction_tasks, contract=contracts.ExtractionTasks, unit="tasks", parent_column="sample_id",
          conserves_rows=False),
    Stage(extract, contract=contracts.Tuples, unit="tuples", parent_column="task_id", conserves_rows=False),
    Stage(compatibility, contract=contracts.Scores, unit="samples"),
    Stage(correlation, contract=contracts.Correlation, unit="correlations", parent_column=None, conserves_rows=False),
)


def deco(run: PipelineRun) -> None:
    """sources -> response_filter -> sample (-> agreement) -> extraction_tasks -> extract -> compatibility ->
    correlation."""
    candidates = run.stage(sources)
    kept = run.stage(response_filter, samples=candidates)
    samples = run.stage(sample, samples=kept)
    run.stage(agreement, samples=samples)
    tasks = run.stage(extraction_tasks, samples=samples)
    tuples = run.stage(extract, tasks=tasks)
    scores = run.stage(compatibility, samples=samples, tuples=tuples)
    run.stage(correlation, scores=scores)


# ------------------------------------------------------------------ DECO's commands
def train_extractor_command(
        base: Path = typer.Option(..., "--base", help="seq2seq directory to fine-tune (ACCENT: t5-base saved locally)"),
        out: Path = typer.Option(..., "--out", help="directory to write the extractor to"),
        train: list[Path] = typer.Option(..., "--train", help="released DECO JSON with tuples (deco_train.json)"),
        negatives: Optional[Path] = typer.Option(None, "--negatives", help="ACCENT's none_sample_5each.csv; "
                                                 "default: 3 single + 2 pair None examples per relation drawn here"),
        epochs: int = typer.Option(50, "--epochs"), batch_size: int = typer.Option(4, "--batch-size"),
        lr: float = typer.Option(5e-5, "--lr"), max_steps: int = typer.Option(0, "--max-steps"),
        seed: int = typer.Option(42, "--seed")) -> None:
    """Fine-tune the event-relation extractor with ACCENT's settings (T5, 50 epochs, batch 4, lr 5e-5)."""
    from tasks.deco.extract import train_extractor

    info = train_extractor(base, out, train, negatives=negatives, epochs=epochs, batch_size=batch_size, lr=lr,
                           max_steps=max_steps, seed=seed)
    print(f"fine-tuned on {info['pairs']} pairs ({info['tuples']} tuples, {info['none_examples']} None; "
          f"{info['steps']} steps, final loss {info['loss']:.4f}); saved to {out}")
    for bad in info["skipped_records"]:
        print(f"skipped {bad['source_file']} {bad['source_locator']}: {bad['reason']}")


train_extractor_command.command_name = "train-extractor"

def _not_collected(p: dict) -> str | None:
    """The card's sentence on the human work this run imported from released files rather than collected in
    Label Studio (the ratings and tuple_validation labeling steps); None when both were collected."""
    imported = [what for what, setting in (("ratings", p["sample"].get("ratings")),
                                           ("validated tuples", p["extract"].get("validations"))) if not setting]
    if not imported:
        return None
    return (f"Human {' and '.join(imported)} are imported (released files), not collected in Label Studio (the "
            "ratings and tuple_validation labeling steps: deco.sample.ratings, deco.extract.validations); built "
            "samples without released ratings and tuples are scored on the extractor's tuples only.")


RELEASE = Release(
    table="sample", files=("sources", "sample", "extraction_tasks"),
    pretty_name="DECO (rebuilt)", task_categories=("text-classification",),
    licences={"dailydialog": "CC BY-NC-SA 4.0", "personachat": "the ParlAI release's terms (facebookresearch/ParlAI)",
              "topicalchat": "CDLA-Sharing-1.0 (alexa/Topical-Chat)",
              "release": "DECO / ACCENT release terms (PlusLabNLP/ACCENT)"},
    deviations=(
        _not_collected,
        lambda p: f"The compatibility embedder was {display_name(p['compatibility']['embed']['model'])}; ACCENT used "
                  "paraphrase-MiniLM-L6-v2." if "paraphrase-MiniLM-L6-v2" not in p["compatibility"]["embed"]["model"]
                  else None,
        lambda p: None if p["compatibility"]["comet"] not in ("", "off", None) else
                  "Not scored: no COMET model configured (deco.compatibility.comet), so there are no "
                  "event-commonsense scores and every correlation with the human ratings is NaN.",
    ))


PIPELINE = Pipeline(
    name="deco",
    release=RELEASE,
    # a DECO release alone: its samples, no history windows built from the bundled corpora, no ConTurE
    release_alone=("deco.sources.release={release}", "deco.sources.dailydialog=", "deco.sources.personachat=",
                   "deco.sources.topicalchat=", "deco.sources.responses=", "deco.sources.conture="),
    doc="DECO: event commonsense of dialogue responses, scored by ACCENT (Ghazarian et al. 2023)",
    stages=STAGES,
    flows=(deco,),
    settings=DecoSettings,
    commands=(train_extractor_command,),
    labeling=deco_labeling.STEPS,
)
