"""The promoter task's contract (:class:`PromoterTask`); each hook imports its code when called."""
from __future__ import annotations

from typing import Any, Mapping

from bioattn.tasks.base import FittedMember, Task, TaskData


class PromoterTask(Task):
    name = "promoter"
    description = "DNA sequence classification (GUE / E. coli promoters or your own labelled FASTA/CSV)"
    kind = "classification"
    headline_metric = "mcc"
    commands = {"train": "bioattn.tasks.promoter.commands:TrainPromoter",
                "predict": "bioattn.tasks.promoter.predict_command:PredictPromoter",
                "explain": "bioattn.tasks.promoter.explain_command:ExplainPromoter"}
    explain = "bioattn.tasks.promoter.explain:explain_promoter"
    attribution = "bioattn.tasks.promoter.attribution:attribute_tokens"
    member_type = "PromoterClassifier"

    @property
    def reference(self) -> Mapping[str, Mapping[str, float]]:  # type: ignore[override]
        """Published MCC×100 on the GUE promoter tasks: ``{task: {model: value}}``."""
        from bioattn.tasks.promoter.train import PUBLISHED_GUE
        tasks = sorted({task for values in PUBLISHED_GUE.values() for task in values})
        return {task: {model: values[task] for model, values in PUBLISHED_GUE.items() if task in values}
                for task in tasks}

    def prepare(self, options: Any, config: Any = None, **inputs: Any) -> tuple[Any, TaskData]:
        from bioattn.tasks.promoter.protocols import prepare
        return prepare(options, config)

    def load_data(self, options: Any) -> TaskData:
        """:func:`~bioattn.tasks.promoter.train.load_data` with the task's default config; writes nothing."""
        from bioattn.tasks.promoter.train import default_config, load_data, quick_config, quick_options
        config = default_config(options.task, options.pretrain_epochs)
        if options.quick:
            config, options = quick_config(config), quick_options(options)
        data = load_data(options, seed=config.seed)
        splits = data.splits
        return TaskData(train=splits.get("train"), dev=splits.get("dev"), pool=splits.get("all"),
                        class_names=data.class_names, source=data.data_root or "", seed=config.seed,
                        extra={"max_len": data.max_len, "config": config})

    def protocol(self, options: Any, data: TaskData) -> Any:
        from bioattn.tasks.promoter.protocols import protocol
        return protocol(options, data)

    def folds(self, data: TaskData) -> Any:
        from bioattn.tasks.promoter.data import stratified_group_folds
        return lambda k, seed: stratified_group_folds(data.pool, k, seed)

    def fit_member(self, options: Any, data: TaskData, member: Any) -> FittedMember:
        from bioattn.tasks.promoter.protocols import fit
        return fit(options, data, member)

    def held_out(self, options: Any, data: TaskData, member: Any, fitted: FittedMember) -> dict[str, Any]:
        from bioattn.tasks.promoter.protocols import held_out
        return held_out(data, member, fitted)

    def report(self, options: Any, data: TaskData, protocol: Any, run: Any) -> tuple[dict[str, Any], str]:
        from bioattn.tasks.promoter.protocols import report
        return report(options, data, protocol, run)

    def score(self, model: Any, split: Any) -> dict[str, float]:
        from bioattn.tasks.promoter.train import score
        return score(model, split)

    def predict_split(self, model: Any, split: Any) -> Any:
        return model.predict_tokens(split.tokens, batch_size=512)

    def fit_baselines(self, options: Any, train: Any, evaluate: Any) -> dict[str, dict[str, float]]:
        from bioattn.tasks.promoter.baselines import run_baselines
        scores = run_baselines(train, {"eval": evaluate}, 0)
        return {name: by_split["eval"] for name, by_split in scores.items()}


TASK = PromoterTask()
