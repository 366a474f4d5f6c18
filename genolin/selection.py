"""Which weights a training run keeps: validation of the starting model, after every epoch and where a stop rule
fired; the best weights (best.safetensors) and early stopping; the decision threshold that predict uses.

Validation is the task's scoring of the validation set through ``genolin.inference``, as ``genolin evaluate`` scores
the input as given; it sees the averaged weights under ``ema_decay``. The starting model (a classifier's k-mer
regression) is the best until training beats it by one standard error of its score.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from genolin import checkpoint as ckpt
from genolin.averaging import WeightAverage, holding
from genolin.config import TrainConfig
from genolin.inference import Predictor, describe_views
from genolin.model import Encoder
from genolin.tasks import Task

log = logging.getLogger(__name__)

# a run memorises when validation has not improved for this many validations while its training loss fell by this
# share or more since the best one (the loss of the epoch that validated best; the first epoch's where the starting
# model is still the best)
MEMORISE_VALIDATIONS = 3
MEMORISE_DROP = 0.25


def memorising(loss_at_best: float | None, loss: float | None, since_best: int) -> float | None:
    """The training loss's fall since the best validation, as a share of its value there, when the run
    memorises by the rule above; else None."""
    if loss_at_best is None or loss is None or loss_at_best <= 0 or since_best < MEMORISE_VALIDATIONS:
        return None
    drop = 1.0 - loss / loss_at_best
    return drop if drop >= MEMORISE_DROP else None


class ModelSelection:
    """Validation and the choice of the best weights for a trainer: its settings, task, model (``predictor``
    scores it, ``average`` holds its averaged weights), run folder and ``state`` (the trainer state: "best",
    "best_epoch", "bad_epochs", "loss_at_best", "start_margin" and "done" are this class's); ``save`` writes a
    checkpoint (``Trainer.checkpoint``)."""

    def __init__(self, cfg: TrainConfig, task: Task, model: Encoder, predictor: Predictor, average: WeightAverage,
                 run: ckpt.RunDir, state: dict, save: Callable[..., None]):
        self.cfg, self.task, self.model, self.predictor, self.average = cfg, task, model, predictor, average
        self.run, self.state, self.save = run, state, save

    def evaluate(self) -> dict | None:
        """The task's metrics on the validation set (None without one), as ``genolin evaluate`` scores the input as
        given (``--no-rc-average --shift-average 0``; ``threshold_as_predicted`` redoes the best weights' threshold
        over the views that predict uses)."""
        if self.task.val_set is None:
            return None
        self.model.eval()
        try:
            with self.average.held(self.state["step"]):
                # track calls as predict makes them: at the training genomes' TSS density
                return self.task.evaluate(self.predictor, self.task.val_set, progress=False,
                                          calls_per_mbp=getattr(self.task, "tss_per_mbp", None))[0]
        finally:
            self.model.train()

    def improves(self, metrics: dict | None) -> bool:
        """Whether a validation beats the best so far (the starting model by ``start_margin``)."""
        st = self.state
        if metrics is None:
            return False
        if st["best"] is None:
            return True
        margin = st.get("start_margin", 0.0) if st["best_epoch"] == 0 else 0.0
        return metrics["score"] > st["best"] + margin

    def validate_start(self) -> None:
        """Validation of the model as the task set it up (epoch 0): the best weights unless training beats it, by
        more than one standard error of its score where the task gives one ("score_se": a classifier started from
        the k-mer regression keeps it unless training is better beyond the validation set's noise; the
        one-standard-error rule of model selection). On small sets a higher validation MCC at one threshold is
        mostly noise: on a 251-nt A. thaliana set (98 validation sequences) the regression scored 0.470, training
        0.533 with a lower AUROC (0.80 against 0.83), and lost 7-12 test MCC points to it."""
        st = self.state
        metrics = self.evaluate()
        if metrics is None:
            return
        kept = None
        if self.task.start_alternative:  # e.g. the k-mer regression fitted to convergence: kept if it validates
            metrics, kept = self._validate_alternative(metrics)  # at least as well; training starts as set up
        st["best"], st["best_epoch"] = metrics["score"], 0
        st["start_margin"] = float(metrics.get("score_se", 0.0))
        self.save(best=True, metrics=metrics, best_weights=kept)
        self.run.log_metrics({"epoch": 0, "step": 0, "val": metrics})
        log.info("before training: validation score %.4f%s", metrics["score"],
                 f" (training must beat it by {st['start_margin']:.4f}, one standard error)"
                 if st["start_margin"] else "")

    def _validate_alternative(self, metrics: dict) -> tuple[dict, dict | None]:
        """The task's ``start_alternative`` (parameter name -> value) validated in place of the start's values:
        (its metrics and the whole state dict with it) when it scores at least the start's ``metrics``, else
        (``metrics``, None). The model holds the start's values again after."""
        params = dict(self.model.named_parameters())
        alternative = self.task.start_alternative
        with holding([params[name] for name in alternative], list(alternative.values())):
            other = self.evaluate()
            kept = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}
        log.info("before training, the start's alternative: validation score %.4f against %.4f (%s)",
                 other["score"], metrics["score"], "kept" if other["score"] >= metrics["score"] else "not kept")
        return (other, kept) if other["score"] >= metrics["score"] else (metrics, None)

    def end_epoch(self, record: dict) -> None:
        """Validation, early stopping, checkpoint and the metrics line after a complete epoch (``record``: its
        training figures; the validation is added as "val")."""
        st, cfg = self.state, self.cfg
        metrics = record["val"] = self.evaluate()
        improved = self.improves(metrics)
        if improved:
            st["best"], st["best_epoch"], st["bad_epochs"] = metrics["score"], record["epoch"], 0
            st["loss_at_best"] = record.get("train_loss")
        elif metrics is not None:
            st["bad_epochs"] += 1
            if st.get("loss_at_best") is None:  # the starting model is still the best: from the first epoch's loss
                st["loss_at_best"] = record.get("train_loss")
        st["epoch"], st["batch"] = record["epoch"], 0
        drop = memorising(st.get("loss_at_best"), record.get("train_loss"), st["bad_epochs"])
        if drop is not None:
            record["memorising"] = {"loss_drop": drop, "since_best": st["bad_epochs"]}
            log.warning("memorising: the training loss fell %.0f%% (%.4g -> %.4g) since the best validation (%.4f "
                        "at epoch %d), which has not improved for %d validations%s", 100 * drop,
                        st["loss_at_best"], record["train_loss"], st["best"], st["best_epoch"], st["bad_epochs"],
                        "; stopping (stop_memorising)" if cfg.stop_memorising else
                        " (--set stop_memorising=true stops such a run)")
            if cfg.stop_memorising:
                st["done"] = True
        if cfg.patience and st["bad_epochs"] >= cfg.patience:
            st["done"] = True
            log.info("early stop: no improvement for %d epochs (best %.4f at epoch %d)", cfg.patience, st["best"],
                     st["best_epoch"])
        self.save(best=improved or metrics is None, metrics=metrics)
        self.run.log_metrics(record)
        score = "" if metrics is None else f", validation score {metrics['score']:.4f}"
        log.info("epoch %d: loss %.4f, %.0f tokens/s, %.3g items/s, peak memory %.2f GiB%s", record["epoch"],
                 record["train_loss"] or float("nan"), record["tokens_per_s"], record["items_per_s"],
                 record["peak_memory_gib"], score)

    def end_stopped(self, reason: str) -> None:
        """A stop rule fired inside an epoch: validation at the stop point (a better score becomes the best weights;
        patience is not charged), and a checkpoint from which --resume continues the epoch."""
        st = self.state
        metrics = self.evaluate()
        improved = self.improves(metrics)
        if improved:
            st["best"], st["best_epoch"] = metrics["score"], st["epoch"] + 1
        self.save(best=improved, metrics=metrics)
        self.run.log_metrics({"epoch": st["epoch"] + 1, "step": st["step"], "stopped": reason, "val": metrics})
        score = "" if metrics is None else f"; validation score {metrics['score']:.4f}"
        log.info("stopped by %s at step %d (epoch %d, batch %d)%s; continue with --resume", reason, st["step"],
                 st["epoch"] + 1, st["batch"], score)

    def threshold_as_predicted(self) -> None:
        """A two-class classifier that predict and evaluate score over several views by default (both strands and
        shifts: ``Task.default_views``): its best weights are scored on validation over those views and the
        decision threshold stored with them is chosen there (max MCC), on the probabilities predict computes,
        not on the forward strand's that chose the epoch."""
        rc, shifts = self.task.default_views(self.cfg)
        best = self.run.path / ckpt.BEST
        if not (self.run.writes and (rc or shifts) and self.task.val_set is not None
                and len(getattr(self.task, "classes", ())) == 2 and best.exists()):
            return
        device = self.predictor.device
        model = Encoder(self.cfg.model).to(device).eval()
        meta = ckpt.load_weights(best, model)
        predictor = Predictor(model, self.task, device, batch_size=self.cfg.batch_size,
                              max_tokens=self.cfg.max_tokens, amp=self.cfg.amp, shift_views=shifts)
        metrics = self.task.evaluate(predictor, self.task.val_set, rc_average=rc, progress=False)[0]
        chosen = metrics.get("best_threshold")
        if chosen:
            meta.update({"threshold": repr(chosen["value"]), "threshold_mcc": repr(chosen["mcc"]),
                         "threshold_views": describe_views(rc, shifts)})
            ckpt.save_weights(best, model, meta)
            log.info("decision threshold %.4g (max MCC %.4f) chosen on validation over %s, as predict scores",
                     chosen["value"], chosen["mcc"], meta["threshold_views"])
        # the best weights' validation over the views (no "epoch": not a line of the epochs)
        self.run.log_metrics({"best_epoch": self.state["best_epoch"], "step": self.state["step"],
                              "views": {"rc_average": rc, "shift_average": shifts}, "val": metrics})
