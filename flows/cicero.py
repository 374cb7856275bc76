"""CICERO (Ghosal et al. 2022): the construction steps of docs/method.md section 1, in order.

`csk run cicero` runs `cicero`; `csk cicero rebuild-distractors` runs `rebuild_distractors`
(the distractor engine alone, on the latest run's instances or on a released file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from csk.errors import CskError
from csk.models import display_name
from csk.orchestration import PipelineRun
from csk.pipeline import Pipeline, Stage
from csk.release import Release
from flows._distractor_engine import (ENGINE_FIGURES, ENGINE_SHARES, EngineSettings, choose_distractors,
                                     engine_deviations)
from data_contracts import cicero as contracts
from data_contracts import common, distractors
from tasks.cicero.annotation import annotation_tasks, annotations, release_instances
from tasks.cicero.experiments import experiments
from tasks.cicero.fidelity import fidelity
from tasks.cicero.instances import instances
from tasks.cicero.length_filter import length_filter
from tasks.cicero.mcq import mcq
from tasks.cicero.nlg import nlg
from tasks.cicero.quality_check import quality_check
from tasks.cicero.sources import sources
from tasks.cicero.splits import splits
from tasks.cicero.statistics import statistics
from tasks.cicero.targets import targets
from tasks.dedup import dedup
from tasks.distractors.adversarial import adversarial_filter
from tasks.distractors.aflite import aflite
from tasks.distractors.candidate_filter import candidate_filter
from tasks.cicero import labeling as cicero_labeling
from tasks.distractors import labeling as distractor_labeling
from tasks.distractors.counterfactuals import counterfactuals
from tasks.distractors.quality import distractor_quality
from tasks.distractors.verification import verification
from tasks.embed import EmbedSpec, embed


class CiceroSettings(EngineSettings):
    """Settings shared by CICERO's stages."""

    schedule: str | None = "0 3 * * 1"
    """cron of `csk schedule cicero` (Mondays 03:00)"""
    embed: EmbedSpec = EmbedSpec()
    """the sentence embedder of dedup, TextRank, the candidate filter and the probes"""


STAGES = (
    Stage(sources, contract=contracts.Dialogues, unit="dialogues", parent_column=None),
    Stage(length_filter, contract=contracts.FilteredDialogues, unit="dialogues"),
    Stage(embed, contract=common.Embeddings, unit="dialogues"),
    Stage(dedup, contract=contracts.Deduplicated, unit="dialogues"),
    Stage(targets, contract=contracts.Targets, unit="targets", parent_column="dialogue_id", conserves_rows=False),
    Stage(annotation_tasks, contract=contracts.AnnotationTasks, unit="tasks"),
    Stage(annotations, contract=contracts.Annotations, unit="instances", parent_column="source_dialogue_id"),
    Stage(quality_check, contract=contracts.CheckedAnnotations, unit="instances"),
    Stage(splits, contract=contracts.Splits, unit="instances"),
    Stage(nlg, contract=contracts.NLG, unit="examples", parent_column="annotation_id", conserves_rows=False),
    Stage(statistics, contract=contracts.Statistics, unit="measures", parent_column=None, conserves_rows=False),
    Stage(fidelity, contract=contracts.Fidelity, unit="measures", parent_column=None, conserves_rows=False),
    # the distractor engine (tasks/distractors), on CICERO's instances
    Stage(release_instances, name="release", contract=contracts.Annotations, unit="instances", parent_column=None,
          table="annotations"),
    Stage(instances, contract=distractors.Instances, unit="instances"),
    Stage(counterfactuals, contract=distractors.Counterfactuals, unit="candidates", parent_column="instance_id",
          conserves_rows=False),
    Stage(candidate_filter, contract=distractors.Candidates, unit="candidates"),
    Stage(adversarial_filter, contract=distractors.AdversarialChoices, unit="instances"),
    Stage(aflite, contract=distractors.AdversarialChoices, unit="instances", enabled=False),  # CoreQuisite's, off here
    Stage(verification, contract=distractors.Verified, unit="instances"),
    Stage(mcq, contract=contracts.MCQ, unit="items"),
    Stage(distractor_quality, contract=distractors.DistractorQuality, unit="measures", parent_column=None,
          conserves_rows=False),
    Stage(experiments, contract=contracts.ExperimentFiles, unit="files", parent_column=None, conserves_rows=False),
)


