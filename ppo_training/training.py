"""The PPO training run: the loop ``train.py`` and the notebooks both execute.

Outline of :func:`train`:

1. resolve the config, seed everything, split the data (train / val), build the env and policy;
2. behaviour-cloning warm start on the teacher (skipped when resuming);
3. PPO: each rollout covers one whole episode per env (all episodes are 400 steps and run in
   lockstep), so updates, checkpoints and resumes happen at episode boundaries;
4. every ``eval_every`` updates a deterministic validation rollout on held-out files decides
   ``best.pt`` and early stopping; every ``checkpoint_every`` updates ``checkpoint_<step>.pt``.

Everything written under ``runs/<name>/``: ``checkpoints/`` (atomic), TensorBoard event files,
``config.yaml`` of the run, ``training_stats.npz``.
"""
from __future__ import annotations

import copy
import datetime as _dt
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import yaml

from . import PROJECT_ROOT
from .data.segments import file_identity, is_synthetic_dir, list_segment_files, split_files
from .environment.lateral_env import EnvConfig, VectorizedLateralControlEnv, make_async_env
from .evaluation import evaluate
from .policy.exploration import ExplorationNoise
from .policy.factory import build_policy  # also re-exported: callers import it from here
from .policy.ppo_agent import PPOAgent, PPOConfig
from .sim.backends import make_backend
from .utils.checkpoint import FORMAT, evaluation_weights, latest_checkpoint, load_checkpoint, save_atomic
from .utils.normalization import ReturnNormalizer
from .utils.progress import progress
from .utils.replay_buffer import RolloutBuffer

DEFAULT_CONFIG = PROJECT_ROOT / "config.yaml"
Callback = Callable[[str, dict], None]


# -- configuration ------------------------------------------------------------------------------------------
def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> dict:
    """Read a YAML config and apply dotted overrides (``{"env.n_envs": 8}``)."""
    path = Path(path) if path else DEFAULT_CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"{path}: config file not found")
    try:
        cfg = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: expected a mapping of settings at the top level")
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        node = cfg
        parts = key.split(".")
        for p in parts[:-1]:
            if p not in node or not isinstance(node[p], dict):
                raise KeyError(f"unknown config section {p!r} in override {key!r}")
            node = node[p]
        if parts[-1] not in node:
            raise KeyError(f"unknown config key {key!r}")
        node[parts[-1]] = value
    return cfg


