"""The ``bioattn explain msa`` command (apart from the training commands, so that it reaches no training code)."""
from __future__ import annotations

from dataclasses import dataclass

from bioattn.explain.attribution import METHODS
from bioattn.options import flag, values
from bioattn.tasks.flags import (
    device_flag, explain_input_flag, explain_out_flag, explain_overwrite_flag, faithfulness_steps_flag, method_flag,
    method_options, model_flag, skip_faithfulness_flag,
)
from bioattn.tasks.msa.flags import chain_flag, format_flag


@dataclass(frozen=True, kw_only=True)
class ExplainMSA:
    """Row-attention maps of a trained MSA model per layer and head, beside the native contact map.

    Reads the alignment like ``bioattn train msa`` (query row first; with ``--pdb`` the query's non-gap
    columns, the chain mapped onto them by sequence alignment; with ``--struct-dat`` every column), keeps up to
    ``--max-rows`` rows chosen for diversity, and runs the model once with ``need_weights=True``. Writes, under
    ``--out``: ``heads_layer{l}.png`` (every head's tied row-attention map next to the native contacts, each
    head titled with its long-range P@L/5), ``head_diversity_layer{l}.png``, ``head_contact_precision.png``
    (layers × heads), ``head_contacts.tsv`` (P@L/5, P@L/2, P@L of every head's symmetrised + APC map),
    ``row_attention.safetensors`` (the raw ``(layers, H, L, L)`` maps), ``head_sharpness.png``, ``columns.tsv``
    (every column's attribution by ``--method``, explaining the model's masked-LM prediction of the query row),
    ``faithfulness.png`` and ``summary.json`` (with ``faithfulness``: each method's deletion/insertion AUC, columns
    masked in every row).

    With --weights (instead of --model) the model is ESM's MSA Transformer with the user's ESM-MSA-1b weights:
    per layer every head's map (heads_layer{l}.png, head_diversity_layer{l}.png), row_attention.safetensors,
    contacts.npy, head_contacts.tsv (each head's weight in its contact regression and, with a structure, its
    precision), head_contact_precision.png and summary.json; --max-rows rows chosen as in ESM's examples.

    Without a structure the contact figures and tables are left out. The run of an ensemble (``bioattn train msa
    --seeds``) is explained through its first member, named on stderr and in ``summary.json``: the heads of
    separately trained models do not correspond, so their per-head maps have no mean.
    """

    model: str | None = model_flag(trained_by="bioattn train msa")
    weights: str | None = flag("--weights", default=None, metavar="FILE_OR_DIR", exclusive="model",
                               help="instead of a run: ESM-MSA-1b weights you have (a fair-esm .pt with its "
                                    "-contact-regression.pt beside it, or a converted directory); writes its "
                                    "per-layer, per-head row-attention maps and their contact precision; nothing is "
                                    "downloaded (default: none)")
    device: str = device_flag()
    input: str = explain_input_flag(help="alignment (.a3m .a2m .fasta .sto .aln; .gz accepted)")
    out: str = explain_out_flag()
    overwrite: bool = explain_overwrite_flag()
    format: str | None = format_flag(group=None)
    query: str | None = flag("--query", default=None, metavar="FASTA",
                             help="FASTA with the query sequence (default: the --pdb chain's row, else row 0)")
    pdb: str | None = flag("--pdb", default=None, help="native structure (PDB or mmCIF) for the contact map")
    chain: str | None = chain_flag(group=None)
    struct_dat: str | None = flag("--struct-dat", default=None, metavar="FILE",
                                  help="arDCA *_struct.dat column distances, instead of --pdb")
    max_rows: int = flag("--max-rows", default=128, help="rows fed to the model, chosen for diversity (default: 128)")
    method: str = method_flag(methods=METHODS)
    skip_faithfulness: bool = skip_faithfulness_flag(unit="alignment columns")
    faithfulness_steps: int | None = faithfulness_steps_flag()

    def run(self) -> int:
        shared = values(self, "query", "pdb", "chain", "struct_dat", "max_rows", "device", "overwrite")
        if self.weights is not None:
            from bioattn.tasks.msa.explain_esm import describe_weights_explanation, explain_with_weights

            print(describe_weights_explanation(*explain_with_weights(self.weights, self.input, self.out,
                                                                     fmt=self.format, **shared)))
            return 0
        from bioattn.tasks.msa.explain import describe, explain_msa
        result = explain_msa(self.model, self.input, fmt=self.format, out=self.out, **shared, **method_options(self))
        print(describe(result))
        return 0
