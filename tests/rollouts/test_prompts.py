import pickle
import subprocess
import sys

import pytest

from rollouts.prompts import PromptFormat, make_prompt_format


def test_plain_prefix_matches_bundled_model_format():
    fmt = make_prompt_format("plain")
    steps = ["a = 1", "b = 2", "The answer is \\boxed{3}."]
    assert fmt.prefix("Add.", []) == "Problem: Add.\nSolution:\n"
    for i in range(len(steps)):
        assert (
            fmt.prefix("Add.", steps[: i + 1])
            == "Problem: Add.\nSolution:\n" + "\n".join(steps[: i + 1]) + "\n"
        )
    assert fmt.full("Add.", steps) == "Problem: Add.\nSolution:\n" + "\n".join(steps)
    assert pickle.loads(pickle.dumps(fmt)) == fmt


def test_plain_custom_template_and_braces_in_problem():
    fmt = make_prompt_format("plain", template="Q: {problem}\nA:", separator=" ")
    # Problems with LaTeX braces (and even a literal "{problem}") are inserted verbatim.
    prob = "Find $\\frac{1}{2}$ of {problem}"
    assert fmt.prefix(prob, ["x", "y"]) == f"Q: {prob}\nA:x y "


def test_template_must_have_placeholder_once():
    with pytest.raises(ValueError, match="exactly once"):
        make_prompt_format("plain", template="no placeholder")
    with pytest.raises(ValueError, match="exactly once"):
        make_prompt_format("plain", template="{problem} {problem}")
    with pytest.raises(ValueError, match="Unknown prompt format"):
        make_prompt_format("xml")
    with pytest.raises(TypeError):
        make_prompt_format("plain").prefix("p", "a single string")


def test_chat_format_continues_the_assistant_turn(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    fmt = make_prompt_format("chat", tok, template="Solve: {problem}", system_prompt="Be brief.")
    assert fmt.kind == "chat" and fmt.separator == "\n\n"
    header = "<s><|system|>\nBe brief.<|end|>\n<|user|>\nSolve: 1+1?<|end|>\n<|assistant|>\n"
    assert fmt.prefix("1+1?", []) == header
    assert fmt.prefix("1+1?", ["one", "two"]) == header + "one\n\ntwo\n\n"
    # Same as rendering the chat template and appending the partial solution: no new turn.
    rendered = tok.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Solve: 1+1?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert fmt.prefix("1+1?", ["one"]) == rendered + "one\n\n"
    assert fmt.prefix("1+1?", ["one"]).count("<|assistant|>") == 1


def test_chat_format_from_model_path(tiny_model):
    fmt = make_prompt_format("chat", str(tiny_model))
    assert fmt.source == str(tiny_model)
    assert fmt.prefix("p", ["s"]) == "<s><|user|>\np<|end|>\n<|assistant|>\ns\n\n"


def test_chat_format_errors(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    with pytest.raises(ValueError, match="needs a model path or tokenizer"):
        make_prompt_format("chat")
    tok.chat_template = "{% for m in messages %}{{ m['content'] | upper }}{% endfor %}"
    with pytest.raises(ValueError, match="does not render the user message verbatim"):
        make_prompt_format("chat", tok)
    tok.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        make_prompt_format("chat", tok)


def test_prompt_format_is_plain_data():
    fmt = PromptFormat(kind="plain", before="P: ", after="\n", separator="\n")
    assert fmt.to_dict()["before"] == "P: "


def test_import_rollouts_does_not_import_torch():
    code = "import sys, rollouts, rollouts.prompts; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