def resolve_device(name: str) -> torch.device:
    """``auto`` picks cuda, then mps, then cpu; an unavailable device is a clear error."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but CUDA is not available")
    if name == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError("device 'mps' requested but MPS is not available")
    if name not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device must be auto, cpu, cuda or mps, got {name!r}")
    return torch.device(name)


def env_config_of(cfg: dict) -> EnvConfig:
    return EnvConfig.from_config(cfg)


def data_split(cfg: dict) -> dict[str, list[str]]:
    """``train`` / ``val`` / ``test`` file lists of the configured data (official evaluation files
    reserved by name), plus ``synthetic`` files mixed into training when ``data.synthetic_ratio``
    is above 0."""
    d = cfg["data"]
    files = list_segment_files(d["path"])
    split = split_files(files, reserve_official=bool(d.get("reserve_official", True)),
                        val_fraction=float(d["val_fraction"]), test_fraction=float(d.get("test_fraction", 0.0)))
    if d.get("max_train_files"):
        split["train"] = split["train"][: int(d["max_train_files"])]
    if not split["train"]:
        raise ValueError(f"{d['path']}: the split leaves no training files (the official evaluation files "
                         f"00000-04999 never train; training needs files from 05000 on, or synthetic ones)")
    if not split["val"]:
        split["val"] = split["train"][:1]
    split["val"] = split["val"][: int(d["val_segments"])]
    ratio = float(d.get("synthetic_ratio", 0.0) or 0.0)
    if not 0.0 <= ratio < 1.0:
        raise ValueError(f"data.synthetic_ratio must be in [0, 1), got {ratio}")
    split["synthetic"] = []
    if ratio > 0:
        synth = d.get("synthetic_path") or "data/synthetic"
        if not Path(synth).is_dir() or not is_synthetic_dir(synth):
            raise FileNotFoundError(f"{synth}: no synthetic segments (data.synthetic_ratio is {ratio}); generate them with "
                                    f"python -m ppo_training.data.synth --n 2000 --out {synth} --seed 0")
        split["synthetic"] = list_segment_files(synth)
    return split


def training_pool(cfg: dict, split: dict[str, list[str]]) -> tuple[list[str], list[float] | None]:
    """Files the training env draws from and their draw probabilities (None: uniform).

    With synthetic files, a share ``data.synthetic_ratio`` of the episodes comes from them.
    """
    real, synth = split["train"], split.get("synthetic") or []
    if not synth:
        return list(real), None
    ratio = float(cfg["data"]["synthetic_ratio"])
    weights = [(1.0 - ratio) / len(real)] * len(real) + [ratio / len(synth)] * len(synth)
    return list(real) + list(synth), weights


def reference_costs(files: list[str], backend) -> dict[str, float]:
    """Mean validation cost of the teacher the policy clones and of PID (reference lines)."""
    from .controllers import PIDController
    from .controllers.policy import TeacherController

    return {name: float(evaluate(ctrl, files, backend=backend, progress=False).table["total_cost"].mean())
            for name, ctrl in (("teacher", TeacherController()), ("pid", PIDController()))}


# -- results ---------------------------------------------------------------------------------------------
@dataclass
class TrainResult:
    run_dir: Path
    final_model: Path
    best_model: Path | None
    best_val_cost: float
    global_step: int
    stats: dict[str, list[float]] = field(default_factory=dict)
    stopped_because: str = "done"
    references: dict[str, float] = field(default_factory=dict)


# -- the run ---------------------------------------------------------------------------------------------
def train(cfg: dict, *, resume: str | None = None, callbacks: list[Callback] | None = None,
          should_stop: Callable[[], bool] | None = None) -> TrainResult:
    """Train a PPO policy as configured; see the module docstring.

    Args:
        cfg: a config dict (see ``config.yaml``).
        resume: None, ``"auto"`` (newest checkpoint of the run, fresh start if none) or a path.
        callbacks: called as ``cb(event, payload)`` with events ``"update"``, ``"validation"``,
            ``"episode"`` and ``"done"`` (used by the notebook dashboard).
        should_stop: polled between updates; True (or a string: the reason reported) ends the run
            cleanly, with a final validation and checkpoint.
    """
    cfg = copy.deepcopy(cfg)
    callbacks = callbacks or []
    emit = lambda event, payload: [cb(event, payload) for cb in callbacks]  # noqa: E731
    t_cfg, ppo_cfg = cfg["train"], PPOConfig(**cfg["ppo"])

    ckpt = None
    if resume:
        run_dir_guess = Path(cfg["runs_dir"]) / (cfg["run_name"] or "")
        path = latest_checkpoint(run_dir_guess / "checkpoints") if resume == "auto" else Path(resume)
        if path is None:
            print(f"no checkpoint in {run_dir_guess / 'checkpoints'}: starting a new run", flush=True)
        else:
            ckpt = load_checkpoint(path)
            print(f"resuming {path} at step {int(ckpt['global_step'])} (update {int(ckpt['update'])})", flush=True)
            saved = ckpt["config"]
            # The saved config defines the run; only the length of training may be extended.
            saved["train"]["total_timesteps"] = cfg["train"]["total_timesteps"]
            cfg, t_cfg, ppo_cfg = saved, saved["train"], PPOConfig(**saved["ppo"])
    if not cfg.get("run_name"):
        cfg["run_name"] = "ppo_" + _dt.datetime.now().strftime("%Y%m%d_%H%M%S")
    run_dir = Path(cfg["runs_dir"]) / cfg["run_name"]
    ckpt_dir = run_dir / "checkpoints"
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))

    seed = int(cfg["seed"])
    torch.manual_seed(seed)
    np.random.seed(seed)  # nothing in the loop uses the global generator; set for user code
    device = resolve_device(cfg["device"])
    if device.type == "cpu":
        # The policy is tiny; extra torch threads only contend with the simulator's threads
        # (measured: 4 ms instead of 0.05 ms per linear layer on 2 cores).
        torch.set_num_threads(1)
    split = ckpt["files"] if ckpt else data_split(cfg)
    pool_files, pool_weights = training_pool(cfg, split)
    files_abs = {k: [str(Path(f).resolve()) for f in v] for k, v in split.items()}
    # name and size: recognises copies elsewhere
    train_ids = [file_identity(f) for f in split["train"] + split.get("synthetic", [])]
    env_cfg = env_config_of(cfg)
    obs_dim = env_cfg.obs_dim
    n_envs, num_steps = int(cfg["env"]["n_envs"]), int(t_cfg["num_steps"])

    sim_backend = cfg["env"].get("backend", "onnx")
    if cfg["env"]["kind"] == "vector":
        backend = None
        if sim_backend == "torch":  # simulator, features and rewards stay on the training device
            backend = make_backend("torch", cfg["tinyphysics_model"], device=str(device),
                                   precision=cfg["env"].get("precision", "fp32"),
                                   compile=bool(cfg["env"].get("compile", False)))
        env = VectorizedLateralControlEnv(pool_files, n_envs, model_path=cfg["tinyphysics_model"], config=env_cfg,
                                          backend=backend, paired=ppo_cfg.advantage == "paired", weights=pool_weights)
        # Validation always uses the exact CPU simulator and the numpy actor (official semantics).
        val_backend = env.backend if sim_backend == "onnx" else make_backend("onnx", cfg["tinyphysics_model"])
    elif cfg["env"]["kind"] == "async":
        if ppo_cfg.advantage == "paired":
            raise ValueError("ppo.advantage 'paired' needs env.kind 'vector'")
        if pool_weights is not None:
            raise ValueError("data.synthetic_ratio needs env.kind 'vector'")
        env = make_async_env(pool_files, n_envs, model_path=cfg["tinyphysics_model"], config=env_cfg,
                             start_method=cfg["env"]["start_method"])
        val_backend = make_backend("onnx", cfg["tinyphysics_model"])
    else:
        raise ValueError(f"env.kind must be 'vector' or 'async', got {cfg['env']['kind']!r}")
    if sim_backend not in ("onnx", "torch") or (sim_backend == "torch" and cfg["env"]["kind"] != "vector"):
        raise ValueError(f"env.backend must be 'onnx', or 'torch' with env.kind 'vector'; got {sim_backend!r}")
    device_env = sim_backend == "torch"

    policy = build_policy(cfg).to(device)
    agent = PPOAgent(policy, ppo_cfg)
    gen = torch.Generator().manual_seed(seed + 1)
    # Fresh draws from the policy itself unless the noise is shaped (correlated or antithetic).
    noise = None
    if ppo_cfg.antithetic and ppo_cfg.advantage != "paired":
        raise ValueError("ppo.antithetic needs ppo.advantage 'paired' (rows 2k and 2k+1 share a segment)")
    if policy.distribution == "gsde":  # the held exploration matrix
        noise = ExplorationNoise("iid", 0.0, n_envs, ppo_cfg.antithetic, device, seed + 5, dim=policy.latent_dim,
                                 hold=int(ppo_cfg.sde_sample_freq))
    elif policy.distribution == "squashed_gaussian" and (ppo_cfg.exploration != "iid" or ppo_cfg.antithetic):
        noise = ExplorationNoise(ppo_cfg.exploration, ppo_cfg.noise_rho, n_envs, ppo_cfg.antithetic, device, seed + 5)
    return_norm = ReturnNormalizer(n_envs, ppo_cfg.gamma, device) if ppo_cfg.reward_norm else None
    cpu_threads = torch.get_num_threads() if device.type != "cpu" else (os.cpu_count() or 1)
    batch = n_envs * num_steps
    n_updates = max(1, int(t_cfg["total_timesteps"]) // batch)
    stats: dict[str, list[float]] = {}
    references: dict[str, float] = {}
    best_val, update0, global_step, bad_vals = float("inf"), 0, 0, 0
    writer = None
    if cfg["logging"].get("tensorboard", True):
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(run_dir))
        # One chart with the policy's validation cost and the teacher's and PID's as reference lines.
        writer.add_custom_scalars({"validation": {"cost vs teacher and PID": [
            "Multiline", ["validation/cost_mean", "validation/teacher_cost", "validation/pid_cost"]]}})

    def log(name: str, value: float, step: int) -> None:
        stats.setdefault(name, []).append(float(value))
        stats.setdefault(name + "/step", []).append(float(step))
        if writer is not None:
            writer.add_scalar(name, value, step)

    # Polyak averaging of the policy's weights over updates (train.policy_ema = the decay, 0: off):
    # a policy that PPO keeps nudging around an optimum is evaluated (and saved for evaluation) as
    # the average of its recent iterates.  The online weights keep training.
    ema_decay = float(t_cfg.get("policy_ema", 0.0) or 0.0)
    if not 0.0 <= ema_decay < 1.0:
        raise ValueError(f"train.policy_ema must be in [0, 1), got {ema_decay}")
    eval_policy = copy.deepcopy(policy) if ema_decay else policy

    @torch.no_grad()
    def update_ema() -> None:
        for (name, avg), cur in zip(eval_policy.state_dict().items(), policy.state_dict().values()):
            if avg.dtype.is_floating_point and not name.startswith("obs_norm"):
                avg.mul_(ema_decay).add_(cur, alpha=1.0 - ema_decay)
            else:  # observation statistics: the current ones
                avg.copy_(cur)

    def validate() -> float:
        from .controllers.policy import PolicyController

        policy.eval()
        res = evaluate(PolicyController(eval_policy, env_cfg), split["val"],
                       backend=val_backend, progress=False)
        policy.train()
        return float(res.table["total_cost"].mean())

    def log_validation(val: float, step: int) -> None:
        log("validation/cost_mean", val, step)
        for name, cost in references.items():
            log(f"validation/{name}_cost", cost, step)  # constant: the reference lines of the plots
        if references.get("teacher"):
            log("validation/cost_over_teacher", val / references["teacher"], step)

    def checkpoint_payload(update: int) -> dict:
        return {
            "format": FORMAT, "policy": policy.state_dict(), "optimizer": agent.optimizer.state_dict(),
            # what validation evaluated (the averaged weights with train.policy_ema): what evaluation loads
            "eval_policy": eval_policy.state_dict() if ema_decay else None,
            "config": cfg, "obs_dim": obs_dim, "env_config": env_cfg.__dict__, "update": update,
            "global_step": global_step, "best_val": best_val, "bad_vals": bad_vals,
            "torch_rng": torch.get_rng_state(), "gen_rng": gen.get_state(),
            "noise": noise.state() if noise is not None else None,
            "return_norm": return_norm.state_dict() if return_norm is not None else None,
            "references": references,
            "env_rng": getattr(env, "_episode_rng_states", None), "files": split, "stats": stats,
            "files_abs": files_abs, "train_ids": train_ids,
            "synthetic_data": is_synthetic_dir(cfg["data"]["path"]), "saved_at": time.time(),
        }

    if ckpt is not None:
        policy.load_state_dict(ckpt["policy"])
        if ema_decay:
            eval_policy.load_state_dict(evaluation_weights(ckpt))
        agent.optimizer.load_state_dict(ckpt["optimizer"])
        torch.set_rng_state(ckpt["torch_rng"])
        gen.set_state(ckpt["gen_rng"])
        update0, global_step = int(ckpt["update"]), int(ckpt["global_step"])
        best_val, bad_vals, stats = float(ckpt["best_val"]), int(ckpt["bad_vals"]), ckpt["stats"]
        references = dict(ckpt.get("references") or {})
        if noise is not None and ckpt.get("noise"):
            noise.load_state(ckpt["noise"])
        if return_norm is not None and ckpt.get("return_norm"):
            return_norm.load_state_dict(ckpt["return_norm"])
        if ckpt.get("env_rng") and hasattr(env, "restore_episode_rngs"):
            env.restore_episode_rngs(ckpt["env_rng"])
            obs, _ = env.reset()
        else:
            obs, _ = env.reset(seed=seed + 7919 * update0)
    else:
        if t_cfg.get("reference_costs", True):
            references = reference_costs(split["val"], val_backend)
        obs, _ = env.reset(seed=seed)
        if cfg["bc"]["enabled"]:
            from .policy.behavior_cloning import behavior_clone

            bc_stats = behavior_clone(policy, env, cfg, device, obs)
            for k, v in bc_stats.items():
                log(f"bc/{k}", v, 0)
            if return_norm is not None:
                return_norm.seed(bc_stats["return_var"], bc_stats["samples"])
            obs, _ = env.reset(seed=seed + 1)
        if t_cfg.get("validate_at_start", True):
            # The starting point of the curve: the cloned (or untrained) policy.
            val0 = validate()
            log_validation(val0, 0)
            best_val = val0  # PPO's policies must beat the one it starts from to become best.pt
            save_atomic(checkpoint_payload(0), ckpt_dir / "best.pt")
            emit("validation", {"global_step": 0, "val_cost": val0, "policy": eval_policy, "env_config": env_cfg,
                                "val_files": split["val"], "backend": val_backend, "run_dir": run_dir,
                                "references": references})

    buffer = RolloutBuffer(num_steps, n_envs, obs_dim, device)
    bar = None
    if cfg["logging"].get("progress", True):
        bar = progress(n_updates * batch, f"train {cfg['run_name']}", initial=update0 * batch, unit="step",
                       unit_scale=True, interval_s=cfg["logging"].get("progress_interval_s"))
    t_start, stopped = time.time(), "done"
    update = update0
    last_validated = global_step if ckpt is None else -1

    def run_validation(updates_done: int) -> None:
        """Validate, log, keep ``best.pt``; updates the early-stopping state."""
        nonlocal best_val, bad_vals, last_validated
        val = validate()
        log_validation(val, global_step)
        last_validated = global_step
        emit("validation", {"global_step": global_step, "val_cost": val, "policy": eval_policy, "env_config": env_cfg,
                            "val_files": split["val"], "backend": val_backend, "run_dir": run_dir,
                            "references": references})
        if val < best_val:
            best_val, bad_vals = val, 0
            save_atomic(checkpoint_payload(updates_done), ckpt_dir / "best.pt")
        else:
            bad_vals += 1

    # Episodes run in lockstep, so a step's done flags are all False or all True: keep both on the
    # device instead of copying a host array there (a synchronisation) at every step.
    done_flags = {False: torch.zeros(n_envs, device=device), True: torch.ones(n_envs, device=device)}
    try:
        for update in range(update0, n_updates):
            reason = should_stop() if should_stop is not None else False
            if reason:
                stopped = reason if isinstance(reason, str) else "stopped by user"
                break
            if t_cfg.get("time_budget_s") and time.time() - t_start > float(t_cfg["time_budget_s"]):
                stopped = "time budget"
                break
            # With a time budget the schedule follows whichever end comes first: steps or time.
            fraction = update / n_updates
            if t_cfg.get("time_budget_s"):
                fraction = max(fraction, (time.time() - t_start) / float(t_cfg["time_budget_s"]))
            lr = agent.set_progress(min(fraction, 1.0))
            t0 = time.time()
            buffer.reset()
            episode_costs: list[float] = []
            policy.eval()
            if noise is not None:
                noise.reset()  # rollouts start with new episodes
            for _t in range(num_steps):
                obs_t = torch.as_tensor(obs, device=device)
                with torch.no_grad():
                    raw, action, logp, value = policy.act(obs_t, noise.sample() if noise is not None else None)
                obs, reward, term, trunc, info = env.step(action if device_env else action.cpu().numpy())
                done = np.logical_or(term, trunc)
                done_t = (done_flags[bool(done[0])] if done.all() or not done.any()
                          else torch.as_tensor(done, device=device, dtype=torch.float32))
                reward_t = torch.as_tensor(reward, device=device)
                if return_norm is not None:
                    reward_t = return_norm(reward_t, done_t)
                else:
                    reward_t = (reward_t * ppo_cfg.reward_scale).to(torch.float32)
                buffer.add(obs_t, raw, logp, reward_t, done_t, value)
                if done.any() and "final_info" in info:
                    fi = info["final_info"]
                    episode_costs.extend(np.asarray(fi["total_cost"])[fi.get("_total_cost", done)].tolist())
            policy.train()
            global_step += batch
            with torch.no_grad():
                last_value = policy.value(torch.as_tensor(obs, device=device))
            if ppo_cfg.advantage == "paired":
                buffer.compute_paired_advantages(ppo_cfg.gamma)
            else:
                buffer.compute_returns(last_value, ppo_cfg.gamma, ppo_cfg.gae_lambda)
            if ppo_cfg.adv_scale_per_env:
                buffer.scale_advantages_per_env()
            if device.type == "cpu":
                torch.set_num_threads(cpu_threads)  # the simulator is idle during the update
            u_stats = agent.update(buffer, generator=gen)
            if device.type == "cpu":
                torch.set_num_threads(1)
            if policy.normalize_obs:
                policy.obs_norm.update(buffer.obs)
            if ema_decay:
                update_ema()
            sps = batch / (time.time() - t0)
            for k, v in u_stats.items():
                log(f"losses/{k}", v, global_step)
            log("charts/learning_rate", lr, global_step)
            if hasattr(policy, "log_std"):
                log("charts/action_std", float(policy.log_std.detach().exp().mean()), global_step)
            log("charts/env_steps_per_second", sps, global_step)
            if episode_costs:
                c = np.asarray(episode_costs)
                log("episode/cost_mean", c.mean(), global_step)
                log("episode/cost_median", np.median(c), global_step)
                log("episode/cost_p90", np.percentile(c, 90), global_step)
            payload = {"update": update + 1, "n_updates": n_updates, "global_step": global_step,
                       "episode_cost_mean": float(np.mean(episode_costs)) if episode_costs else float("nan"),
                       **u_stats, "sps": sps, "stats": stats}
            emit("update", payload)
            if bar is not None:
                bar.update(batch)
                bar.set_postfix(ep_cost=f"{payload['episode_cost_mean']:.1f}",
                                val=f"{best_val:.1f}" if best_val < float("inf") else "-")

            stop_now = False
            if (update + 1) % int(t_cfg["eval_every"]) == 0 or update + 1 == n_updates:
                run_validation(update + 1)
                if t_cfg.get("patience") and bad_vals >= int(t_cfg["patience"]):
                    stopped, stop_now = "early stop (patience)", True
                if t_cfg.get("target_cost") is not None and best_val <= float(t_cfg["target_cost"]):
                    stopped, stop_now = "target cost reached", True
            if (update + 1) % int(t_cfg["checkpoint_every"]) == 0:
                save_atomic(checkpoint_payload(update + 1), ckpt_dir / f"checkpoint_{global_step}.pt")
            if stop_now:
                update += 1
                break
        else:
            update = n_updates
        if update > update0 and last_validated != global_step:
            run_validation(update)  # stopped between validations: the curve ends at the final policy
    finally:
        if bar is not None:
            bar.close()
    final = save_atomic(checkpoint_payload(update), ckpt_dir / "final_model.pt")
    if t_cfg.get("copy_final_model", True):
        models_dir = PROJECT_ROOT / "models"
        models_dir.mkdir(exist_ok=True)
        tmp = models_dir / ".final_model.pt.tmp"
        shutil.copyfile(final, tmp)
        tmp.replace(models_dir / "final_model.pt")
    np.savez(run_dir / "training_stats.tmp.npz", **{k.replace("/", "__"): np.asarray(v) for k, v in stats.items()})
    (run_dir / "training_stats.tmp.npz").replace(ckpt_dir / "training_stats.npz")
    if writer is not None:
        writer.close()
    env.close()
    best_path = ckpt_dir / "best.pt"
    result = TrainResult(run_dir, final, best_path if best_path.exists() else None, best_val, global_step,
                         stats, stopped, references)
    emit("done", {"result": result})
    return result
