"""mcprm train reports a training that went nan (the Trainer's logged train loss hides it)."""

from pipeline.training.card import non_finite_steps

NAN = float("nan")

# the Trainer's log_history of the bf16 run of the real 1.5B model on one H100 (BENCHMARKS.md, issue 28 item 5)
H100_BF16 = [
    {"loss": 2.94, "grad_norm": 46.06, "learning_rate": 7.292e-06, "epoch": 1.0, "step": 17},
    {"eval_loss": 0.8142, "epoch": 1.0, "step": 17},
    {"loss": 4.159, "grad_norm": NAN, "learning_rate": 3.75e-06, "epoch": 2.0, "step": 34},
    {"eval_loss": NAN, "epoch": 2.0, "step": 34},
    {"loss": 0.0, "grad_norm": NAN, "learning_rate": 2.083e-07, "epoch": 3.0, "step": 51},
    {"eval_loss": NAN, "epoch": 3.0, "step": 51},
    {"train_runtime": 113.7, "train_loss": 2.366, "epoch": 3.0, "step": 51},
]


def test_non_finite_steps_finds_where_training_went_nan():
    assert non_finite_steps(H100_BF16) == {"first_epoch": 2.0, "first_step": 34, "entries": 4}


def test_non_finite_steps_none_for_a_finite_run_and_inf_counts():
    finite = [h for h in H100_BF16[:2]] + [{"loss": 1.2, "grad_norm": 31.8, "epoch": 2.0, "step": 34}]
    assert non_finite_steps(finite) is None
    assert non_finite_steps([{"loss": float("inf"), "epoch": 0.5, "step": 3}]) == {
        "first_epoch": 0.5, "first_step": 3, "entries": 1}