def cicero(run: PipelineRun) -> None:
    """Sources -> length filter -> embeddings -> near-duplicate removal -> targets -> annotation round
    trip -> splits -> NLG tasks -> distractor engine -> MCQ tasks -> statistics."""
    dialogues = run.stage(sources)
    filtered = run.stage(length_filter, dialogues=dialogues)
    embeddings = run.stage(embed, dialogues=filtered)
    deduped = run.stage(dedup, dialogues=filtered, embeddings=embeddings)
    chosen = run.stage(targets, dialogues=deduped)
    tasks = run.stage(annotation_tasks, targets=chosen, dialogues=deduped)
    split = answers = imported = None
    if run.config.annotations.release or run.config.annotations.answers:
        imported = run.stage(annotations, dialogues=deduped, tasks=tasks)
        answers = run.stage(quality_check, annotations=imported)
        split = run.stage(splits, annotations=answers)
        run.stage(nlg, split_rows=split, annotations=answers)
        distractor_engine(run, answers, split)
    else:
        import logging

        logging.getLogger("csk").info("neither cicero.annotations.release nor .answers is set: stopping after the "
                                      "annotation task export (`csk label export cicero answers` writes its project)")
    run.stage(statistics, sources=dialogues, filtered=filtered, deduped=deduped, targets=chosen, splits=split,
              annotations=answers)
    run.stage(fidelity, sources=dialogues, filtered=filtered, deduped=deduped, targets=chosen, annotations=imported,
              splits=split)


def distractor_engine(run: PipelineRun, answers, split) -> None:
    """docs/method.md 1.6: counterfactual pool -> candidate filter -> adversarial filtering -> (AF-Lite) ->
    human verification -> MCQ files, and the distractor-quality measurement."""
    items = run.stage(instances, annotations=answers, splits=split)
    kept, verified = choose_distractors(run, items)
    if verified is None:  # a stage of the engine kept nothing (it said why)
        return
    final = run.stage(mcq, verified=verified, annotations=answers, splits=split)
    run.stage(experiments, mcq=final, annotations=answers, splits=split)
    run.stage(distractor_quality, mcq=final, instances=items, candidates=kept)


def rebuild_distractors(run: PipelineRun, release: str | None = None) -> None:
    """Only the distractor stages: on the latest run's cached instances, or on a released file alone."""
    if release:
        distractor_engine(run, run.stage(release_instances, release=release), None)
        return
    answers = run.from_latest(quality_check) or run.from_latest(annotations)
    if answers is None:
        raise CskError("the latest cicero run has no annotations artifact: run `csk run cicero` with "
                       "cicero.annotations.release set, or pass --release FILE")
    distractor_engine(run, answers, run.from_latest(splits))


# ------------------------------------------------------------------ CICERO's commands
def rebuild_distractors_command(
        release: Optional[Path] = typer.Option(None, "--release", help="a released CICERO JSON Lines file to start from"),
        config: Path = typer.Option(Path("pipelines.toml"), "--config", help="pipelines.toml to read"),
        store: Path = typer.Option(Path("artifacts"), "--store", help="artifact store directory"),
        set_: list[str] = typer.Option([], "--set", help="override a setting, e.g. "
                                       "cicero.adversarial_filter.max_iterations=3")) -> None:
    """Rerun only CICERO's distractor stages, on the cached upstream artifacts or on a release file alone."""
    from csk.cli import run_flow

    if release is not None:  # a readable file, before Prefect starts (a directory or an empty file: one line)
        from readers.base import require_file

        require_file(release)
    run_flow("cicero", rebuild_distractors, config, store, set_,
             {"release": str(release.resolve())} if release else {})


