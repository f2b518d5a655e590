"""An AivisSpeech AIVMX model turned into a HayaKoe voice, in the cache's child (optimize.py).

An AIVMX file is Style-Bert-VITS2's whole JP-Extra synthesizer as ONNX, with
the voice's manifest, config.json (`aivm_hyper_parameters`) and style
vectors (`aivm_style_vectors`, a base64 .npy) as metadata. Its contract is
not HayaKoe's: AivisSpeech binds the inputs by position (x_tst,
x_tst_lengths, sid, tones, language, bert, style_vec, length_scale,
sdp_ratio, noise_scale, noise_scale_w), the four scalars are 0-d where ours
are [1], and the audio is the first output. So the inputs are renamed to
ours by position, the scalars reshaped, the audio output renamed; and, as
the file has no separate duration predictor, one is cut out of the graph up
to its only `Ceil` (the frames per phone, as hayakoe's
duration_predictor.onnx gives them) so that pauses between sentences work as
for HayaKoe voices. Uses the `onnx` package: only ever imported in the child.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.utils import Extractor

from ..store import STYLE_VECTORS_FILE, VOICE_CONFIG_FILE, InvalidAivmx, check_aivmx_metadata
from .split import graphs, rename_tensors

# Our synthesizer's inputs in AivisSpeech's order (the four scalars last).
INPUTS = (
    "x",
    "x_lengths",
    "sid",
    "tone",
    "language",
    "bert",
    "style_vec",
    "length_scale",
    "sdp_ratio",
    "noise_scale",
    "noise_scale_w",
)
SCALARS = frozenset(INPUTS[7:])
DP_INPUTS = tuple(name for name in INPUTS if name != "noise_scale")
AUDIO = "audio"
DURATIONS = "durations"
MANIFEST_FILE = "aivm_manifest.json"
STYLE_DIM = 256


@dataclass
class ConvertedAivmx:
    """The voice in HayaKoe's contract, and the files the engine reads instead of the metadata."""

    synthesizer: onnx.ModelProto
    duration_predictor: onnx.ModelProto | None
    files: dict[str, bytes] = field(default_factory=dict)
    no_duration_predictor_reason: str = ""


def _style_vectors(encoded: str, rows_needed: int) -> bytes:
    """The .npy bytes of the style vectors, checked: float [rows, 256] with a row for every style."""
    raw = base64.b64decode(encoded)
    try:
        vectors = np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise InvalidAivmx(f"damaged aivm_style_vectors metadata ({err})") from err
    if vectors.ndim != 2 or vectors.shape[1] != STYLE_DIM or vectors.shape[0] < rows_needed:
        raise InvalidAivmx(
            f"style vectors of shape {list(vectors.shape)}: need [{rows_needed} or more, {STYLE_DIM}] for its styles"
        )
    out = io.BytesIO()
    np.save(out, vectors.astype(np.float32))
    return out.getvalue()


def _check_speakers(model: onnx.ModelProto, manifest: dict, hyper: dict) -> None:
    """Every speaker's local_id must be a row of the speaker embedding (emb_g), else its sid reads past it."""
    rows = next((t.dims[0] for t in model.graph.initializer if t.name.endswith("emb_g.weight") and t.dims), None)
    if rows is None:
        data = hyper.get("data")
        rows = int(data.get("n_speakers", 1)) if isinstance(data, dict) else 1
    for speaker in manifest["speakers"]:
        if int(speaker["local_id"]) >= rows:
            raise InvalidAivmx(
                f"speaker {speaker['name']!r} has local_id {speaker['local_id']}, but the model has {rows} speaker(s)"
            )


def _names(graph: onnx.GraphProto) -> set[str]:
    return {n for g in graphs(graph) for node in g.node for n in [*node.input, *node.output]} | {
        t.name for t in graph.initializer
    }


