"""Public import path of the corpus reader, kept for docs/corpus.md's ``from pipeline.corpus import read_corpus``;
the code lives in :mod:`pipeline.storage.corpus`."""

from pipeline.storage.corpus import (
                                     CorpusError,
                                     corpus_stats,
                                     iter_corpus,
                                     open_manifest,
                                     read_corpus,
                                     scan_corpus,
                                     shard_uris,
)

__all__ = ["CorpusError", "corpus_stats", "iter_corpus", "open_manifest", "read_corpus", "scan_corpus", "shard_uris"]
