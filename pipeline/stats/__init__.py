"""Pure statistics of Monte Carlo labels, below storage and labeling (no imports from the rest of mcprm):
intervals valid under each sampling design (:mod:`pipeline.stats.intervals`) and the first-error model whose
posterior is ``first_error_confidence`` (:mod:`pipeline.stats.changepoint`), and how true a stated
probability is against known answers (:mod:`pipeline.stats.calibration`)."""