def _to_our_contract(model: onnx.ModelProto) -> None:
    """Inputs renamed by position (0-d scalars fed through a reshape from [1]), the first output named audio."""
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in initializers]
    if len(inputs) != len(INPUTS):
        raise InvalidAivmx(
            f"the synthesizer has {len(inputs)} inputs, a JP-Extra AIVMX has {len(INPUTS)}: not a JP-Extra model?"
        )
    if not graph.output:
        raise InvalidAivmx("the synthesizer has no outputs")
    taken = _names(graph) - {v.name for v in inputs} - {graph.output[0].name}
    clash = sorted(n for n in (*INPUTS, AUDIO) if n in taken)
    if clash:
        raise InvalidAivmx(f"the graph already uses the names {clash}")
    # Through temporary names, so that a swap of two names cannot go wrong.
    temporary = {v.name: f"aivmx_input_{i}" for i, v in enumerate(inputs)}
    temporary[graph.output[0].name] = "aivmx_output_0"
    rename_tensors(graph, temporary)
    final: dict[str, str] = {"aivmx_output_0": AUDIO}
    shape = numpy_helper.from_array(np.zeros(0, dtype=np.int64), "aivmx_scalar_shape")
    for i, (value, ours) in enumerate(zip(inputs, INPUTS, strict=True)):
        dims = value.type.tensor_type.shape.dim
        if ours in SCALARS and not len(dims):
            # AivisSpeech feeds 0-d scalars; we feed [1]: reshape ours into the name the graph reads.
            graph.node.insert(0, helper.make_node("Reshape", [ours, shape.name], [f"aivmx_input_{i}"]))
            value.type.tensor_type.shape.dim.add().dim_value = 1
            value.name = ours
        else:
            final[f"aivmx_input_{i}"] = ours
    if any(n.op_type == "Reshape" and n.input[1] == shape.name for n in graph.node):
        graph.initializer.append(shape)
    rename_tensors(graph, final)
    del graph.output[1:]


def _duration_predictor(model: onnx.ModelProto) -> tuple[onnx.ModelProto | None, str]:
    """The graph up to its only Ceil (frames per phone) as [batch, phones] `durations`, or None and why not."""
    graph = model.graph
    ceils = [node for node in graph.node if node.op_type == "Ceil"]
    if len(ceils) != 1:
        return None, f"{len(ceils)} Ceil nodes where the durations should be the only one"
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "aivmx_durations_axes")
    with_dp = onnx.ModelProto()
    with_dp.CopyFrom(model)
    with_dp.graph.initializer.append(axes)
    with_dp.graph.node.append(helper.make_node("Squeeze", [ceils[0].output[0], axes.name], [DURATIONS]))
    with_dp.graph.output.append(helper.make_tensor_value_info(DURATIONS, onnx.TensorProto.FLOAT, ["batch", "phones"]))
    try:
        dp = Extractor(with_dp).extract_model(list(DP_INPUTS), [DURATIONS])
        onnx.checker.check_model(dp)
    except Exception as err:  # the durations read noise_scale, or the cut is not clean
        return None, f"the durations cannot be cut out ({err})"
    return dp, ""


def convert(path: Path) -> ConvertedAivmx:
    """The AIVMX file at `path` in HayaKoe's contract; InvalidAivmx with the reason if it cannot be served."""
    try:
        model = onnx.load(str(path))
    except Exception as err:  # protobuf's DecodeError and friends
        raise InvalidAivmx(f"not an ONNX file ({err})") from err
    metadata = {p.key: p.value for p in model.metadata_props}
    manifest, hyper = check_aivmx_metadata(metadata)
    rows = 1 + max(int(s["local_id"]) for speaker in manifest["speakers"] for s in speaker["styles"])
    style_vectors = _style_vectors(metadata["aivm_style_vectors"], rows)
    _check_speakers(model, manifest, hyper)
    del model.metadata_props[:]  # not needed in the converted graphs
    _to_our_contract(model)
    dp, reason = _duration_predictor(model)
    synthesizer = Extractor(model).extract_model(list(INPUTS), [AUDIO])
    config = dict(hyper)
    config.setdefault("version", "2.0-JP-Extra")
    return ConvertedAivmx(
        synthesizer=synthesizer,
        duration_predictor=dp,
        files={
            VOICE_CONFIG_FILE: json.dumps(config, ensure_ascii=False, indent=1).encode(),
            STYLE_VECTORS_FILE: style_vectors,
            MANIFEST_FILE: json.dumps(manifest, ensure_ascii=False, indent=1).encode(),
        },
        no_duration_predictor_reason=reason,
    )
