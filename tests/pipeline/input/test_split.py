import pytest

from pipeline.input.split import SPLIT_MODES, SplitError, compile_split_regex, split_solution


def test_blank_line_default():
    text = "First, 2+2=4.\n\nThen 4*3=12.\n   \n\t\nSo the answer is 12.\n"
    assert split_solution(text) == ["First, 2+2=4.", "Then 4*3=12.", "So the answer is 12."]


def test_blank_line_keeps_single_newlines_inside_a_step_and_handles_crlf():
    text = "a = 1\nb = 2\r\n\r\nc = a + b\r\n"
    assert split_solution(text, "blank-line") == ["a = 1\nb = 2", "c = a + b"]


def test_newline_mode():
    assert split_solution(" x = 1 \n\n  y = 2\n#### 3", "newline") == ["x = 1", "y = 2", "#### 3"]


def test_step_prefix_variants_and_preamble():
    text = (
        "Let us solve it.\n"
        "## Step 1: Add\n2+2=4\n"
        "**Step 2:** Multiply\n4*3=12\n"
        "step 3. Check\n"
        "Step 4\nDone, Step 1.5 is not a marker\n"
        "Step 10) Final"
    )
    assert split_solution(text, "step-prefix") == [
        "Let us solve it.",
        "Add\n2+2=4",
        "Multiply\n4*3=12",
        "Check",
        "Done, Step 1.5 is not a marker",
        "Final",
    ]


def test_step_prefix_marker_only_at_line_start():
    text = "Step 1: we use the result of Step 2: no.\nStep 2: ok"
    assert split_solution(text, "step-prefix") == ["we use the result of Step 2: no.", "ok"]


def test_step_prefix_without_markers_is_an_error():
    with pytest.raises(SplitError, match="no 'Step k:' line"):
        split_solution("just one paragraph", "step-prefix")
    assert split_solution("   ", "step-prefix") == []


def test_regex_separator_ignores_capture_groups():
    assert split_solution("a ;; b;c ;;; d", "regex", r"\s*;+\s*") == ["a", "b", "c", "d"]
    assert split_solution("x (Step 1) y (Step 2) z", "regex", r"\((Step) \d\)") == ["x", "y", "z"]


def test_regex_lookahead_keeps_the_marker():
    text = "Step 1: a\nStep 2: b"
    assert split_solution(text, "regex", r"(?=^Step \d)") == ["Step 1: a", "Step 2: b"]


@pytest.mark.parametrize(
    "regex, msg",
    [("(", "invalid split regex"), ("x*", "matches the empty string"), ("", "empty")],
)
def test_bad_regex_errors(regex, msg):
    with pytest.raises(SplitError, match=msg):
        split_solution("abc", "regex", regex)
    with pytest.raises(ValueError, match=msg):
        compile_split_regex(regex)


def test_regex_mode_needs_a_regex_and_unknown_mode():
    with pytest.raises(SplitError, match="needs a regex"):
        split_solution("a", "regex")
    with pytest.raises(SplitError, match="unknown splitter 'lines'"):
        split_solution("a", "lines")


@pytest.mark.parametrize("mode", [m for m in SPLIT_MODES if m != "regex"])
def test_empty_and_whitespace_give_no_steps(mode):
    assert split_solution("", mode) == []
    assert split_solution(" \n\n \n", mode) == []


def test_non_text_is_a_type_error():
    with pytest.raises(TypeError, match="needs a str"):
        split_solution(["a", "b"])
