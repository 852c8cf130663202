"""The committed version a run builds on (a refresh reuses its labels): the current one, unless it was labeled
with another configuration or written with another schema version. Labels of either kind are never mixed in one
corpus version: refused, naming what differs, or with ``--overwrite`` the run starts a new corpus version."""

from __future__ import annotations

import logging

from pipeline.config import ConfigError, LabelConfig
from pipeline.storage.schema import SCHEMA_VERSION

log = logging.getLogger("mcprm")

# What each schema version changed (for the message that refuses to mix versions in one corpus).
_SCHEMA_CHANGES = {2: "it adds mc_no_answer and counts a continuation with no final answer as incorrect",
                   3: "it adds mc_low, mc_high, first_error_confidence and label_status",
                   4: "an unreadable answer counts as a failure (mc_unreadable), mc_value and its interval follow "
                      "the sampling design, rollout reuse is counted exactly (mc_reused, mc_deep_*), and "
                      "first_error_confidence comes from a model fitted to the whole version"}


def base_version(cfg: LabelConfig, manifest: dict | None, identity: str) -> dict | None:
    """The version whose shards the new one builds on: ``manifest`` (the committed version found, None: a new
    corpus; ``identity``: ``cfg.identity()``), or None to start afresh (``--overwrite`` over another configuration or schema version)."""
    base = manifest
    if manifest is not None and manifest.get("identity") != identity:
        if not cfg.overwrite:
            diff = identity_diff(manifest.get("identity_fields", {}), cfg.identity_dict())
            raise ConfigError(
                f"{cfg.output} holds a corpus labeled with a different configuration ({diff}). Labels made "
                "with different settings must not be mixed: use another --output, or pass --overwrite to "
                "start a new corpus version there (the old versions stay readable until `mcprm prune`)."
            )
        log.warning("--overwrite: starting a new corpus version with the new configuration at %s", cfg.output)
        base = None
    old_schema = int(manifest.get("schema_version") or 1) if manifest is not None else SCHEMA_VERSION
    if base is not None and old_schema != SCHEMA_VERSION:
        # Shards of different schema versions are never mixed in one version: their columns differ, and
        # so does what mc_value counts (schema 1 left "no final answer" continuations out of it).
        if not cfg.overwrite:
            raise ConfigError(
                f"{cfg.output} holds a corpus written with schema version {old_schema}; this mcprm writes "
                f"version {SCHEMA_VERSION} ("
                + ("; ".join(_SCHEMA_CHANGES[v] for v in range(old_schema + 1, SCHEMA_VERSION + 1)
                             if v in _SCHEMA_CHANGES) or "other columns") + "), and the "
                "two cannot be mixed in one corpus version. Use another --output, or pass --overwrite to "
                "relabel everything as a new corpus version there (the old versions stay readable until "
                "`mcprm prune`)."
            )
        log.warning("--overwrite: relabeling the schema-%d corpus at %s as a new schema-%d version", old_schema,
                    cfg.output, SCHEMA_VERSION)
        base = None
    return base


def identity_diff(old: dict, new: dict) -> str:
    """What differs between two configurations (``identity_fields``), in words."""
    changed = [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return "; ".join(changed[:6]) or "unknown difference"
