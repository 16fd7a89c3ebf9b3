"""A small TensorFlow ParameterServerStrategy job, deterministic and resumable, with pschaos' shim.

One script for every task of the cluster TF_CONFIG describes: a `ps` or `worker` task serves
(tf.distribute.Server) until it is killed; the `chief` is the coordinator. It builds a model of
the recommendation shape (an embedding table and a dense tower) on the parameter servers and
schedules one training closure per step through ClusterCoordinator, each on whichever worker is
free, and waits for its result: that result is the step's acknowledgement. Its batch is drawn
from (seed, step) inside the closure, so a step computes the same wherever and whenever it
runs. Every `--ckpt-every` steps the chief saves a checkpoint (tf.train.CheckpointManager), and
a restarted chief resumes from the newest. The model carries an audit variable on a parameter
server, raised by one inside every closure with the update, through the same path.

TF puts no time limit on a closure: one waiting on a paused parameter server waits as long as
the pause lasts, in silence. So the chief keeps a watchdog: a step (or the setup) that takes
longer than `--step-timeout-s` ends the process with exit code 3, for the scheduler to restart.

Run it yourself: one process per task, each with its TF_CONFIG, e.g. task {"type": "ps", "index": 0}.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import tensorflow as tf

import pschaos_shim

VOCAB, EMB, DENSE, HIDDEN, BATCH = 64, 8, 8, 16, 16


def serve() -> None:
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=task["type"], task_index=task["index"],
                                  protocol="grpc", start=True)
    server.join()


def watchdog(timeout_s: float) -> dict:
    """Exit 3 when the work in hand (`busy`, since `t`) has taken longer than `timeout_s`."""
    state = {"t": time.monotonic(), "busy": True}

    def watch() -> None:
        while True:
            time.sleep(0.25)
            if state["busy"] and time.monotonic() - state["t"] > timeout_s:
                sys.stderr.write(f"tf_ps_train: no progress in {timeout_s:.0f}s; exiting for a restart\n")
                sys.stderr.flush()
                os._exit(3)
    if timeout_s > 0:
        threading.Thread(target=watch, name="watchdog", daemon=True).start()
    return state


def coordinate(a: argparse.Namespace) -> None:
    shim = pschaos_shim.Shim("chief")      # first: a start whose setup fails is on record too
    dog = watchdog(a.step_timeout_s)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coord = tf.distribute.coordinator.ClusterCoordinator(strategy)
    g = tf.random.Generator.from_seed(a.seed)
    shapes = {"emb": [VOCAB, EMB], "w1": [EMB + DENSE, HIDDEN], "b1": [HIDDEN], "w2": [HIDDEN, 1], "b2": [1]}
    init = {k: g.normal(s) * 0.3 for k, s in shapes.items()}      # drawn on the chief, the same every run
    with strategy.scope():
        params = {k: tf.Variable(v, name=k) for k, v in init.items()}
        moms = {k: tf.Variable(tf.zeros(s), name=f"m_{k}") for k, s in shapes.items()}
        audit = tf.Variable(0.0, name="audit")
        done = tf.Variable(0, dtype=tf.int64, name="step")
    ckpt = tf.train.Checkpoint(step=done, audit=audit, **params, **{f"m_{k}": m for k, m in moms.items()})
    manager = tf.train.CheckpointManager(ckpt, str(a.dir), max_to_keep=2)
    if manager.latest_checkpoint:
        ckpt.restore(manager.latest_checkpoint).assert_consumed()
    start = int(done.numpy())
    shim.started(resumed_from=start, workers=resolver.cluster_spec().num_tasks("worker"))

    @tf.function
    def train_step(step: tf.Tensor) -> tf.Tensor:
        seed = tf.stack([tf.constant(a.seed, tf.int64), step])
        ids = tf.random.stateless_uniform([BATCH, 2], seed, 0, VOCAB, dtype=tf.int64)
        x = tf.random.stateless_normal([BATCH, DENSE], seed + 1)
        y = tf.sin(tf.cast(ids[:, :1], tf.float32)) * 0.5 + x[:, :1] * 0.25
        with tf.GradientTape() as tape:
            e = tf.reduce_sum(tf.nn.embedding_lookup(params["emb"], ids), axis=1)
            h = tf.tanh(tf.concat([e, x], 1) @ params["w1"] + params["b1"])
            loss = tf.reduce_mean(tf.square(h @ params["w2"] + params["b2"] - y))
        grads = tape.gradient(loss, [params[k] for k in shapes])
        for k, grad in zip(shapes, grads):
            moms[k].assign(0.9 * moms[k] + tf.convert_to_tensor(grad))
            params[k].assign_sub(0.05 * moms[k])
        done_update = audit.assign_add(1.0)      # one per logical update, on a parameter server, with it
        if not a.tail_work:
            return loss
        with tf.control_dependencies([done_update]):     # work on the worker after the update landed
            m = tf.random.stateless_normal([192, 192], seed) * 0.1
            n = tf.where((step == a.tail_step) | (a.tail_step == 0), a.tail_work, 0)   # every step, or one
            _, m = tf.while_loop(lambda i, _m: i < n, lambda i, m: (i + 1, tf.tanh(m @ m)), (tf.constant(0), m))
            return loss + 0.0 * tf.reduce_sum(m)

    loss = None
    for step in range(start + 1, a.steps + 1):
        dog["t"] = time.monotonic()
        with shim.step(step) as rec:
            result = coord.schedule(train_step, args=(tf.constant(step, tf.int64),))
            coord.join()
            loss = float(result.fetch())
            rec["loss"] = loss
        if step % a.ckpt_every == 0:
            with shim.checkpoint(step):
                done.assign(step)
                manager.save(checkpoint_number=step)
        if a.step_delay_s:
            time.sleep(a.step_delay_s)
    arrays = [params[k].numpy() for k in shapes]
    shim.final(a.steps, float(audit.numpy()), pschaos_shim.digest(arrays), loss,
               values=[float(v) for arr in arrays for v in arr.ravel()])
    shim.close()
    # done: skip TF's teardown, which can wait minutes on a worker that was killed and came back
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--ckpt-every", type=int, default=20)
    p.add_argument("--dir", type=Path, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--step-delay-s", type=float, default=0.0)
    p.add_argument("--step-timeout-s", type=float, default=30.0, help="the watchdog's bound; 0: none")
    p.add_argument("--tail-work", type=int, default=0, help="matmuls a closure does after its update")
    p.add_argument("--tail-step", type=int, default=0, help="the one step whose closure does them (0: every step)")
    a = p.parse_args()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    if task["type"] in ("ps", "worker"):
        serve()
    else:
        coordinate(a)


if __name__ == "__main__":
    main()