def train_generator_command(
        base: Path = typer.Option(..., "--base", help="seq2seq model directory to fine-tune (e.g. t5-large saved locally)"),
        out: Path = typer.Option(..., "--out", help="directory to write the fine-tuned generator to"),
        snli: list[Path] = typer.Option([], "--snli", help="SNLI JSON Lines (sentence1, sentence2, gold_label)"),
        timetravel: list[Path] = typer.Option([], "--timetravel", help="TimeTravel JSON Lines"),
        epochs: int = typer.Option(1, "--epochs"), lr: float = typer.Option(3e-4, "--lr"),
        batch_size: int = typer.Option(16, "--batch-size"), max_steps: int = typer.Option(0, "--max-steps"),
        seed: int = typer.Option(0, "--seed")) -> None:
    """Fine-tune the counterfactual generator on SNLI contradictions and TimeTravel rewrites."""
    from tasks.distractors.generator_training import read_pairs, train

    pairs = read_pairs(snli, timetravel)
    info = train(base, out, pairs, epochs=epochs, lr=lr, batch_size=batch_size, max_steps=max_steps, seed=seed)
    print(f"fine-tuned on {info['pairs']} pairs ({info['steps']} steps, final loss {info['loss']:.4f}); saved to {out}")


rebuild_distractors_command.command_name = "rebuild-distractors"
train_generator_command.command_name = "train-generator"


RELEASE = Release(
    # a rebuild from a released file alone (`rebuild-distractors --release`) has the file's rows as `release`
    table="quality_check", or_table=("release",), split_stage="splits",
    files=("quality_check", "nlg", "mcq", "experiments"),
    rebuilt=("mcq", ("choices", "correct_answers", "human_written_answer")),
    figures={"fidelity": "Fidelity to the release", **ENGINE_FIGURES}, shares=ENGINE_SHARES,
    pretty_name="CICERO (rebuilt)", task_categories=("question-answering", "text-generation"),
    licences={"dailydialog": "CC BY-NC-SA 4.0", "mutual": "no licence stated (Nealcly/MuTual): check before redistributing",
              "dream": "DREAM's license.txt (nlpdata/dream): check before redistributing",
              "cicero": "CICERO's release terms (declare-lab/CICERO)", "release": "CICERO's release terms (declare-lab/CICERO)"},
    deviations=(
        lambda p: f"Near-duplicates are found with {display_name(p['embed']['embed']['model'])} at cosine "
                  f"{p['dedup']['threshold']} (the paper's threshold was set for its own embedder); "
                  "cicero.embed.model and cicero.dedup.threshold change them.",
        *engine_deviations("cicero"),
    ),
    file_notes={
        "release/quality_check": "the annotated instances with the quality check's votes, one JSON line each",
        "release/nlg": "the generative tasks (1.1.1-1.2.3) per split, from the annotated answers",
        "release/mcq": "the multiple-choice tasks 2.1 / 2.2 with the REBUILT distractors (this run's distractor "
                       "engine); the release's own choices are data/'s published_choices (and, where the release "
                       "has what they read, under release/experiments/published/)",
        "release/experiments/rebuilt": "the authors' experiment files built from the REBUILT choices",
        "release/experiments/published": "the authors' experiment files built from the RELEASE's own choices "
                                         "(for comparison with the rebuilt ones)",
    })



PIPELINE = Pipeline(
    name="cicero",
    release=RELEASE,
    doc="CICERO: contextualized commonsense inference in dialogues (Ghosal et al. 2022)",
    stages=STAGES,
    flows=(cicero, rebuild_distractors),
    settings=CiceroSettings,
    commands=(rebuild_distractors_command, train_generator_command),
    labeling=(*cicero_labeling.STEPS, distractor_labeling.STEP),
)
