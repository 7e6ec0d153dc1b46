"""Live training dashboard for Jupyter, with a static fallback for headless runs.

    dash = TrainingDashboard()
    dash.show()                                   # widgets: status line, stop button, live figure
    result = dash.train(cfg)                      # training.train with the dashboard's callbacks
    dash.finish(result)                           # static figure in the notebook + PNGs in the run

In JupyterLab the figure is redrawn after every update and the stop button ends the run cleanly
between updates (pending button clicks are processed while the training cell runs).  Under
papermill nothing renders widgets, so :meth:`finish` displays the final figures as ordinary
outputs and saves them as ``dashboard.png`` / ``sample_rollout.png`` in the run folder, which is
also refreshed at every validation.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .data.segments import load_segment
from .plots import rollout_figure, training_figure
from .sim.engine import BatchedSimulator


class TrainingDashboard:
    """Collects the trainer's callbacks and draws :func:`~ppo_training.plots.training_figure`.

    Args:
        redraw_every_s: minimum seconds between live redraws.
    """

    def __init__(self, redraw_every_s: float = 2.0) -> None:
        self.redraw_every_s = redraw_every_s
        self.stats: dict = {}
        self.rollout: tuple | None = None
        self.run_dir: Path | None = None
        self._stop = False
        self._last_draw = 0.0
        self._widgets = None
        self._poll = None

    # -- widgets -------------------------------------------------------------------------------------
    def show(self) -> None:
        """Display the live widgets (no-op outside IPython)."""
        try:
            import ipywidgets as w
            from IPython.display import display
        except ImportError:
            return
        status = w.HTML("<b>waiting for the first update…</b>")
        stop = w.Button(description="Stop after this update", button_style="warning", icon="stop")
        out = w.Output(layout={"border": "1px solid #ddd"})
        stop.on_click(lambda _b: self.request_stop())
        self._widgets = {"status": status, "stop": stop, "out": out}
        display(w.VBox([w.HBox([stop, status]), out]))

    def request_stop(self) -> None:
        self._stop = True
        if self._widgets:
            self._widgets["status"].value = "<b>stopping after the current update…</b>"

    def should_stop(self) -> bool:
        """Polled by the trainer between updates; first lets the front end deliver button clicks."""
        if self._poll is not None:
            self._poll(20)
        return self._stop

    def train(self, cfg: dict, resume: str | None = None):
        """Run :func:`ppo_training.training.train` with this dashboard attached.

        While a notebook cell runs, the kernel handles no widget messages; here the UI events that
        arrive meanwhile (the stop button) are processed between updates, and cells queued after
        this one wait until it finishes.
        """
        from .training import train

        self._poll = None
        context = None
        if self._widgets:
            try:
                from jupyter_ui_poll import ui_events

                context = ui_events()
                self._poll = context.__enter__()
            except Exception:  # not in a kernel: the button then only works between cells
                context, self._poll = None, None
        try:
            return train(cfg, resume=resume, callbacks=[self.callback], should_stop=self.should_stop)
        finally:
            if context is not None:
                context.__exit__(None, None, None)
            self._poll = None

    # -- trainer callbacks -----------------------------------------------------------------------------
    def callback(self, event: str, payload: dict) -> None:
        if event == "update":
            self.stats = payload["stats"]
            if self._widgets:
                self._widgets["status"].value = (
                    f"update {payload['update']}/{payload['n_updates']} · {payload['global_step']:,} steps · "
                    f"episode cost {payload['episode_cost_mean']:.2f} · {payload['sps']:.0f} steps/s")
            if time.time() - self._last_draw > self.redraw_every_s:
                self._redraw()
        elif event == "validation":
            self.run_dir = Path(payload["run_dir"])
            self.rollout = self._sample_rollout(payload)
            self._redraw(force=True)
            self.save_pngs()

    def _sample_rollout(self, payload: dict) -> tuple:
        from .controllers import PIDController
        from .controllers.policy import PolicyController

        seg = load_segment(payload["val_files"][0])
        runs = {}
        for name, ctrl in (("policy", PolicyController(payload["policy"], payload["env_config"])),
                           ("pid", PIDController())):
            res = BatchedSimulator(payload["backend"], [seg], full=True).rollout(ctrl, keep_histories=True)
            runs[name] = {"current": res.current[0], "action": res.action[0]}
            target = res.target[0]
        return (Path(seg.path).name, np.asarray(target), runs)

    def _redraw(self, force: bool = False) -> None:
        if not self._widgets:
            return
        import matplotlib.pyplot as plt
        from IPython.display import clear_output, display

        fig = training_figure(self.stats, self.rollout)
        with self._widgets["out"]:
            clear_output(wait=True)
            display(fig)
        plt.close(fig)
        self._last_draw = time.time()

    # -- static output ------------------------------------------------------------------------------
    def save_pngs(self) -> list[Path]:
        """Write ``dashboard.png`` (and ``sample_rollout.png``) into the run folder."""
        import matplotlib.pyplot as plt

        if self.run_dir is None:
            return []
        paths = []
        fig = training_figure(self.stats, self.rollout)
        paths.append(self.run_dir / "dashboard.png")
        fig.savefig(paths[-1], dpi=80)
        plt.close(fig)
        if self.rollout is not None:
            title, target, runs = self.rollout
            fig = rollout_figure(target, runs, title=title)
            paths.append(self.run_dir / "sample_rollout.png")
            fig.savefig(paths[-1], dpi=80)
            plt.close(fig)
        return paths

    def finish(self, result) -> list[Path]:
        """Final static figures: shown as normal notebook outputs and saved as PNGs."""
        self.stats = result.stats or self.stats
        self.run_dir = Path(result.run_dir)
        paths = self.save_pngs()
        if self._widgets:
            self._redraw(force=True)
            self._widgets["status"].value = f"<b>done: {result.stopped_because}</b>"
        try:
            from IPython.display import Image, display

            for p in paths:
                display(Image(filename=str(p)))
        except ImportError:
            pass
        return paths
