"""Write the TensorFlow checkpoints of this folder with TensorFlow itself, and the outputs of the original modeling
code on them (the references `albert-hf import` is tested against: tests/test_tf_import.py).

Each layout is built by the code that wrote such checkpoints: google-research's ALBERT (the albert-tensorflow wheel:
`modeling.py`, `run_pretraining.py`'s heads, `classifier_utils.create_model`, `squad_utils.create_v1_model` and
`create_v2_model`, the optimizers of `optimization.py` and `lamb_optimizer.py`), a TF-Hub module exported as
google-research's `export_to_tfhub.py` does and a classifier fine-tuned on it as `fine_tuning_utils.py` does
(tensorflow_hub), and brightmart/albert_zh's `modeling.py` and `run_pretraining.py`. The graphs run under
TensorFlow 2's `tf.compat.v1`; TensorFlow 2 dropped `tf.contrib`, so `tf.contrib.layers.layer_norm` is given back here
as TensorFlow 1.15 wrote it (variables `beta`, `gamma` in scope `LayerNorm`, `tf.nn.moments` then
`tf.nn.batch_normalization` with variance_epsilon 1e-12). Every variable is then set to random values (weights of
std 0.25, so that the activations are of order 1 and the two GELUs differ visibly), the reference outputs computed by
TensorFlow in the same session, and the checkpoint saved by `tf.compat.v1.train.Saver`.

Run it in an environment of its own (README.md): TensorFlow is no dependency of albert_hf or of its tests.

    python tests/data/tf_checkpoints/make_tf_checkpoints.py --albert_zh /path/to/brightmart/albert_zh
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.compat.v1.layers.dense needs Keras 2 (tf_keras)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# tensorflow_hub 0.12 (the last to export TF1 Hub modules) has protobuf modules older than the installed protobuf.
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_v2_behavior()

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
BATCH, SEQUENCE = 2, 10
WEIGHT_STD = 0.25


# --------------------------------------------------------------------------------------------------------------------
# TensorFlow 1's contrib.layers.layer_norm, and the original code imported with TensorFlow 1's API
# --------------------------------------------------------------------------------------------------------------------


def contrib_layer_norm(
    inputs,
    center=True,
    scale=True,
    activation_fn=None,
    reuse=None,
    variables_collections=None,
    outputs_collections=None,
    trainable=True,
    begin_norm_axis=1,
    begin_params_axis=-1,
    scope=None,
):
    """tf.contrib.layers.layer_norm of TensorFlow 1.15 (tensorflow/contrib/layers/python/layers/layers.py)."""
    with tf1.variable_scope(scope, "LayerNorm", [inputs], reuse=reuse):
        inputs = tf1.convert_to_tensor(inputs)
        rank = inputs.shape.ndims
        if begin_norm_axis < 0:
            begin_norm_axis += rank
        if begin_params_axis < 0:
            begin_params_axis += rank
        params_shape = inputs.shape[begin_params_axis:]
        beta = gamma = None
        if center:
            beta = tf1.get_variable(
                "beta", params_shape, inputs.dtype, initializer=tf1.zeros_initializer(), trainable=trainable
            )
        if scale:
            gamma = tf1.get_variable(
                "gamma", params_shape, inputs.dtype, initializer=tf1.ones_initializer(), trainable=trainable
            )
        mean, variance = tf1.nn.moments(inputs, list(range(begin_norm_axis, rank)), keep_dims=True)
        outputs = tf1.nn.batch_normalization(inputs, mean, variance, beta, gamma, variance_epsilon=1e-12)
        return activation_fn(outputs) if activation_fn is not None else outputs


CONTRIB = types.ModuleType("tensorflow.contrib")
for _name in ("layers", "data", "tpu", "metrics", "cluster_resolver"):
    setattr(CONTRIB, _name, types.SimpleNamespace())
CONTRIB.layers.layer_norm = contrib_layer_norm
tf1.contrib = CONTRIB
tf1.estimator = types.SimpleNamespace(Exporter=object)  # what tensorflow_hub 0.12 subclasses; estimators are gone


def import_with_tf1(*names: str, path: str | None = None) -> list[types.ModuleType]:
    """Import modules written for TensorFlow 1 (`import tensorflow as tf`, `tf.contrib`) with `tf.compat.v1` as
    their `tensorflow`."""
    real = sys.modules["tensorflow"]
    sys.modules["tensorflow"], sys.modules["tensorflow.contrib"] = tf1, CONTRIB
    if path:
        sys.path.insert(0, path)
    try:
        return [__import__(name, fromlist=["_"]) for name in names]
    finally:
        sys.modules["tensorflow"] = real
        if path:
            sys.path.remove(path)


def import_tensorflow_hub():
    """tensorflow_hub 0.12, the last release that exports TF1 Hub modules (`hub.create_module_spec`), on TensorFlow
    2: `tensorflow.python.training.tracking` has moved to `tensorflow.python.trackable`."""
    from tensorflow.python.trackable import data_structures

    tracking = types.ModuleType("tensorflow.python.training.tracking")
    tracking.data_structures = data_structures
    sys.modules.setdefault("tensorflow.python.training.tracking", tracking)
    sys.modules.setdefault("tensorflow.python.training.tracking.data_structures", data_structures)
    import tensorflow_hub

    return tensorflow_hub


def recording(module) -> list:
    """Make `module.AlbertModel`/`BertModel` record each model it builds (the heads' functions build their own)."""
    built: list = []
    name = "AlbertModel" if hasattr(module, "AlbertModel") else "BertModel"
    original = getattr(module, name)

    class Recording(original):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(self)

    setattr(module, name, Recording)
    return built


# --------------------------------------------------------------------------------------------------------------------
# Vocabularies
# --------------------------------------------------------------------------------------------------------------------


def sentencepiece_model(folder: Path, vocab_size: int) -> Path:
    """A small SentencePiece model trained with the ALBERT recipe (google-research/albert README) on the repository's
    English excerpt; identity normalization keeps the file a few KB (nmt_nfkc's tables alone are 240 KB)."""
    import sentencepiece as spm

    target = folder / "30k-clean.model"
    with tempfile.TemporaryDirectory() as work:
        spm.SentencePieceTrainer.train(
            input=str(REPO / "tests" / "fixtures" / "corpus" / "botchan.txt"),
            model_prefix=os.path.join(work, "spm"),
            vocab_size=vocab_size,
            pad_id=0,
            unk_id=1,
            eos_id=-1,
            bos_id=-1,
            control_symbols="[CLS],[SEP],[MASK]",
            user_defined_symbols='(,),",-,.,–,£,€',
            shuffle_input_sentence=True,
            character_coverage=0.99995,
            model_type="unigram",
            normalization_rule_name="identity",
            minloglevel=2,
        )
        shutil.copy(os.path.join(work, "spm.model"), target)
    return target


def wordpiece_vocabulary(path: Path, size: int) -> list[str]:
    """A BERT WordPiece vocabulary in the layout of the Chinese ones ([PAD], [UNK], [CLS], [SEP], [MASK], then
    characters and ## continuations): the most frequent characters of the repository's Lu Xun excerpt."""
    text = (REPO / "tests" / "data" / "chinese_lu_xun_nahan.txt").read_text(encoding="utf-8")
    counts: dict[str, int] = {}
    for character in text:
        if not character.isspace():
            counts[character] = counts.get(character, 0) + 1
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words = ["the", "a", "##s", "##ing"]
    characters = sorted(counts, key=lambda c: (-counts[c], c))[: size - len(specials) - len(words) - 8]
    tokens = specials + words + characters + [f"##{c}" for c in characters[:8]]
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return tokens


# --------------------------------------------------------------------------------------------------------------------
# Graphs, weights, references
# --------------------------------------------------------------------------------------------------------------------


def inputs(vocab_size: int, first_id: int, seed: int) -> dict[str, np.ndarray]:
    """Two sequences: [CLS] a [SEP] b [SEP], the second with three padding positions at its end."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(first_id, vocab_size, size=(BATCH, SEQUENCE)).astype(np.int32)
    mask = np.ones((BATCH, SEQUENCE), dtype=np.int32)
    types_ = np.zeros((BATCH, SEQUENCE), dtype=np.int32)
    types_[:, SEQUENCE // 2 :] = 1
    mask[1, -3:] = 0
    ids[1, -3:] = 0
    types_[1, -3:] = 0
    return {"input_ids": ids, "input_mask": mask, "token_type_ids": types_}


def placeholders() -> dict:
    return {
        name: tf1.placeholder(tf.int32, [BATCH, SEQUENCE], name=name)
        for name in ("input_ids", "input_mask", "token_type_ids")
    }


def randomize(session, seed: int, skip=lambda name: False) -> None:
    """Set every trainable variable to random values: LayerNorm gains near 1, everything else of std WEIGHT_STD."""
    rng = np.random.default_rng(seed)
    for variable in tf1.trainable_variables():
        name = variable.op.name
        if skip(name):
            continue
        shape = variable.shape.as_list()
        if name.endswith("/gamma"):
            value = 1.0 + 0.2 * rng.standard_normal(shape)
        elif name.endswith(("/beta", "/bias", "output_bias")):
            value = 0.2 * rng.standard_normal(shape)
        else:
            value = WEIGHT_STD * rng.standard_normal(shape)
        variable.load(value.astype(variable.dtype.as_numpy_dtype), session)


def albert_config(folder: Path, name: str = "albert_config.json", **fields) -> types.SimpleNamespace:
    defaults = dict(
        attention_probs_dropout_prob=0.1,
        hidden_dropout_prob=0.1,
        hidden_act="gelu",
        initializer_range=0.02,
        max_position_embeddings=16,
        num_hidden_groups=1,
        net_structure_type=0,
        gap_size=0,
        num_memory_blocks=0,
        inner_group_num=1,
        down_scale_factor=1,
        type_vocab_size=2,
    )
    config = {**defaults, **fields}
    (folder / name).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return config


def finish(folder: Path, saver, session, prefix: str, step: int | None, references: dict, feed: dict) -> None:
    saver.save(session, str(folder / prefix), global_step=step, write_meta_graph=False)
    np.savez(folder / "reference.npz", **feed, **references)


def save_references(session, tensors: dict, feed: dict, graph_inputs: dict) -> dict[str, np.ndarray]:
    values = session.run(tensors, {graph_inputs[name]: feed[name] for name in graph_inputs})
    return {name: np.asarray(value, dtype=np.float32) for name, value in values.items()}


def google_pretraining(folder: Path, albert) -> None:
    """run_pretraining.py's graph: the model (2 groups of 2 inner layers, applied 4 times), the MLM and SOP heads,
    the slots of google-research's LAMBOptimizer (named adam_m, adam_v there), global_step."""
    modeling, run_pretraining, optimization = albert["modeling"], albert["run_pretraining"], albert["optimization"]
    spm_model = sentencepiece_model(folder, 120)
    config = albert_config(
        folder,
        vocab_size=120,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=4,
        num_hidden_groups=2,
        inner_group_num=2,
        num_attention_heads=4,
        intermediate_size=37,
    )
    del spm_model
    with tf.Graph().as_default():
        graph_inputs = placeholders()
        model = modeling.AlbertModel(modeling.AlbertConfig.from_dict(config), False, **graph_inputs)
        positions = tf1.constant(np.tile(np.arange(SEQUENCE, dtype=np.int32), (BATCH, 1)))
        _, _, mlm = run_pretraining.get_masked_lm_output(
            modeling.AlbertConfig.from_dict(config),
            model.get_sequence_output(),
            model.get_embedding_table(),
            positions,
            tf1.zeros([BATCH, SEQUENCE], tf.int32),
            tf1.ones([BATCH, SEQUENCE], tf.float32),
        )
        sop_loss, _, sop = run_pretraining.get_sentence_order_output(
            modeling.AlbertConfig.from_dict(config), model.get_pooled_output(), tf1.zeros([BATCH], tf.int32)
        )
        global_step = tf1.train.get_or_create_global_step()
        optimizer = albert["lamb_optimizer"].LAMBOptimizer(learning_rate=1e-3)
        variables = tf1.trainable_variables()
        loss = sop_loss - tf1.reduce_mean(mlm)
        optimizer.apply_gradients(zip(tf1.gradients(loss, variables), variables), global_step=global_step)
        del optimization
        saver = tf1.train.Saver(save_relative_paths=True)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            randomize(session, seed=1)
            global_step.load(3, session)
            feed = inputs(120, 5, seed=11)
            references = save_references(
                session,
                {
                    "sequence_output": model.get_sequence_output(),
                    "pooled_output": model.get_pooled_output(),
                    "mlm_log_probs": tf1.reshape(mlm, [BATCH, SEQUENCE, -1]),
                    "sop_log_probs": sop,
                },
                feed,
                graph_inputs,
            )
            finish(folder, saver, session, "model.ckpt", 3, references, feed)


def google_classifier_zh(folder: Path, albert) -> None:
    """run_classifier.py's graph on a Chinese WordPiece vocabulary (the layout of Google's albert_*_zh): E == H, so
    the model has no embedding_hidden_mapping_in; AdamWeightDecayOptimizer's slots (adam_m, adam_v)."""
    modeling, classifier_utils, optimization = albert["modeling"], albert["classifier_utils"], albert["optimization"]
    tokens = wordpiece_vocabulary(folder / "vocab_chinese.txt", 128)
    config = albert_config(
        folder,
        vocab_size=len(tokens),
        embedding_size=24,
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=29,
    )
    with tf.Graph().as_default():
        graph_inputs = placeholders()
        built = recording(modeling)
        _, _, _, logits, _ = classifier_utils.create_model(
            modeling.AlbertConfig.from_dict(config),
            False,
            graph_inputs["input_ids"],
            graph_inputs["input_mask"],
            graph_inputs["token_type_ids"],
            tf1.zeros([BATCH], tf.int32),
            3,
            False,
            "mnli",
        )
        model = built[-1]
        global_step = tf1.train.get_or_create_global_step()
        loss = tf1.reduce_sum(logits)
        variables = tf1.trainable_variables()
        optimization.AdamWeightDecayOptimizer(learning_rate=1e-3).apply_gradients(
            zip(tf1.gradients(loss, variables), variables), global_step=global_step
        )
        saver = tf1.train.Saver(save_relative_paths=True)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            randomize(session, seed=2)
            global_step.load(5, session)
            feed = inputs(len(tokens), 5, seed=12)
            references = save_references(
                session,
                {
                    "sequence_output": model.get_sequence_output(),
                    "pooled_output": model.get_pooled_output(),
                    "logits": logits,
                },
                feed,
                graph_inputs,
            )
            finish(folder, saver, session, "model.ckpt", 5, references, feed)


def google_squad(folder: Path, albert, version: int) -> None:
    """run_squad_v1.py's graph (cls/squad/output_weights, output_bias) or run_squad_v2.py's (start_logits,
    end_logits conditioned on the start, answer_class)."""
    modeling, squad_utils = albert["modeling"], albert["squad_utils"]
    sentencepiece_model(folder, 120)
    layers = 3 if version == 1 else 2
    config = albert_config(
        folder,
        vocab_size=120,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=layers,
        num_hidden_groups=layers if version == 1 else 1,
        num_attention_heads=4,
        intermediate_size=37,
    )
    with tf.Graph().as_default():
        graph_inputs = placeholders()
        built = recording(modeling)
        albert_config_ = modeling.AlbertConfig.from_dict(config)
        if version == 1:
            start, end = squad_utils.create_v1_model(
                albert_config_,
                False,
                graph_inputs["input_ids"],
                graph_inputs["input_mask"],
                graph_inputs["token_type_ids"],
                False,
            )
            heads = {"start_logits": start, "end_logits": end}
        else:
            outputs = squad_utils.create_v2_model(
                albert_config_,
                False,
                graph_inputs["input_ids"],
                graph_inputs["input_mask"],
                graph_inputs["token_type_ids"],
                False,
                {"p_mask": tf1.zeros([BATCH, SEQUENCE], tf.int32)},
                SEQUENCE,
                2,
                2,
                0.0,
            )
            heads = {"cls_logits": outputs["cls_logits"]}
        model = built[-1]
        global_step = tf1.train.get_or_create_global_step()
        saver = tf1.train.Saver(save_relative_paths=True)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            randomize(session, seed=3 + version)
            global_step.load(7, session)
            feed = inputs(120, 5, seed=13 + version)
            references = save_references(
                session,
                {"sequence_output": model.get_sequence_output(), "pooled_output": model.get_pooled_output(), **heads},
                feed,
                graph_inputs,
            )
            finish(folder, saver, session, "model.ckpt", 7, references, feed)


def tfhub(module_folder: Path, classifier_folder: Path, albert) -> None:
    """A TF-Hub module exported as google-research's export_to_tfhub.py does (signatures tokens, mlm, sop; assets
    albert_config.json and 30k-clean.model), and a classifier fine-tuned on it as fine_tuning_utils.py's
    _create_model_from_hub does: hub.Module(trainable=True) puts every module variable under module/."""
    hub = import_tensorflow_hub()
    modeling, run_pretraining = albert["modeling"], albert["run_pretraining"]
    assets = module_folder / "assets"
    assets.mkdir(parents=True)
    sentencepiece_model(assets, 120)
    config = albert_config(
        assets,
        vocab_size=120,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
    )
    albert_config_ = modeling.AlbertConfig.from_dict(config)

    def module_fn():
        graph_inputs = {
            name: tf1.placeholder(tf.int32, [None, None], name) for name in ("input_ids", "input_mask", "segment_ids")
        }
        model = modeling.AlbertModel(
            albert_config_, False, graph_inputs["input_ids"], graph_inputs["input_mask"], graph_inputs["segment_ids"]
        )
        positions = tf1.tile(
            tf1.range(tf1.shape(graph_inputs["input_ids"])[1])[None], [tf1.shape(graph_inputs["input_ids"])[0], 1]
        )
        _, _, mlm = run_pretraining.get_masked_lm_output(
            albert_config_,
            model.get_sequence_output(),
            model.get_embedding_table(),
            positions,
            tf1.zeros_like(positions),
            tf1.ones_like(positions, tf.float32),
        )
        _, _, sop = run_pretraining.get_sentence_order_output(
            albert_config_, model.get_pooled_output(), tf1.zeros_like(positions[:, 0])
        )
        outputs = {"sequence_output": model.get_sequence_output(), "pooled_output": model.get_pooled_output()}
        hub.add_signature("tokens", graph_inputs, outputs)
        hub.add_signature("mlm", graph_inputs, {**outputs, "mlm_log_probs": mlm})
        hub.add_signature("sop", graph_inputs, {**outputs, "sop_log_probs": sop})

    spec = hub.create_module_spec(module_fn, tags_and_args=[(set(), {})])
    feed = inputs(120, 5, seed=15)
    with tf.Graph().as_default():
        module = hub.Module(spec, trainable=True)
        hub_inputs = {
            "input_ids": feed["input_ids"],
            "input_mask": feed["input_mask"],
            "segment_ids": feed["token_type_ids"],
        }
        mlm = module(hub_inputs, signature="mlm", as_dict=True)
        sop = module(hub_inputs, signature="sop", as_dict=True)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            randomize(session, seed=5)
            values = session.run({**mlm, "sop_log_probs": sop["sop_log_probs"]})
            export = module_folder / "export"
            module.export(str(export), session)
    references = {
        "sequence_output": values["sequence_output"],
        "pooled_output": values["pooled_output"],
        "mlm_log_probs": values["mlm_log_probs"].reshape(BATCH, SEQUENCE, -1),
        "sop_log_probs": values["sop_log_probs"],
    }
    np.savez(module_folder / "reference.npz", **feed, **{k: np.asarray(v, np.float32) for k, v in references.items()})

    # Fine-tuning on the module: run_classifier.py --albert_hub_module_handle, which saves an absolute path in its
    # `checkpoint` file (Saver's default): moved here, the file names a path that does not exist.
    with tf.Graph().as_default():
        module = hub.Module(str(export), trainable=True)
        graph_inputs = placeholders()
        outputs = module(
            {
                "input_ids": graph_inputs["input_ids"],
                "input_mask": graph_inputs["input_mask"],
                "segment_ids": graph_inputs["token_type_ids"],
            },
            signature="tokens",
            as_dict=True,
        )
        output_weights = tf1.get_variable(
            "output_weights", [2, 32], initializer=tf1.truncated_normal_initializer(stddev=0.02)
        )
        output_bias = tf1.get_variable("output_bias", [2], initializer=tf1.zeros_initializer())
        logits = tf1.nn.bias_add(tf1.matmul(outputs["pooled_output"], output_weights, transpose_b=True), output_bias)
        global_step = tf1.train.get_or_create_global_step()
        with tempfile.TemporaryDirectory() as work:
            saver = tf1.train.Saver()
            with tf1.Session() as session:
                session.run(tf1.global_variables_initializer())
                randomize(session, seed=6)
                global_step.load(9, session)
                feed = inputs(120, 5, seed=16)
                references = save_references(
                    session,
                    {
                        "sequence_output": outputs["sequence_output"],
                        "pooled_output": outputs["pooled_output"],
                        "logits": logits,
                    },
                    feed,
                    graph_inputs,
                )
                saver.save(session, os.path.join(work, "model.ckpt"), global_step=9, write_meta_graph=False)
            for name in os.listdir(work):
                shutil.move(os.path.join(work, name), classifier_folder / name)
    np.savez(classifier_folder / "reference.npz", **feed, **references)
    # The module's own files beside its assets; saved_model.pb (its graph) is left out: albert_hf reads no graph.
    for name in ("tfhub_module.pb", "variables"):
        shutil.move(str(export / name), str(module_folder / name))
    print("saved_model.pb:", (export / "saved_model.pb").stat().st_size, "bytes, left out")
    shutil.rmtree(export)


def brightmart(folder: Path, albert_zh: Path) -> None:
    """brightmart/albert_zh's graph (its modeling.BertModel and run_pretraining.py's heads): a factorized word table
    (word_embeddings [V, E] times word_embeddings_2 [E, H]) before position and type embeddings of width H, BERT's
    layer names under layer_shared. Saved in two shards (variables on two CPU devices, a sharded Saver) as
    albert_model.ckpt, the name of brightmart's releases, with no `checkpoint` file."""
    modeling, run_pretraining = import_with_tf1("modeling", "run_pretraining", path=str(albert_zh))
    tokens = wordpiece_vocabulary(folder / "vocab.txt", 128)
    config = {
        "attention_probs_dropout_prob": 0.0,
        "directionality": "bidi",
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0,
        "hidden_size": 32,
        "embedding_size": 16,
        "initializer_range": 0.02,
        "intermediate_size": 37,
        "max_position_embeddings": 16,
        "num_attention_heads": 4,
        "num_hidden_layers": 4,
        "pooler_fc_size": 768,
        "pooler_num_attention_heads": 12,
        "pooler_num_fc_layers": 3,
        "pooler_size_per_head": 128,
        "pooler_type": "first_token_transform",
        "type_vocab_size": 2,
        "vocab_size": len(tokens),
        "ln_type": "postln",
    }
    (folder / "albert_config_tiny.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    bert_config = modeling.BertConfig.from_dict(config)
    with tf.Graph().as_default():
        graph_inputs = placeholders()
        with tf1.device("/cpu:0"):
            model = modeling.BertModel(bert_config, False, **graph_inputs)
        with tf1.device("/cpu:1"):
            positions = tf1.constant(np.tile(np.arange(SEQUENCE, dtype=np.int32), (BATCH, 1)))
            _, _, mlm = run_pretraining.get_masked_lm_output(
                bert_config,
                model.get_sequence_output(),
                model.get_embedding_table(),
                model.get_embedding_table_2(),
                positions,
                tf1.zeros([BATCH, SEQUENCE], tf.int32),
                tf1.ones([BATCH, SEQUENCE], tf.float32),
            )
            _, _, sop = run_pretraining.get_next_sentence_output(
                bert_config, model.get_pooled_output(), tf1.zeros([BATCH], tf.int32)
            )
            tf1.train.get_or_create_global_step()
        saver = tf1.train.Saver(sharded=True, save_relative_paths=True)
        with tf1.Session(config=tf1.ConfigProto(device_count={"CPU": 2})) as session:
            session.run(tf1.global_variables_initializer())
            randomize(session, seed=7)
            feed = inputs(len(tokens), 5, seed=17)
            references = save_references(
                session,
                {
                    "sequence_output": model.get_sequence_output(),
                    "pooled_output": model.get_pooled_output(),
                    "mlm_log_probs": tf1.reshape(mlm, [BATCH, SEQUENCE, -1]),
                    "sop_log_probs": sop,
                },
                feed,
                graph_inputs,
            )
            finish(folder, saver, session, "albert_model.ckpt", None, references, feed)
    (folder / "checkpoint").unlink()


def dtypes(folder: Path) -> None:
    """Variables of each dtype the reader knows (and a string one), and a variable partitioned in three slices, with
    the values TensorFlow reads back from the saved bundle."""
    rng = np.random.default_rng(8)
    values = {
        "float32": rng.standard_normal((3, 4)).astype(np.float32),
        "float64": rng.standard_normal((2, 3)),
        "float16": rng.standard_normal(5).astype(np.float16),
        "bfloat16": rng.standard_normal((2, 5)).astype(np.float32),
        "int32": rng.integers(-1000, 1000, (4,)).astype(np.int32),
        "int64": np.array(2**40 + 17, dtype=np.int64),
        "int8": rng.integers(-128, 128, (3,)).astype(np.int8),
        "uint8": rng.integers(0, 256, (3,)).astype(np.uint8),
        "bool": np.array([True, False, True]),
    }
    with tf.Graph().as_default():
        variables = {}
        for name, value in values.items():
            dtype = tf.bfloat16 if name == "bfloat16" else tf.as_dtype(value.dtype)
            variables[name] = tf1.Variable(
                tf1.cast(value, dtype) if name == "bfloat16" else value, name=f"scope/{name}"
            )
        tf1.Variable(np.array([b"text", b""]), name="scope/string")
        tf1.get_variable(
            "partitioned", [6, 2], initializer=tf1.ones_initializer(), partitioner=tf1.fixed_size_partitioner(3)
        )
        saver = tf1.train.Saver(save_relative_paths=True)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            saver.save(session, str(folder / "dtypes"), write_meta_graph=False)
    (folder / "checkpoint").unlink()
    reader = tf.train.load_checkpoint(str(folder / "dtypes"))
    expected = {}
    for name in values:
        value = reader.get_tensor(f"scope/{name}")
        expected[name] = {
            "dtype": name,
            "shape": list(np.shape(value)),
            "values": np.asarray(value).astype(np.float64 if name not in ("int64", "bool") else value.dtype).tolist(),
        }
    partitioned_shape = reader.get_variable_to_shape_map()["partitioned"]
    expected["partitioned"] = {"shape": partitioned_shape}
    (folder / "expected.json").write_text(json.dumps(expected, indent=1) + "\n", encoding="utf-8")


LAYOUTS = (
    "google_pretraining",
    "google_classifier_zh",
    "google_squad_v1",
    "google_squad_v2",
    "tfhub",
    "brightmart",
    "dtypes",
)


def write_layout(name: str, output: Path, albert_zh: Path) -> None:
    if name == "brightmart":
        modules = {}
    else:
        imported = import_with_tf1(
            "albert.modeling",
            "albert.run_pretraining",
            "albert.classifier_utils",
            "albert.squad_utils",
            "albert.optimization",
            "albert.lamb_optimizer",
        )
        modules = {module.__name__.split(".")[-1]: module for module in imported}
    folders = ["tfhub_module", "tfhub_classifier"] if name == "tfhub" else [name]
    for folder in folders:
        shutil.rmtree(output / folder, ignore_errors=True)
        (output / folder).mkdir(parents=True)
    if name == "tfhub":
        shutil.rmtree(output / "tfhub_module")  # tfhub() makes it with its assets
        tfhub(output / "tfhub_module", output / "tfhub_classifier", modules)
    elif name == "brightmart":
        brightmart(output / name, albert_zh)
    elif name == "dtypes":
        dtypes(output / name)
    elif name.startswith("google_squad_v"):
        google_squad(output / name, modules, int(name[-1]))
    else:
        {"google_pretraining": google_pretraining, "google_classifier_zh": google_classifier_zh}[name](
            output / name, modules
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--albert_zh", required=True, help="a checkout of github.com/brightmart/albert_zh")
    parser.add_argument("--output_dir", default=str(HERE))
    parser.add_argument("--layout", choices=LAYOUTS, help="write this layout only (default: each, one process each)")
    args = parser.parse_args()
    if args.layout:
        write_layout(args.layout, Path(args.output_dir), Path(args.albert_zh))
        return
    # One process per layout: brightmart's run_pretraining.py and google-research's define the same absl flags.
    for layout in LAYOUTS:
        command = [sys.executable, __file__, "--albert_zh", args.albert_zh, "--output_dir", args.output_dir]
        subprocess.run([*command, "--layout", layout], check=True)
    print(json.dumps({"tensorflow": tf.__version__}))


if __name__ == "__main__":
    main()
