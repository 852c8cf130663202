"""Shared builders for the export / trainer / report tests: a small hand-made corpus and a char-level tokenizer."""

from __future__ import annotations

import string

from pipeline.solution import LabeledSolution, Solution, StepStats
from pipeline.storage.confidence import fit_model
from pipeline.storage.schema import to_table
from pipeline.storage.store import CorpusStore

# (id, steps, labels, (correct, total) per step or None, solution_correct, strategy)
ROWS = [
    ("s1", ["3 + 4 = 7", "7 - 2 = 5\nso we have 5", "The answer is 5"], [True, True, True],
     [(4, 4), (3, 4), None], True, "per-step"),
    ("s2", ["2 * 3 = 6", "6 + 1 = 8", "8 - 1 = 7", "The answer is 7"], [True, False, False, False],
     [(2, 4), (0, 4), (0, 4), None], False, "per-step"),
    ("s3", ["x = 2", "x^2 = 5", "The answer is 5"], [False, None, None],
     [(0, 4), None, None], False, "binary-search"),
    ("s4", ["a", "b", "c", "d"], [True, True, False, None],
     [None, (1, 4), (0, 4), None], False, "binary-search"),
    ("s5", ["1 + 1 = 2", "The answer is 2"], [True, True], [None, None], True, "adaptive"),  # trust_correct
    ("s6", ["10 / 2 = 5", "ungradable step", "5 + 5 = 10", "The answer is 10"], [True, None, True, True],
     [(4, 4), (0, 0), (2, 4), None], True, "per-step"),  # step 1's continuations were all ungradable
]


def make_corpus(path, rows=ROWS, k=4) -> list[LabeledSolution]:
    labeled = []
    for sid, steps, labels, counts, correct, strategy in rows:
        stats = []
        for c in counts:
            st = StepStats()
            if c is not None:
                st.correct, st.total = c
                # own draws of a fixed design, no reuse: the first wave and the deepest-prefix counts are all of them
                st.first_correct, st.first_n = st.deep_correct, st.deep_n = c
                if st.total == 0:
                    st.total, st.ungradable = 4, 4
            stats.append(st)
        fe = next((i for i, x in enumerate(labels) if x is False), -1)
        sol = Solution(id=sid, problem=f"Problem {sid}: compute it.", answer="5", steps=tuple(steps))
        rollouts = sum(s.total for s in stats)
        labeled.append(LabeledSolution(sol, list(labels), stats, fe, correct, rollouts=rollouts,
                                       rollout_tokens=rollouts * 20, strategy=strategy))
    store = CorpusStore(str(path))
    table = to_table(labeled, k)
    store.write_table("data/v00001/part-00000.parquet", table)
    store.commit({"version": 1, "strategy": "per-step", "k": k, "schema_version": 4,
                  "shards": [{"path": "data/v00001/part-00000.parquet", "rows": len(labeled)}],
                  "first_error_model": fit_model([table])})
    return labeled


def char_tokenizer(extra_special=("ки", "<extra_0>"), bos: bool = False):
    """A char-level fast tokenizer like the bundled model's, plus ``extra_special`` as single special tokens."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "<eos>", "<unk>"] + (["<bos>"] if bos else [])
    chars = [c for c in string.printable if c not in "\t\r\x0b\x0c"]
    vocab = {t: i for i, t in enumerate(special + chars)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(special)
    kw = {"bos_token": "<bos>"} if bos else {}
    t = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>",
                                clean_up_tokenization_spaces=False, model_max_length=512, **kw)
    if extra_special:
        t.add_special_tokens({"additional_special_tokens": list(extra_special)})
    return t
