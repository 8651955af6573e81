"""The flags several tasks' commands share, as :func:`bioattn.options.flag` fields."""
from __future__ import annotations

from typing import Any, Sequence

from bioattn.distributed import DEVICES
from bioattn.options import flag


def model_flag(*, trained_by: str, required: bool = True, group: str | None = None) -> Any:
    """``--model NAME_OR_DIR``: a shipped model or a run directory of ``trained_by``."""
    from bioattn.models.registry import available_models
    shipped = ", ".join(available_models()) or "none"
    return flag("--model", default=None, metavar="NAME_OR_DIR", group=group, exclusive="model", required=required,
                help=f"a model shipped with bioattn by name ({shipped}; see 'bioattn models') or a run directory of "
                     f"'{trained_by}' (config.json + model.safetensors) (default: none)")


def device_flag(*, group: str | None = None) -> Any:
    return flag("--device", default="auto", choices=DEVICES, group=group,
                help="where the model runs: auto (the GPU when PyTorch sees one), cpu or cuda (default: %(default)s)")


def data_root_flag(*, what: str, group: str | None = None) -> Any:
    return flag("--data-root", default=None, group=group,
                help=f"{what} (default: $BIOATTN_DATA_ROOT or ../shared/data)")


def seeds_flag(*, group: str) -> Any:
    return flag("--seeds", default=None, nargs="+", metavar="S", group=group,
                help="train one model per seed on the same split and save them as one ensemble; reports each seed, "
                     "mean ± sd and the ensemble (default: one model, seed --seed)")


def cv_flag(*, pool: str, group: str, default: str = "off") -> Any:
    """``--cv K`` over ``pool`` (e.g. ``"train + val"``)."""
    return flag("--cv", default=None, metavar="K", group=group,
                help=f"K-fold stratified cross-validation over {pool}: out-of-fold metrics, the K fold models saved as "
                     f"one ensemble (default: {default})")


def cv_repeats_flag(*, group: str) -> Any:
    return flag("--cv-repeats", default=1, metavar="R", group=group,
                help="with --cv K: repeat the K-fold split R times with different shuffles (R x K fold models; each "
                     "example's out-of-fold probability is its mean over the repeats; mean ± sd over all R x K folds) "
                     "(default: %(default)s)")


def head_fusion_flag(*, help: str = "how rollout fuses a layer's heads (default: mean)") -> Any:
    from bioattn.attention.rollout import HEAD_FUSIONS
    return flag("--head-fusion", default="mean", choices=HEAD_FUSIONS, help=help)


def start_layer_flag() -> Any:
    return flag("--start-layer", default=0, help="first layer included in the rollout (default: 0)")


def explain_input_flag(*, help: str) -> Any:
    return flag("--input", required=True, metavar="FILE", help=help)


def explain_out_flag() -> Any:
    return flag("--out", required=True, metavar="DIR", help="output folder for tables and figures (created)")


def explain_overwrite_flag() -> Any:
    return flag("--overwrite", default=False, help="replace the contents of a non-empty --out folder")


def method_flag(*, methods: Sequence[str], auto_help: str | None = None) -> Any:
    return flag("--method", default="auto", choices=("auto", *methods),
                help="attribution shown in the outputs: auto (" + (auto_help or "of the methods fast enough for the "
                     "input, the one most faithful on a sample of it, measured by deletion/insertion and named on "
                     "stderr with its AUCs") + "), " + ", ".join(methods) + " (default: %(default)s)")


def skip_faithfulness_flag(*, unit: str) -> Any:
    """``--no-faithfulness``; ``unit``: what one perturbation step removes."""
    return flag("--no-faithfulness", default=False,
                help=f"skip measuring every method's deletion/insertion faithfulness ({unit} removed or revealed by "
                     "rank; summary.json key 'faithfulness', faithfulness.png) (default: off, i.e. measured)")


def faithfulness_steps_flag(*, default: int | None = 20, steps_help: str | None = None) -> Any:
    return flag("--faithfulness-steps", default=default, type=int,
                help="points of each deletion/insertion curve (default: " + (steps_help or "%(default)s") + ")")


def method_options(options: Any) -> dict[str, Any]:
    """The library keywords of the method and faithfulness fields of ``options``."""
    return {"method": options.method, "faithfulness": not options.skip_faithfulness,
            "faithfulness_steps": options.faithfulness_steps}
